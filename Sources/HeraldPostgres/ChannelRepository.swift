public import HeraldCore

/// An app's notification channels (`channels`), readable and writable without the credentials
/// key: `herald channels`, and ``AppRepository``'s channel methods, which forward here.
public struct ChannelRepository: Sendable {
    private let pool: PostgresPool

    /// A repository using `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Creates or replaces the app's channel `channel.key`. The stored version moves by one when
    /// an Android setting changed (a trigger does it, whoever writes the row); `channel.version`
    /// is ignored. Returns the channel as stored.
    @discardableResult
    public func upsert(appID: String, _ channel: NotificationChannel) async throws(PostgresError) -> NotificationChannel {
        let (soundMode, soundName) = AppRepository.columns(channel.sound, custom: "custom") { $0 }
        let (vibrationMode, pattern) = AppRepository.columns(channel.vibration, custom: "pattern") { SQLValue.array($0.map { String($0) }) }
        let (lightMode, colour) = AppRepository.columns(channel.light, custom: "colour") { $0 }
        let rows = try await pool.query("""
            INSERT INTO channels AS c (app_id, id, name, description, importance, sound_mode, sound, vibration_mode, vibration_pattern,
                                       light_mode, light_colour, lockscreen_visibility, badge, bypass_dnd, group_id, android_channel_id,
                                       ios_sound, ios_interruption_level, ios_relevance_score, ios_thread_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::integer[], $10, $11, $12, $13::boolean, $14::boolean, $15, $16, $17, $18,
                    $19::double precision, $20)
            ON CONFLICT (app_id, id) DO UPDATE SET
                name = EXCLUDED.name, description = EXCLUDED.description, importance = EXCLUDED.importance,
                sound_mode = EXCLUDED.sound_mode, sound = EXCLUDED.sound, vibration_mode = EXCLUDED.vibration_mode,
                vibration_pattern = EXCLUDED.vibration_pattern, light_mode = EXCLUDED.light_mode, light_colour = EXCLUDED.light_colour,
                lockscreen_visibility = EXCLUDED.lockscreen_visibility, badge = EXCLUDED.badge, bypass_dnd = EXCLUDED.bypass_dnd,
                group_id = EXCLUDED.group_id, android_channel_id = EXCLUDED.android_channel_id, ios_sound = EXCLUDED.ios_sound,
                ios_interruption_level = EXCLUDED.ios_interruption_level, ios_relevance_score = EXCLUDED.ios_relevance_score,
                ios_thread_id = EXCLUDED.ios_thread_id
            RETURNING \(AppRepository.channelColumns)
            """, [appID, channel.key, channel.name, channel.description, channel.importance.rawValue, soundMode, soundName,
                  vibrationMode, pattern, lightMode, colour, channel.lockscreenVisibility.rawValue, channel.badge ? "true" : "false",
                  channel.bypassDoNotDisturb ? "true" : "false", channel.group, channel.pinnedAndroidID, channel.iosSound,
                  channel.iosInterruptionLevel?.rawValue, channel.iosRelevanceScore.map { String($0) }, channel.iosThreadID],
            idempotent: true)
        guard let row = rows.rows.first, let stored = AppRepository.channel(row) else {
            throw PostgresError(.unexpectedResult, "channel \(appID)/\(channel.key) was not stored")
        }
        return stored
    }

    /// Deletes the app's channel `key`; false when there was none.
    @discardableResult
    public func delete(appID: String, key: String) async throws(PostgresError) -> Bool {
        try await pool.query("DELETE FROM channels WHERE app_id = $1 AND id = $2", [appID, key]).affected == 1
    }

    /// The app's channels by key.
    public func channels(appID: String) async throws(PostgresError) -> [String: NotificationChannel] {
        let rows = try await pool.query("SELECT \(AppRepository.channelColumns) FROM channels WHERE app_id = $1", [appID])
        var channels: [String: NotificationChannel] = [:]
        for row in rows.rows {
            if let channel = AppRepository.channel(row) { channels[channel.key] = channel }
        }
        return channels
    }
}

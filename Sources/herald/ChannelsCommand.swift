import Foundation
import HeraldCore
import HeraldPostgres
import HeraldWorker

/// `herald channels list|set|delete`: an app's notification channels, the ones jobs name in
/// `content.channel` (docs/operations.md "Notification channels"). Changes are checked
/// (`ChannelEdit`) before PostgreSQL is touched; changing an Android setting moves the channel's
/// version, and with it the Android channel id the SDK creates.
enum ChannelsCommand {
    static let usage = """
    usage: herald channels list --app APP [--json]
           herald channels set --app APP --key KEY [--name NAME] [SETTINGS] [--json]
           herald channels delete --app APP --key KEY [--json]
      KEY: what jobs name in content.channel: 1 to 64 of a-z, 0-9, _ and -.
      SETTINGS (set: options not given keep their stored value; --name is required to create):
        Android  --description TEXT  --importance low|medium|high|urgent  --sound off|default|NAME
                 --vibration off|default|MS,MS,...  --light off|default|#rrggbb  --lockscreen public|private|secret
                 --badge true|false  --bypass-dnd true|false  --group ID  --android-id ID (pin the channel id)
        iOS      --ios-sound NAME  --ios-interruption-level passive|active|time-sensitive|critical
                 --ios-relevance-score 0..1  --ios-thread-id ID
        An optional setting given as "" is cleared. Changing an Android setting (not the name or
        description) moves the channel's version: the SDK then creates a new Android channel,
        since Android freezes a channel's settings once created.
      Every action also takes --database-url URL (default HERALD_DATABASE_URL).
      Exit 0 done, 64 usage, 65 invalid setting, 66 no such app or channel, 69 PostgreSQL unavailable.
    """

    static func run(_ arguments: [String]) async -> Int32 {
        guard let action = arguments.first, ["list", "set", "delete"].contains(action) else {
            Console.error("herald channels: name an action: list, set or delete\n\(usage)")
            return 64
        }
        var options = OptionParser(Array(arguments.dropFirst()), command: "herald channels \(action)", usage: usage)
        let url = options.string("--database-url")
        let app = options.string("--app")
        let key = options.string("--key")
        let json = options.flag("--json")
        var values: [String: String] = [:]
        if action == "set" {
            for name in ChannelEdit.options { values[name] = options.string(name) }
        }
        guard options.finish() else { return 64 }
        guard let app else {
            Console.error("herald channels \(action): --app is required\n\(usage)")
            return 64
        }
        if action != "list" {
            guard let key else {
                Console.error("herald channels \(action): --key is required\n\(usage)")
                return 64
            }
            do {
                try ChannelEdit.checkKey(key)
            } catch {
                Console.error("herald channels \(action): \(error)")
                return 64
            }
        }
        let edit: ChannelEdit
        do {
            edit = try ChannelEdit(values)
        } catch {
            Console.error("herald channels set: \(error)")
            return 65
        }

        let pool: PostgresPool
        do {
            pool = try CommandEnvironment.pool(url: url, applicationName: "herald-channels")
        } catch {
            Console.error("herald channels \(action): \(error)")
            return 78
        }
        defer { Task { await pool.close() } }
        let channels = ChannelRepository(pool: pool)
        do {
            guard try await AppRepository.summaries(pool: pool).contains(where: { $0.id == app }) else {
                Console.error("herald channels \(action): no app \(app)")
                return 66
            }
            switch action {
            case "list":
                let all = try await channels.channels(appID: app).values.sorted { $0.key < $1.key }
                if json {
                    print(JSONValue.array(all.map(ChannelEdit.json)).serialized())
                } else {
                    for channel in all { print(line(channel)) }
                }
                return 0
            case "set":
                guard let key else { return 64 }
                let existing = try await channels.channels(appID: app)[key]
                let wanted: NotificationChannel
                do {
                    wanted = try edit.applied(to: existing, key: key)
                } catch {
                    Console.error("herald channels set: \(error)")
                    return 64
                }
                let stored = try await channels.upsert(appID: app, wanted)
                if json {
                    print(ChannelEdit.json(stored).serialized())
                } else {
                    let change = existing == nil ? "created" : stored.version != existing?.version ? "updated (Android settings changed: version \(stored.version))" : "updated"
                    print("\(change): \(line(stored))")
                }
                return 0
            default:
                guard let key else { return 64 }
                let deleted = try await channels.delete(appID: app, key: key)
                if json {
                    print(JSONValue.object(["app_id": .string(app), "key": .string(key), "deleted": .bool(deleted)]).serialized())
                } else if deleted {
                    print("deleted channel \(key) of \(app)")
                }
                if !deleted { Console.error("herald channels delete: app \(app) has no channel \(key)") }
                return deleted ? 0 : 66
            }
        } catch {
            Console.error("herald channels \(action): \(error.message)")
            return CommandEnvironment.exitStatus(error)
        }
    }

    /// One channel on one line: key, Android id, name and the settings that differ from the defaults' shape.
    static func line(_ channel: NotificationChannel) -> String {
        var fields = [channel.key, "android_id=\(channel.androidID)", "version=\(channel.version)", "name=\(AppsCommand.quoted(channel.name))",
                      "importance=\(channel.importance.rawValue)"]
        func setting<T>(_ name: String, _ value: NotificationChannel.Setting<T>, _ text: (T) -> String) {
            switch value {
            case .off: fields.append("\(name)=off")
            case .platformDefault: fields.append("\(name)=default")
            case .custom(let custom): fields.append("\(name)=\(text(custom))")
            }
        }
        setting("sound", channel.sound) { $0 }
        setting("vibration", channel.vibration) { $0.map(String.init).joined(separator: ",") }
        setting("light", channel.light) { $0 }
        fields.append("lockscreen=\(channel.lockscreenVisibility.rawValue)")
        if let group = channel.group { fields.append("group=\(group)") }
        if let sound = channel.iosSound { fields.append("ios_sound=\(sound)") }
        if let level = channel.iosInterruptionLevel { fields.append("ios_interruption_level=\(level.rawValue)") }
        if let score = channel.iosRelevanceScore { fields.append("ios_relevance_score=\(score)") }
        if let thread = channel.iosThreadID { fields.append("ios_thread_id=\(thread)") }
        return fields.joined(separator: " ")
    }
}

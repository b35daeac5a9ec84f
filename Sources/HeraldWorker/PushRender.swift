import HeraldAPNs
import HeraldCore
import HeraldPostgres

/// What one subscription receives for a job, decided without sockets: the provider, the keys of
/// the app's payload profile (`schemas/payloads.md`, "Payload profiles") and the rendered request.
/// ``AppDelivery`` only sends what this decided.
enum PushRender {
    /// A rendered request, or why there is none.
    enum Result: Sendable, Equatable {
        /// An APNs request.
        case apns(APNsNotification)
        /// An FCM `messages:send` body.
        case fcm(FCMMessage.Rendered)
        /// Nothing to send: the `failed` receipt's reason and a detail.
        case failed(Receipt.Reason, String)
    }

    /// Renders `job` for `member`; `token` is the one to address (the VoIP or activity token
    /// where the job needs one).
    static func render(_ job: Job, to member: AudienceMember, token: String, app: AppSettings, now: Timestamp) -> Result {
        // A channel carries settings for both platforms (Android's channel, iOS's sound and
        // interruption level): a job naming one the app does not have is wrong on every device,
        // and sending it without them would be a guess.
        let channel = job.content?.channel.flatMap { app.channels[$0] }
        if let key = job.content?.channel, channel == nil {
            return .failed(.unknownChannel, "content.channel \"\(key)\" names no channel of app \(app.id)")
        }
        let provider = AppDelivery.provider(for: member, kind: job.kind)
        let profile = PayloadProfile(rawValue: app.payloadProfile) ?? .sdk
        let dialect = profile.dialect(platform: member.platform, provider: provider, sdk: member.sdk)
        switch provider {
        case .apns:
            do {
                return .apns(try APNsNotification.forJob(job, target: APNsNotification.Target(
                    subscriptionID: member.id, deviceToken: token, sandbox: member.sandbox, language: member.language,
                    channel: channel, dialect: dialect), now: now))
            } catch {
                return .failed(error.reason, error.description)
            }
        case .fcm:
            let mode = FCMMessage.Mode(dialect: dialect, platform: member.platform)
            let target = FCMMessage.Target(token: token, mode: mode, language: member.language,
                                           channel: mode == .pushbib ? channel?.pushbibDefinition : channel?.definition)
            do {
                // An iOS device through FCM takes the channel's iOS side, as over APNs.
                if let content = member.platform == .ios ? job.content?.applyingIOSSide(of: channel) : job.content {
                    return .fcm(try FCMMessage.render(jobID: job.id, content: content, expiresAt: job.expiresAt,
                                                      priority: job.delivery.priority, target: target, now: now))
                } else if let voip = job.voip {
                    return .fcm(try FCMMessage.render(jobID: job.id, voip: voip, expiresAt: job.expiresAt, target: target, now: now))
                } else if let update = job.liveActivity {
                    return .fcm(try FCMMessage.render(jobID: job.id, liveActivity: update, expiresAt: job.expiresAt, target: target, now: now))
                }
                return .failed(.badRequest, "nothing to render for a \(job.kind.rawValue) job through FCM")
            } catch {
                return .failed(error.reason, error.description)
            }
        }
    }
}

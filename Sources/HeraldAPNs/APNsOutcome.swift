public import HeraldCore
public import HeraldHTTP2

/// What one APNs send came to (docs/ARCHITECTURE.md; `shared/reference/protocols.md` §A3).
public enum APNsOutcome: Sendable, Equatable {
    /// 200: APNs took it; `apnsID` is the receipt's `provider_id`.
    case accepted(apnsID: String)
    /// The token is dead for this topic: 410 `Unregistered`/`ExpiredToken` (with APNs's
    /// `timestamp` in milliseconds, so a 410 older than the token's last registration can be
    /// ignored), `BadDeviceToken`, `DeviceTokenNotForTopic`.
    case unregistered(reason: String, timestampMilliseconds: Int64?)
    /// Try again later: 429, 5xx, `IdleTimeout`, transport failures, and
    /// `TooManyProviderTokenUpdates` (the token is kept). `retryAfterSeconds` from `Retry-After`.
    case retryable(reason: String, retryAfterSeconds: Int?)
    /// Never succeeds as it is: other 4xx (`status`), `PayloadTooLarge`, or a payload Herald
    /// could not fit (`status` 0, reason `payload-too-large`).
    case permanent(status: Int, reason: String)
    /// The app's key, certificate or topic is wrong: halt the app's APNs sends.
    case credentialFault(reason: String)

    /// APNs reasons that mean the credential, not the notification, is at fault.
    public static let credentialReasons: Set<String> = [
        "InvalidProviderToken", "MissingProviderToken", "ExpiredProviderToken", "BadCertificate", "BadCertificateEnvironment",
        "BadEnvironmentKeyIdInToken", "BadEnvironmentKeyInToken", "TopicDisallowed", "Forbidden", "UnrelatedKeyIdInToken",
    ]

    /// Classifies an APNs response. `ExpiredProviderToken` comes back as a credential fault:
    /// ``APNsClient`` refreshes the token and retries once before reporting it.
    public static func classify(_ response: HTTP2Response) -> APNsOutcome {
        // Nearly every answer: nothing to parse, and no reason to make.
        if response.status == 200 { return .accepted(apnsID: response.header("apns-id") ?? "") }
        let json = try? JSONValue.parse(response.body, limits: .init(maxBytes: 64 * 1024))
        let reason = json?["reason"]?.stringValue ?? "HTTP \(response.status)"
        let retryAfter = response.header("retry-after").flatMap { Int($0.filter { $0 != " " }) }
        switch response.status {
        case 200:
            return .accepted(apnsID: response.header("apns-id") ?? "")
        case 410:
            var timestamp: Int64?
            if case .number(let number)? = json?["timestamp"] { timestamp = number.int64 ?? Int64(exactly: number.double.rounded()) }
            return .unregistered(reason: reason, timestampMilliseconds: timestamp)
        case 429:
            return .retryable(reason: reason, retryAfterSeconds: retryAfter)
        case 500...599:
            return .retryable(reason: reason, retryAfterSeconds: retryAfter)
        default:
            if reason == "BadDeviceToken" || reason == "DeviceTokenNotForTopic" {
                return .unregistered(reason: reason, timestampMilliseconds: nil)
            }
            if credentialReasons.contains(reason) || response.status == 403 { return .credentialFault(reason: reason) }
            if reason == "IdleTimeout" { return .retryable(reason: reason, retryAfterSeconds: retryAfter) }
            return .permanent(status: response.status, reason: reason)
        }
    }

    /// A payload Herald could not fit: permanent, receipt `failed` / `payload-too-large`.
    public static func notRendered(_ failure: APNsPayload.Failure) -> APNsOutcome {
        .permanent(status: 0, reason: failure.reason.rawValue)
    }

    /// A transport failure: retryable (the pipeline's attempt limit bounds it), except after shutdown.
    public static func classify(_ error: HTTP2Error, certificateAuth: Bool = false) -> APNsOutcome {
        if error.code == .shutdown { return .permanent(status: 0, reason: "\(error)") }
        let text = "\(error)"
        // With certificate auth, APNs refuses a bad, expired, revoked or foreign certificate with a
        // TLS alert: during the handshake (TLS 1.2) or on the first read after it (TLS 1.3). That
        // is the app's credential, like a bad key: halt it rather than retry every device.
        if certificateAuth, let alert = clientCertificateAlerts.first(where: { text.contains($0) }) {
            return .credentialFault(reason: "the APNs server refused the app's certificate (\(alert))")
        }
        return .retryable(reason: text, retryAfterSeconds: nil)
    }

    /// OpenSSL's texts for the TLS alerts a server sends about the client's certificate (never
    /// for a failure to verify the server's: that reads "certificate verify failed").
    static let clientCertificateAlerts = [
        "alert bad certificate", "alert unsupported certificate", "alert certificate revoked", "alert certificate expired",
        "alert certificate unknown", "alert unknown ca", "alert access denied", "alert certificate required",
    ]

    /// The receipt reason for this outcome (nil when accepted).
    public var receiptReason: Receipt.Reason? {
        switch self {
        case .accepted: nil
        case .unregistered(let reason, _):
            switch reason {
            case "BadDeviceToken": .badDeviceToken
            case "DeviceTokenNotForTopic": .deviceTokenNotForTopic
            case "ExpiredToken": .expiredToken
            default: .unregistered
            }
        case .retryable: .retry
        case .permanent(_, let reason): reason == "PayloadTooLarge" || reason == Receipt.Reason.payloadTooLarge.rawValue ? .payloadTooLarge : .badRequest
        case .credentialFault: .credentials
        }
    }
}

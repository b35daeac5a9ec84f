/// An app's payload profile (`apps.payload_profile`): which SDK its devices run, and so which keys
/// a device receives (`schemas/payloads.md`, "Payload profiles").
public enum PayloadProfile: String, Sendable, CaseIterable {
    /// Herald's own keys (`herald.*` on iOS, data-only `herald_id`, `title`, … on Android).
    case sdk
    /// Provider-native payloads only: what iOS and Android show without an SDK.
    case plain
    /// The OpenPush iOS SDK (`op_message_id`, `op_actions`, `image_url`, `deep_link`, …).
    /// OpenPush has no Android side: Android subscriptions get Herald's keys.
    case openpush
    /// The Pushbib React Native SDK (`imageUrl`, `data.url`, `pushbib_voip`, …) on both platforms.
    case pushbib

    /// The keys one subscription receives: the app's profile, narrowed by the subscription.
    /// - A subscription whose `sdk` flag is false runs no SDK: `plain`.
    /// - An iOS subscription delivered through FCM (BV Garner): `plain`, as an FCM message with an
    ///   `apns` block; the SDKs that use FCM on iOS name no payload keys.
    /// - `openpush` on Android: Herald's keys (`herald`).
    public func dialect(platform: Platform, provider: Receipt.Provider, sdk: Bool) -> PayloadDialect {
        if !sdk || (platform == .ios && provider == .fcm) { return .plain }
        switch self {
        case .sdk: return .herald
        case .plain: return .plain
        case .openpush: return platform == .ios ? .openpush : .herald
        case .pushbib: return .pushbib
        }
    }
}

/// The set of keys one device's payload is written in (see ``PayloadProfile/dialect(platform:provider:sdk:)``).
public enum PayloadDialect: String, Sendable, CaseIterable {
    /// Herald's own SDK keys.
    case herald
    /// Provider-native payloads.
    case plain
    /// OpenPush iOS keys.
    case openpush
    /// Pushbib keys.
    case pushbib
}

import HeraldCore
import Testing

@Suite struct PayloadProfileTests {
    @Test func theProfileIsNarrowedBySubscription() {
        // The table of schemas/payloads.md, "Payload profiles".
        let expected: [(PayloadProfile, Platform, Receipt.Provider, Bool, PayloadDialect)] = [
            (.sdk, .ios, .apns, true, .herald), (.sdk, .android, .fcm, true, .herald),
            (.plain, .ios, .apns, true, .plain), (.plain, .android, .fcm, true, .plain),
            (.openpush, .ios, .apns, true, .openpush), (.openpush, .android, .fcm, true, .herald),
            (.pushbib, .ios, .apns, true, .pushbib), (.pushbib, .android, .fcm, true, .pushbib),
        ]
        for (profile, platform, provider, sdk, dialect) in expected {
            #expect(profile.dialect(platform: platform, provider: provider, sdk: sdk) == dialect, "\(profile) \(platform)")
        }
        for profile in PayloadProfile.allCases {
            // No SDK, or an iOS device holding an FCM token: plain, whatever the profile.
            #expect(profile.dialect(platform: .ios, provider: .apns, sdk: false) == .plain)
            #expect(profile.dialect(platform: .android, provider: .fcm, sdk: false) == .plain)
            #expect(profile.dialect(platform: .ios, provider: .fcm, sdk: true) == .plain)
        }
    }

    @Test func theFCMModeFollowsTheDialect() {
        #expect(FCMMessage.Mode(dialect: .herald, platform: .android) == .sdk)
        #expect(FCMMessage.Mode(dialect: .pushbib, platform: .android) == .pushbib)
        #expect(FCMMessage.Mode(dialect: .plain, platform: .android) == .plain)
        #expect(FCMMessage.Mode(dialect: .plain, platform: .ios) == .ios)
    }
}

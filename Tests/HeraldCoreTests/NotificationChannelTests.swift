import HeraldCore
import Testing

@Suite struct NotificationChannelTests {
    @Test func androidIDIsVersionedUnlessPinned() {
        var channel = NotificationChannel(key: "orders", name: "Orders", version: 4)
        #expect(channel.androidID == "nf_orders_v4")
        channel.pinnedAndroidID = "legacy_orders"
        #expect(channel.androidID == "legacy_orders")
        #expect(channel.definition["id"] == .string("legacy_orders"))
    }

    /// The definition the SDK creates the channel from: every Android setting, by name.
    @Test func definitionCarriesEveryAndroidSetting() throws {
        var channel = NotificationChannel(key: "rides", name: "Rides", version: 2)
        channel.description = "Your rides"
        channel.importance = .urgent
        channel.sound = .custom("horn")
        channel.vibration = .custom([0, 200, 100, 200])
        channel.light = .custom("#00ff00")
        channel.lockscreenVisibility = .public
        channel.badge = false
        channel.bypassDoNotDisturb = true
        channel.group = "travel"
        channel.iosSound = "ios-only.caf"
        let expected = try JSONValue.parse(Array("""
        {"id":"nf_rides_v2","key":"rides","version":2,"name":"Rides","description":"Your rides","importance":"urgent",
         "sound":"custom","sound_name":"horn","vibration":"pattern","vibration_pattern":[0,200,100,200],"light":"colour",
         "light_colour":"#00ff00","lockscreen_visibility":"public","badge":false,"bypass_dnd":true,"group":"travel"}
        """.utf8))
        #expect(channel.definition == expected)
        let defaults = NotificationChannel(key: "news", name: "News").definition
        #expect(defaults["sound"] == .string("default") && defaults["vibration"] == .string("default") && defaults["light"] == .string("off"))
        #expect(defaults["importance"] == .string("medium") && defaults["lockscreen_visibility"] == .string("private"))
    }
}

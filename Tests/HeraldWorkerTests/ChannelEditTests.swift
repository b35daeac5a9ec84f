import HeraldCore
import HeraldWorker
import Testing

/// `herald channels set`'s options, checked and applied without a database.
@Suite struct ChannelEditTests {
    @Test func optionsBecomeSettingsAndAbsentOnesKeepTheStoredValue() throws {
        var stored = NotificationChannel(key: "orders", name: "Orders", version: 3)
        stored.importance = .high
        stored.group = "shop"
        stored.iosThreadID = "orders"
        let edit = try ChannelEdit(["--sound": "chime", "--vibration": "0, 250,250", "--light": "#AABBCC", "--badge": "false",
                                    "--group": "", "--ios-relevance-score": "0.5"])
        let channel = try edit.applied(to: stored, key: "orders")
        #expect(channel.name == "Orders" && channel.importance == .high && channel.version == 3)
        #expect(channel.sound == .custom("chime") && channel.vibration == .custom([0, 250, 250]) && channel.light == .custom("#aabbcc"))
        #expect(channel.badge == false && channel.group == nil && channel.iosThreadID == "orders" && channel.iosRelevanceScore == 0.5)
        let defaults = try ChannelEdit(["--sound": "off", "--vibration": "default", "--light": "default"]).applied(to: stored, key: "orders")
        #expect(defaults.sound == .off && defaults.vibration == .platformDefault && defaults.light == .platformDefault)
    }

    @Test func aNewChannelNeedsANameAndStartsFromAndroidsDefaults() throws {
        #expect(throws: ChannelEdit.Failure.self) { try ChannelEdit(["--importance": "low"]).applied(to: nil, key: "news") }
        let channel = try ChannelEdit(["--name": "News"]).applied(to: nil, key: "news")
        #expect(channel == NotificationChannel(key: "news", name: "News"))
    }

    @Test(arguments: [
        ["--importance": "loud"], ["--light": "red"], ["--light": "#12345"], ["--vibration": "100,-1"], ["--vibration": ""],
        ["--vibration": Array(repeating: "1", count: 65).joined(separator: ",")], ["--badge": "yes"], ["--lockscreen": "hidden"],
        ["--ios-interruption-level": "loud"], ["--ios-relevance-score": "2"], ["--name": ""], ["--name": String(repeating: "n", count: 201)],
        ["--group": String(repeating: "g", count: 65)],
    ])
    func badValuesAreRefusedWithTheOptionNamed(values: [String: String]) {
        #expect {
            _ = try ChannelEdit(values)
        } throws: { error in
            (error as? ChannelEdit.Failure)?.message.contains(values.keys.first ?? "?") == true
        }
    }

    @Test func keysFollowTheTablesRule() throws {
        try ChannelEdit.checkKey("orders_v2-eu")
        for bad in ["", "Orders", "a b", String(repeating: "k", count: 65), "ordérs"] {
            #expect(throws: ChannelEdit.Failure.self) { try ChannelEdit.checkKey(bad) }
        }
    }

    @Test func theJSONCarriesTheAndroidDefinitionAndTheIOSSide() throws {
        var channel = NotificationChannel(key: "orders", name: "Orders")
        channel.iosSound = "chime.caf"
        let json = ChannelEdit.json(channel)
        #expect(json["id"] == .string("nf_orders_v1") && json["ios"]?["sound"] == .string("chime.caf"))
    }
}

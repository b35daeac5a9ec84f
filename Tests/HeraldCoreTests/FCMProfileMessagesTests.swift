@testable import HeraldCore
import Testing

@Suite struct FCMProfileMessagesTests {
    static let now = Timestamp(seconds: 1_796_205_600)

    static func render(_ members: String, mode: FCMMessage.Mode, extra: String = "") throws -> JSONValue {
        let job = try Job.decode(Array(#"""
        {"schema":"herald.job.v1","id":"j:1","app_id":"a","kind":"notification","created_at":"2026-12-02T10:00:00Z",
         "audience":{"all":true},"content":{\#(members)}\#(extra)}
        """#.utf8))
        let content = try #require(job.content)
        let rendered = try FCMMessage.render(jobID: job.id, content: content, expiresAt: job.expiresAt, priority: job.delivery.priority,
                                             target: .init(token: "t", mode: mode), now: now)
        return try #require(try JSONValue.parse(rendered.body)["message"])
    }

    @Test func anIOSDeviceThroughFCMGetsAnAPNsBlockAndNoAndroidBlock() throws {
        let message = try Self.render(#""title":"T","body":"B","image_url":"https://i.example/x.png","collapse_id":"c""#, mode: .ios)
        #expect(message["android"] == nil)
        #expect(message["notification"] == nil)
        #expect(message["apns"]?["headers"]?["apns-push-type"] == .string("alert"))
        #expect(message["apns"]?["headers"]?["apns-priority"] == .string("10"))
        #expect(message["apns"]?["headers"]?["apns-collapse-id"] == .string("c"))
        #expect(message["apns"]?["payload"]?["aps"]?["alert"]?["title"] == .string("T"))
        #expect(message["apns"]?["payload"]?["aps"]?["mutable-content"] == .int(1))
        #expect(message["apns"]?["fcm_options"]?["image"] == .string("https://i.example/x.png"))
    }

    @Test func aBackgroundPushThroughFCMIsPriorityFiveWithOnlyContentAvailable() throws {
        let message = try Self.render(#""content_available":true"#, mode: .ios, extra: #","delivery":{"priority":"high"}"#)
        #expect(message["apns"]?["headers"]?["apns-push-type"] == .string("background"))
        #expect(message["apns"]?["headers"]?["apns-priority"] == .string("5"))
        #expect(message["apns"]?["payload"] == .object(["aps": .object(["content-available": .int(1)])]))
    }

    @Test func pushbibChannelsTakeTheSDKsShape() {
        var channel = NotificationChannel(key: "orders", name: "Orders", version: 2)
        channel.sound = .custom("order_ding")
        channel.light = .custom("#2E7DF7")
        let definition = channel.pushbibDefinition
        #expect(definition["id"] == .string("nf_orders_v2"))
        #expect(definition["sound"] == .object(["mode": .string("custom"), "name": .string("order_ding")]))
        #expect(definition["vibration"] == .object(["mode": .string("default")]))
        #expect(definition["led"] == .object(["mode": .string("custom"), "color": .string("#2E7DF7")]))
        channel.pinnedAndroidID = "orders_app"
        #expect(channel.pushbibDefinition == .object(["id": .string("orders_app"), "key": .string("orders"), "appOwned": .bool(true)]))
    }
}

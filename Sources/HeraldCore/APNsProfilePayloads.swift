/// The keys of the payload profiles other than Herald's own (`schemas/payloads.md`, "Payload
/// profiles"): what an iOS device running OpenPush or Pushbib, or no SDK, finds beside `aps`.
extension APNsPayload {
    /// The `op_message_id` of a delivery: the subscription id (a UUID, which holds no `:`), `:`,
    /// then the job id. The upstream API splits it at the first `:` when the SDK posts a receipt.
    public static func openPushMessageID(jobID: String, subscriptionID: String) -> String {
        subscriptionID + ":" + jobID
    }

    /// The `op_action_category` of a job with buttons: `op:` and the button ids joined by `,`,
    /// so one set of buttons always names the same category.
    public static func openPushCategory(_ buttons: [NotificationButton]) -> String? {
        buttons.isEmpty ? nil : "op:" + buttons.map(\.id).joined(separator: ",")
    }

    /// OpenPush's sender never builds a critical sound nor `interruption-level: critical`: a job
    /// asking for either is refused for OpenPush devices rather than sent as something else.
    static func refuseForOpenPush(_ content: NotificationContent) throws(Failure) {
        if case .critical? = content.sound {
            throw .unsupported("OpenPush devices do not take critical sounds (the openpush payload profile never sends one)")
        }
        if content.interruptionLevel == .critical {
            throw .unsupported("OpenPush devices do not take interruption-level critical (the openpush payload profile never sends it)")
        }
    }

    /// Plain apps: `herald_id`, `url` and `data` beside `aps`, as on Android's plain messages.
    static func plainKeys(_ content: NotificationContent, for recipient: Recipient) -> [String: JSONValue] {
        var keys: [String: JSONValue] = ["herald_id": .string(recipient.jobID)]
        if let url = content.url { keys["url"] = .string(url) }
        if let data = content.data { keys["data"] = data }
        return keys
    }

    /// OpenPush: the custom keys of 002 "iOS payload keys", plus `data`.
    static func openPushKeys(_ content: NotificationContent, for recipient: Recipient, truncated: Bool) -> [String: JSONValue] {
        var keys: [String: JSONValue] = [
            "op_message_id": .string(openPushMessageID(jobID: recipient.jobID, subscriptionID: recipient.subscriptionID)),
        ]
        if !content.buttons.isEmpty {
            keys["op_actions"] = buttonArray(Array(content.buttons.prefix(3)))
            if let category = openPushCategory(content.buttons) { keys["op_action_category"] = .string(category) }
        }
        if let image = content.imageURL { keys["image_url"] = .string(image) }
        if let url = content.url { keys["deep_link"] = .string(url) }
        if let data = content.data { keys["data"] = data }
        if truncated { keys["op_render_truncated"] = .string("1") }
        return keys
    }

    /// Pushbib: `imageUrl` and the notification's `data` object beside `aps`, plus `herald_id`.
    /// Pushbib's iOS SDK shows no buttons, so none are sent.
    static func pushbibKeys(_ content: NotificationContent, for recipient: Recipient, background: Bool,
                            truncated: Bool) -> [String: JSONValue] {
        var keys: [String: JSONValue] = ["herald_id": .string(recipient.jobID)]
        if let image = content.imageURL { keys["imageUrl"] = .string(image) }
        let data = pushbibData(content, background: background)
        if !data.isEmpty { keys["data"] = .object(data) }
        if truncated { keys["truncated"] = .string("1") }
        return keys
    }

    /// The notification's data as Pushbib reads it (its `additionalData`): the job's `data`
    /// members with their JSON types, then `url`, `showForeground` and `showBackground`. The job's
    /// own `content.url`, `show_foreground` and `show_background` win over same-named members of
    /// its `data`; a `data` member stays when the job leaves the field unset. A background push
    /// is silent: both flags default to false. A `data` that is not an object travels as `data`.
    public static func pushbibData(_ content: NotificationContent, background: Bool) -> [String: JSONValue] {
        var data: [String: JSONValue] = [:]
        switch content.data {
        case .object(let members)?: data = members
        case let value?: data["data"] = value
        case nil: break
        }
        if let url = content.url { data["url"] = .string(url) }
        if let show = content.showForeground { data["showForeground"] = .bool(show) }
        if let show = content.showBackground { data["showBackground"] = .bool(show) }
        if background {
            if data["showForeground"] == nil { data["showForeground"] = .bool(false) }
            if data["showBackground"] == nil { data["showBackground"] = .bool(false) }
        }
        return data
    }

    /// The VoIP payload in the recipient's dialect. Every dialect keeps an `aps` dictionary
    /// (APNs's payload is `aps` and its peers), empty as PushKit wants.
    static func voipPayload(data: [String: String], for recipient: Recipient) -> JSONValue {
        let values = JSONValue.object(data.mapValues { .string($0) })
        switch recipient.dialect {
        case .herald:
            return .object(["aps": .object([:]), "herald": .object([
                "id": .string(recipient.jobID), "sub": .string(recipient.subscriptionID), "data": values, "voip": .string("1"),
            ])])
        case .plain:
            return .object(["aps": .object([:]), "herald_id": .string(recipient.jobID), "data": values])
        case .openpush:
            return .object(["aps": .object([:]), "data": values,
                            "op_message_id": .string(openPushMessageID(jobID: recipient.jobID, subscriptionID: recipient.subscriptionID))])
        case .pushbib:
            // "The payload is the data you sent plus pushbib_voip: "1"": flat string keys.
            var members = data.filter { $0.key != "aps" }.mapValues { JSONValue.string($0) }
            members["pushbib_voip"] = .string("1")
            members["aps"] = .object([:])
            return .object(members)
        }
    }
}

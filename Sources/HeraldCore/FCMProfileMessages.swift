/// The FCM renderings of the payload profiles other than Herald's own (`schemas/payloads.md`,
/// "Payload profiles"): Pushbib's data-only keys, and the `apns` block of an iOS device that holds
/// an FCM token.
extension FCMMessage {
    /// Pushbib's data keys for a notification: `title`, `body`, `imageUrl`, `buttons`, `collapseId`,
    /// `channel`, and `data`, the notification's data as one JSON object string (the SDK reads it
    /// back with its JSON types as `additionalData`; `url`, `showForeground` and `showBackground`
    /// ride inside it, as on iOS).
    static func pushbibData(_ data: inout [String: String], content: NotificationContent, title: String?, body: String?,
                            isAlert: Bool, truncated: Bool, target: Target) {
        if let title { data["title"] = title }
        if let body { data["body"] = body }
        if let image = content.imageURL { data["imageUrl"] = image }
        if !content.buttons.isEmpty { data["buttons"] = APNsPayload.buttonArray(content.buttons).serialized() }
        let additional = APNsPayload.pushbibData(content, background: !isAlert)
        if !additional.isEmpty { data["data"] = JSONValue.object(additional).serialized() }
        if let collapseID = content.collapseID { data["collapseId"] = collapseID }
        if content.channel != nil, let channel = target.channel { data["channel"] = channel.serialized() }
        if truncated { data["truncated"] = "1" }
    }

    /// The `apns` block of a message to an iOS device through FCM: APNs headers, the `aps`
    /// dictionary (no custom keys: the message's `data` become them) and the image for the
    /// Firebase service extension.
    static func iosBlock(content: NotificationContent, title: String?, subtitle: String?, body: String?, isAlert: Bool,
                         expiresAt: Timestamp?, priority: Delivery.Priority?) -> JSONValue {
        var headers: [String: JSONValue] = [
            "apns-push-type": .string(isAlert ? "alert" : "background"),
            // Apple: a background push is always priority 5.
            "apns-priority": .string(isAlert && priority != .normal ? "10" : "5"),
        ]
        if let collapseID = content.collapseID { headers["apns-collapse-id"] = .string(collapseID) }
        if let expiresAt { headers["apns-expiration"] = .string(String(max(expiresAt.seconds, 0))) }
        var aps: [String: JSONValue]
        if isAlert {
            aps = APNsPayload.alertAPS(content, text: LocalizedText(title: title, subtitle: subtitle, body: body),
                                       body: body, dialect: .plain)
            // The Firebase extension attaches `fcm_options.image` only when it runs.
            if content.imageURL != nil { aps["mutable-content"] = .int(1) }
        } else {
            aps = ["content-available": .int(1)]
        }
        var block: [String: JSONValue] = ["headers": .object(headers), "payload": .object(["aps": .object(aps)])]
        if isAlert, let image = content.imageURL { block["fcm_options"] = .object(["image": .string(image)]) }
        return .object(block)
    }
}

extension NotificationChannel {
    /// The definition in Pushbib's shape (000 "Notification channels"): `importance`, and
    /// `sound`, `vibration` and `led` as `{mode: off | default | custom, …}`. An app-owned
    /// (pinned) id goes through with `appOwned: true` and nothing to create.
    public var pushbibDefinition: JSONValue {
        if let pinned = pinnedAndroidID {
            return .object(["id": .string(pinned), "key": .string(key), "appOwned": .bool(true)])
        }
        var members: [String: JSONValue] = [
            "id": .string(androidID), "key": .string(key), "version": .int(version), "name": .string(name),
            "importance": .string(importance.rawValue), "lockscreenVisibility": .string(lockscreenVisibility.rawValue),
            "showBadge": .bool(badge), "bypassDnd": .bool(bypassDoNotDisturb),
        ]
        if let description { members["description"] = .string(description) }
        if let group { members["group"] = .string(group) }
        func mode<T>(_ setting: Setting<T>, custom: (T) -> (String, JSONValue)) -> JSONValue {
            switch setting {
            case .off: return .object(["mode": .string("off")])
            case .platformDefault: return .object(["mode": .string("default")])
            case .custom(let value):
                let (name, json) = custom(value)
                return .object(["mode": .string("custom"), name: json])
            }
        }
        members["sound"] = mode(sound) { ("name", .string($0)) }
        members["vibration"] = mode(vibration) { ("pattern", .array($0.map { .int($0) })) }
        members["led"] = mode(light) { ("color", .string($0)) }
        return .object(members)
    }
}

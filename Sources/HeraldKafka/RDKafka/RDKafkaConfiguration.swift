internal import CRdKafka

/// Owns an `rd_kafka_conf_t` until a client takes it (``RDKafkaClient``), and destroys it if
/// none does.
final class RDKafkaConfiguration {
    let pointer: OpaquePointer
    /// Set once `rd_kafka_new` has taken the object: librdkafka frees it from then on.
    private var isTaken = false

    /// librdkafka's configuration for `configuration`'s properties, its log lines routed to
    /// ``KafkaLogOutput``.
    convenience init(_ configuration: KafkaConfiguration) throws(KafkaError) {
        try self.init(properties: configuration.properties)
    }

    /// Sets each property in name order; throws, naming the property, at the first one
    /// librdkafka refuses.
    init(properties: [String: String]) throws(KafkaError) {
        pointer = try RDKafkaConfiguration.make(properties)
    }

    private static func make(_ properties: [String: String]) throws(KafkaError) -> OpaquePointer {
        guard let conf = rd_kafka_conf_new() else {
            throw KafkaError(.configuration, "rd_kafka_conf_new failed")
        }
        for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
            var errorText = [CChar](repeating: 0, count: 512)
            if rd_kafka_conf_set(conf, name, value, &errorText, errorText.count) != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                throw KafkaError(.configuration, "property \(name): \(rdkafkaString(errorText))")
            }
        }
        rd_kafka_conf_set_log_cb(conf) { _, level, facility, text in
            KafkaLogOutput.write(level: level, facility: facility.map { String(cString: $0) } ?? "", message: text.map { String(cString: $0) } ?? "")
        }
        return conf
    }

    /// Reads a property back, defaults included (nil when unknown or unset, or once a client
    /// took the object).
    func value(of name: String) -> String? {
        guard !isTaken else { return nil }
        var size = 0
        guard rd_kafka_conf_get(pointer, name, nil, &size) == RD_KAFKA_CONF_OK, size > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: size)
        guard rd_kafka_conf_get(pointer, name, &buffer, &size) == RD_KAFKA_CONF_OK else { return nil }
        return rdkafkaString(buffer)
    }

    /// Records that `rd_kafka_new` accepted the object, which it then owns.
    func markTaken() { isTaken = true }

    deinit {
        if !isTaken { rd_kafka_conf_destroy(pointer) }
    }
}

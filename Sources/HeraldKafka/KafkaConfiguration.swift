import Foundation
internal import CRdKafka
import HeraldCore
import Synchronization

/// librdkafka properties for a client, with Herald's defaults and the `HERALD_KAFKA_PROPERTY_*`
/// pass-through (DESIGN §6), so SASL/TLS to a managed cluster needs no code.
public struct KafkaConfiguration: Sendable {
    /// librdkafka properties, by their dotted names.
    public var properties: [String: String]

    /// Creates a configuration for `bootstrapServers` plus any extra properties.
    public init(bootstrapServers: String, properties: [String: String] = [:]) {
        self.properties = properties
        self.properties["bootstrap.servers"] = bootstrapServers
    }

    /// Adds every `HERALD_KAFKA_PROPERTY_<NAME>` variable: `<NAME>` lower-cased with `_` as `.`,
    /// so `HERALD_KAFKA_PROPERTY_SASL_MECHANISM=PLAIN` sets `sasl.mechanism`.
    public mutating func addPassThroughProperties(from environment: [String: String]) {
        let prefix = "HERALD_KAFKA_PROPERTY_"
        for (name, value) in environment where name.hasPrefix(prefix) && name.count > prefix.count {
            let property = name.dropFirst(prefix.count).lowercased().replacingOccurrences(of: "_", with: ".")
            properties[property] = value
        }
    }

    /// Properties whose values must never be logged.
    static let secretProperties: Set<String> = ["sasl.password", "ssl.key.password", "ssl.keystore.password", "sasl.oauthbearer.client.secret", "ssl.key.pem"]

    /// The properties with secrets replaced, for logs.
    public var redacted: [String: String] {
        properties.reduce(into: [:]) { result, entry in
            result[entry.key] = KafkaConfiguration.secretProperties.contains(entry.key) || entry.key.contains("password") ? "[redacted]" : entry.value
        }
    }

    /// Builds a librdkafka configuration object. The caller owns it until `rd_kafka_new` takes it.
    func makeHandle() throws(KafkaError) -> OpaquePointer {
        guard let conf = rd_kafka_conf_new() else {
            throw KafkaError(.configuration, "rd_kafka_conf_new failed")
        }
        for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
            var errorText = [CChar](repeating: 0, count: 512)
            let result = rd_kafka_conf_set(conf, name, value, &errorText, errorText.count)
            if result != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                let reason = String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                throw KafkaError(.configuration, "property \(name): \(reason)")
            }
        }
        rd_kafka_conf_set_log_cb(conf, kafkaLogLine)
        return conf
    }

    /// Reads a property back from a librdkafka configuration object (nil when unknown or unset).
    static func value(of name: String, in conf: OpaquePointer) -> String? {
        var size = 0
        guard rd_kafka_conf_get(conf, name, nil, &size) == RD_KAFKA_CONF_OK, size > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: size)
        guard rd_kafka_conf_get(conf, name, &buffer, &size) == RD_KAFKA_CONF_OK else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// What librdkafka makes of this configuration: every property as it would read it back,
    /// defaults included. Useful to check a configuration before starting a client.
    public func resolvedValue(of name: String) throws(KafkaError) -> String? {
        let conf = try makeHandle()
        defer { rd_kafka_conf_destroy(conf) }
        return KafkaConfiguration.value(of: name, in: conf)
    }
}

/// Text of a librdkafka error code.
func rdkafkaErrorText(_ code: rd_kafka_resp_err_t) -> String {
    String(cString: rd_kafka_err2str(code))
}

/// Where librdkafka's own log lines go. Standard error by default, so a command whose standard
/// output is its data (`herald tail`, `herald bench … --json`) keeps it clean while a broker is
/// down; `herald run` sends them to standard output, with the rest of a worker's log.
public enum KafkaLogOutput {
    private static let standardOutput = Atomic<Bool>(false)

    /// Sends the lines to standard output (true) or standard error (false) from now on.
    public static func useStandardOutput(_ yes: Bool) { standardOutput.store(yes, ordering: .relaxed) }

    static var usesStandardOutput: Bool { standardOutput.load(ordering: .relaxed) }
}

/// librdkafka's own log lines as JSON lines, like the rest of Herald's logs (DESIGN §6), instead
/// of its `%4|…` format, to the stream ``KafkaLogOutput`` names. librdkafka only logs what its
/// `log_level` allows (warnings and worse by default). Runs on librdkafka's threads.
private func kafkaLogLine(_ handle: OpaquePointer?, _ level: Int32, _ facility: UnsafePointer<CChar>?, _ text: UnsafePointer<CChar>?) {
    let severity: String
    switch level {
    case ...3: severity = "error"
    case 4: severity = "warning"
    case 5, 6: severity = "info"
    default: severity = "debug"
    }
    func escaped(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        var result = ""
        for scalar in String(cString: pointer).unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
    let line = "{\"component\":\"librdkafka\",\"facility\":\"\(escaped(facility))\",\"level\":\"\(severity)\",\"message\":\"\(escaped(text))\"}"
    LogSink.shared.write(line, to: KafkaLogOutput.usesStandardOutput ? .standardOutput : .standardError)
}

import Foundation
import HeraldCore
import Synchronization

/// librdkafka properties for a client, with Herald's defaults and the `HERALD_KAFKA_PROPERTY_*`
/// pass-through (docs/operations.md), so SASL/TLS to a managed cluster needs no code.
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

    /// What librdkafka makes of this configuration: every property as it would read it back,
    /// defaults included. Useful to check a configuration before starting a client.
    public func resolvedValue(of name: String) throws(KafkaError) -> String? {
        try RDKafkaConfiguration(self).value(of: name)
    }
}

/// Where librdkafka's own log lines go. Standard error by default, so a command whose standard
/// output is its data (`herald tail`, `herald bench … --json`) keeps it clean while a broker is
/// down; `herald run` sends them to standard output, with the rest of a worker's log.
public enum KafkaLogOutput {
    private static let standardOutput = Atomic<Bool>(false)

    /// Sends the lines to standard output (true) or standard error (false) from now on.
    public static func useStandardOutput(_ yes: Bool) { standardOutput.store(yes, ordering: .relaxed) }

    static var usesStandardOutput: Bool { standardOutput.load(ordering: .relaxed) }

    /// Writes one of librdkafka's own log lines as a JSON line, like the rest of Herald's logs
    /// (docs/operations.md), instead of its `%4|…` format. librdkafka only logs what its `log_level`
    /// allows (warnings and worse by default). Runs on librdkafka's threads.
    static func write(level: Int32, facility: String, message: String) {
        LogSink.shared.write(line(level: level, facility: facility, message: message, time: .now),
                             to: usesStandardOutput ? .standardOutput : .standardError)
    }

    /// The JSON line of one librdkafka log message, stamped with `time` like every Herald line
    /// (without it, a rebalance's lines cannot be placed among the worker's own).
    static func line(level: Int32, facility: String, message: String, time: Timestamp) -> String {
        let severity: String
        switch level {
        case ...3: severity = "error"
        case 4: severity = "warning"
        case 5, 6: severity = "info"
        default: severity = "debug"
        }
        func escaped(_ text: String) -> String {
            var result = ""
            for scalar in text.unicodeScalars {
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
        return "{\"component\":\"librdkafka\",\"facility\":\"\(escaped(facility))\",\"level\":\"\(severity)\",\"message\":\"\(escaped(message))\",\"time\":\"\(time)\"}"
    }
}

/// Builds Prometheus text exposition format 0.0.4.
struct PrometheusText {
    private(set) var output = ""

    init() {
        output.reserveCapacity(8 * 1024)
    }

    mutating func family(_ name: String, type: String, help: String) {
        output += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(type)\n"
    }

    mutating func sample(_ name: String, _ labels: [(String, String)], _ value: Int) {
        sample(name, labels, String(value))
    }

    mutating func sample(_ name: String, _ labels: [(String, String)], _ value: String) {
        output += name
        if !labels.isEmpty {
            output += "{"
            for (index, (label, labelValue)) in labels.enumerated() {
                if index > 0 { output += "," }
                output += "\(label)=\"\(Self.escapeLabelValue(labelValue))\""
            }
            output += "}"
        }
        output += " \(value)\n"
    }

    /// A float as Prometheus writes it: integers without a fraction, `+Inf`, `-Inf`, `NaN`.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// Label values escape backslash, double quote and line feed.
    static func escapeLabelValue(_ value: String) -> String {
        escape(value, quote: true)
    }

    /// HELP text escapes backslash and line feed.
    static func escapeHelp(_ value: String) -> String {
        escape(value, quote: false)
    }

    // By scalar, not Character: "\r\n" is one Character that is not equal to "\n".
    private static func escape(_ value: String, quote: Bool) -> String {
        let needs = value.unicodeScalars.contains { $0 == "\\" || $0 == "\n" || (quote && $0 == "\"") }
        guard needs else { return value }
        var escaped = String.UnicodeScalarView()
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": escaped.append(contentsOf: "\\\\".unicodeScalars)
            case "\n": escaped.append(contentsOf: "\\n".unicodeScalars)
            case "\"" where quote: escaped.append(contentsOf: "\\\"".unicodeScalars)
            default: escaped.append(scalar)
            }
        }
        return String(escaped)
    }
}

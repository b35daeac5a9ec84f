import Foundation

/// Every command's options (issue 21: one parser, so `--name value`, `--name=value`, unknown
/// options and bad values behave the same everywhere; errors go to stderr with the command's
/// usage, and the command exits 64).
struct OptionParser {
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []
    private var consumed: Set<String> = []
    private var problems: [String] = []
    private let command: String
    private let usage: String

    init(_ arguments: [String], command: String, usage: String, flags known: Set<String> = ["--json"]) {
        self.command = command
        self.usage = usage
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                let name = String(argument[..<equals])
                if known.contains(name) {
                    problems.append("\(name) takes no value")
                } else {
                    values[name, default: []].append(String(argument[argument.index(after: equals)...]))
                }
            } else if known.contains(argument) {
                flags.insert(argument)
            } else if argument.hasPrefix("--"), let value = remaining.popFirst() {
                values[argument, default: []].append(value)
            } else {
                problems.append("unexpected argument \(argument)")
            }
        }
    }

    mutating func flag(_ name: String) -> Bool {
        consumed.insert(name)
        return flags.contains(name)
    }

    mutating func string(_ name: String) -> String? {
        consumed.insert(name)
        return values[name]?.last
    }

    mutating func strings(_ name: String) -> [String] {
        consumed.insert(name)
        return values[name] ?? []
    }

    mutating func int(_ name: String, in range: ClosedRange<Int>) -> Int? {
        guard let text = string(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            problems.append("\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound), not \(text)")
            return nil
        }
        return value
    }

    mutating func double(_ name: String, in range: ClosedRange<Double>) -> Double? {
        guard let text = string(name) else { return nil }
        guard let value = Double(text), range.contains(value) else {
            problems.append("\(name) takes a number from \(range.lowerBound) to \(range.upperBound), not \(text)")
            return nil
        }
        return value
    }

    /// A value of a command's own kind: `parse` returns nil for text that is not `expected`
    /// (which the error message names, e.g. "an IPv4 address").
    mutating func value<Value>(_ name: String, expected: String, _ parse: (String) -> Value?) -> Value? {
        guard let text = string(name) else { return nil }
        guard let value = parse(text) else {
            problems.append("\(name) takes \(expected), not \(text)")
            return nil
        }
        return value
    }

    /// Every value of a repeatable option, as ``value(_:expected:_:)`` parses one.
    mutating func values<Value>(_ name: String, expected: String, _ parse: (String) -> Value?) -> [Value] {
        var parsed: [Value] = []
        for text in strings(name) {
            if let value = parse(text) {
                parsed.append(value)
            } else {
                problems.append("\(name) takes \(expected), not \(text)")
            }
        }
        return parsed
    }

    /// Reports unknown options and bad values; false when there were any.
    mutating func finish() -> Bool {
        for name in values.keys.sorted() where !consumed.contains(name) { problems.append("unknown option \(name)") }
        for name in flags.sorted() where !consumed.contains(name) { problems.append("unknown option \(name)") }
        guard problems.isEmpty else {
            Console.error("\(command): \(problems.joined(separator: "; "))\n\(usage)")
            return false
        }
        return true
    }
}

import Foundation

/// The key tables and golden examples of `schemas/payloads.md` ("Payload profiles"), read from
/// the document itself so the tests assert what it says, not a copy of it.
///
/// A key table follows a `<!-- key-table: NAME -->` line: rows `| `key` | where | type | kinds |
/// source |`. A key is a dotted path into the payload (APNs) or the `message` (FCM); `.*` at the
/// end stands for any member below, a `<…>` segment for any one member name. Kinds are a comma-separated list of `alert`, `background`,
/// `voip`, `live-start`, `live-update`, `live-end`. A golden example follows a
/// `<!-- golden: NAME/KIND -->` line as one fenced block holding the exact bytes.
public struct PayloadDocument: Sendable {
    /// One row of a key table.
    public struct Row: Sendable {
        public var key: String
        public var kinds: Set<String>
        public var source: String

        /// Whether `path` (a flattened payload path) is this row's key: segment by segment, where
        /// a `<…>` segment stands for any one member name and a final `*` for anything below.
        public func matches(_ path: String) -> Bool {
            let pattern = key.split(separator: ".", omittingEmptySubsequences: false)
            let segments = path.split(separator: ".", omittingEmptySubsequences: false)
            for (index, part) in pattern.enumerated() {
                if part == "*" { return index == pattern.count - 1 && segments.count > index }
                guard index < segments.count else { return false }
                if part.hasPrefix("<") && part.hasSuffix(">") { continue }
                if part != segments[index] { return false }
            }
            return segments.count == pattern.count
        }
    }

    /// Tables by name (`openpush-apns`, `pushbib-fcm`, …).
    public var tables: [String: [Row]] = [:]
    /// Golden examples by `NAME/KIND`, the block's text.
    public var goldens: [String: String] = [:]

    /// Reads `schemas/payloads.md`.
    public static func load() throws -> PayloadDocument {
        let url = TestEnvironment.repositoryRoot.appendingPathComponent("schemas/payloads.md")
        return PayloadDocument(parsing: try String(contentsOf: url, encoding: .utf8))
    }

    /// Parses the document's text.
    public init(parsing text: String) {
        let lines = text.components(separatedBy: "\n")
        var index = 0
        while index < lines.count {
            let line = lines[index].trimmingCharacters(in: .whitespaces)
            if let name = Self.marker(line, "key-table") {
                var rows: [Row] = []
                index += 1
                while index < lines.count, !lines[index].hasPrefix("|") { index += 1 }
                while index < lines.count, lines[index].hasPrefix("|") {
                    let cells = lines[index].split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                        .map { $0.trimmingCharacters(in: .whitespaces) }
                    index += 1
                    guard cells.count >= 5, cells[0].hasPrefix("`") else { continue }
                    let key = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
                    let kinds = Set(cells[3].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                    rows.append(Row(key: key, kinds: kinds, source: cells[4]))
                }
                tables[name] = rows
                continue
            }
            if let name = Self.marker(line, "golden") {
                index += 1
                while index < lines.count, !lines[index].hasPrefix("```") { index += 1 }
                index += 1
                var body: [String] = []
                while index < lines.count, !lines[index].hasPrefix("```") {
                    body.append(lines[index])
                    index += 1
                }
                goldens[name] = body.joined(separator: "\n")
            }
            index += 1
        }
    }

    static func marker(_ line: String, _ kind: String) -> String? {
        let prefix = "<!-- \(kind): "
        guard line.hasPrefix(prefix), line.hasSuffix(" -->") else { return nil }
        return String(line.dropFirst(prefix.count).dropLast(4))
    }

    /// Every leaf path of a JSON document: objects are walked (`a.b.c`), anything else is a leaf.
    public static func paths(of bytes: [UInt8]) throws -> [String] {
        let object = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        var result: [String] = []
        func walk(_ value: Any, _ path: String) {
            if let members = value as? [String: Any], !members.isEmpty {
                for (key, member) in members { walk(member, path.isEmpty ? key : path + "." + key) }
            } else if !path.isEmpty {
                result.append(path)
            }
        }
        walk(object, "")
        return result.sorted()
    }

    /// The paths of `payload` that no row of `table` allows for `kind`.
    public func unlisted(_ paths: [String], table: String, kind: String) -> [String] {
        let rows = (tables[table] ?? []).filter { $0.kinds.contains(kind) }
        return paths.filter { path in !rows.contains { $0.matches(path) } }
    }
}

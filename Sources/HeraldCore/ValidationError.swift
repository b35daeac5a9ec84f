/// Where in a JSON document something is: `content.buttons[3]`, `audience.filter.and[0].tag`.
public struct JSONPath: Sendable, Equatable, CustomStringConvertible {
    enum Component: Sendable, Equatable {
        case key(String)
        case index(Int)
    }

    var components: [Component]

    /// The document itself.
    public static let root = JSONPath(components: [])

    /// The path to a member of the object at this path.
    public func appending(_ key: String) -> JSONPath {
        JSONPath(components: components + [.key(key)])
    }

    /// The path to an element of the array at this path.
    public func appending(_ index: Int) -> JSONPath {
        JSONPath(components: components + [.index(index)])
    }

    public var description: String {
        var text = ""
        for component in components {
            switch component {
            case .key(let key):
                if !text.isEmpty { text += "." }
                text += key
            case .index(let index):
                text += "[\(index)]"
            }
        }
        return text
    }
}

/// Input that does not meet a Herald contract: says where (a JSON path) and why, in words a
/// person who wrote the job can act on, e.g. `content.buttons[3]: at most 3 buttons`.
public struct ValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of refusal. One kind today: Herald handles every refusal alike, from bytes that
    /// are not JSON to a value out of range (a worker dead-letters the message as `invalid`).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case invalid
        }
        private let base: Base

        /// The input breaks the contract; ``ValidationError/reason`` says how.
        public static let invalid = Code(base: .invalid)

        public var description: String { base.rawValue }
    }

    /// What kind of refusal.
    public let code: Code
    /// Where the problem is; `.root` for the document as a whole.
    public let path: JSONPath
    /// Why the input is refused.
    public let reason: String
    /// Where the error was raised.
    public let file: String
    /// The line where the error was raised.
    public let line: Int

    /// Creates an error at `path`, recording where it is raised.
    public init(at path: JSONPath, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = .invalid
        self.path = path
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String {
        path.components.isEmpty ? reason : "\(path): \(reason)"
    }

    /// Equal when code, path and reason are: where each was raised is left out, so
    /// `#expect(throws: ValidationError(at:_:))` matches the error the code under test threw.
    public static func == (lhs: ValidationError, rhs: ValidationError) -> Bool {
        lhs.code == rhs.code && lhs.path == rhs.path && lhs.reason == rhs.reason
    }
}

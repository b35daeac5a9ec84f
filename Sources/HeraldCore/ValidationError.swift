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
    /// Where the problem is; `.root` for the document as a whole.
    public let path: JSONPath
    /// Why the input is refused.
    public let reason: String

    /// Creates an error at `path`.
    public init(at path: JSONPath, _ reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String {
        path.components.isEmpty ? reason : "\(path): \(reason)"
    }
}

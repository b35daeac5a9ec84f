/// Secrets read from files (a Kubernetes Secret or Docker secret mounted as a file) instead of
/// environment variables, which leak into `ps e`, crash reports and `docker inspect`.
///
/// `HERALD_CREDENTIALS_KEY_FILE`, `HERALD_DATABASE_URL_FILE` and `HERALD_KAFKA_SASL_PASSWORD_FILE`
/// name a file whose contents (one trailing newline removed) become `HERALD_CREDENTIALS_KEY`,
/// `HERALD_DATABASE_URL` and librdkafka's `sasl.password`. The last is not a
/// `HERALD_KAFKA_PROPERTY_*` name on purpose: such names pass through to librdkafka as they are.
public enum SecretFiles {
    /// Each `_FILE` variable and the variable its contents become.
    public static let variables: [(file: String, value: String)] = [
        ("HERALD_CREDENTIALS_KEY_FILE", "HERALD_CREDENTIALS_KEY"),
        ("HERALD_DATABASE_URL_FILE", "HERALD_DATABASE_URL"),
        ("HERALD_KAFKA_SASL_PASSWORD_FILE", "HERALD_KAFKA_PROPERTY_SASL_PASSWORD"),
    ]

    /// Why a secret file could not be used; names the variable.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        let variable: String
        public let reason: String
        public var description: String { "\(variable): \(reason)" }
    }

    /// The variables to set for the `_FILE` variables in `environment`, read with `read` (nil
    /// when the file cannot be read). A secret given both ways, or an unreadable or empty file,
    /// is an error rather than a guess.
    public static func resolve(_ environment: [String: String], read: (String) -> [UInt8]?) throws(Invalid) -> [String: String] {
        var resolved: [String: String] = [:]
        for (fileVariable, variable) in variables {
            guard let path = environment[fileVariable], !path.isEmpty else { continue }
            if let direct = environment[variable], !direct.isEmpty {
                throw Invalid(variable: fileVariable, reason: "\(variable) is set too; set one of them")
            }
            guard let bytes = read(path) else { throw Invalid(variable: fileVariable, reason: "cannot read \(path)") }
            var trimmed = bytes[...]
            if trimmed.last == UInt8(ascii: "\n") { trimmed = trimmed.dropLast() }
            if trimmed.last == UInt8(ascii: "\r") { trimmed = trimmed.dropLast() }
            let text = String(decoding: trimmed, as: UTF8.self)
            guard !text.isEmpty else { throw Invalid(variable: fileVariable, reason: "\(path) is empty") }
            guard !text.utf8.contains(0) else { throw Invalid(variable: fileVariable, reason: "\(path) contains a NUL byte") }
            resolved[variable] = text
        }
        return resolved
    }
}

import HeraldAPNs
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldHTTP2
import HeraldPostgres

/// One parser fed arbitrary bytes. A target returns normally for every input, valid or not;
/// a crash, a hang or a sanitizer report is the failure (scripts/fuzz). The `fatalError`s below
/// are this harness's own checks failing on purpose, so libFuzzer keeps the input.
enum FuzzTarget: String, CaseIterable, Sendable {
    case job
    case message
    case deviceEvent = "device-event"
    case receipt
    case shard
    case deadLetter = "dead-letter"
    case audienceFilter = "audience-filter"
    case apnsResponse = "apns-response"
    case fcmResponse = "fcm-response"
    case fcmServiceAccount = "fcm-service-account"
    case fcmTokenResponse = "fcm-token-response"
    case http2ClientFrames = "http2-client-frames"
    case http1RequestHead = "http1-request-head"
    case privateKey = "private-key"

    func run(_ bytes: [UInt8]) {
        switch self {
        case .job:
            _ = try? Job.decode(bytes)
        case .message:
            _ = try? Message.decode(bytes)
        case .deviceEvent:
            _ = try? DeviceEvent.decode(bytes)
        case .receipt:
            _ = try? Receipt.decode(bytes)
        case .shard:
            _ = try? Shard.decode(bytes)
        case .deadLetter:
            _ = try? DeadLetter.decode(bytes)
        case .audienceFilter:
            FuzzTarget.compileFilter(bytes)
        case .apnsResponse:
            _ = APNsOutcome.classify(FuzzTarget.response(bytes))
        case .fcmResponse:
            let response = FuzzTarget.response(bytes)
            _ = FCMOutcome.classify(response)
            _ = FCMErrorStatus(body: response.body, httpStatus: response.status).summary
        case .fcmServiceAccount:
            _ = try? FCMServiceAccount(json: bytes)
        case .fcmTokenResponse:
            // A clock near the end of time as well: no `expires_in` may make the expiry overflow.
            let response = FuzzTarget.response(bytes)
            for seconds in [Int64(1_800_000_000), Int64.max - 1, Int64.min + 1] {
                if case .success(let token) = FCMAccessTokenSource.token(from: response, issuedAt: Timestamp(seconds: seconds), clientEmail: "fuzz@example"),
                   token.expiresAt.seconds < seconds {
                    fatalError("a token expiring before it was issued: \(token.expiresAt.seconds) < \(seconds)")
                }
            }
        case .http2ClientFrames:
            HTTP2ClientSessionFuzzer.receive(bytes)
        case .http1RequestHead:
            FuzzTarget.requestHead(bytes)
        case .privateKey:
            let pem = String(decoding: bytes, as: UTF8.self)
            if let key = try? PrivateKey(pem: pem) {
                _ = try? key.signSHA256(Array("fuzz".utf8))
            }
            _ = try? PublicKey(pem: pem)
        }
    }

    /// The health server's request parser on a head as its connection finds it (searching for
    /// the blank line from an arbitrary offset too): a path handed to the handler is absolute,
    /// without query or fragment, whatever the bytes.
    static func requestHead(_ bytes: [UInt8]) {
        let start = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 4)
        let end = HTTP1Message.headEnd(bytes, from: start) ?? bytes.count
        guard end <= bytes.count else { fatalError("a head ending at \(end), past the \(bytes.count) bytes read") }
        switch HTTP1Message.parse(head: bytes[0..<end]) {
        case .get(let path, _):
            if !path.hasPrefix("/") || path.contains("?") || path.contains("#") { fatalError("a handler path of \(path.utf8.count) bytes that is not a bare absolute path") }
        case .reject(let status, _):
            if ![400, 405, 505].contains(status) { fatalError("a refusal with status \(status)") }
        }
    }

    /// A response written as text, so the corpus stays readable: the status on the first line,
    /// then `name: value` header lines, an empty line, and the body.
    static func response(_ bytes: [UInt8]) -> HTTP2Response {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false)
        let status = lines.isEmpty ? 0 : Int(String(decoding: lines.removeFirst(), as: UTF8.self)) ?? 0
        var rest = lines.first.map(Array.init) ?? []
        var headers: [HeaderField] = []
        while !rest.isEmpty {
            let parts = rest.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false)
            let line = parts.first.map(Array.init) ?? []
            rest = parts.count > 1 ? Array(parts[1]) : []
            if line.isEmpty { break }
            let field = line.split(separator: UInt8(ascii: ":"), maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(decoding: field.first ?? [], as: UTF8.self)
            let value = field.count > 1 ? String(decoding: field[1], as: UTF8.self) : ""
            headers.append(HeaderField(name.lowercased(), value.hasPrefix(" ") ? String(value.dropFirst()) : value))
        }
        return HTTP2Response(status: status, headers: headers, body: rest)
    }

    /// A filter compiled to SQL, checked for what a hostile producer could exploit: the SQL text
    /// holds only Herald's own constants and `$n` placeholders, every value goes in a parameter.
    static func compileFilter(_ bytes: [UInt8]) {
        guard let json = try? JSONValue.parse(bytes),
              let filter = try? AudienceFilter(json: json, at: .root) else { return }
        // The app ID is producer input too; this one could not pass Identifiers, which is the point.
        let query = AudienceQuery(appID: "app'; DROP TABLE subscriptions; --", audience: .filter(filter))
        // The same tree with every string replaced by a stand-in must give the same SQL text: then
        // no input text reached it. (Stand-ins keep what may choose the SQL's shape: whether a
        // `gt`/`lt` value is a number, how many distinct languages there are.)
        let standIn = AudienceQuery(appID: "a", audience: .filter(replacingStrings(filter)))
        if query.condition != standIn.condition {
            fatalError("input text reached the SQL text:\n\(query.condition)\nwith stand-ins:\n\(standIn.condition)")
        }
        for scalar in query.condition.unicodeScalars where !(0x20...0x7E).contains(scalar.value) {
            fatalError("non-ASCII byte \(scalar.value) in the SQL text: \(query.condition)")
        }
        let used = placeholders(query.condition)
        guard used == Set(1...max(1, query.parameters.count)) else {
            fatalError("placeholders \(used.sorted()) do not match \(query.parameters.count) parameters: \(query.condition)")
        }
    }

    static func replacingStrings(_ filter: AudienceFilter) -> AudienceFilter {
        switch filter {
        case .and(let children):
            return .and(children.map(replacingStrings))
        case .or(let children):
            return .or(children.map(replacingStrings))
        case .not(let child):
            return .not(replacingStrings(child))
        case .tag(_, let op, let value):
            return .tag(key: "k", op: op, value: AudienceQuery.isNumber(value) ? "0" : "v")
        case .tagExists(_, let exists):
            return .tagExists(key: "k", exists: exists)
        case .language(let languages):
            let distinct = Array(Set(languages.map { $0.lowercased() }))
            return .language(distinct.indices.map { "l\($0)" })
        case .externalID(let ids):
            return .externalID(ids.map { _ in "e" })
        case .platform, .near, .lastSession, .sessionCount:
            return filter
        }
    }

    /// The `n` of every `$n` in `sql`.
    static func placeholders(_ sql: String) -> Set<Int> {
        var found: Set<Int> = []
        var digits: [UInt8]?
        for byte in sql.utf8 + [0] {
            if byte == UInt8(ascii: "$") {
                digits = []
            } else if digits != nil, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                digits?.append(byte)
            } else if let number = digits {
                if let n = Int(String(decoding: number, as: UTF8.self)) { found.insert(n) }
                digits = nil
            }
        }
        return found
    }
}

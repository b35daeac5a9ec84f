public import HeraldCore
public import HeraldHTTP2

/// What one FCM send came to (docs/ARCHITECTURE.md; `shared/reference/protocols.md` §B3).
public enum FCMOutcome: Sendable, Equatable {
    /// 200: FCM took it; `name` (`projects/…/messages/…`) is the receipt's `provider_id`.
    case accepted(name: String)
    /// The token is dead or belongs to another project: `UNREGISTERED`, `SENDER_ID_MISMATCH`,
    /// or an `INVALID_ARGUMENT` naming the registration token.
    case unregistered(reason: Receipt.Reason, detail: String)
    /// Never succeeds as it is: other `INVALID_ARGUMENT`s and unexpected 4xx answers.
    case permanent(reason: Receipt.Reason, detail: String)
    /// Try again later: `QUOTA_EXCEEDED` (also slow the app down), `UNAVAILABLE`, `INTERNAL`,
    /// other 5xx, transport failures. `retryAfterSeconds` from `Retry-After`.
    case retryable(retryAfterSeconds: Int?, quotaExceeded: Bool, detail: String)
    /// The app's Firebase credential is wrong: halt the app's FCM sends.
    case credentialFault(detail: String)

    /// The receipt reason for this outcome (nil when accepted).
    public var receiptReason: Receipt.Reason? {
        switch self {
        case .accepted: nil
        case .unregistered(let reason, _), .permanent(let reason, _): reason
        case .retryable: .retry
        case .credentialFault: .credentials
        }
    }

    /// Classifies an FCM answer. A bare 401 (expired or unknown access token, no FcmError
    /// detail) comes back as a credential fault: ``FCMClient`` refreshes the token and retries
    /// once before reporting it.
    public static func classify(_ response: HTTP2Response) -> FCMOutcome {
        if response.status == 200 { return .accepted(name: messageName(response.body)) }
        let retryAfter = response.header("retry-after").flatMap(parseRetryAfter)
        let status = FCMErrorStatus(body: response.body, httpStatus: response.status)
        let detail = status.summary
        switch status.errorCode {
        case "UNREGISTERED":
            return .unregistered(reason: .unregistered, detail: detail)
        case "SENDER_ID_MISMATCH":
            return .unregistered(reason: .senderIDMismatch, detail: detail)
        case "QUOTA_EXCEEDED":
            return .retryable(retryAfterSeconds: retryAfter, quotaExceeded: true, detail: detail)
        case "UNAVAILABLE", "INTERNAL":
            return .retryable(retryAfterSeconds: retryAfter, quotaExceeded: false, detail: detail)
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR":
            return .credentialFault(detail: detail)
        case "INVALID_ARGUMENT":
            return status.namesRegistrationToken ? .unregistered(reason: .invalidToken, detail: detail) : .permanent(reason: .badRequest, detail: detail)
        default:
            break
        }
        switch response.status {
        case 401, 403:
            // Missing or expired OAuth token, API disabled, or the account lacks permission.
            return .credentialFault(detail: detail)
        case 404 where status.rpcStatus == "NOT_FOUND" && status.errorCode == nil:
            return .permanent(reason: .badRequest, detail: detail)
        case 429:
            return .retryable(retryAfterSeconds: retryAfter, quotaExceeded: true, detail: detail)
        case 500...599:
            return .retryable(retryAfterSeconds: retryAfter, quotaExceeded: false, detail: detail)
        case 400 where status.namesRegistrationToken:
            return .unregistered(reason: .invalidToken, detail: detail)
        default:
            return .permanent(reason: .badRequest, detail: detail)
        }
    }

    /// A transport failure: retryable (the pipeline's attempt limit bounds it), except after
    /// shutdown.
    public static func classify(_ error: HTTP2Error) -> FCMOutcome {
        if error.code == .shutdown { return .permanent(reason: .providerError, detail: "\(error)") }
        return .retryable(retryAfterSeconds: nil, quotaExceeded: false, detail: "\(error)")
    }

    /// The `name` of a 200 answer's body (`{"name": "projects/p/messages/0:1%2"}`), or "".
    /// Every accepted FCM send has one, so the usual body — an object with that one member, a
    /// string of printable ASCII without escapes — is read in place; anything else goes through
    /// the parser.
    static func messageName(_ body: [UInt8]) -> String {
        if let name = body.withUnsafeBufferPointer(usualMessageName) { return name }
        return (try? JSONValue.parse(body, limits: .init(maxBytes: 64 * 1024, maxDepth: 8)))?["name"]?.stringValue ?? ""
    }

    /// The name in `{"name":"…"}` (JSON whitespace around the tokens), when the string is printable
    /// ASCII without escapes; nil for any other body.
    private static func usualMessageName(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var index = 0
        func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 { index += 1 }
        }
        /// Takes `text` right at `index`.
        func take(_ text: StaticString) -> Bool {
            let expected = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
            guard index + expected.count <= bytes.count, bytes[index..<(index + expected.count)].elementsEqual(expected) else { return false }
            index += expected.count
            return true
        }
        /// Takes `text` after any whitespace.
        func token(_ text: StaticString) -> Bool {
            skipSpace()
            return take(text)
        }
        guard token("{"), token("\"name\""), token(":"), token("\"") else { return nil }
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), (0x20..<0x80).contains(bytes[index]) {
            index += 1
        }
        let end = index
        guard take("\""), token("}") else { return nil }
        skipSpace()
        guard index == bytes.count else { return nil }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }

    /// `Retry-After` in seconds (the delta form; an HTTP-date is ignored).
    static func parseRetryAfter(_ text: String) -> Int? {
        let trimmed = text.split(separator: " ").first.map(String.init) ?? ""
        guard let seconds = Int(trimmed), seconds >= 0 else { return nil }
        return min(seconds, 86_400)
    }
}

/// An FCM error body, a `google.rpc.Status`:
/// `{"error":{"code","message","status","details":[{"@type","errorCode"}|BadRequest|ApnsError]}}`.
public struct FCMErrorStatus: Sendable, Equatable {
    public var httpStatus: Int
    /// The canonical status (`NOT_FOUND`, `PERMISSION_DENIED`, …).
    public var rpcStatus: String?
    public var message: String?
    /// `FcmError.errorCode` (`UNREGISTERED`, …), if a detail carries one.
    public var errorCode: String?
    /// `google.rpc.BadRequest` field violations (field, description).
    public var fieldViolations: [FieldViolation]
    /// APNs's answer when FCM relayed to APNs (`ApnsError {statusCode, reason}`).
    public var apnsStatusCode: Int?
    public var apnsReason: String?

    /// One `google.rpc.BadRequest` field violation.
    public struct FieldViolation: Sendable, Equatable {
        public var field: String
        public var description: String
    }

    /// Parses an error body; anything missing or malformed is simply absent.
    public init(body: [UInt8], httpStatus: Int) {
        self.httpStatus = httpStatus
        fieldViolations = []
        let json = try? JSONValue.parse(body, limits: .init(maxBytes: 64 * 1024, maxDepth: 16))
        let error = json?["error"]
        rpcStatus = error?["status"]?.stringValue
        message = error?["message"]?.stringValue.map { String($0.prefix(300)) }
        for detail in error?["details"]?.arrayValue ?? [] {
            let type = detail["@type"]?.stringValue ?? ""
            if type.hasSuffix("google.firebase.fcm.v1.FcmError") || (type.isEmpty && detail["errorCode"] != nil) {
                errorCode = errorCode ?? detail["errorCode"]?.stringValue
            } else if type.hasSuffix("google.firebase.fcm.v1.ApnsError") {
                if case .number(let code)? = detail["statusCode"] { apnsStatusCode = code.int64.map { Int($0) } }
                apnsReason = detail["reason"]?.stringValue
            } else if type.hasSuffix("google.rpc.BadRequest") {
                for violation in detail["fieldViolations"]?.arrayValue ?? [] {
                    fieldViolations.append(FieldViolation(field: violation["field"]?.stringValue ?? "",
                                                          description: violation["description"]?.stringValue ?? ""))
                }
            }
        }
        // Some answers carry only the canonical status; map the ones with a clear meaning.
        if errorCode == nil, let rpcStatus, ["UNAVAILABLE", "INTERNAL"].contains(rpcStatus) { errorCode = rpcStatus }
        if errorCode == nil, rpcStatus == "RESOURCE_EXHAUSTED" { errorCode = "QUOTA_EXCEEDED" }
    }

    /// Whether an `INVALID_ARGUMENT` is about the registration token rather than the message.
    public var namesRegistrationToken: Bool {
        if fieldViolations.contains(where: { $0.field == "message.token" || $0.field == "token" }) { return true }
        let text = (message ?? "").lowercased()
        return text.contains("registration token") || text.contains("invalid token")
    }

    /// A one-line description for receipts and logs.
    public var summary: String {
        var parts = ["HTTP \(httpStatus)"]
        if let errorCode { parts.append(errorCode) } else if let rpcStatus { parts.append(rpcStatus) }
        if let message { parts.append(message) }
        if let apnsReason { parts.append("APNs \(apnsStatusCode.map(String.init) ?? "?") \(apnsReason)") }
        return parts.joined(separator: " ")
    }
}

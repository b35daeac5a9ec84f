import Foundation
import HeraldCore
public import HeraldCrypto
import HeraldHTTP2
import Synchronization

/// A strict loopback FCM HTTP v1: an OAuth token endpoint that checks the service account's
/// RS256 assertion and issues expiring bearer tokens, and `messages:send` validating messages
/// as FCM does (`shared/reference/protocols.md` §B1–B4), with FCM's error bodies.
public final class FCMSimulator: Sendable {
    private let credentials: SimulatorCredentials
    private let publicKey: PublicKey
    public let stats: SimulatorStats
    private let tokenLifetimeSeconds: Int64
    private let accessTokens = Mutex<[String: Int64]>([:])
    private let messageCounter = Atomic<UInt64>(0)
    private let log: SimulatorLog

    /// Creates a simulator for the credentials' service account.
    public init(credentials: SimulatorCredentials, stats: SimulatorStats, tokenLifetimeSeconds: Int64 = 3600,
                log: SimulatorLog = SimulatorLog()) throws(CryptoError) {
        self.log = log
        self.credentials = credentials
        self.publicKey = try credentials.fcmKey.publicKey()
        self.stats = stats
        self.tokenLifetimeSeconds = tokenLifetimeSeconds
    }

    private static let reservedKeys: Set<String> = ["from", "message_type"]

    func handle(_ request: HTTP2ServerRequest, faults: SimulatorFaults) {
        stats.recordRequest()
        if request.path == "/token" { return issueToken(request) }
        func fail(_ status: Int, _ rpcStatus: String, _ message: String, errorCode: String?, violation: Bool = true,
                  fieldViolation: (String, String)? = nil, headers: [HeaderField] = []) {
            stats.recordRejected(reason: errorCode ?? rpcStatus, violation: violation)
            var details: [JSONValue] = []
            if let errorCode {
                details.append(.object(["@type": .string("type.googleapis.com/google.firebase.fcm.v1.FcmError"), "errorCode": .string(errorCode)]))
            }
            if let (field, description) = fieldViolation {
                details.append(.object(["@type": .string("type.googleapis.com/google.rpc.BadRequest"),
                                        "fieldViolations": .array([.object(["field": .string(field), "description": .string(description)])])]))
            }
            var error: [String: JSONValue] = ["code": .int(status), "message": .string(message), "status": .string(rpcStatus)]
            if !details.isEmpty { error["details"] = .array(details) }
            request.respond(status: status, headers: [HeaderField("content-type", "application/json; charset=UTF-8")] + headers,
                            body: JSONValue.object(["error": .object(error)]).serializedBytes())
        }
        guard request.method == "POST" else { return fail(405, "INVALID_ARGUMENT", "Only POST is supported.", errorCode: nil) }
        let prefix = "/v1/projects/"
        let suffix = "/messages:send"
        guard request.path.hasPrefix(prefix), request.path.hasSuffix(suffix), request.path.count > prefix.count + suffix.count else {
            return fail(404, "NOT_FOUND", "The requested URL was not found.", errorCode: nil)
        }
        guard let authorization = request.header("authorization"), authorization.lowercased().hasPrefix("bearer "),
              let expiry = accessTokens.withLock({ $0[String(authorization.dropFirst(7))] }), expiry > Int64(Date().timeIntervalSince1970)
        else {
            return fail(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.", errorCode: nil, violation: false)
        }
        let project = request.path.dropFirst(prefix.count).dropLast(suffix.count)
        guard project == credentials.fcmProjectID else {
            return fail(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH", violation: false)
        }
        guard let body = try? JSONValue.parse(request.body, limits: .init(maxBytes: 64 * 1024, maxDepth: 32)),
              let message = body["message"]?.objectValue else {
            return fail(400, "INVALID_ARGUMENT", "Invalid JSON payload received.", errorCode: "INVALID_ARGUMENT")
        }
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets.count == 1 else {
            return fail(400, "INVALID_ARGUMENT", "Exactly one of token, topic or condition must be set.", errorCode: "INVALID_ARGUMENT",
                        fieldViolation: ("message", "exactly one target"))
        }
        if let problem = FCMSimulator.validate(message) {
            return fail(400, "INVALID_ARGUMENT", problem.1, errorCode: "INVALID_ARGUMENT", fieldViolation: problem)
        }
        let target = message["token"]?.stringValue ?? message["topic"]?.stringValue ?? ""
        if message["token"] != nil, faults.unregistered.isUnregistered(target) {
            return fail(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED", violation: false)
        }
        // validate_only (FCM's dry run): the message and token were checked above; answer as FCM
        // does, with a fake message name, and deliver nothing.
        if body["validate_only"] == .bool(true) {
            stats.recordValidated()
            request.respond(status: 200, headers: [HeaderField("content-type", "application/json; charset=UTF-8")],
                            body: JSONValue.object(["name": .string("projects/\(credentials.fcmProjectID)/messages/fake_message_id")]).serializedBytes())
            return
        }
        let roll = Double.random(in: 0..<1)
        if roll < faults.stallRate { return }
        if roll < faults.stallRate + faults.tooManyRequestsRate {
            return fail(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", errorCode: "QUOTA_EXCEEDED", violation: false,
                        headers: [HeaderField("retry-after", String(faults.retryAfterSeconds))])
        }
        if roll < faults.stallRate + faults.tooManyRequestsRate + faults.serverErrorRate {
            return Bool.random()
                ? fail(500, "INTERNAL", "Internal error encountered.", errorCode: "INTERNAL", violation: false)
                : fail(503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE", violation: false,
                       headers: [HeaderField("retry-after", String(faults.retryAfterSeconds))])
        }
        stats.recordAccepted(token: target)
        log.record(token: target, .object(["message": .object(message)]))
        let number = messageCounter.wrappingAdd(1, ordering: .relaxed).newValue
        let name = "projects/\(credentials.fcmProjectID)/messages/0:\(number)%\(String(number, radix: 16))"
        request.respond(status: 200, headers: [HeaderField("content-type", "application/json; charset=UTF-8")],
                        body: JSONValue.object(["name": .string(name)]).serializedBytes())
    }

    /// The first rule a message breaks, as (field, description), or nil.
    static func validate(_ message: [String: JSONValue]) -> (String, String)? {
        var dataBytes = 0
        func checkData(_ value: JSONValue?, field: String) -> (String, String)? {
            guard let value else { return nil }
            guard case .object(let data) = value else { return (field, "data must be a map of strings") }
            for (key, item) in data {
                guard case .string(let text) = item else { return ("\(field).\(key)", "Invalid value (TYPE_STRING)") }
                if reservedKeys.contains(key) || key.hasPrefix("google") || key.hasPrefix("gcm") {
                    return ("\(field).\(key)", "Invalid data key: reserved word")
                }
                dataBytes += key.utf8.count + text.utf8.count
            }
            return nil
        }
        if let problem = checkData(message["data"], field: "message.data") { return problem }
        if let notification = message["notification"] {
            guard case .object(let fields) = notification else { return ("message.notification", "must be an object") }
            for key in ["title", "body", "image"] where fields[key] != nil && fields[key]?.stringValue == nil {
                return ("message.notification.\(key)", "must be a string")
            }
        }
        if let android = message["android"] {
            guard case .object(let config) = android else { return ("message.android", "must be an object") }
            if let priority = config["priority"] {
                guard let text = priority.stringValue, ["normal", "high", "NORMAL", "HIGH"].contains(text) else {
                    return ("message.android.priority", "must be normal or high")
                }
            }
            if let ttl = config["ttl"] {
                guard let text = ttl.stringValue, text.hasSuffix("s"), let seconds = Double(text.dropLast()), seconds >= 0, seconds <= 2_419_200 else {
                    return ("message.android.ttl", "TTL must be a duration from 0s to 2419200s")
                }
            }
            if let problem = checkData(config["data"], field: "message.android.data") { return problem }
            if let notification = config["notification"], notification.objectValue == nil {
                return ("message.android.notification", "must be an object")
            }
        }
        if let apns = message["apns"], let problem = validateAPNs(apns) { return problem }
        if dataBytes > 4096 { return ("message", "Message is too big: data exceeds 4096 bytes") }
        return nil
    }

    /// The first rule a message's `apns` block (ApnsConfig) breaks: string headers Apple knows
    /// the values of, a payload with an `aps` dictionary within APNs's 4096 bytes, a background
    /// push with only `content-available` and priority 5, and `fcm_options.image` a string.
    static func validateAPNs(_ apns: JSONValue) -> (String, String)? {
        guard case .object(let config) = apns else { return ("message.apns", "must be an object") }
        var pushType = "alert"
        var priority = "10"
        if let headers = config["headers"] {
            guard case .object(let fields) = headers else { return ("message.apns.headers", "must be a map of strings") }
            for (name, value) in fields where value.stringValue == nil { return ("message.apns.headers.\(name)", "Invalid value (TYPE_STRING)") }
            if let value = fields["apns-push-type"]?.stringValue {
                guard ["alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity"].contains(value) else {
                    return ("message.apns.headers.apns-push-type", "Invalid APNs push type \(value)")
                }
                pushType = value
            }
            if let value = fields["apns-priority"]?.stringValue {
                guard ["1", "5", "10"].contains(value) else { return ("message.apns.headers.apns-priority", "Invalid APNs priority \(value)") }
                priority = value
            }
            if let value = fields["apns-collapse-id"]?.stringValue, value.utf8.count > 64 {
                return ("message.apns.headers.apns-collapse-id", "BadCollapseId: longer than 64 bytes")
            }
            if let value = fields["apns-expiration"]?.stringValue, Int64(value) == nil {
                return ("message.apns.headers.apns-expiration", "BadExpirationDate")
            }
        }
        if let payload = config["payload"] {
            guard case .object(let members) = payload, case .object(let aps)? = members["aps"] else {
                return ("message.apns.payload", "must be an object with an aps dictionary")
            }
            if payload.serializedBytes().count > 4096 { return ("message.apns.payload", "PayloadTooLarge") }
            if pushType == "background" {
                guard aps.keys.sorted() == ["content-available"], aps["content-available"] == .int(1) else {
                    return ("message.apns.payload.aps", "a background push holds only content-available: 1")
                }
                guard priority == "5" else { return ("message.apns.headers.apns-priority", "a background push must have priority 5") }
            }
        }
        if let options = config["fcm_options"] {
            guard case .object(let fields) = options else { return ("message.apns.fcm_options", "must be an object") }
            if let image = fields["image"], image.stringValue == nil { return ("message.apns.fcm_options.image", "must be a string") }
        }
        return nil
    }

    private func issueToken(_ request: HTTP2ServerRequest) {
        func deny(_ status: Int, _ error: String, _ description: String) {
            stats.recordRejected(reason: "oauth:\(error)", violation: true)
            request.respond(status: status, headers: [HeaderField("content-type", "application/json")],
                            body: JSONValue.object(["error": .string(error), "error_description": .string(description)]).serializedBytes())
        }
        let form = FormBody(String(decoding: request.body, as: UTF8.self))
        guard request.method == "POST", form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form["assertion"] else {
            return deny(400, "unsupported_grant_type", "Invalid grant_type or missing assertion")
        }
        let now = Int64(Date().timeIntervalSince1970)
        guard let jwt = try? JWT(compact: assertion), jwt.verify(with: publicKey),
              let header = try? JSONValue.parse(jwt.headerJSON), header["alg"] == .string("RS256"),
              let claims = try? JSONValue.parse(jwt.claimsJSON)
        else { return deny(400, "invalid_grant", "Invalid JWT Signature.") }
        guard claims["iss"] == .string(credentials.fcmClientEmail), claims["aud"] == .string(credentials.fcmTokenURI) else {
            return deny(400, "invalid_grant", "Invalid JWT: iss or aud does not match.")
        }
        guard let scope = claims["scope"]?.stringValue, scope.contains("firebase.messaging") || scope.contains("cloud-platform") else {
            return deny(400, "invalid_scope", "Scope firebase.messaging or cloud-platform required.")
        }
        guard case .number(let iatNumber)? = claims["iat"], case .number(let expNumber)? = claims["exp"],
              let iat = iatNumber.int64, let exp = expNumber.int64, exp > iat, exp - iat <= 3600, iat <= now + 300, exp >= now - 300
        else { return deny(400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.") }
        let token = "ya29.sim-" + Hex.encode((try? SecureRandom.bytes(16)) ?? Array(String(now).utf8))
        accessTokens.withLock { tokens in
            tokens = tokens.filter { $0.value > now }
            tokens[token] = now + tokenLifetimeSeconds
        }
        stats.recordTokenIssued()
        request.respond(status: 200, headers: [HeaderField("content-type", "application/json")],
                        body: JSONValue.object(["access_token": .string(token), "expires_in": .int(tokenLifetimeSeconds), "token_type": .string("Bearer")]).serializedBytes())
    }
}

/// `application/x-www-form-urlencoded` fields.
struct FormBody {
    private var fields: [String: String] = [:]

    init(_ text: String) {
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { continue }
            let decode = { (part: Substring) in (part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding) ?? String(part) }
            fields[decode(parts[0])] = decode(parts[1])
        }
    }

    subscript(name: String) -> String? { fields[name] }
}

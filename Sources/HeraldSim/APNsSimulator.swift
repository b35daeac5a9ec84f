import Foundation
import HeraldCore
public import HeraldCrypto
import HeraldHTTP2
import Synchronization

/// A strict loopback APNs: validates requests as APNs does (`shared/reference/protocols.md`
/// §A2–A7) and answers with APNs's status codes and reason strings.
///
/// It takes a provider token (`authorization: bearer …`) or, on a connection whose client
/// certificate the simulator's CA issued, the certificate: its subject UID is the one bundle it
/// may push to. A request that carries a token is judged by the token, certificate or not.
///
/// It advertises one stream until the connection's first authenticated request, then
/// `maxConcurrentStreams`, as APNs does with token auth. `@unchecked Sendable`: per-connection
/// state lives in the connection's `context` and is touched only on its loop; shared state is
/// behind locks.
public final class APNsSimulator: @unchecked Sendable {
    private let credentials: SimulatorCredentials
    private let publicKey: PublicKey
    public let stats: SimulatorStats
    private let maxConcurrentStreams: UInt32
    private let streamsBeforeToken: UInt32
    /// Other bundle ids the key's team owns (see ``init(credentials:stats:maxConcurrentStreams:streamsBeforeToken:log:teamBundleIDs:)``).
    private let teamBundleIDs: Set<String>
    /// Tokens whose signature was checked: token → issued-at (verifying once per token, not per request).
    private let verifiedTokens = Mutex<[String: Int64]>([:])
    private let counter = Atomic<UInt64>(0)
    private let log: SimulatorLog

    /// Creates a simulator for the credentials' key, team and bundle.
    ///
    /// Every simulated device token belongs to the credentials' bundle. `teamBundleIDs` are other
    /// apps of the same team: APNs accepts the provider token for their topics but answers
    /// `DeviceTokenNotForTopic` for a device of another app, which is what a job sent with the
    /// wrong (but owned) bundle id sees for every device. A topic the team does not own stays
    /// `TopicDisallowed`.
    public init(credentials: SimulatorCredentials, stats: SimulatorStats, maxConcurrentStreams: UInt32,
                streamsBeforeToken: UInt32 = 1, log: SimulatorLog = SimulatorLog(), teamBundleIDs: Set<String> = []) throws(CryptoError) {
        self.log = log
        self.streamsBeforeToken = streamsBeforeToken
        self.teamBundleIDs = teamBundleIDs
        self.credentials = credentials
        self.publicKey = try credentials.apnsKey.publicKey()
        self.stats = stats
        self.maxConcurrentStreams = maxConcurrentStreams
    }

    static let pushTypes: [String: String] = [
        "alert": "", "background": "", "voip": ".voip", "liveactivity": ".push-type.liveactivity", "location": ".location-query",
        "complication": ".complication", "fileprovider": ".pushkit.fileprovider", "mdm": "", "pushtotalk": ".voip-ptt",
        "controls": ".push-type.controls", "widgets": ".push-type.widgets",
    ]

    /// Sets up a new connection: one stream (by default) until a valid token.
    func connectionOpened(_ connection: HTTP2ServerConnection) {
        _ = connection.simulatorState
        connection.setMaxConcurrentStreams(min(streamsBeforeToken, maxConcurrentStreams))
    }

    /// Handles one request (on the connection's loop).
    func handle(_ request: HTTP2ServerRequest, faults: SimulatorFaults) {
        stats.recordRequest()
        let apnsID = request.header("apns-id") ?? Self.randomAPNsID()
        func reject(_ status: Int, _ reason: String, violation: Bool = true, extra: [String: JSONValue] = [:], headers: [HeaderField] = []) {
            stats.recordRejected(reason: reason, violation: violation)
            var body = extra
            body["reason"] = .string(reason)
            request.respond(status: status, headers: [HeaderField("apns-id", apnsID), HeaderField("content-type", "application/json")] + headers,
                            body: JSONValue.object(body).serializedBytes())
        }
        let state = request.connection.simulatorState

        // A7 order, then the stricter checks Apple's rules imply.
        if let id = request.header("apns-id"), !Identifiers.isUUID(id) { return reject(400, "BadMessageId") }
        guard request.method == "POST" else { return reject(405, "MethodNotAllowed") }
        var seen = Set<String>()
        for header in request.headers where !seen.insert(header.name).inserted { return reject(400, "DuplicateHeaders") }
        guard let topic = request.header("apns-topic"), !topic.isEmpty else { return reject(400, "MissingTopic") }
        if let collapse = request.header("apns-collapse-id"), collapse.utf8.count > 64 { return reject(400, "BadCollapseId") }
        let pushType = request.header("apns-push-type") ?? "alert"
        guard let suffix = APNsSimulator.pushTypes[pushType] else { return reject(400, "InvalidPushType") }
        let priority = request.header("apns-priority") ?? "10"
        guard ["10", "5", "1"].contains(priority) else { return reject(400, "BadPriority") }
        if pushType == "background" && priority == "10" { return reject(400, "BadPriority") }
        if let expiration = request.header("apns-expiration"), Int64(expiration).map({ $0 < 0 }) ?? true { return reject(400, "BadExpirationDate") }
        guard request.path.hasPrefix("/3/device/") else { return reject(404, "BadPath") }
        let token = String(request.path.dropFirst("/3/device/".count))
        guard !token.isEmpty else { return reject(400, "MissingDeviceToken") }
        guard token.count >= 32, token.count <= 200, token.count % 2 == 0, token.utf8.allSatisfy({ $0.isHexDigit }) else {
            return reject(400, "BadDeviceToken")
        }

        // Authentication (A4): the token when there is one, else the client certificate.
        // `otherApp`: a topic the credential may push to, of an app whose devices these are not.
        let otherApp: Bool
        if let authorization = request.header("authorization"), authorization.lowercased().hasPrefix("bearer "), authorization.count > 7 {
            switch verify(String(authorization.dropFirst(7))) {
            case .invalid: return reject(403, "InvalidProviderToken")
            case .expired: return reject(403, "ExpiredProviderToken")
            case .valid(let team):
                if let first = state.teamID, first != team { return reject(403, "InvalidProviderToken") }
                state.teamID = team
            }
            otherApp = teamBundleIDs.contains { topic == $0 + suffix }
            guard topic == credentials.bundleID + suffix || otherApp else {
                if topic.hasPrefix(credentials.bundleID) { return reject(400, "BadTopic") }
                return reject(400, "TopicDisallowed")
            }
        } else if let subject = request.connection.peerCertificateSubject {
            // The TLS handshake verified it; Apple's certificates name their bundle in the UID.
            guard let bundleID = subject.uid, !bundleID.isEmpty else { return reject(403, "BadCertificate") }
            guard topic == bundleID + suffix else {
                if APNsSimulator.pushTypes.values.contains(where: { topic == bundleID + $0 }) { return reject(400, "BadTopic") }
                return reject(400, "TopicDisallowed")
            }
            // A2.1: location pushes are token auth only. Which reason Apple gives is not known
            // (protocols.md part D); InvalidPushType is A2.1's answer for a type a certificate
            // connection does not support.
            if pushType == "location" { return reject(400, "InvalidPushType") }
            otherApp = bundleID != credentials.bundleID
        } else {
            return reject(403, "MissingProviderToken")
        }
        if !state.authenticated {
            state.authenticated = true
            request.connection.setMaxConcurrentStreams(maxConcurrentStreams)
        }

        // Payload.
        let limit = pushType == "voip" ? 5120 : 4096
        guard !request.body.isEmpty else { return reject(400, "PayloadEmpty") }
        guard request.body.count <= limit else { return reject(413, "PayloadTooLarge") }
        guard let payload = try? JSONValue.parse(request.body, limits: .init(maxBytes: limit, maxDepth: 32)), payload["aps"]?.objectValue != nil else {
            return reject(400, "BadPayload")
        }
        if pushType == "liveactivity", let problem = APNsSimulator.liveActivityProblem(payload) { return reject(400, problem) }

        // Devices and faults. Every simulated device belongs to the credentials' bundle.
        if otherApp { return reject(400, "DeviceTokenNotForTopic", violation: false) }
        if faults.unregistered.isUnregistered(token) {
            let timestamp = Int64(Date().timeIntervalSince1970 * 1000) - 60_000
            return reject(410, "Unregistered", violation: false, extra: ["timestamp": .int(timestamp)])
        }
        let roll = Double.random(in: 0..<1)
        if roll < faults.stallRate { return }  // never answered: the client's deadline must fire
        if roll < faults.stallRate + faults.tooManyRequestsRate {
            return reject(429, "TooManyRequests", violation: false, headers: [HeaderField("retry-after", String(faults.retryAfterSeconds))])
        }
        if roll < faults.stallRate + faults.tooManyRequestsRate + faults.serverErrorRate {
            return Bool.random() ? reject(500, "InternalServerError", violation: false)
                : reject(503, "ServiceUnavailable", violation: false, headers: [HeaderField("retry-after", String(faults.retryAfterSeconds))])
        }
        stats.recordAccepted(token: token)
        log.record(token: token, {
            var entry: [String: JSONValue] = ["push_type": .string(pushType), "topic": .string(topic), "priority": .string(priority),
                                              "apns_id": .string(apnsID), "bytes": .int(request.body.count), "payload": payload]
            if let expiration = request.header("apns-expiration") { entry["expiration"] = .string(expiration) }
            if let collapse = request.header("apns-collapse-id") { entry["collapse_id"] = .string(collapse) }
            return .object(entry)
        }())
        request.respond(status: 200, headers: [HeaderField("apns-id", apnsID)])
    }

    /// A random version-4 UUID in lower case: the `apns-id` APNs makes up for a request that has
    /// none. Foundation's `UUID()` opens and reads `/dev/urandom` for each one, a fifth of the
    /// simulator's CPU under h2load (whose requests carry no `apns-id`); two draws from the system
    /// generator (`getrandom`) open nothing.
    static func randomAPNsID() -> String {
        var generator = SystemRandomNumberGenerator()
        let halves: [UInt64] = [generator.next(), generator.next()]
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for index in 0..<16 {
            var byte = UInt8(truncatingIfNeeded: halves[index / 8] >> (8 * UInt64(index % 8)))
            if index == 6 { byte = (byte & 0x0F) | 0x40 }  // version 4
            if index == 8 { byte = (byte & 0x3F) | 0x80 }  // RFC 4122 variant
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(Hex.digit(byte >> 4))
            text.append(Hex.digit(byte & 0x0F))
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Apple's rules for a live-activity payload (`shared/reference/protocols.md` §A6): an
    /// `event` of start, update or end, a numeric `timestamp`, a `content-state` object; a start
    /// also needs `alert`, `attributes-type` and `attributes`. The reason APNs returns is not
    /// documented; the simulator says `BadLiveActivityPayload`.
    static func liveActivityProblem(_ payload: JSONValue) -> String? {
        guard let aps = payload["aps"] else { return "BadLiveActivityPayload" }
        guard let event = aps["event"]?.stringValue, ["start", "update", "end"].contains(event) else { return "BadLiveActivityPayload" }
        guard case .number? = aps["timestamp"], aps["content-state"]?.objectValue != nil else { return "BadLiveActivityPayload" }
        if event == "start" {
            guard aps["alert"] != nil, aps["attributes-type"]?.stringValue != nil, aps["attributes"]?.objectValue != nil else {
                return "BadLiveActivityPayload"
            }
        }
        return nil
    }

    enum Verification { case valid(team: String), invalid, expired }

    private func verify(_ jwt: String) -> Verification {
        let now = Int64(Date().timeIntervalSince1970)
        if let issuedAt = verifiedTokens.withLock({ $0[jwt] }) {
            return now - issuedAt > 3600 ? .expired : .valid(team: credentials.teamID)
        }
        guard let token = try? JWT(compact: jwt), token.verify(with: publicKey),
              let header = try? JSONValue.parse(token.headerJSON), let claims = try? JSONValue.parse(token.claimsJSON),
              header["alg"] == .string("ES256"), header["kid"] == .string(credentials.apnsKeyID),
              claims["iss"] == .string(credentials.teamID), case .number(let iat)? = claims["iat"], let issuedAt = iat.int64
        else { return .invalid }
        if issuedAt > now + 60 { return .invalid }
        verifiedTokens.withLock { tokens in
            if tokens.count > 10_000 { tokens.removeAll() }
            tokens[jwt] = issuedAt
        }
        return now - issuedAt > 3600 ? .expired : .valid(team: credentials.teamID)
    }
}

extension UInt8 {
    var isHexDigit: Bool { (self >= 0x30 && self <= 0x39) || (self >= 0x41 && self <= 0x46) || (self >= 0x61 && self <= 0x66) }
}

import HeraldCore
@testable import HeraldFCM
import HeraldHTTP2
import Testing

@Suite struct FCMOutcomeTests {
    static func response(_ status: Int, _ body: String, retryAfter: String? = nil) -> HTTP2Response {
        HTTP2Response(status: status, headers: retryAfter.map { [HeaderField("retry-after", $0)] } ?? [], body: Array(body.utf8))
    }

    static func error(_ status: Int, _ rpc: String, _ code: String?, message: String = "m", extra: String = "") -> String {
        let fcm = code.map { #"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}"# }
        let details = [fcm, extra.isEmpty ? nil : extra].compactMap { $0 }.joined(separator: ",")
        return #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(rpc)","details":[\#(details)]}}"#
    }

    @Test func accepted() {
        #expect(FCMOutcome.classify(Self.response(200, #"{"name":"projects/p/messages/0:1"}"#)) == .accepted(name: "projects/p/messages/0:1"))
    }

    @Test func unregisteredClass() {
        let gone = FCMOutcome.classify(Self.response(404, Self.error(404, "NOT_FOUND", "UNREGISTERED")))
        #expect(gone.receiptReason == .unregistered)
        let mismatch = FCMOutcome.classify(Self.response(403, Self.error(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH")))
        #expect(mismatch.receiptReason == .senderIDMismatch)
        let badToken = FCMOutcome.classify(Self.response(400, Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
                                                                         message: "The registration token is not a valid FCM registration token")))
        #expect(badToken.receiptReason == .invalidToken)
        let namedField = FCMOutcome.classify(Self.response(400, Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", extra:
            #"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}"#)))
        #expect(namedField.receiptReason == .invalidToken)
        guard case .unregistered = namedField else { Issue.record("got \(namedField)"); return }
    }

    @Test func permanentClass() {
        let outcome = FCMOutcome.classify(Self.response(400, Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "Message is too big", extra:
            #"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.data","description":"too big"}]}"#)))
        guard case .permanent(let reason, _) = outcome else { Issue.record("got \(outcome)"); return }
        #expect(reason == .badRequest)
    }

    @Test func retryableClass() {
        #expect(FCMOutcome.classify(Self.response(429, Self.error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), retryAfter: "30"))
            == .retryable(retryAfterSeconds: 30, quotaExceeded: true, detail: "HTTP 429 QUOTA_EXCEEDED m"))
        #expect(FCMOutcome.classify(Self.response(503, Self.error(503, "UNAVAILABLE", "UNAVAILABLE"), retryAfter: "5"))
            == .retryable(retryAfterSeconds: 5, quotaExceeded: false, detail: "HTTP 503 UNAVAILABLE m"))
        #expect(FCMOutcome.classify(Self.response(500, Self.error(500, "INTERNAL", "INTERNAL"))).receiptReason == .retry)
        #expect(FCMOutcome.classify(Self.response(502, "<html>bad gateway</html>")).receiptReason == .retry)
        #expect(FCMOutcome.classify(HTTP2Error(.connectionLost, "gone")).receiptReason == .retry)
        #expect(FCMOutcome.classify(HTTP2Error(.streamReset(7), "refused")).receiptReason == .retry)
        #expect(FCMOutcome.classify(HTTP2Error(.shutdown, "bye")).receiptReason == .providerError)
        #expect(FCMOutcome.parseRetryAfter("Wed, 21 Oct 2026 07:28:00 GMT") == nil)
    }

    @Test func credentialFaultClass() {
        let thirdParty = FCMOutcome.classify(Self.response(401, Self.error(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", extra:
            #"{"@type":"type.googleapis.com/google.firebase.fcm.v1.ApnsError","statusCode":403,"reason":"InvalidProviderToken"}"#)))
        guard case .credentialFault(let detail) = thirdParty else { Issue.record("got \(thirdParty)"); return }
        #expect(detail.contains("APNs 403 InvalidProviderToken"))
        #expect(FCMOutcome.classify(Self.response(403, Self.error(403, "PERMISSION_DENIED", nil))).receiptReason == .credentials)
        #expect(FCMOutcome.classify(Self.response(401, Self.error(401, "UNAUTHENTICATED", nil))).receiptReason == .credentials)
    }

    @Test func statusParsesNestedApnsError() {
        let body = Self.error(404, "NOT_FOUND", "UNREGISTERED", extra:
            #"{"@type":"type.googleapis.com/google.firebase.fcm.v1.ApnsError","statusCode":410,"reason":"Unregistered"}"#)
        let status = FCMErrorStatus(body: Array(body.utf8), httpStatus: 404)
        #expect(status.errorCode == "UNREGISTERED")
        #expect(status.apnsStatusCode == 410)
        #expect(status.apnsReason == "Unregistered")
        #expect(status.rpcStatus == "NOT_FOUND")
        #expect(FCMErrorStatus(body: Array("not json".utf8), httpStatus: 500).errorCode == nil)
    }

    /// The in-place read of an accepted answer's name gives what the parser gives, for the usual
    /// body and for bodies that only look like it (escapes, other members, non-ASCII, cut short).
    @Test func messageNameReadsWhatTheParserReads() {
        func parsed(_ body: [UInt8]) -> String {
            (try? JSONValue.parse(body, limits: .init(maxBytes: 64 * 1024, maxDepth: 8)))?["name"]?.stringValue ?? ""
        }
        #expect(FCMOutcome.messageName(Array(#"{"name": "projects/p/messages/0:1%2"}"#.utf8)) == "projects/p/messages/0:1%2")
        #expect(FCMOutcome.messageName(Array("{\n  \"name\": \"projects/demo/messages/abc\"\n}\n".utf8)) == "projects/demo/messages/abc")
        #expect(FCMOutcome.messageName([]) == "")
        var generator = SplitMix64(seed: 7)
        let pieces = [" ", "\n", "{", "}", "\"name\"", "\"other\"", ":", ",", "\"", "projects/p/messages/1", "\\\"", "\\u0041",
                      "\u{E9}", "1", "null", "[", "]", "\"name\":\"x\"", "\u{01}"]
        for _ in 0..<5000 {
            var text = generator.next() % 3 == 0 ? "" : #"{"name":""#
            for _ in 0..<Int(generator.next() % 8) { text += pieces[Int(generator.next() % UInt64(pieces.count))] }
            let body = Array(text.utf8)
            #expect(FCMOutcome.messageName(body) == parsed(body), "\(text)")
        }
        var bytes = Array(#"{"name":"ab"}"#.utf8)
        bytes[10] = 0xFF  // not UTF-8: the parser refuses the body, and so does the read
        #expect(FCMOutcome.messageName(bytes) == parsed(bytes))
    }
}


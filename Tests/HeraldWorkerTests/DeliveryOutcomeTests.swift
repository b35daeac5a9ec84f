import HeraldAPNs
import HeraldCore
import HeraldFCM
import HeraldHTTP2
@testable import HeraldWorker
import Testing

@Suite struct DeliveryOutcomeTests {
    private static let apnsID = "eabeae54-14a8-11e5-b60b-1697f925ec7b"

    private func apns(_ status: Int, _ reason: String?, timestamp: Int64? = nil, headers: [HeaderField] = []) -> DeliveryOutcome {
        var body: [String: JSONValue] = [:]
        if let reason { body["reason"] = .string(reason) }
        if let timestamp { body["timestamp"] = .int(timestamp) }
        let response = HTTP2Response(status: status, headers: headers + [HeaderField("apns-id", Self.apnsID)],
                                     body: reason == nil ? [] : JSONValue.object(body).serializedBytes())
        return DeliveryOutcome(APNsOutcome.classify(response))
    }

    private func fcm(_ status: Int, _ rpc: String, _ code: String?, message: String = "m", retryAfter: String? = nil) -> DeliveryOutcome {
        let detail = code.map { #"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}"# } ?? ""
        let body = #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(rpc)","details":[\#(detail)]}}"#
        let response = HTTP2Response(status: status, headers: retryAfter.map { [HeaderField("retry-after", $0)] } ?? [], body: Array(body.utf8))
        return DeliveryOutcome(FCMOutcome.classify(response))
    }

    // MARK: APNs

    @Test func apnsAccepted() {
        #expect(apns(200, nil) == .accepted(providerID: Self.apnsID))
    }

    @Test func apnsGoneKeepsTheTimestampInSeconds() {
        // APNs gives milliseconds; the registration comparison works in seconds.
        #expect(apns(410, "Unregistered", timestamp: 1_796_235_667_123)
            == .unregistered(reason: .unregistered, providerReason: "Unregistered", timestamp: Timestamp(seconds: 1_796_235_667)))
        #expect(apns(410, "ExpiredToken", timestamp: 1_796_235_667_000)
            == .unregistered(reason: .expiredToken, providerReason: "ExpiredToken", timestamp: Timestamp(seconds: 1_796_235_667)))
        #expect(apns(410, "Unregistered") == .unregistered(reason: .unregistered, providerReason: "Unregistered", timestamp: nil))
    }

    @Test func apnsBadTokensAreUnregisteredWithTheirReason() {
        #expect(apns(400, "BadDeviceToken") == .unregistered(reason: .badDeviceToken, providerReason: "BadDeviceToken", timestamp: nil))
        #expect(apns(400, "DeviceTokenNotForTopic")
            == .unregistered(reason: .deviceTokenNotForTopic, providerReason: "DeviceTokenNotForTopic", timestamp: nil))
    }

    @Test func apnsRetryable() {
        #expect(apns(429, "TooManyRequests", headers: [HeaderField("retry-after", "30")])
            == .retryable(providerReason: "TooManyRequests", retryAfterSeconds: 30, quotaExceeded: false))
        #expect(apns(503, "ServiceUnavailable") == .retryable(providerReason: "ServiceUnavailable", retryAfterSeconds: nil, quotaExceeded: false))
        #expect(apns(500, "InternalServerError") == .retryable(providerReason: "InternalServerError", retryAfterSeconds: nil, quotaExceeded: false))
        guard case .retryable(_, nil, false) = DeliveryOutcome(APNsOutcome.classify(HTTP2Error(.connectionLost, "gone"))) else {
            Issue.record("a lost connection is retried"); return
        }
    }

    @Test func apnsPermanentFailures() {
        #expect(apns(413, "PayloadTooLarge") == .failed(reason: .payloadTooLarge, providerReason: "PayloadTooLarge"))
        // A payload Herald could not shorten enough never reaches APNs.
        #expect(DeliveryOutcome(APNsOutcome.permanent(status: 0, reason: "payload-too-large"))
            == .failed(reason: .payloadTooLarge, providerReason: "payload-too-large"))
        #expect(apns(400, "BadCollapseId") == .failed(reason: .badRequest, providerReason: "BadCollapseId"))
        #expect(apns(400, nil) == .failed(reason: .badRequest, providerReason: "HTTP 400"))
    }

    @Test(arguments: ["ExpiredProviderToken", "InvalidProviderToken", "MissingProviderToken", "BadCertificate",
                      "BadCertificateEnvironment", "BadEnvironmentKeyIdInToken", "BadEnvironmentKeyInToken", "Forbidden"])
    func apnsCredentialFaults(reason: String) {
        #expect(apns(403, reason) == .credentialFault(providerReason: reason))
    }

    @Test func apnsTopicDisallowedHaltsTheApp() {
        #expect(apns(400, "TopicDisallowed") == .credentialFault(providerReason: "TopicDisallowed"))
    }

    // MARK: FCM

    @Test func fcmAccepted() {
        let response = HTTP2Response(status: 200, headers: [], body: Array(#"{"name":"projects/p/messages/0:1"}"#.utf8))
        #expect(DeliveryOutcome(FCMOutcome.classify(response)) == .accepted(providerID: "projects/p/messages/0:1"))
    }

    @Test func fcmUnregistered() {
        guard case .unregistered(.unregistered, _, nil) = fcm(404, "NOT_FOUND", "UNREGISTERED") else {
            Issue.record("UNREGISTERED is a dead token"); return
        }
        // A token of another Firebase project: dead for this app, not a credential fault.
        guard case .unregistered(.senderIDMismatch, _, nil) = fcm(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH") else {
            Issue.record("SENDER_ID_MISMATCH is unregistered"); return
        }
        guard case .unregistered(.invalidToken, _, nil) = fcm(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
                                                              message: "The registration token is not a valid FCM registration token") else {
            Issue.record("an INVALID_ARGUMENT naming the token is unregistered"); return
        }
    }

    @Test func fcmQuotaIsRetryableAndMarkedAsQuota() {
        #expect(fcm(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", retryAfter: "30")
            == .retryable(providerReason: "HTTP 429 QUOTA_EXCEEDED m", retryAfterSeconds: 30, quotaExceeded: true))
        guard case .retryable(_, nil, false) = fcm(503, "UNAVAILABLE", "UNAVAILABLE") else {
            Issue.record("UNAVAILABLE is retried without the quota delay"); return
        }
        guard case .retryable(_, nil, false) = DeliveryOutcome(FCMOutcome.classify(HTTP2Error(.connectionLost, "gone"))) else {
            Issue.record("a lost connection is retried"); return
        }
    }

    @Test func fcmPermanentFailures() {
        guard case .failed(.badRequest, let detail) = fcm(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "Message is too big") else {
            Issue.record("a bad message fails"); return
        }
        #expect(detail.contains("Message is too big"))
    }

    @Test func fcmCredentialFaults() {
        guard case .credentialFault = fcm(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR") else {
            Issue.record("THIRD_PARTY_AUTH_ERROR halts"); return
        }
        guard case .credentialFault = fcm(403, "PERMISSION_DENIED", nil) else {
            Issue.record("PERMISSION_DENIED without SENDER_ID_MISMATCH halts"); return
        }
    }

    // MARK: What the invalidation guard counts

    /// Only answers about the token feed the guard: a 5xx storm or a bad payload must not
    /// dilute (or inflate) the share of unregistered answers.
    @Test func onlyAnswersAboutTheTokenCountTowardsTheGuard() {
        #expect(apns(200, nil).isVerdictOnToken)
        #expect(apns(410, "Unregistered").isVerdictOnToken)
        #expect(fcm(404, "NOT_FOUND", "UNREGISTERED").isVerdictOnToken)
        #expect(!apns(503, "ServiceUnavailable").isVerdictOnToken)
        #expect(!apns(413, "PayloadTooLarge").isVerdictOnToken)
        #expect(!apns(403, "InvalidProviderToken").isVerdictOnToken)
        #expect(!fcm(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED").isVerdictOnToken)
    }
}

import HeraldAPNs
import HeraldCore
import HeraldHTTP2
import Testing

@Suite struct APNsOutcomeTests {
    private func response(_ status: Int, _ reason: String?, timestamp: Int64? = nil, headers: [HeaderField] = []) -> HTTP2Response {
        var body: [String: JSONValue] = [:]
        if let reason { body["reason"] = .string(reason) }
        if let timestamp { body["timestamp"] = .int(timestamp) }
        return HTTP2Response(status: status, headers: headers + [HeaderField("apns-id", "eabeae54-14a8-11e5-b60b-1697f925ec7b")],
                             body: reason == nil ? [] : JSONValue.object(body).serializedBytes())
    }

    @Test func acceptedKeepsTheAPNsID() {
        #expect(APNsOutcome.classify(response(200, nil)) == .accepted(apnsID: "eabeae54-14a8-11e5-b60b-1697f925ec7b"))
    }

    @Test func unregisteredKeepsTheTimestampInMilliseconds() {
        let outcome = APNsOutcome.classify(response(410, "Unregistered", timestamp: 1_796_235_667_123))
        #expect(outcome == .unregistered(reason: "Unregistered", timestampMilliseconds: 1_796_235_667_123))
        #expect(outcome.receiptReason == .unregistered)
        #expect(APNsOutcome.classify(response(410, "ExpiredToken")).receiptReason == .expiredToken)
        #expect(APNsOutcome.classify(response(400, "BadDeviceToken")) == .unregistered(reason: "BadDeviceToken", timestampMilliseconds: nil))
        #expect(APNsOutcome.classify(response(400, "DeviceTokenNotForTopic")).receiptReason == .deviceTokenNotForTopic)
    }

    @Test func retryableHonoursRetryAfter() {
        #expect(APNsOutcome.classify(response(429, "TooManyRequests", headers: [HeaderField("retry-after", "30")]))
            == .retryable(reason: "TooManyRequests", retryAfterSeconds: 30))
        #expect(APNsOutcome.classify(response(500, "InternalServerError")) == .retryable(reason: "InternalServerError", retryAfterSeconds: nil))
        #expect(APNsOutcome.classify(response(503, "Shutdown")).receiptReason == .retry)
        #expect(APNsOutcome.classify(response(503, "ServiceUnavailable")).receiptReason == .retry)
        #expect(APNsOutcome.classify(response(400, "IdleTimeout")).receiptReason == .retry)
        // Keeps the token and backs off: retryable, not a credential fault.
        #expect(APNsOutcome.classify(response(429, "TooManyProviderTokenUpdates")) == .retryable(reason: "TooManyProviderTokenUpdates", retryAfterSeconds: nil))
        #expect(APNsOutcome.classify(HTTP2Error(.connectionLost, "gone")).receiptReason == .retry)
        #expect(APNsOutcome.classify(HTTP2Error(.goaway(retryable: true), "goaway")).receiptReason == .retry)
    }

    /// A server's TLS alert about the client certificate is the app's credential under
    /// certificate auth; the same text under token auth, or a failure to verify the server, is not.
    @Test func certificateAlertsAreCredentialFaultsOnlyUnderCertificateAuth() {
        let revoked = HTTP2Error(.tlsHandshakeFailed, "TLS handshake failed: error:0A000414:SSL routines::sslv3 alert certificate revoked")
        #expect(APNsOutcome.classify(revoked, certificateAuth: true)
                == .credentialFault(reason: "the APNs server refused the app's certificate (alert certificate revoked)"))
        #expect(APNsOutcome.classify(revoked).receiptReason == .retry)
        let unknownCA = HTTP2Error(.connectionLost, "TLS read failed: error:0A000418:SSL routines::tlsv1 alert unknown ca")
        #expect(APNsOutcome.classify(unknownCA, certificateAuth: true) == .credentialFault(reason: "the APNs server refused the app's certificate (alert unknown ca)"))
        let ourTrust = HTTP2Error(.tlsHandshakeFailed, "TLS handshake failed: certificate verification: certificate verify failed")
        #expect(APNsOutcome.classify(ourTrust, certificateAuth: true).receiptReason == .retry)
    }

    @Test(arguments: ["InvalidProviderToken", "MissingProviderToken", "BadCertificate", "BadCertificateEnvironment",
                      "BadEnvironmentKeyIdInToken", "BadEnvironmentKeyInToken", "Forbidden", "ExpiredProviderToken"])
    func credentialFaults(reason: String) {
        let outcome = APNsOutcome.classify(response(403, reason))
        #expect(outcome == .credentialFault(reason: reason))
        #expect(outcome.receiptReason == .credentials)
    }

    @Test func topicDisallowedIsACredentialFault() {
        #expect(APNsOutcome.classify(response(400, "TopicDisallowed")) == .credentialFault(reason: "TopicDisallowed"))
    }

    @Test func permanentFailures() {
        #expect(APNsOutcome.classify(response(413, "PayloadTooLarge")) == .permanent(status: 413, reason: "PayloadTooLarge"))
        #expect(APNsOutcome.classify(response(413, "PayloadTooLarge")).receiptReason == .payloadTooLarge)
        #expect(APNsOutcome.classify(response(400, "BadCollapseId")).receiptReason == .badRequest)
        #expect(APNsOutcome.classify(response(405, "MethodNotAllowed")) == .permanent(status: 405, reason: "MethodNotAllowed"))
        #expect(APNsOutcome.classify(response(400, nil)) == .permanent(status: 400, reason: "HTTP 400"))
    }
}

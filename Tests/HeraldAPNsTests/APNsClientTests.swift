import Foundation
import HeraldAPNs
import HeraldCore
import HeraldCrypto
import HeraldHTTP2
import HeraldSim
import Testing

/// APNsClient against the in-process APNs simulator, which validates every request strictly.
@Suite(.timeLimit(.minutes(2))) struct APNsClientTests {
    static let subscription = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"

    private func target(_ index: Int, sandbox: Bool? = nil) -> APNsNotification.Target {
        .init(subscriptionID: APNsClientTests.subscription, deviceToken: APNsSimulatorFixture.deviceToken(index), sandbox: sandbox)
    }

    private func alert(_ index: Int = 1) throws -> APNsNotification {
        let job = try APNsNotificationTests.job("notification", #""content":{"title":"Hi","body":"There"}"#)
        return try APNsNotification.forJob(job, target: target(index), now: .now)
    }

    @Test func openConnectionsCountsBothEnvironments() async throws {
        let fixture = try APNsSimulatorFixture()
        #expect(await fixture.client.openConnections() == 0, "connections open on demand")
        let production = try APNsNotification.forJob(try APNsNotificationTests.job("notification", #""content":{"title":"Hi"}"#),
                                                     target: target(1, sandbox: false), now: .now)
        #expect(await fixture.client.send(production) == .accepted(apnsID: production.apnsID))
        #expect(await fixture.client.openConnections() == 1)
        let sandbox = try APNsNotification.forJob(try APNsNotificationTests.job("notification", #""content":{"title":"Hi"}"#),
                                                  target: target(2, sandbox: true), now: .now)
        #expect(await fixture.client.send(sandbox) == .accepted(apnsID: sandbox.apnsID))
        #expect(await fixture.client.openConnections() == 2, "one to each environment's host")
    }

    @Test func everyPushTypeIsAccepted() async throws {
        let fixture = try APNsSimulatorFixture()
        let jobs: [(APNsPushType, Job)] = [
            (.alert, try APNsNotificationTests.job("notification",
                #""content":{"title":"Hi","subtitle":"S","body":"B","badge":1,"sound":"default","buttons":[{"id":"ok","text":"OK"}],"data":{"k":[1,2]}}"#,
                extra: #","expires_at":"2099-01-01T00:00:00Z""#)),
            (.background, try APNsNotificationTests.job("notification", #""content":{"content_available":true}"#)),
            (.voip, try APNsNotificationTests.job("voip", #""voip":{"data":{"call_id":"c1"},"ttl_s":60}"#)),
            (.liveActivity, try APNsNotificationTests.job("live_activity",
                #""live_activity":{"activity_id":"a1","event":"update","stream_id":"s1","sequence":1,"content_state":{"eta":3}}"#)),
        ]
        for (index, (pushType, job)) in jobs.enumerated() {
            let notification = try APNsNotification.forJob(job, target: target(index + 1, sandbox: index % 2 == 0), now: .now)
            #expect(notification.pushType == pushType)
            #expect(await fixture.client.send(notification) == .accepted(apnsID: notification.apnsID))
        }
        let location = APNsNotification(deviceToken: APNsSimulatorFixture.deviceToken(9), pushType: .location,
                                        payload: Array(#"{"aps":{}}"#.utf8), priority: 10,
                                        apnsID: APNsNotification.apnsID(jobID: "loc", subscriptionID: APNsClientTests.subscription))
        #expect(await fixture.client.send(location) == .accepted(apnsID: location.apnsID))
        let stats = fixture.simulator.apnsStats.snapshot
        #expect(stats.accepted == 5)
        #expect(stats.violations == 0)
        #expect(fixture.tokens.tokensMinted == 1)
    }

    @Test func unregisteredCarriesTheTimestamp() async throws {
        var faults = SimulatorFaults()
        faults.unregistered = UnregisteredShare(1.0)
        let fixture = try APNsSimulatorFixture(faults: faults)
        let before = Int64(Date().timeIntervalSince1970 * 1000) - 120_000
        let outcome = await fixture.client.send(try alert())
        guard case .unregistered(let reason, let timestamp) = outcome else {
            Issue.record("expected unregistered, got \(outcome)")
            return
        }
        #expect(reason == "Unregistered")
        #expect((timestamp ?? 0) > before)
        #expect(outcome.receiptReason == .unregistered)
        #expect(fixture.violations == 0)
    }

    @Test func tooManyRequestsIsRetryableWithRetryAfter() async throws {
        var faults = SimulatorFaults()
        faults.tooManyRequestsRate = 1.0
        faults.retryAfterSeconds = 7
        let fixture = try APNsSimulatorFixture(faults: faults)
        #expect(await fixture.client.send(try alert()) == .retryable(reason: "TooManyRequests", retryAfterSeconds: 7))
        #expect(fixture.violations == 0)
    }

    @Test func serverErrorsAreRetryable() async throws {
        var faults = SimulatorFaults()
        faults.serverErrorRate = 1.0
        let fixture = try APNsSimulatorFixture(faults: faults)
        for index in 1...4 {
            let outcome = await fixture.client.send(try alert(index))
            guard case .retryable(let reason, _) = outcome else {
                Issue.record("expected retryable, got \(outcome)")
                continue
            }
            #expect(["InternalServerError", "ServiceUnavailable"].contains(reason))
        }
        #expect(fixture.violations == 0)
    }

    @Test func wrongKeyIsACredentialFault() async throws {
        let fixture = try APNsSimulatorFixture { credentials in
            APNsProviderToken(key: try PrivateKey.generate(.ecP256), keyID: credentials.apnsKeyID, teamID: credentials.teamID)
        }
        let outcome = await fixture.client.send(try alert())
        #expect(outcome == .credentialFault(reason: "InvalidProviderToken"))
        #expect(outcome.receiptReason == .credentials)
    }

    @Test func wrongTeamIsACredentialFault() async throws {
        let fixture = try APNsSimulatorFixture { credentials in
            APNsProviderToken(key: credentials.apnsKey, keyID: credentials.apnsKeyID, teamID: "WRONGTEAM0")
        }
        #expect(await fixture.client.send(try alert()) == .credentialFault(reason: "InvalidProviderToken"))
    }

    /// Certificate auth: the client certificate goes on the TLS connection and no bearer token is
    /// sent; the simulator takes the certificate it issued for the bundle, for its topics.
    @Test func certificateAuthIsAcceptedForTheBundleAndItsVoIPTopic() async throws {
        let fixture = try APNsSimulatorFixture()
        let client = try fixture.client(authentication: try fixture.certificateAuthentication())
        defer { client.shutdown() }
        let notification = try alert()
        #expect(await client.send(notification) == .accepted(apnsID: notification.apnsID))
        let voip = APNsNotification(deviceToken: APNsSimulatorFixture.deviceToken(2), pushType: .voip, payload: Array(#"{"aps":{}}"#.utf8),
                                    apnsID: APNsNotification.apnsID(jobID: "call", subscriptionID: APNsClientTests.subscription))
        #expect(await client.send(voip) == .accepted(apnsID: voip.apnsID))
        #expect(fixture.tokens.tokensMinted == 0)
        #expect(fixture.simulator.apnsStats.snapshot.accepted == 2)
        #expect(fixture.violations == 0)
    }

    /// The certificate names one bundle: an app configured with another bundle id sends topics
    /// the certificate does not cover, which halts the app's sends.
    @Test func certificateForAnotherBundleIsTopicDisallowed() async throws {
        let fixture = try APNsSimulatorFixture()
        let client = try fixture.client(authentication: try fixture.certificateAuthentication(), bundleID: "com.example.other")
        defer { client.shutdown() }
        let outcome = await client.send(try alert())
        #expect(outcome == .credentialFault(reason: "TopicDisallowed"))
        #expect(outcome.receiptReason == .credentials)
    }

    /// A certificate the simulator's CA did not issue fails the TLS handshake, as Apple's does:
    /// no request reaches the simulator, and the client sees a transport failure.
    @Test func certificateFromAnotherCAIsACredentialFault() async throws {
        let fixture = try APNsSimulatorFixture()
        let stranger = try CertificateAuthority.generate(commonName: "Herald test client CA")
        let certificate = try CertificateAuthority.issueAPNsClientCertificate(
            bundleID: fixture.simulator.credentials.bundleID, caCertificatePEM: stranger.caCertificatePEM, caKeyPEM: stranger.caKeyPEM)
        let client = try fixture.client(authentication: .certificate(certificatePEM: certificate.certificatePEM, keyPEM: certificate.keyPEM))
        defer { client.shutdown() }
        // TLS 1.3: the simulator's "unknown ca" alert arrives on the first read. A credential
        // fault: the worker halts the app's APNs sends instead of retrying every device.
        let outcome = await client.send(try alert())
        #expect(outcome == .credentialFault(reason: "the APNs server refused the app's certificate (alert unknown ca)"), "\(outcome)")
        #expect(fixture.simulator.apnsStats.snapshot.requests == 0)
        #expect(fixture.tokens.tokensMinted == 0)
    }

    @Test func oversizedPayloadIsPermanent() async throws {
        let fixture = try APNsSimulatorFixture()
        let body = #"{"aps":{"alert":"\#(String(repeating: "x", count: 4200))"}}"#
        let notification = APNsNotification(deviceToken: APNsSimulatorFixture.deviceToken(1), pushType: .alert, payload: Array(body.utf8),
                                            apnsID: APNsNotification.apnsID(jobID: "big", subscriptionID: APNsClientTests.subscription))
        let outcome = await fixture.client.send(notification)
        #expect(outcome == .permanent(status: 413, reason: "PayloadTooLarge"))
        #expect(outcome.receiptReason == .payloadTooLarge)
    }

    @Test func expiredProviderTokenIsRefreshedOnceAndRetried() async throws {
        let real = Int64(Date().timeIntervalSince1970)
        let clock = FakeClock(real - 3700)  // the token is already over an hour old for APNs
        let fixture = try APNsSimulatorFixture { credentials in
            APNsProviderToken(key: credentials.apnsKey, keyID: credentials.apnsKeyID, teamID: credentials.teamID, now: clock.closure)
        }
        let stale = try fixture.tokens.current()
        clock.advance(25 * 60)  // young enough to reuse, old enough to replace
        let notification = try alert()
        #expect(await fixture.client.send(notification) == .accepted(apnsID: notification.apnsID))
        #expect(fixture.tokens.tokensMinted == 2)
        #expect(try fixture.tokens.current() != stale)
    }

    @Test func repeatedExpiredProviderTokenIsACredentialFault() async throws {
        let real = Int64(Date().timeIntervalSince1970)
        let clock = FakeClock(real - 7300)  // every token this clock makes is expired for APNs
        let fixture = try APNsSimulatorFixture { credentials in
            APNsProviderToken(key: credentials.apnsKey, keyID: credentials.apnsKeyID, teamID: credentials.teamID, now: clock.closure)
        }
        _ = try fixture.tokens.current()
        clock.advance(25 * 60)
        #expect(await fixture.client.send(try alert()) == .credentialFault(reason: "ExpiredProviderToken"))
        #expect(fixture.tokens.tokensMinted == 2)  // refreshed once, not in a loop
    }

    @Test func requestHeadersAndEnvironments() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var configuration = APNsConfiguration(bundleID: "com.example.app")
        configuration.environment = .sandbox
        configuration.port = APNsConfiguration.alternativePort
        let key = try PrivateKey.generate(.ecP256)
        let client = try APNsClient(configuration: configuration,
                                    authentication: .token(APNsProviderToken(key: key, keyID: "K", teamID: "T")), loop: loop)
        defer { client.shutdown() }
        #expect(configuration.host(for: .production) == "api.push.apple.com")
        #expect(configuration.host(for: .sandbox) == "api.sandbox.push.apple.com")
        var notification = APNsNotification(deviceToken: "abcd", pushType: .voip, payload: [0x7B, 0x7D], priority: 5, expiration: 1_800_000_000,
                                            collapseID: "c", apnsID: "eabeae54-14a8-51e5-b60b-1697f925ec7b")
        #expect(client.environment(for: notification) == .sandbox)  // the app's
        notification.sandbox = false
        #expect(client.environment(for: notification) == .production)  // the subscription's flag wins
        let request = client.request(for: notification, bearer: "jwt")
        #expect(request.path == "/3/device/abcd")
        let headers = Dictionary(request.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        #expect(headers["authorization"] == "bearer jwt")
        #expect(headers["apns-topic"] == "com.example.app.voip")
        #expect(headers["apns-push-type"] == "voip")
        #expect(headers["apns-priority"] == "10")
        #expect(headers["apns-expiration"] == "1800000000")
        #expect(headers["apns-collapse-id"] == "c")
        #expect(headers["apns-id"] == "eabeae54-14a8-51e5-b60b-1697f925ec7b")
        // Unique per request, so kept out of the HPACK tables; the topic, repeated, is indexed.
        #expect(request.headers.first { $0.name == "apns-id" }?.neverIndex == true)
        #expect(request.headers.first { $0.name == "apns-topic" }?.neverIndex == false)
        #expect(client.request(for: notification, bearer: nil).headers.allSatisfy { $0.name != "authorization" })
    }
}

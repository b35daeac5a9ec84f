import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP2
@testable import HeraldSim
import Testing

@Suite(.timeLimit(.minutes(2))) struct APNsSimulatorTests {
    /// Issue 9: live-activity payloads are held to Apple's rules (event, timestamp, content
    /// state; alert, attributes type and attributes on start), and with `--log` the accepted
    /// requests of a token come back in order from `GET /_sim/log`.
    @Test func liveActivityRulesAndTheLog() async throws {
        let fixture = try SimulatorFixture(logPerToken: 100)
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        let token = SimulatorFixture.deviceToken(9)
        let bad: [String] = [
            #"{"aps":{"event":"update","content-state":{}}}"#,
            #"{"aps":{"event":"pause","timestamp":1,"content-state":{}}}"#,
            #"{"aps":{"event":"update","timestamp":1}}"#,
            #"{"aps":{"event":"start","timestamp":1,"content-state":{},"attributes-type":"T","attributes":{}}}"#,
            #"{"aps":{"event":"start","timestamp":1,"content-state":{},"alert":{"title":"a","body":"b"},"attributes":{}}}"#,
        ]
        for body in bad {
            let response = try await client.send(try fixture.apnsRequest(token: token, pushType: "liveactivity", body: body))
            #expect(response.status == 400 && SimulatorFixture.reason(response) == "BadLiveActivityPayload", "\(body)")
        }
        let good = [
            #"{"aps":{"event":"start","timestamp":1,"content-state":{},"alert":{"title":"a","body":"b"},"attributes-type":"T","attributes":{}}}"#,
            #"{"aps":{"event":"update","timestamp":2,"content-state":{"n":1}}}"#,
            #"{"aps":{"event":"end","timestamp":3,"content-state":{"n":2},"dismissal-date":4}}"#,
        ]
        for body in good {
            let response = try await client.send(try fixture.apnsRequest(token: token, pushType: "liveactivity", body: body,
                                                                          extra: [HeaderField("apns-priority", "5")]))
            #expect(response.status == 200, "\(body)")
        }
        let log = fixture.simulator.apnsLog.entries(token: token)
        #expect(log.map { $0["payload"]?["aps"]?["timestamp"] } == [.int(1), .int(2), .int(3)])
        #expect(log.allSatisfy { $0["push_type"] == .string("liveactivity") && $0["priority"] == .string("5") })
        #expect(log.first?["topic"] == .string(fixture.simulator.credentials.bundleID + ".push-type.liveactivity"))
        // Over HTTP as well.
        let answer = try await client.send(HTTP2Request(method: "GET", path: "/_sim/log?token=\(token)", headers: []))
        #expect(try JSONValue.parse(answer.body)["entries"]?.arrayValue?.count == 3)
        client.shutdown()
    }

    @Test func acceptsAValidPushAndCountsIt() async throws {
        let fixture = try SimulatorFixture()
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        let id = "2f5c3c16-8f0a-4a45-9c83-2a6f4f6ad7e4"
        let response = try await client.send(try fixture.apnsRequest(token: SimulatorFixture.deviceToken(1), extra: [HeaderField("apns-id", id)]))
        #expect(response.status == 200)
        #expect(response.header("apns-id") == id)
        let stats = fixture.simulator.apnsStats.snapshot
        #expect(stats.accepted == 1 && stats.deliveries[SimulatorFixture.deviceToken(1)] == 1 && stats.violations == 0)
        client.shutdown()
    }

    @Test func makesUpARandomVersion4IDForARequestWithout() async throws {
        var seen = Set<String>()
        for _ in 0..<1000 {
            let id = APNsSimulator.randomAPNsID()
            #expect(Identifiers.isUUID(id) && id == id.lowercased())
            let bytes = Array(id.utf8)
            #expect(bytes[14] == UInt8(ascii: "4") && [UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(bytes[19]))
            seen.insert(id)
        }
        #expect(seen.count == 1000)
        // On the wire: a request without apns-id gets one back.
        let fixture = try SimulatorFixture()
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        let response = try await client.send(try fixture.apnsRequest(token: SimulatorFixture.deviceToken(1)))
        #expect(response.status == 200)
        #expect(response.header("apns-id").map(Identifiers.isUUID) == true)
        client.shutdown()
    }

    @Test func answersWithAPNsReasons() async throws {
        let fixture = try SimulatorFixture(faults: { var faults = SimulatorFaults(); faults.unregistered = UnregisteredShare(1); return faults }())
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        let token = SimulatorFixture.deviceToken(7)
        let key = try PrivateKey.generate(.ecP256)
        let forged = try JWT.sign(header: #"{"alg":"ES256","kid":"\#(fixture.simulator.credentials.apnsKeyID)"}"#,
                                  claims: #"{"iss":"\#(fixture.simulator.credentials.teamID)","iat":\#(Int(Date().timeIntervalSince1970))}"#, key: key)
        let stale = try fixture.simulator.credentials.apnsProviderToken(issuedAt: Int64(Date().timeIntervalSince1970) - 7200)
        var noAuth = try fixture.apnsRequest(token: token)
        noAuth.headers.removeAll { $0.name == "authorization" }
        var wrongTopic = try fixture.apnsRequest(token: token)
        wrongTopic.headers = wrongTopic.headers.map { $0.name == "apns-topic" ? HeaderField("apns-topic", "com.other.app") : $0 }
        let cases: [(HTTP2Request, Int, String)] = [
            (noAuth, 403, "MissingProviderToken"),
            (try fixture.apnsRequest(token: token, providerToken: forged), 403, "InvalidProviderToken"),
            (try fixture.apnsRequest(token: token, providerToken: stale), 403, "ExpiredProviderToken"),
            (try fixture.apnsRequest(token: "xyz"), 400, "BadDeviceToken"),
            (try fixture.apnsRequest(token: token, extra: [HeaderField("apns-collapse-id", String(repeating: "c", count: 65))]), 400, "BadCollapseId"),
            (try fixture.apnsRequest(token: token, pushType: "background", extra: [HeaderField("apns-priority", "10")]), 400, "BadPriority"),
            (try fixture.apnsRequest(token: token, pushType: "sms"), 400, "InvalidPushType"),
            (wrongTopic, 400, "TopicDisallowed"),
            (try fixture.apnsRequest(token: token, body: ""), 400, "PayloadEmpty"),
            (try fixture.apnsRequest(token: token, body: #"{"aps":{"alert":"\#(String(repeating: "x", count: 4100))"}}"#), 413, "PayloadTooLarge"),
            (try fixture.apnsRequest(token: token), 410, "Unregistered"),
        ]
        for (request, status, reason) in cases {
            let response = try await client.send(request)
            #expect(response.status == status, "\(reason)")
            #expect(SimulatorFixture.reason(response) == reason)
        }
        // VoIP may carry 5120 bytes.
        let voip = try await client.send(try fixture.apnsRequest(token: token, pushType: "voip",
                                                                 body: #"{"aps":{},"x":"\#(String(repeating: "x", count: 4500))"}"#))
        #expect(SimulatorFixture.reason(voip) == "Unregistered")
        let gone = try await client.send(try fixture.apnsRequest(token: token))
        #expect((try JSONValue.parse(gone.body))["timestamp"] != nil)
        #expect(fixture.simulator.apnsStats.snapshot.accepted == 0)
        client.shutdown()
    }

    /// A push to another app of the same team (a wrong but owned bundle id) is refused per device
    /// with DeviceTokenNotForTopic, which is what makes every token of a job look invalid; a
    /// topic the team does not own stays TopicDisallowed.
    @Test func anotherAppOfTheTeamGetsDeviceTokenNotForTopic() async throws {
        let fixture = try SimulatorFixture(apnsTeamBundleIDs: ["dev.herald.other"])
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        func send(topic: String, pushType: String = "alert") async throws -> (Int, String?) {
            var request = try fixture.apnsRequest(token: SimulatorFixture.deviceToken(3), pushType: pushType)
            request.headers = request.headers.map { $0.name == "apns-topic" ? HeaderField("apns-topic", topic) : $0 }
            let response = try await client.send(request)
            return (response.status, SimulatorFixture.reason(response))
        }
        #expect(try await send(topic: "dev.herald.other") == (400, "DeviceTokenNotForTopic"))
        #expect(try await send(topic: "dev.herald.other.voip", pushType: "voip") == (400, "DeviceTokenNotForTopic"))
        #expect(try await send(topic: "com.stranger.app") == (400, "TopicDisallowed"))
        #expect(try await send(topic: fixture.simulator.credentials.bundleID) == (200, nil))
        let stats = fixture.simulator.apnsStats.snapshot
        #expect(stats.accepted == 1 && stats.reasons["DeviceTokenNotForTopic"] == 2 && stats.violations == 1)
        client.shutdown()
    }

    /// Certificate auth: no token, and the client certificate's UID is the bundle it may push
    /// to, with each push type's topic suffix.
    @Test func aClientCertificateAuthenticatesPushesToItsBundlesTopics() async throws {
        let fixture = try SimulatorFixture()
        let client = try fixture.client(port: fixture.simulator.apnsPort, certificate: try fixture.apnsClientCertificate())
        let bundleID = fixture.simulator.credentials.bundleID
        func send(_ pushType: String, topic: String? = nil, body: String = #"{"aps":{"alert":"hi"}}"#) async throws -> (Int, String?) {
            let response = try await client.send(try fixture.apnsCertificateRequest(token: SimulatorFixture.deviceToken(4), pushType: pushType,
                                                                                    topic: topic, body: body))
            return (response.status, SimulatorFixture.reason(response))
        }
        let liveActivity = #"{"aps":{"event":"update","timestamp":1,"content-state":{}}}"#
        #expect(try await send("alert") == (200, nil))
        #expect(try await send("voip", topic: bundleID + ".voip") == (200, nil))
        #expect(try await send("liveactivity", topic: bundleID + ".push-type.liveactivity", body: liveActivity) == (200, nil))
        #expect(try await send("complication", topic: bundleID + ".complication") == (200, nil))
        #expect(try await send("alert", topic: "com.other.app") == (400, "TopicDisallowed"))
        #expect(try await send("voip", topic: "com.other.app.voip") == (400, "TopicDisallowed"))
        // Another bundle that only starts like this one is not this one.
        #expect(try await send("alert", topic: bundleID + "x") == (400, "TopicDisallowed"))
        #expect(try await send("voip", topic: bundleID) == (400, "BadTopic"))
        #expect(try await send("location", topic: bundleID + ".location-query") == (400, "InvalidPushType"))
        let stats = fixture.simulator.apnsStats.snapshot
        #expect(stats.accepted == 4 && stats.reasons["TopicDisallowed"] == 3)
        client.shutdown()
    }

    /// A request that carries a provider token is judged by the token, certificate or not.
    @Test func aTokenOnACertificateConnectionIsJudgedAsAToken() async throws {
        let fixture = try SimulatorFixture()
        let client = try fixture.client(port: fixture.simulator.apnsPort, certificate: try fixture.apnsClientCertificate())
        let token = SimulatorFixture.deviceToken(5)
        let forged = try JWT.sign(header: #"{"alg":"ES256","kid":"\#(fixture.simulator.credentials.apnsKeyID)"}"#,
                                  claims: #"{"iss":"\#(fixture.simulator.credentials.teamID)","iat":\#(Int(Date().timeIntervalSince1970))}"#,
                                  key: try PrivateKey.generate(.ecP256))
        let refused = try await client.send(try fixture.apnsRequest(token: token, providerToken: forged))
        #expect(refused.status == 403 && SimulatorFixture.reason(refused) == "InvalidProviderToken")
        #expect(try await client.send(try fixture.apnsRequest(token: token)).status == 200)
        client.shutdown()
    }

    /// A certificate the CA issued for another app: its topics are its own, but the simulated
    /// devices belong to apns.json's bundle.
    @Test func aCertificateForAnotherBundleOwnsOnlyThatBundlesTopics() async throws {
        let fixture = try SimulatorFixture()
        let directory = fixture.simulator.credentials.directory
        let other = try CertificateAuthority.issueAPNsClientCertificate(
            bundleID: "com.example.other", caCertificatePEM: fixture.simulator.credentials.caCertificatePEM,
            caKeyPEM: try String(contentsOf: directory.appendingPathComponent("ca-key.pem"), encoding: .utf8))
        let client = try fixture.client(port: fixture.simulator.apnsPort, certificate: other)
        let token = SimulatorFixture.deviceToken(6)
        let ownTopic = try await client.send(try fixture.apnsCertificateRequest(token: token, topic: "com.example.other"))
        #expect(ownTopic.status == 400 && SimulatorFixture.reason(ownTopic) == "DeviceTokenNotForTopic")
        let simulatorsTopic = try await client.send(try fixture.apnsCertificateRequest(token: token))
        #expect(simulatorsTopic.status == 400 && SimulatorFixture.reason(simulatorsTopic) == "TopicDisallowed")
        client.shutdown()
    }

    /// As Apple does, a certificate the simulator's CA did not issue fails the TLS handshake:
    /// no request is ever processed. The client sees the server's alert, or a reset when the
    /// server closed with the client's first frames unread.
    @Test func aCertificateFromAnotherCAFailsTheHandshake() async throws {
        let fixture = try SimulatorFixture()
        let stranger = try CertificateAuthority.generate(commonName: "Another CA")
        let certificate = try CertificateAuthority.issueAPNsClientCertificate(
            bundleID: fixture.simulator.credentials.bundleID, caCertificatePEM: stranger.caCertificatePEM, caKeyPEM: stranger.caKeyPEM)
        let client = try fixture.client(port: fixture.simulator.apnsPort, certificate: certificate)
        var request = try fixture.apnsCertificateRequest(token: SimulatorFixture.deviceToken(7))
        request.timeoutNanoseconds = 5_000_000_000
        await #expect {
            _ = try await client.send(request)
        } throws: { error in
            guard let error = error as? HTTP2Error else { return false }
            return [.connectionLost, .tlsHandshakeFailed].contains(error.code)
        }
        #expect(fixture.simulator.apnsStats.snapshot.requests == 0)
        client.shutdown()
    }

    /// Certificate auth raises the one stream of a new connection with its first push, as a
    /// valid token does.
    @Test func manyStreamsAfterTheFirstCertificatePush() async throws {
        let fixture = try SimulatorFixture(maxConcurrentStreams: 500)
        let client = try fixture.client(port: fixture.simulator.apnsPort, certificate: try fixture.apnsClientCertificate())
        try await expectManyStreamsOnOneConnection(client) { try fixture.apnsCertificateRequest(token: SimulatorFixture.deviceToken($0)) }
        client.shutdown()
    }

    /// GOAWAY after every 100 requests during 20,000: every request answered once, every token
    /// delivered exactly once (refused streams are resent, processed ones are not).
    @Test func goawayEveryHundredLosesAndDuplicatesNothing() async throws {
        var faults = SimulatorFaults()
        faults.goawayEvery = 100
        let fixture = try SimulatorFixture(faults: faults)
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        let provider = try fixture.simulator.credentials.apnsProviderToken()
        let total = 20_000
        // Results, not throws: a failure then says what failed and what the simulator saw.
        let results = try await withThrowingTaskGroup(of: Result<Int, HTTP2Error>.self) { group in
            var results: [Result<Int, HTTP2Error>] = []
            var next = 0
            for _ in 0..<200 {
                let request = try fixture.apnsRequest(token: SimulatorFixture.deviceToken(next), providerToken: provider)
                next += 1
                group.addTask { do throws(HTTP2Error) { return .success(try await client.send(request).status) } catch { return .failure(error) } }
            }
            while let result = try await group.next() {
                results.append(result)
                if next < total {
                    let request = try fixture.apnsRequest(token: SimulatorFixture.deviceToken(next), providerToken: provider)
                    next += 1
                    group.addTask { do throws(HTTP2Error) { return .success(try await client.send(request).status) } catch { return .failure(error) } }
                }
            }
            return results
        }
        let failures = results.compactMap { result -> String? in
            if case .failure(let error) = result { return error.description }
            return nil
        }
        let statuses = results.compactMap { try? $0.get() }
        let seen = fixture.simulator.apnsStats.snapshot.json(includeTokens: false).serialized()
        #expect(failures.isEmpty, "\(failures.count) failed, first: \(failures.first ?? "none"); simulator: \(seen)")
        #expect(results.count == total)
        #expect(statuses.allSatisfy { $0 == 200 })
        let stats = fixture.simulator.apnsStats.snapshot
        #expect(stats.accepted == total)
        #expect(stats.deliveries.count == total)
        #expect(stats.duplicateDeliveries == 0)
        let clientStats = await client.statistics()
        #expect(clientStats.connectionsOpened >= total / 100)
        client.shutdown()
    }

    @Test func oneStreamUntilTheFirstValidToken() async throws {
        let fixture = try SimulatorFixture(maxConcurrentStreams: 500)
        let client = try fixture.client(port: fixture.simulator.apnsPort)
        let provider = try fixture.simulator.credentials.apnsProviderToken()
        try await expectManyStreamsOnOneConnection(client) {
            try fixture.apnsRequest(token: SimulatorFixture.deviceToken($0), providerToken: provider)
        }
        client.shutdown()
    }

    /// Sends 300 requests at once (`request` makes the one of each index): every one accepted, on
    /// one connection carrying more than one stream: the pool waited for the raise instead of
    /// opening a connection per request.
    private func expectManyStreamsOnOneConnection(_ client: HTTP2Client, request: (Int) throws -> HTTP2Request) async throws {
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<300 {
                let made = try request(index)
                group.addTask { try await client.send(made).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { $0 == 200 })
        let statistics = await client.statistics()
        #expect(statistics.connectionsOpened == 1)
        #expect(statistics.maxStreamsInFlightOnOneConnection > 1)
    }
}

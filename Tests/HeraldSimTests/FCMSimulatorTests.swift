import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP2
@testable import HeraldSim
import Testing

@Suite(.timeLimit(.minutes(2))) struct FCMSimulatorTests {
    private func assertion(_ fixture: SimulatorFixture, audience: String? = nil, lifetime: Int = 3600) throws -> String {
        let credentials = fixture.simulator.credentials
        let now = Int(Date().timeIntervalSince1970)
        let claims = #"{"iss":"\#(credentials.fcmClientEmail)","scope":"https://www.googleapis.com/auth/firebase.messaging","aud":"\#(audience ?? credentials.fcmTokenURI)","iat":\#(now),"exp":\#(now + lifetime)}"#
        return try JWT.sign(header: #"{"alg":"RS256","typ":"JWT"}"#, claims: claims, key: credentials.fcmKey)
    }

    private func tokenRequest(_ assertion: String) -> HTTP2Request {
        HTTP2Request(path: "/token", headers: [HeaderField("content-type", "application/x-www-form-urlencoded")],
                     body: Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)".utf8))
    }

    private func send(_ client: HTTP2Client, _ fixture: SimulatorFixture, accessToken: String, message: String) async throws -> HTTP2Response {
        try await client.send(HTTP2Request(path: "/v1/projects/\(fixture.simulator.credentials.fcmProjectID)/messages:send",
                                           headers: [HeaderField("authorization", "Bearer \(accessToken)"), HeaderField("content-type", "application/json")],
                                           body: Array(#"{"message":\#(message)}"#.utf8)))
    }

    private func errorCode(_ response: HTTP2Response) -> String? {
        (try? JSONValue.parse(response.body))?["error"]?["details"]?.arrayValue?.first?["errorCode"]?.stringValue
    }

    @Test func oauthThenSend() async throws {
        let fixture = try SimulatorFixture()
        let client = try fixture.client(port: fixture.simulator.fcmPort)
        let tokenResponse = try await client.send(tokenRequest(try assertion(fixture)))
        #expect(tokenResponse.status == 200)
        let accessToken = try #require((try JSONValue.parse(tokenResponse.body))["access_token"]?.stringValue)
        let sent = try await send(client, fixture, accessToken: accessToken,
                                  message: #"{"token":"device-1","data":{"title":"Hi","payload":"{\"n\":1}"},"android":{"priority":"high","ttl":"3600s"}}"#)
        #expect(sent.status == 200)
        #expect((try JSONValue.parse(sent.body))["name"]?.stringValue?.hasPrefix("projects/\(fixture.simulator.credentials.fcmProjectID)/messages/") == true)
        #expect(fixture.simulator.fcmStats.snapshot.deliveries["device-1"] == 1)

        let cases: [(String, Int, String?)] = [
            (#"{"token":"d","data":{"n":1}}"#, 400, "INVALID_ARGUMENT"),
            (#"{"token":"d","data":{"google.x":"1"}}"#, 400, "INVALID_ARGUMENT"),
            (#"{"token":"d","topic":"t"}"#, 400, "INVALID_ARGUMENT"),
            (#"{"token":"d","android":{"ttl":"9999999s"}}"#, 400, "INVALID_ARGUMENT"),
        ]
        for (message, status, code) in cases {
            let response = try await send(client, fixture, accessToken: accessToken, message: message)
            #expect(response.status == status, "\(message)")
            #expect(errorCode(response) == code)
        }
        let unauthenticated = try await send(client, fixture, accessToken: "ya29.forged", message: #"{"token":"d"}"#)
        #expect(unauthenticated.status == 401)
        #expect(errorCode(unauthenticated) == nil)
        client.shutdown()
    }

    @Test func refusesBadAssertions() async throws {
        let fixture = try SimulatorFixture()
        let client = try fixture.client(port: fixture.simulator.fcmPort)
        #expect(try await client.send(tokenRequest(try assertion(fixture, audience: "https://oauth2.googleapis.com/token"))).status == 400)
        #expect(try await client.send(tokenRequest(try assertion(fixture, lifetime: 7200))).status == 400)
        let other = try PrivateKey.generate(.rsa(bits: 2048))
        let forged = try JWT.sign(header: #"{"alg":"RS256"}"#, claims: #"{"iss":"x"}"#, key: other)
        #expect(try await client.send(tokenRequest(forged)).status == 400)
        #expect(fixture.simulator.fcmStats.snapshot.tokensIssued == 0)
        client.shutdown()
    }

    @Test func unregisteredAndSenderMismatch() async throws {
        var faults = SimulatorFaults()
        faults.unregistered = UnregisteredShare(1)
        let fixture = try SimulatorFixture(faults: faults)
        let client = try fixture.client(port: fixture.simulator.fcmPort)
        let tokenResponse = try await client.send(tokenRequest(try assertion(fixture)))
        let accessToken = try #require((try JSONValue.parse(tokenResponse.body))["access_token"]?.stringValue)
        let gone = try await send(client, fixture, accessToken: accessToken, message: #"{"token":"device-2","data":{"a":"b"}}"#)
        #expect(gone.status == 404)
        #expect(errorCode(gone) == "UNREGISTERED")
        let mismatch = try await client.send(HTTP2Request(path: "/v1/projects/another-project/messages:send",
                                                          headers: [HeaderField("authorization", "Bearer \(accessToken)")],
                                                          body: Array(#"{"message":{"token":"d"}}"#.utf8)))
        #expect(mismatch.status == 403)
        #expect(errorCode(mismatch) == "SENDER_ID_MISMATCH")
        client.shutdown()
    }

    @Test func theAPNsBlockOfAnIOSMessageIsChecked() throws {
        func problem(_ json: String) throws -> String? {
            guard case .object(let message) = try JSONValue.parse(Array(json.utf8)) else { return "not an object" }
            return FCMSimulator.validate(message)?.0
        }
        #expect(try problem(#"{"token":"t","apns":{"headers":{"apns-push-type":"alert","apns-priority":"10"},"payload":{"aps":{"alert":{"title":"T"}}},"fcm_options":{"image":"https://i/x.png"}}}"#) == nil)
        #expect(try problem(#"{"token":"t","apns":{"headers":{"apns-priority":10}}}"#) == "message.apns.headers.apns-priority")
        #expect(try problem(#"{"token":"t","apns":{"headers":{"apns-push-type":"shout"}}}"#) == "message.apns.headers.apns-push-type")
        #expect(try problem(#"{"token":"t","apns":{"payload":{"alert":"no aps"}}}"#) == "message.apns.payload")
        #expect(try problem(#"{"token":"t","apns":{"headers":{"apns-push-type":"background","apns-priority":"10"},"payload":{"aps":{"content-available":1}}}}"#) == "message.apns.headers.apns-priority")
        #expect(try problem(#"{"token":"t","apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1,"badge":1}}}}"#) == "message.apns.payload.aps")
        #expect(try problem(#"{"token":"t","apns":{"headers":{"apns-collapse-id":"\#(String(repeating: "c", count: 65))"}}}"#) == "message.apns.headers.apns-collapse-id")
        #expect(try problem(#"{"token":"t","apns":{"payload":{"aps":{"alert":"\#(String(repeating: "x", count: 4100))"}}}}"#) == "message.apns.payload")
    }
}

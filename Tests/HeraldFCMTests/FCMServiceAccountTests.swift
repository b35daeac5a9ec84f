import HeraldFCM
import Testing

@Suite struct FCMServiceAccountTests {
    static let secret = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC-not-a-real-key"
    static func file(_ changes: [String: String?] = [:]) -> [UInt8] {
        var members: [String: String] = [
            "type": "service_account", "project_id": "demo-project", "private_key_id": "abc123",
            "private_key": "-----BEGIN PRIVATE KEY-----\n\(secret)\n-----END PRIVATE KEY-----\n",
            "client_email": "herald@demo-project.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token",
        ]
        for (key, value) in changes { members[key] = value }
        let body = members.sorted { $0.key < $1.key }.map { key, value in
            "\"\(key)\":\"\(value.replacingOccurrences(of: "\n", with: "\\n"))\""
        }.joined(separator: ",")
        return Array("{\(body)}".utf8)
    }

    @Test func parsesAServiceAccount() throws {
        let account = try FCMServiceAccount(json: Self.file())
        #expect(account.projectID == "demo-project")
        #expect(account.sendPath == "/v1/projects/demo-project/messages:send")
        #expect(account.tokenURI == "https://oauth2.googleapis.com/token")
    }

    @Test(arguments: [
        (["type": "authorized_user"], "type must be \"service_account\""),
        (["client_email": nil], "client_email is missing"),
        (["private_key": "not a key \(FCMServiceAccountTests.secret)"], "private_key must be a PEM PKCS#8 key"),
        (["token_uri": "http://evil.example.com/token"], "token_uri must be an https URL"),
        // The loopback exceptions are gone: the simulator's token_uri is https, and allowed by HERALD_FCM_TOKEN_HOSTS.
        (["token_uri": "http://127.0.0.1:8443/token"], "token_uri must be an https URL"),
        (["token_uri": "http://localhost/token"], "token_uri must be an https URL"),
        (["token_uri": "https:///token"], "token_uri must be an https URL"),
    ] as [([String: String?], String)])
    func refusesWithoutEchoingTheKey(changes: [String: String?], expected: String) {
        do {
            _ = try FCMServiceAccount(json: Self.file(changes))
            Issue.record("accepted")
        } catch {
            #expect(error.description.contains(expected))
            #expect(!error.description.contains(Self.secret))
        }
    }

    @Test func refusesNonJSON() {
        #expect(throws: FCMServiceAccount.Invalid.self) { try FCMServiceAccount(json: Array("{\"type\":".utf8)) }
    }

    @Test func theTokenHostMustBeOnTheListMatchedExactlyAnyPort() throws {
        func account(_ uri: String) throws -> FCMServiceAccount { try FCMServiceAccount(json: Self.file(["token_uri": uri])) }
        let google = FCMTokenHosts()
        #expect(google.refusal(of: try account("https://oauth2.googleapis.com/token")) == nil)
        #expect(google.refusal(of: try account("https://OAuth2.googleapis.com:443/token")) == nil, "host names are case-insensitive; any port")
        for hostile in ["https://oauth2.googleapis.com.evil.example/token", "https://evil.example/oauth2.googleapis.com",
                        "https://169.254.169.254/latest/meta-data", "https://127.0.0.1:8443/token", "https://[::1]:8443/token"] {
            #expect(google.refusal(of: try account(hostile))?.contains("is not allowed") == true, "\(hostile)")
        }
        #expect(throws: FCMServiceAccount.Invalid.self, "userinfo is no way around it") { try account("https://x@oauth2.googleapis.com/token") }
        let simulator = try FCMTokenHosts(variable: " 127.0.0.1, ::1 ,oauth-proxy.internal")
        #expect(simulator.refusal(of: try account("https://127.0.0.1:8443/token")) == nil)
        #expect(simulator.refusal(of: try account("https://[::1]:8443/token")) == nil)
        #expect(simulator.refusal(of: try account("https://oauth-proxy.internal/token")) == nil)
        #expect(simulator.refusal(of: try account("https://oauth2.googleapis.com/token")) == nil, "Google's host stays allowed")
        #expect(throws: FCMServiceAccount.Invalid.self) { try FCMTokenHosts(variable: "https://proxy.internal") }
        #expect(throws: FCMServiceAccount.Invalid.self) { try FCMTokenHosts(variable: "proxy.internal:8443") }
    }
}

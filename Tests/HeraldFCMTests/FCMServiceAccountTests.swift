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
}

import HeraldCore
import HeraldFCM
import HeraldHTTP2
import HeraldPostgres
@testable import HeraldWorker
import Testing

@Suite struct ProviderDirectoryTests {
    private typealias Endpoint = ProviderEndpoints.Endpoint

    @Test func endpointWithAndWithoutPort() {
        #expect(Endpoint(url: "https://api.push.apple.com") == Endpoint(host: "api.push.apple.com", port: 443))
        #expect(Endpoint(url: "https://apns-sim:8443") == Endpoint(host: "apns-sim", port: 8443))
        #expect(Endpoint(url: "https://127.0.0.1:2197") == Endpoint(host: "127.0.0.1", port: 2197))
        #expect(Endpoint(url: "https://fcm-sim:1") == Endpoint(host: "fcm-sim", port: 1))
        #expect(Endpoint(url: "https://fcm-sim:65535") == Endpoint(host: "fcm-sim", port: 65535))
    }

    @Test func endpointAllowsATrailingSlash() {
        #expect(Endpoint(url: "https://fcm.googleapis.com/") == Endpoint(host: "fcm.googleapis.com", port: 443))
        #expect(Endpoint(url: "https://fcm-sim:9443/") == Endpoint(host: "fcm-sim", port: 9443))
        #expect(Endpoint(url: "https://fcm-sim:9443//") == nil)
    }

    @Test func endpointRefusesPlainHTTPAndOtherSchemes() {
        #expect(Endpoint(url: "http://apns-sim:8443") == nil, "providers are only spoken to over TLS")
        #expect(Endpoint(url: "apns-sim:8443") == nil)
        #expect(Endpoint(url: "ftp://apns-sim") == nil)
        #expect(Endpoint(url: "") == nil)
    }

    @Test func endpointRefusesAPath() {
        // The clients add their own paths (/3/device/…, /v1/projects/…): a path here would be lost.
        #expect(Endpoint(url: "https://apns-sim:8443/3/device") == nil)
        #expect(Endpoint(url: "https://fcm-sim/v1") == nil)
    }

    @Test func endpointRefusesBadPortsAndEmptyHosts() {
        for bad in ["https://", "https:///", "https://:443", "https://apns-sim:", "https://apns-sim:0", "https://apns-sim:65536",
                    "https://apns-sim:https", "https://user@apns-sim", "https://user:pw@apns-sim:443"] {
            #expect(Endpoint(url: bad) == nil, "\(bad)")
        }
    }

    @Test func endpointTakesIPv6InBrackets() {
        #expect(Endpoint(url: "https://[::1]:8443") == Endpoint(host: "::1", port: 8443))
        #expect(Endpoint(url: "https://[::1]") == Endpoint(host: "::1", port: 443))
        #expect(Endpoint(url: "https://[2001:db8::2]:9443/") == Endpoint(host: "2001:db8::2", port: 9443))
        #expect(Endpoint(url: "https://[]:443") == nil)
    }

    @Test func endpointDescriptionIsAURL() {
        #expect(Endpoint(host: "apns-sim", port: 8443).description == "https://apns-sim:8443")
    }

    @Test func aTokenURIOutsideTheAllowedHostsMakesTheAppsFCMCredentialsUnusable() throws {
        let loops = try EventLoopGroup(count: 1)
        defer { loops.shutdown() }
        func problem(tokenURI: String, allowed: [String]) -> String? {
            // The key is not a usable RSA key: only the host check decides before the key is read.
            let account = #"{"type":"service_account","project_id":"demo","client_email":"a@demo.iam","token_uri":"\#(tokenURI)","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}"#
            let settings = AppSettings(id: "app", name: "App", fcm: FCMCredentials(projectID: "demo", serviceAccountJSON: account))
            var endpoints = ProviderEndpoints()
            endpoints.fcmTokenHosts = FCMTokenHosts(adding: allowed)
            return AppDelivery.build(settings: settings, endpoints: endpoints, loops: loops).fcmProblem
        }
        let metadata = problem(tokenURI: "https://169.254.169.254/token", allowed: [])
        #expect(metadata?.contains("token_uri host 169.254.169.254 is not allowed") == true, "\(metadata ?? "nil")")
        let listed = problem(tokenURI: "https://127.0.0.1:8443/token", allowed: ["127.0.0.1"])
        #expect(listed?.contains("not allowed") == false && listed?.contains("RSA") == true, "past the host check, to the key: \(listed ?? "nil")")
    }

    @Test func credentialsThatOpenUnderNoKeyHaltThatProviderWithTheirOwnReason() async throws {
        let loops = try EventLoopGroup(count: 1)
        defer { loops.shutdown() }
        var settings = AppSettings(id: "app", name: "App")
        settings.fcmUnreadable = "cannot decrypt app/fcm_credentials under HERALD_CREDENTIALS_KEY or HERALD_CREDENTIALS_OLD_KEYS"
        let delivery = AppDelivery.build(settings: settings, endpoints: ProviderEndpoints(), loops: loops)
        let job = try Job.decode(Array(#"{"schema":"herald.job.v1","id":"j","app_id":"app","kind":"notification","created_at":"2026-12-02T10:00:00Z","audience":{"all":true},"content":{"title":"t","body":"b"}}"#.utf8))
        let member = AudienceMember(id: "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234", platform: .android, token: "tok", sandbox: false, sdk: true,
                                    language: nil, timeZone: nil, voipToken: nil)
        let outcome = await delivery.send(job, to: member, token: "tok", now: .now)
        guard case .credentialFault(let detail, let haltReason) = outcome else {
            Issue.record("not a credential fault: \(outcome)")
            return
        }
        #expect(haltReason == .unreadableCredentials && detail.contains("cannot be opened"))
        delivery.shutdown()
    }

    @Test func aJobNamingAChannelTheAppDoesNotHaveFailsOnEveryPlatform() async throws {
        let loops = try EventLoopGroup(count: 1)
        defer { loops.shutdown() }
        func job(channel: String) throws -> Job {
            try Job.decode(Array(#"{"schema":"herald.job.v1","id":"j","app_id":"app","kind":"notification","created_at":"2026-12-02T10:00:00Z","audience":{"all":true},"content":{"title":"t","body":"b","channel":"\#(channel)"}}"#.utf8))
        }
        var settings = AppSettings(id: "app", name: "App")
        settings.channels = ["orders": NotificationChannel(key: "orders", name: "Orders")]
        let delivery = AppDelivery.build(settings: settings, endpoints: ProviderEndpoints(), loops: loops)
        for platform in [Platform.ios, .android] {
            let member = AudienceMember(id: "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234", platform: platform, token: "tok", sandbox: false, sdk: true,
                                        language: nil, timeZone: nil, voipToken: nil)
            let unknown = await delivery.send(try job(channel: "promo"), to: member, token: "tok", now: .now)
            #expect(unknown == .failed(reason: .unknownChannel, providerReason: #"content.channel "promo" names no channel of app app"#), "\(platform)")
            // The app's own channel goes on to the provider (here: no credentials, so that failure instead).
            let known = await delivery.send(try job(channel: "orders"), to: member, token: "tok", now: .now)
            #expect(known == .failed(reason: .noCredentials, providerReason: "the app has no \(platform == .ios ? "APNs" : "FCM") credentials"))
        }
        delivery.shutdown()
    }
}

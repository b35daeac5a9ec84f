import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP2
import HeraldKafka
import HeraldPostgres
import HeraldWorker

/// `herald doctor`: checks what a worker needs, one line per check, and exits 0 when all pass.
enum DoctorCommand {
    static let usage = """
    usage: herald doctor [--database-url URL] [--brokers B] [--skip-providers]
      Checks, one line each: PostgreSQL answers; the migration level is this binary's; the clocks of this
      host and PostgreSQL agree within 2 s; Kafka answers and every Herald topic exists (read from metadata:
      nothing is created); every app's credentials open under HERALD_CREDENTIALS_KEY (or an old key); APNs
      and FCM answer over TLS HTTP/2 (HERALD_APNS_ENDPOINT, HERALD_FCM_ENDPOINT, HERALD_TLS_CA_FILE, as a
      worker reads them) and their date header is within 30 s of this host's clock.
      --skip-providers: leave out the APNs and FCM checks (a host without outbound access).
      Exit 0 when every check passes, 1 when one fails, 64 usage, 78 configuration.
    """

    static func run(_ arguments: [String]) async -> Int32 {
        var options = OptionParser(arguments, command: "herald doctor", usage: usage, flags: ["--skip-providers"])
        let databaseURL = options.string("--database-url")
        let brokers = options.string("--brokers")
        let skipProviders = options.flag("--skip-providers")
        guard options.finish() else { return 64 }
        var checks: [Doctor.Check] = []

        // PostgreSQL, the migrations, the clock, the credentials.
        do {
            let pool = try CommandEnvironment.pool(url: databaseURL, applicationName: "herald-doctor")
            defer { Task { await pool.close() } }
            do {
                let sent = Date()
                let rows = try await pool.query("SELECT extract(epoch FROM clock_timestamp())::float8::text")
                let received = Date()
                let database = rows.rows.first?.first.flatMap { $0 }.flatMap(Double.init) ?? 0
                checks.append(Doctor.Check(name: "postgres", ok: true, detail: "answers (\(Int(received.timeIntervalSince(sent) * 1000)) ms)"))
                let host = (sent.timeIntervalSince1970 + received.timeIntervalSince1970) / 2
                checks.append(Doctor.skew(hostMinusDatabaseSeconds: host - database))
                checks.append(Doctor.migrations(applied: try await Migrator.appliedVersion(pool),
                                                embedded: Migration.all.map(\.version).max() ?? 0))
                do {
                    let key = try CredentialsKey.fromEnvironment(CommandEnvironment.variables)
                    let repository = AppRepository(pool: pool, key: key)
                    var apps: [(id: String, unreadable: [String])] = []
                    for summary in try await AppRepository.summaries(pool: pool) {
                        guard let settings = try await repository.settingsForDelivery(id: summary.id) else { continue }
                        apps.append((summary.id, [settings.apnsUnreadable.map { _ in "apns" }, settings.fcmUnreadable.map { _ in "fcm" }].compactMap { $0 }))
                    }
                    checks.append(Doctor.credentials(apps))
                } catch {
                    checks.append(Doctor.Check(name: "credentials", ok: false, detail: error.message))
                }
            } catch {
                checks.append(Doctor.Check(name: "postgres", ok: false, detail: "\(error.message)"))
            }
        } catch {
            checks.append(Doctor.Check(name: "postgres", ok: false, detail: "\(error)"))
        }

        // Kafka and the topics, from metadata only (no auto-creation).
        do {
            var configuration = try CommandEnvironment.kafka(brokers: brokers)
            configuration.properties["allow.auto.create.topics"] = "false"
            let topics = try CommandEnvironment.topics()
            let admin = try KafkaAdmin(configuration: configuration)
            let metadata = try await admin.metadata(timeoutMilliseconds: 10_000)
            checks.append(Doctor.Check(name: "kafka", ok: true, detail: "answers (\(metadata.brokers) broker\(metadata.brokers == 1 ? "" : "s"))"))
            let required = [topics.jobs, topics.jobsUrgent, topics.shards, topics.shardsUrgent, topics.results, topics.deviceEvents,
                            topics.metrics, topics.deadLetters]
            checks.append(Doctor.topics(required: required, present: metadata.topics))
        } catch {
            checks.append(Doctor.Check(name: "kafka", ok: false, detail: "\(error)"))
        }

        // The providers: reachable over TLS HTTP/2, and their clocks.
        if !skipProviders {
            do {
                let endpoints = try WorkerConfiguration.endpoints(environment: CommandEnvironment.variables)
                let apns = endpoints.apns ?? ProviderEndpoints.Endpoint(host: "api.push.apple.com", port: 443)
                let fcm = endpoints.fcm ?? ProviderEndpoints.Endpoint(host: "fcm.googleapis.com", port: 443)
                for (name, endpoint) in [("apns", apns), ("fcm", fcm)] {
                    checks.append(await providerCheck(name, endpoint: endpoint, caFile: endpoints.caFile))
                }
            } catch {
                checks.append(Doctor.Check(name: "providers", ok: false, detail: "\(error)"))
            }
        }

        for check in checks { print(check.line) }
        return checks.allSatisfy(\.ok) ? 0 : 1
    }

    /// One unauthenticated `GET /` to the provider: any answer shows it is reachable over TLS
    /// HTTP/2 with the configured CAs; its `date` header is compared with this host's clock.
    static func providerCheck(_ name: String, endpoint: ProviderEndpoints.Endpoint, caFile: String?) async -> Doctor.Check {
        let origin = "https://\(endpoint.host):\(endpoint.port)"
        do {
            let loop = try EventLoop(name: "herald-doctor")
            defer { loop.shutdown() }
            var configuration = HTTP2Client.Configuration(host: endpoint.host, port: endpoint.port)
            configuration.maxConnections = 1
            let client = HTTP2Client(configuration: configuration, tls: try TLSContext(client: caFile), loop: loop)
            defer { client.shutdown() }
            let sent = Date().timeIntervalSince1970
            let response = try await client.send(HTTP2Request(method: "GET", path: "/", timeoutNanoseconds: 10_000_000_000))
            let received = Date().timeIntervalSince1970
            let date = response.headers.first { $0.name == "date" }.flatMap { HTTPDate.parse($0.value) }
            return Doctor.providerClock(name, origin: origin, sent: sent, received: received, date: date)
        } catch {
            return Doctor.Check(name: name, ok: false, detail: "cannot reach \(origin): \(error)")
        }
    }
}

import Foundation
import HeraldCore
import HeraldPostgres
import HeraldWorker

/// `herald send --token T --platform P --app A …`: one test push to a raw device token
/// (`TestPush`), printing the provider's answer as one JSON line.
enum TestPushCommand {
    static func run(_ arguments: [String]) async -> Int32 {
        var options = OptionParser(arguments, command: "herald send", usage: SendCommand.usage, flags: ["--sandbox", "--no-sdk", "--urgent", "--validate-only"])
        let token = options.string("--token")
        let platformName = options.string("--platform")
        let providerName = options.string("--provider")
        let app = options.string("--app")
        let file = options.string("--file")
        let title = options.string("--title")
        let body = options.string("--body")
        let data = options.string("--data")
        let url = options.string("--url")
        let sandbox = options.flag("--sandbox")
        let sdk = !options.flag("--no-sdk")
        let urgent = options.flag("--urgent")
        let validateOnly = options.flag("--validate-only")
        let databaseURL = options.string("--database-url")
        guard options.finish() else { return 64 }
        guard let token, !token.isEmpty, token.utf8.count <= 4096, let app else {
            Console.error("herald send: --token and --app are required for a test push\n\(SendCommand.usage)")
            return 64
        }
        guard let platform = platformName.flatMap(Platform.init(rawValue:)) else {
            Console.error("herald send: --platform is ios or android\n\(SendCommand.usage)")
            return 64
        }
        let provider = providerName.flatMap(Receipt.Provider.init(rawValue:))
        guard providerName == nil || provider != nil, !(platform == .android && provider == .apns) else {
            Console.error("herald send: --provider is apns (iOS only) or fcm")
            return 64
        }

        // The job: a file (any kind), or a notification from the options.
        var document: JSONValue
        if let file {
            do {
                document = try JSONValue.parse(try InputFile.read(file))
            } catch {
                Console.error("herald send: cannot read a job from \(file): \(error)")
                return 66
            }
        } else {
            var content: [String: JSONValue] = ["title": .string(title ?? "Herald test push")]
            if let body { content["body"] = .string(body) }
            if let url { content["url"] = .string(url) }
            if let data {
                guard let value = try? JSONValue.parse(Array(data.utf8)) else {
                    Console.error("herald send: --data is not JSON")
                    return 65
                }
                content["data"] = value
            }
            var members: [String: JSONValue] = [
                "schema": .string(Job.schemaName), "id": .string("test-push-\(Timestamp.now.seconds)"), "app_id": .string(app),
                "kind": .string(Job.Kind.notification.rawValue), "created_at": .string(Timestamp.now.rfc3339), "content": .object(content),
            ]
            if urgent { members["delivery"] = .object(["urgent": .bool(true)]) }
            document = .object(members)
        }
        // One placeholder subscription: the worker's validation wants an audience; it is not read.
        if case .object(var members) = document {
            members["app_id"] = .string(app)
            if members["kind"] != .string(Job.Kind.liveActivity.rawValue) || members["audience"] != nil {
                members["audience"] = .object(["subscription_ids": .array([.string("00000000-0000-4000-8000-000000000000")])])
            }
            document = .object(members)
        }
        let job: Job
        do {
            job = try Job(json: document)
        } catch {
            Console.error("invalid: \(error)")
            return 65
        }

        let pool: PostgresPool
        let key: CredentialsKey
        let endpoints: ProviderEndpoints
        do {
            pool = try CommandEnvironment.pool(url: databaseURL, applicationName: "herald-send-token")
            key = try CredentialsKey.fromEnvironment(CommandEnvironment.variables)
            endpoints = try WorkerConfiguration.endpoints(environment: CommandEnvironment.variables)
        } catch {
            Console.error("herald send: \(error)")
            return 78
        }
        let settings: AppSettings?
        do {
            settings = try await AppRepository(pool: pool, key: key).settingsForDelivery(id: app)
        } catch {
            await pool.close()
            Console.error("herald send: \(error.message)")
            return CommandEnvironment.exitStatus(error)
        }
        await pool.close()
        guard let settings else {
            Console.error("herald send: no app \(app)")
            return 66
        }
        let answer: TestPush.Answer
        do {
            answer = try await TestPush.send(job, to: TestPush.Device(token: token, platform: platform, provider: provider, sandbox: sandbox, sdk: sdk),
                                             app: settings, endpoints: endpoints, validateOnly: validateOnly)
        } catch {
            Console.error("herald send: \(error)")
            return 70
        }
        let (line, status) = describe(answer, validateOnly: validateOnly)
        print(line.serialized())
        return status
    }

    /// The answer as JSON, and the exit status. Validate-only answers say `"sent": false`; an
    /// FCM `accepted` under validate-only is reported as `valid`.
    static func describe(_ answer: TestPush.Answer, validateOnly: Bool) -> (JSONValue, Int32) {
        switch answer {
        case .renderedOnly(let request):
            return (.object([
                "outcome": .string("valid"), "provider": .string("apns"), "sent": .bool(false),
                "note": .string("APNs has no validate-only mode: the request was rendered and checked here, not sent to Apple"),
                "push_type": .string(request.pushType), "topic": .string(request.topic), "priority": .int(request.priority),
                "payload_bytes": .int(request.payloadBytes), "payload": (try? JSONValue.parse(Array(request.payload.utf8))) ?? .string(request.payload),
            ]), 0)
        case .provider(let outcome, let provider):
            var (line, status) = describe(outcome)
            guard case .object(var members) = line else { return (line, status) }
            members["provider"] = .string(provider.rawValue)
            if validateOnly {
                members["sent"] = .bool(false)
                if members["outcome"] == .string("accepted") { members["outcome"] = .string("valid") }
            }
            line = .object(members)
            return (line, status)
        }
    }

    /// The answer as JSON, and the exit status.
    static func describe(_ outcome: DeliveryOutcome) -> (JSONValue, Int32) {
        switch outcome {
        case .accepted(let id):
            return (.object(["outcome": .string("accepted"), "provider_id": .string(id)]), 0)
        case .unregistered(let reason, let providerReason, _):
            return (.object(["outcome": .string("unregistered"), "reason": .string(reason.rawValue), "provider_reason": .string(providerReason)]), 1)
        case .failed(let reason, let providerReason):
            return (.object(["outcome": .string("failed"), "reason": .string(reason.rawValue), "provider_reason": .string(providerReason)]), 1)
        case .credentialFault(let providerReason, let haltReason):
            return (.object(["outcome": .string("credentials"), "reason": .string(haltReason.rawValue), "provider_reason": .string(providerReason)]), 1)
        case .retryable(let providerReason, let retryAfter, _):
            var members: [String: JSONValue] = ["outcome": .string("retryable"), "provider_reason": .string(providerReason)]
            if let retryAfter { members["retry_after_seconds"] = .int(retryAfter) }
            return (.object(members), 69)
        }
    }
}

import Foundation
import HeraldCore
import HeraldKafka
import HeraldWorker

/// `herald send`: builds (or reads) a `herald.job.v1`, validates it as a worker will, produces
/// it to the jobs topic (the urgent one for `delivery.urgent`) and prints where it landed once
/// the broker has acknowledged it.
enum SendCommand {
    static let usage = """
    usage: herald send --file PATH|- [--brokers B]
           herald send --app APP [--title T] [--body B] (--subscription ID ... | --external-id X ... | --all)
                       [--id ID] [--urgent] [--data JSON] [--url U] [--expires-in SECONDS] [--brokers B]
           herald send --token T --platform ios|android --app APP [--provider apns|fcm] [--sandbox] [--no-sdk]
                       [--title T] [--body B] [--data JSON] [--url U] [--file PATH|-] [--validate-only] [--database-url URL]
      --token: one test push straight to a device token, through the worker's renderer (the app's
      payload profile), the app's credentials and the providers (HERALD_APNS_ENDPOINT, … as a
      worker reads them); prints the provider's answer as JSON. No broker, no receipt, no
      invalidation. Exit 0 accepted, 1 refused (unregistered, failed, credentials), 69 retryable.
      --validate-only: FCM checks the message and the token (its validate_only) and delivers nothing;
      APNs has no such mode, so the request is rendered and checked here and not sent ("sent": false).
    """

    /// Options that build the job; refused together with `--file`.
    private static let builderOptions = ["--app", "--title", "--body", "--subscription", "--external-id", "--id", "--data", "--url", "--expires-in"]

    static func run(_ arguments: [String]) async -> Int32 {
        if arguments.contains("--token") { return await TestPushCommand.run(arguments) }
        var options = OptionParser(arguments, command: "herald send", usage: usage, flags: ["--urgent", "--all"])
        let brokers = options.string("--brokers")
        let bytes: [UInt8]
        if let path = options.string("--file") {
            let extra = builderOptions.filter { !options.strings($0).isEmpty } + ["--urgent", "--all"].filter { options.flag($0) }
            guard options.finish() else { return 64 }
            guard extra.isEmpty else {
                Console.error("herald send: --file takes the whole job; \(extra.joined(separator: ", ")) cannot be combined with it\n\(usage)")
                return 64
            }
            do {
                bytes = try InputFile.read(path)
            } catch {
                Console.error("herald send: cannot read \(path): \(error.localizedDescription)")
                return 66
            }
        } else {
            switch buildJob(&options) {
            case .success(let document): bytes = document.serializedBytes()
            case .failure(let failure):
                if !failure.message.isEmpty { Console.error("herald send: \(failure.message)\n\(usage)") }
                return failure.status
            }
        }

        // The worker's own check, so what is accepted here is what the worker will run.
        let job: Job
        do {
            job = try Job.decode(bytes)
        } catch {
            Console.error("invalid: \(error)")
            return 65
        }

        let topics: WorkerConfiguration.Topics
        let configuration: KafkaConfiguration
        do {
            topics = try CommandEnvironment.topics()
            configuration = try CommandEnvironment.kafka(brokers: brokers)
        } catch {
            Console.error("herald send: \(error)")
            return 78
        }
        let topic = job.delivery.urgent ? topics.jobsUrgent : topics.jobs
        do {
            let producer = try KafkaProducer(configuration: configuration)
            let report = try await producer.send(topic: topic, key: Array(messageKey(job).utf8), value: bytes)
            // Written by hand to keep the documented member order.
            var line: [UInt8] = Array(#"{"job_id":"#.utf8)
            JSONValue.writeString(job.id, into: &line)
            line += Array(#","topic":"#.utf8)
            JSONValue.writeString(report.topic, into: &line)
            line += Array(#","partition":\#(report.partition),"offset":\#(report.offset)}"#.utf8)
            print(String(decoding: line, as: UTF8.self))
            return 0
        } catch {
            Console.error("herald send: not sent: \(error)")
            return error.code == .configuration ? 78 : 69
        }
    }

    /// The job message key (docs/ARCHITECTURE.md): the job id, or `app_id/activity_id` for live activities
    /// so one activity's updates stay in order on one partition.
    static func messageKey(_ job: Job) -> String {
        if job.kind == .liveActivity, let activity = job.liveActivity {
            return "\(job.appID)/\(activity.activityID)"
        }
        return job.id
    }

    struct Failure: Error {
        let status: Int32
        let message: String
    }

    /// A notification job from the options, not yet validated (that is `Job.decode`'s work).
    private static func buildJob(_ options: inout OptionParser) -> Result<JSONValue, Failure> {
        let app = options.string("--app")
        let title = options.string("--title")
        let body = options.string("--body")
        let subscriptions = options.strings("--subscription")
        let externalIDs = options.strings("--external-id")
        let all = options.flag("--all")
        let id = options.string("--id") ?? UUID().uuidString.lowercased()
        let urgent = options.flag("--urgent")
        let data = options.string("--data")
        let url = options.string("--url")
        let expiresIn = options.int("--expires-in", in: 1...31_536_000)
        guard options.finish() else { return .failure(Failure(status: 64, message: "")) }
        guard let app else { return .failure(Failure(status: 64, message: "--app is required (or --file)")) }
        let audiences = [!subscriptions.isEmpty, !externalIDs.isEmpty, all].filter { $0 }.count
        guard audiences == 1 else {
            return .failure(Failure(status: 64, message: "give exactly one audience: --subscription ID (repeatable), --external-id X (repeatable) or --all"))
        }

        let now = Timestamp.now
        var content: [String: JSONValue] = [:]
        if let title { content["title"] = .string(title) }
        if let body { content["body"] = .string(body) }
        if let url { content["url"] = .string(url) }
        if let data {
            do {
                content["data"] = try JSONValue.parse(data)
            } catch {
                return .failure(Failure(status: 65, message: "--data is not JSON: \(error)"))
            }
        }
        let audience: JSONValue
        if all {
            audience = .object(["all": .bool(true)])
        } else if !subscriptions.isEmpty {
            audience = .object(["subscription_ids": .array(subscriptions.map(JSONValue.string))])
        } else {
            audience = .object(["external_ids": .array(externalIDs.map(JSONValue.string))])
        }
        var job: [String: JSONValue] = [
            "schema": .string(Job.schemaName),
            "id": .string(id),
            "app_id": .string(app),
            "kind": .string(Job.Kind.notification.rawValue),
            "created_at": .string(now.rfc3339),
            "audience": audience,
            "content": .object(content),
        ]
        if let expiresIn { job["expires_at"] = .string(now.adding(seconds: Int64(expiresIn)).rfc3339) }
        if urgent { job["delivery"] = .object(["urgent": .bool(true)]) }
        return .success(.object(job))
    }
}

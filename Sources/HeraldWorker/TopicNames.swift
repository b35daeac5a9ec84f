extension WorkerConfiguration.Topics {
    /// The topic names from `HERALD_TOPIC_*` alone, defaults for the rest, for tools that need
    /// the topics but not the rest of a worker's configuration (`herald send`, `tail`, `jobs`).
    /// The same variables, defaults and checks as ``WorkerConfiguration/init(environment:)``.
    public init(environment: [String: String]) throws(WorkerConfiguration.Invalid) {
        func topic(_ name: String, default value: String) throws(WorkerConfiguration.Invalid) -> String {
            guard let text = environment[name], !text.isEmpty else { return value }
            let valid = text.utf8.count <= 249 && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
            guard valid else { throw WorkerConfiguration.Invalid(variable: name, reason: "a Kafka topic name is 1–249 of A-Z a-z 0-9 . _ -") }
            return text
        }
        self.init()
        jobs = try topic("HERALD_TOPIC_JOBS", default: jobs)
        jobsUrgent = try topic("HERALD_TOPIC_JOBS_URGENT", default: jobsUrgent)
        shards = try topic("HERALD_TOPIC_SHARDS", default: shards)
        shardsUrgent = try topic("HERALD_TOPIC_SHARDS_URGENT", default: shardsUrgent)
        results = try topic("HERALD_TOPIC_RESULTS", default: results)
        deviceEvents = try topic("HERALD_TOPIC_DEVICE_EVENTS", default: deviceEvents)
        metrics = try topic("HERALD_TOPIC_METRICS", default: metrics)
        deadLetters = try topic("HERALD_TOPIC_DLQ", default: deadLetters)
    }
}

extension WorkerConfiguration.Topics {
    /// The lane that reads `topic`, as metrics and logs name it: `jobs`, `urgent` (both urgent
    /// topics), `shards`, `device-events`; `other` for a topic no lane reads.
    func lane(of topic: String) -> String {
        switch topic {
        case jobs: "jobs"
        case jobsUrgent, shardsUrgent: "urgent"
        case shards: "shards"
        case deviceEvents: "device-events"
        default: "other"
        }
    }
}

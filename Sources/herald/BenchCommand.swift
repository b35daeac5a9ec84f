/// `herald bench <what> …`: benchmarks that print JSON (not timed tests; docs/BENCHMARKS.md records them).
enum BenchCommand {
    static let usage = """
    usage: herald bench http2 …      HTTP/2 client load against any TLS HTTP/2 server (compare with h2load)
           herald bench kafka …      produce and consume through HeraldKafka (compare with kcat)
           herald bench audience …   stream an app's audience from PostgreSQL (compare with psql COPY)
           herald bench pipeline …   one campaign through the whole pipeline on this machine (JSON)
           herald bench poison …     poison messages on every lane, each ahead of a good one (JSON; scripts/chaos poison)
    """

    static func run(_ arguments: [String]) async -> Int32 {
        switch arguments.first {
        case "http2":
            return BenchHTTP2Command.run(Array(arguments.dropFirst()))
        case "kafka":
            return await BenchKafkaCommand.run(Array(arguments.dropFirst()))
        case "pipeline":
            return await BenchPipelineCommand.run(Array(arguments.dropFirst()))
        case "poison":
            return await BenchPoisonCommand.run(Array(arguments.dropFirst()))
        case "audience":
            return await BenchAudienceCommand.run(Array(arguments.dropFirst()))
        default:
            Console.error(usage)
            return 64
        }
    }
}

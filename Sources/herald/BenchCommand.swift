/// `herald bench <what>`: benchmarks that print JSON (not timed tests; see docs/BENCHMARKS.md).
enum BenchCommand {
    static let usage = """
    usage: herald bench http2 …     HTTP/2 client load against any TLS HTTP/2 server (compare with h2load)
    """

    static func run(_ arguments: [String]) -> Int32 {
        switch arguments.first {
        case "http2":
            return BenchHTTP2Command.run(Array(arguments.dropFirst()))
        default:
            Console.error(usage)
            return 64
        }
    }
}

/// `herald bench <what>`: benchmarks that print JSON.
enum BenchCommand {
    static let usage = """
        usage: herald bench audience --database-url URL --app APP [--filter JSON] [--page-size N] [--streams N] [--json]
        """

    static func run(_ arguments: [String]) async -> Int32 {
        switch arguments.first {
        case "audience":
            return await BenchAudienceCommand.run(Array(arguments.dropFirst()))
        default:
            Console.error(usage)
            return 64
        }
    }
}

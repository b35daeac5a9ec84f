/// `--help` / `-h` on any command or subcommand: its usage on standard output, exit status 0
/// (issue 21). Decided before the command parses anything, so no command can answer it with a
/// usage error.
enum Help {
    /// The usage to print when `arguments` (the whole command line after `herald`) ask for
    /// help; nil when they do not.
    static func usage(for arguments: [String]) -> String? {
        guard let command = arguments.first, arguments.dropFirst().contains(where: { $0 == "--help" || $0 == "-h" }) else {
            return nil
        }
        switch command {
        case "validate-job":
            return "usage: herald validate-job [FILE|-]\n  Validates a herald.job.v1 document (exit 0 valid, 65 invalid; reasons on stderr)."
        case "validate":
            return "usage: herald validate [FILE|-]\n  Validates any Herald message by its \"schema\" member (exit 0 valid, 65 invalid)."
        case "migrate": return MigrateCommand.usage
        case "dev-broker": return DevBrokerCommand.usage
        case "dev": return DevCommand.usage
        case "run": return RunCommand.usage
        case "sim": return SimCommand.usage
        case "seed": return SeedCommand.usage
        case "send": return SendCommand.usage
        case "tail": return TailCommand.usage
        case "apps": return AppsCommand.usage
        case "channels": return ChannelsCommand.usage
        case "topics": return TopicsCommand.usage
        case "dlq": return DLQCommand.usage
        case "jobs": return JobsCommand.usage
        case "doctor": return DoctorCommand.usage
        case "bench":
            switch arguments.dropFirst().first {
            case "http2": return BenchHTTP2Command.usage
            case "pipeline": return BenchPipelineCommand.usage
            case "poison": return BenchPoisonCommand.usage
            default: return BenchCommand.usage
            }
        default:
            return Usage.text
        }
    }
}

import Foundation
import HeraldCore
import HeraldWorker

// The `herald` command line. Each command lives in its own file; this one only dispatches.
// Exit codes follow sysexits(3): 64 usage, 65 bad input data, 66 no input, 69 a service unavailable, 70 internal, 78 configuration.

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32

// Secrets given as files (HERALD_*_FILE) become the variables every command reads.
do {
    let secrets = try SecretFiles.resolve(ProcessInfo.processInfo.environment) { path in
        FileManager.default.contents(atPath: path).map { Array($0) }
    }
    for (name, value) in secrets { setenv(name, value, 1) }
} catch {
    FileHandle.standardError.write(Data("herald: \(error)\n".utf8))
    exit(78)
}

if let usage = Help.usage(for: arguments) {
    print(usage)
    exit(0)
}

switch arguments.first {
case "--version", "version":
    print("herald \(HeraldVersion.full)")
    status = 0
case "validate-job":
    status = ValidateCommand.run(Array(arguments.dropFirst()), jobsOnly: true)
case "validate":
    status = ValidateCommand.run(Array(arguments.dropFirst()), jobsOnly: false)
case "dev":
    status = await DevCommand.run(Array(arguments.dropFirst()))
case "run":
    status = await RunCommand.run(Array(arguments.dropFirst()))
case "migrate":
    status = await MigrateCommand.run(Array(arguments.dropFirst()))
case "sim":
    status = SimCommand.run(Array(arguments.dropFirst()))
case "seed":
    status = await SeedCommand.run(Array(arguments.dropFirst()))
case "dev-broker":
    status = DevBrokerCommand.run(Array(arguments.dropFirst()))
case "send":
    status = await SendCommand.run(Array(arguments.dropFirst()))
case "tail":
    status = await TailCommand.run(Array(arguments.dropFirst()))
case "apps":
    status = await AppsCommand.run(Array(arguments.dropFirst()))
case "channels":
    status = await ChannelsCommand.run(Array(arguments.dropFirst()))
case "topics":
    status = await TopicsCommand.run(Array(arguments.dropFirst()))
case "dlq":
    status = await DLQCommand.run(Array(arguments.dropFirst()))
case "jobs":
    status = await JobsCommand.run(Array(arguments.dropFirst()))
case "bench":
    status = await BenchCommand.run(Array(arguments.dropFirst()))
case "doctor":
    status = await DoctorCommand.run(Array(arguments.dropFirst()))
case nil, "help", "--help", "-h":
    print(Usage.text)
    status = arguments.isEmpty ? 64 : 0
default:
    Console.error("herald: unknown command '\(arguments[0])'\n\n\(Usage.text)")
    status = 64
}
// Log lines still queued (a worker's last ones, librdkafka's) go out before the process ends.
LogSink.shared.flush(timeout: .seconds(2))
exit(status)

import Foundation
import HeraldTestSupport
import Testing

/// `--help` and `-h` everywhere: the usage on standard output, exit status 0, nothing run.
@Suite(.timeLimit(.minutes(2))) struct HelpTests {
    static let commands: [[String]] = [
        ["validate-job"], ["validate"], ["dev"], ["run"], ["migrate"], ["sim"], ["sim", "token"], ["seed"], ["dev-broker"],
        ["send"], ["tail"], ["tail", "results"], ["apps"], ["apps", "add"], ["apps", "update"], ["apps", "show"], ["apps", "rekey"],
        ["topics", "create"], ["dlq", "replay"], ["jobs", "show"], ["jobs", "cancel"], ["jobs", "resume"], ["jobs", "list"], ["jobs", "watch"],
        ["channels"], ["channels", "list"], ["channels", "set"], ["channels", "delete"],
        ["doctor"], ["bench"], ["bench", "http2"], ["bench", "kafka"], ["bench", "audience"], ["bench", "pipeline"], ["bench", "poison"],
    ]

    @Test(arguments: commands) func everyCommandAnswersHelpWithItsUsage(command: [String]) throws {
        for flag in ["--help", "-h"] {
            // Options around it are not parsed: help wins, nothing connects anywhere.
            let result = try Subprocess.run(TestEnvironment.heraldBinary, command + ["--database-url", "postgresql://nowhere:1/x", flag])
            #expect(result.status == 0, "\(command) \(flag): exit \(result.status), stderr \(result.stderr)")
            #expect(result.stdout.hasPrefix("usage: herald"), "\(command) \(flag): \(result.stdout.prefix(120))")
            #expect(result.stderr.isEmpty, "\(command) \(flag): \(result.stderr.prefix(200))")
        }
    }

    @Test func withoutArgumentsTheTopLevelUsageListsEveryCommandAndIsAUsageError() throws {
        let result = try Subprocess.run(TestEnvironment.heraldBinary, [])
        #expect(result.status == 64)
        for command in ["dev", "run", "validate-job", "validate", "migrate", "seed", "send", "tail", "jobs", "apps", "channels", "topics", "dlq",
                        "dev-broker", "sim", "bench", "doctor"] {
            #expect(result.stdout.contains("  \(command)"), "\(command) is not in the top-level usage")
        }
        #expect(try Subprocess.run(TestEnvironment.heraldBinary, ["--help"]).status == 0)
    }

    /// `contrib/herald.bash` completes commands, subcommands and options read from `--help`.
    @Test func theBashCompletionCompletesCommandsSubcommandsAndOptions() throws {
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("contrib/herald.bash").path
        let binaryDirectory = TestEnvironment.heraldBinary.deletingLastPathComponent().path
        func complete(_ words: [String]) throws -> String {
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let result = try Subprocess.run(URL(fileURLWithPath: "/bin/bash"), ["-c", """
                export PATH="\(binaryDirectory):$PATH"; source '\(script)'
                COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _herald; echo "${COMPREPLY[*]}"
                """])
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try complete(["herald", "doc"]) == "doctor")
        #expect(try complete(["herald", "jobs", "l"]) == "list")
        #expect(try complete(["herald", "jobs", "list", "--st"]) == "--state")
        #expect(try complete(["herald", "send", "--plat"]) == "--platform")
        #expect(try complete(["herald", "channels", "s"]) == "set")
        #expect(try complete(["herald", "channels", "set", "--ios-inter"]) == "--ios-interruption-level")
        #expect(try complete(["herald", "sim", "--pub"]) == "--public-host")
        #expect(try complete(["herald", "sim", "--cert"]) == "--cert-name")
    }
}

import Foundation
import HeraldTestSupport
import Testing

/// One option parser for every command (`Sources/herald/OptionParser.swift`): `--name=value` is
/// `--name value`, and an unknown option or a value out of range is a usage error on stderr,
/// exit 64, naming the option, before anything connects anywhere.
@Suite(.timeLimit(.minutes(2))) struct OptionParserTests {
    static let refusals: [([String], String)] = [
        (["migrate", "--database-url=postgresql://nowhere:1/x", "--bogus", "1"], "unknown option --bogus"),
        (["dev-broker", "--brokers=0"], "--brokers"),
        (["dev", "--workers=99"], "--workers"),
        (["seed", "--app", "a", "--credentials-from", "/nonexistent", "--devices=-1"], "--devices"),
        (["seed", "--app=a", "--credentials-from=/nonexistent", "--ios-share", "2"], "--ios-share"),
        (["bench", "kafka", "--messages=0"], "--messages"),
        (["bench", "audience", "--app", "a", "--streams=100"], "--streams"),
        (["channels", "list", "--app=a", "--color", "red"], "unknown option --color"),
        (["jobs", "list", "--limit=0"], "--limit"),
        (["send", "--app=a", "--title=T", "--all", "--expires-in=x"], "--expires-in"),
        (["doctor", "--json=yes"], "--json"),
    ]

    @Test(arguments: refusals) func badOptionsAreUsageErrorsNamingTheOption(command: [String], named: String) throws {
        let result = try Subprocess.run(TestEnvironment.heraldBinary, command, environment: ["HERALD_DATABASE_URL": "postgresql://nowhere:1/x"])
        #expect(result.status == 64, "\(command): exit \(result.status), stderr \(result.stderr)")
        #expect(result.stderr.contains(named), "\(command): \(result.stderr.prefix(300))")
        #expect(result.stderr.contains("usage: herald"), "\(command): the usage follows the problem")
        #expect(result.stdout.isEmpty, "\(command): \(result.stdout.prefix(200))")
    }

    /// `--name=value` reaches the command as `--name value` does: `herald migrate` fails on the
    /// unreachable database the same way under both spellings (exit 69), not with a usage error.
    @Test func equalsAndSpaceSpellingsAreTheSame() throws {
        let url = "postgresql://127.0.0.1:1/nothing?connect_timeout=2"
        let spaced = try Subprocess.run(TestEnvironment.heraldBinary, ["migrate", "--database-url", url])
        let joined = try Subprocess.run(TestEnvironment.heraldBinary, ["migrate", "--database-url=\(url)"])
        #expect(spaced.status == joined.status && spaced.status != 64 && spaced.status != 0, "\(spaced.status) \(joined.status) \(joined.stderr)")
    }
}

import Foundation
import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

/// `herald channels list|set|delete` through the binary, against a database of its own.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(3)))
struct ChannelsCommandTests {
    @Test func channelsAreCreatedChangedListedAndDeleted() async throws {
        let serverURL = try TestEnvironment.require(TestEnvironment.databaseVariable)
        let name = TestEnvironment.uniqueName("herald_cli_channels")
        let admin = try await PostgresConnection.connect(serverURL)
        try await admin.execute("CREATE DATABASE \(name)")
        await admin.close()
        defer {
            Task {
                if let admin = try? await PostgresConnection.connect(serverURL) {
                    try? await admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
                    await admin.close()
                }
            }
        }
        let info = try ConnectionInfo(serverURL)
        let url = "postgresql://\(info.options["user"] ?? "postgres")@\(info.options["host"] ?? "127.0.0.1"):\(info.options["port"] ?? "5432")/\(name)"
        let migrate = try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["migrate", "--database-url", url])
        try #require(migrate.status == 0, "\(migrate.stderr)")
        let database = try await PostgresConnection.connect(url)
        try await database.execute("INSERT INTO apps (id, name) VALUES ('shop', 'Shop')")
        await database.close()

        func herald(_ arguments: [String]) async throws -> Subprocess.Result {
            try await Subprocess.runDetached(TestEnvironment.heraldBinary, ["channels"] + arguments + ["--database-url", url], timeout: 60)
        }

        // Creating needs a name; bad settings are refused before PostgreSQL is touched.
        let nameless = try await herald(["set", "--app", "shop", "--key", "orders", "--importance", "high"])
        #expect(nameless.status == 64 && nameless.stderr.contains("--name is required"), "\(nameless.status) \(nameless.stderr)")
        let badLight = try await herald(["set", "--app", "shop", "--key", "orders", "--name", "Orders", "--light", "red"])
        #expect(badLight.status == 65 && badLight.stderr.contains("#rrggbb"), "\(badLight.status) \(badLight.stderr)")
        let badKey = try await herald(["set", "--app", "shop", "--key", "Orders!", "--name", "Orders"])
        #expect(badKey.status == 64, "\(badKey.status) \(badKey.stderr)")
        let unknownApp = try await herald(["set", "--app", "nope", "--key", "orders", "--name", "Orders"])
        #expect(unknownApp.status == 66 && unknownApp.stderr.contains("no app nope"), "\(unknownApp.status) \(unknownApp.stderr)")

        let created = try await herald(["set", "--app", "shop", "--key", "orders", "--name", "Orders", "--importance", "high",
                                        "--vibration", "0,250,250,250", "--light", "#FF8800", "--ios-interruption-level", "time-sensitive", "--json"])
        #expect(created.status == 0, "\(created.stderr)")
        let first = try JSONValue.parse(Array(created.stdout.utf8))
        #expect(first["id"] == .string("nf_orders_v1") && first["importance"] == .string("high") && first["light_colour"] == .string("#ff8800"),
                "\(created.stdout)")
        #expect(first["vibration_pattern"] == .array([.int(0), .int(250), .int(250), .int(250)]), "\(created.stdout)")
        #expect(first["ios"]?["interruption_level"] == .string("time-sensitive"), "\(created.stdout)")

        // A rename keeps the version (Android lets an app rename a channel); a sound change moves it.
        let renamed = try JSONValue.parse(Array(try await herald(["set", "--app", "shop", "--key", "orders", "--name", "Your orders", "--json"]).stdout.utf8))
        #expect(renamed["version"] == .int(1) && renamed["name"] == .string("Your orders") && renamed["importance"] == .string("high"),
                "the other settings are kept: \(renamed)")
        let resounded = try await herald(["set", "--app", "shop", "--key", "orders", "--sound", "chime"])
        #expect(resounded.status == 0 && resounded.stdout.contains("version 2") && resounded.stdout.contains("android_id=nf_orders_v2"),
                "\(resounded.stdout) \(resounded.stderr)")
        // "" clears an optional setting.
        let cleared = try JSONValue.parse(Array(try await herald(["set", "--app", "shop", "--key", "orders", "--ios-interruption-level", "", "--json"]).stdout.utf8))
        #expect(cleared["ios"] == .object([:]), "\(cleared)")

        _ = try await herald(["set", "--app", "shop", "--key", "news", "--name", "News", "--importance", "low"])
        let listed = try await herald(["list", "--app", "shop", "--json"])
        let keys = try JSONValue.parse(Array(listed.stdout.utf8)).arrayValue?.compactMap { $0["key"]?.stringValue }
        #expect(keys == ["news", "orders"], "\(listed.stdout)")
        let text = try await herald(["list", "--app", "shop"])
        #expect(text.stdout.split(separator: "\n").count == 2 && text.stdout.contains("orders android_id=nf_orders_v2"), "\(text.stdout)")

        let deleted = try await herald(["delete", "--app", "shop", "--key", "news", "--json"])
        #expect(deleted.status == 0 && deleted.stdout.contains(#""deleted":true"#), "\(deleted.stdout)")
        let again = try await herald(["delete", "--app", "shop", "--key", "news"])
        #expect(again.status == 66 && again.stderr.contains("no channel news"), "\(again.status) \(again.stderr)")
        let remaining = try await herald(["list", "--app", "shop", "--json"])
        #expect(try JSONValue.parse(Array(remaining.stdout.utf8)).arrayValue?.count == 1)
    }
}

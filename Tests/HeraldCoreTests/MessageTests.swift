import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

/// The Swift validators against `schemas/examples/`: every valid file is accepted, every invalid
/// file is refused with the reason its `.expect` file names. `scripts/check-schemas.py` checks the
/// same files against the JSON Schemas, so the two sides agree on every example.
@Suite struct MessageTests {
    static let examples = TestEnvironment.repositoryRoot.appendingPathComponent("schemas/examples")

    static func files(_ folder: String) -> [URL] {
        let directory = examples.appendingPathComponent(folder)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().map { directory.appendingPathComponent($0) }
    }

    @Test func thereAreExamplesOfEveryMessage() {
        let names = Self.files("valid").map(\.lastPathComponent) + Self.files("invalid").map(\.lastPathComponent)
        for prefix in ["job-", "shard-", "receipt-", "device-event-", "metrics-", "dead-letter-"] {
            #expect(names.contains { $0.hasPrefix(prefix) }, "no example for \(prefix)")
        }
    }

    @Test(arguments: MessageTests.files("valid"))
    func validExampleIsAccepted(file: URL) throws {
        let bytes = Array(try Data(contentsOf: file))
        #expect(throws: Never.self) { try Message.decode(bytes) }
    }

    @Test(arguments: MessageTests.files("invalid"))
    func invalidExampleIsRefusedWithItsReason(file: URL) throws {
        let bytes = Array(try Data(contentsOf: file))
        let expectURL = file.deletingPathExtension().appendingPathExtension("expect")
        let expected = try String(contentsOf: expectURL, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        do {
            _ = try Message.decode(bytes)
            Issue.record("\(file.lastPathComponent) was accepted")
        } catch {
            #expect(error.description.contains(expected), "\(file.lastPathComponent): got \(error.description)")
        }
    }

    @Test func embeddedSchemaExamplesAreAccepted() throws {
        let schemas = try FileManager.default.contentsOfDirectory(atPath: TestEnvironment.repositoryRoot.appendingPathComponent("schemas").path)
            .filter { $0.hasSuffix(".schema.json") }
        #expect(schemas.count == 6)
        for name in schemas {
            let url = TestEnvironment.repositoryRoot.appendingPathComponent("schemas").appendingPathComponent(name)
            let schema = try JSONValue.parse(Array(try Data(contentsOf: url)), limits: .init(maxBytes: 8 << 20, maxDepth: 256))
            let examples = try #require(schema["examples"]?.arrayValue, "\(name) has no examples")
            #expect(!examples.isEmpty)
            for example in examples {
                #expect(throws: Never.self, "\(name)") { try Message.decode(example.serializedBytes()) }
            }
        }
    }
}

import HeraldCore
@testable import HeraldWorker
import Testing

@Suite struct ConfigurationAuditTests {
    static let base = ["HERALD_DATABASE_URL": "postgresql://herald:s3cret@db:5432/herald", "HERALD_KAFKA_BROKERS": "k:9092",
                       "HERALD_CREDENTIALS_KEY": "AAAA", "HERALD_WORKER_ID": "w1"]

    @Test func typosAreNamedAndFamiliesAndToolingAreNot() {
        var environment = Self.base
        environment["HERALD_SHARD_SIZ"] = "5"                             // a typo
        environment["HERALD_KAFKA_PROPERTY_SECURITY_PROTOCOL"] = "ssl"    // librdkafka's family
        environment["HERALD_SKIP_FUZZ"] = "1"                             // scripts/test
        environment["HERALD_DATABASE_URL_FILE"] = "/run/secrets/db"       // a secret file
        environment["PATH"] = "/usr/bin"
        #expect(ConfigurationAudit.unknownVariables(environment) == ["HERALD_SHARD_SIZ"])
        #expect(ConfigurationAudit.unknownVariables(Self.base).isEmpty)
    }

    @Test func theSummaryCarriesNoSecret() throws {
        var environment = Self.base
        environment["HERALD_KAFKA_PROPERTY_SASL_PASSWORD"] = "hunter2"
        environment["HERALD_CREDENTIALS_OLD_KEYS"] = "BBBB"
        let configuration = try WorkerConfiguration(environment: environment)
        let text = JSONValue.object(ConfigurationAudit.summary(configuration)).serialized()
        for secret in ["s3cret", "hunter2", "AAAA", "BBBB", "sasl.password"] {
            #expect(!text.contains(secret), "\(secret) in \(text)")
        }
        #expect(text.contains("postgresql://herald@db:5432/herald") && text.contains(#""credentials_key":"set""#), "\(text)")
        #expect(configuration.unknownVariables.isEmpty)
    }
}

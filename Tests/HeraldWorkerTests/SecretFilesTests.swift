@testable import HeraldWorker
import Testing

@Suite struct SecretFilesTests {
    private let files: [String: [UInt8]] = [
        "/run/secrets/key": Array("c2VjcmV0LWtleQ==\n".utf8),
        "/run/secrets/db": Array("postgresql://herald:pw@db/herald\r\n".utf8),
        "/run/secrets/sasl": Array("hunter2".utf8),
        "/run/secrets/empty": Array("\n".utf8),
    ]

    private func resolve(_ environment: [String: String]) throws -> [String: String] {
        try SecretFiles.resolve(environment) { files[$0] }
    }

    @Test func eachFileBecomesItsVariableWithoutTheTrailingNewline() throws {
        let resolved = try resolve(["HERALD_CREDENTIALS_KEY_FILE": "/run/secrets/key", "HERALD_DATABASE_URL_FILE": "/run/secrets/db",
                                    "HERALD_KAFKA_SASL_PASSWORD_FILE": "/run/secrets/sasl"])
        #expect(resolved == ["HERALD_CREDENTIALS_KEY": "c2VjcmV0LWtleQ==", "HERALD_DATABASE_URL": "postgresql://herald:pw@db/herald",
                             "HERALD_KAFKA_PROPERTY_SASL_PASSWORD": "hunter2"])
        #expect(try resolve(["HERALD_DATABASE_URL": "postgresql://db/herald"]).isEmpty, "no _FILE variable, nothing to do")
    }

    @Test func aSecretGivenTwiceOrUnreadableIsAnErrorNamingTheVariable() {
        #expect(throws: SecretFiles.Invalid(variable: "HERALD_CREDENTIALS_KEY_FILE", reason: "HERALD_CREDENTIALS_KEY is set too; set one of them")) {
            try resolve(["HERALD_CREDENTIALS_KEY_FILE": "/run/secrets/key", "HERALD_CREDENTIALS_KEY": "other"])
        }
        #expect(throws: SecretFiles.Invalid(variable: "HERALD_DATABASE_URL_FILE", reason: "cannot read /run/secrets/missing")) {
            try resolve(["HERALD_DATABASE_URL_FILE": "/run/secrets/missing"])
        }
        #expect(throws: SecretFiles.Invalid(variable: "HERALD_KAFKA_SASL_PASSWORD_FILE", reason: "/run/secrets/empty is empty")) {
            try resolve(["HERALD_KAFKA_SASL_PASSWORD_FILE": "/run/secrets/empty"])
        }
    }
}

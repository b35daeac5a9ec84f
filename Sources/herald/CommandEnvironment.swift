import Foundation
import HeraldKafka
import HeraldPostgres
import HeraldWorker

/// The Kafka and PostgreSQL settings the operator commands (`send`, `tail`, `jobs`) share:
/// the same variables a worker reads, so a command talks to the topics the workers use.
enum CommandEnvironment {
    /// A configuration problem, already worded for the user; exit 78.
    struct Problem: Error, CustomStringConvertible {
        let description: String
    }

    static var variables: [String: String] { ProcessInfo.processInfo.environment }

    /// Topic names from `HERALD_TOPIC_*`.
    static func topics() throws(Problem) -> WorkerConfiguration.Topics {
        do {
            return try WorkerConfiguration.Topics(environment: variables)
        } catch {
            throw Problem(description: error.description)
        }
    }

    /// librdkafka settings: `--brokers` or `HERALD_KAFKA_BROKERS`, plus `HERALD_KAFKA_PROPERTY_*`.
    static func kafka(brokers flag: String?) throws(Problem) -> KafkaConfiguration {
        guard let brokers = flag ?? variables["HERALD_KAFKA_BROKERS"], !brokers.isEmpty else {
            throw Problem(description: "no Kafka brokers: set HERALD_KAFKA_BROKERS or pass --brokers HOST:PORT[,…]")
        }
        var configuration = KafkaConfiguration(bootstrapServers: brokers, properties: ["log_level": "3"])
        configuration.addPassThroughProperties(from: variables)
        return configuration
    }

    /// A small pool on `--database-url` or `HERALD_DATABASE_URL` (and the `HERALD_DATABASE_*` settings).
    static func pool(url flag: String?, applicationName: String) throws(Problem) -> PostgresPool {
        do {
            var configuration = try PostgresPoolConfiguration.fromEnvironment(url: flag)
            configuration.size = 2
            configuration.applicationName = applicationName
            return PostgresPool(configuration)
        } catch {
            throw Problem(description: "\(error.message) (pass --database-url postgresql://USER@HOST:PORT/DB or set HERALD_DATABASE_URL)")
        }
    }

    /// sysexits for a PostgreSQL failure: 78 bad URL, 69 unreachable, 66 unknown job,
    /// 65 refused by the data (a job in the wrong state), 70 anything else.
    static func exitStatus(_ error: PostgresError) -> Int32 {
        switch error.code {
        case .invalidURL, .configuration: 78
        case .connectFailed, .connectionLost, .poolTimeout, .poolClosed: 69
        case .notFound: 66
        case .invalidState: 65
        default: 70
        }
    }
}

import CHeraldBuildInfo
import Foundation

enum HeraldVersion {
    static let string = "0.1.0"
    /// The git revision of the build (scripts/stamp-revision), "unknown" without one.
    static let revision = String(cString: herald_build_revision())
    /// `herald --version`: "0.1.0 (revision abc1234)".
    static let full = "\(string) (revision \(revision))"
}

enum Usage {
    static let text = """
    usage: herald <command> [options]

    commands:
      dev [--demo] [--exit]      everything on one machine: broker, PostgreSQL, simulators, demo devices, workers
      run                        run a delivery worker (configuration: HERALD_* environment variables)
      validate-job [FILE|-]      validate a herald.job.v1 document (exit 0 valid, 65 invalid; reasons on stderr)
      validate [FILE|-]          validate any Herald message by its "schema" member
      migrate                    apply the database migrations (--database-url URL or HERALD_DATABASE_URL)
      doctor                     check PostgreSQL, migrations, clock, Kafka topics and app credentials, one line each
      seed                       create an app from simulator credentials and N synthetic subscriptions (COPY)
      bench http2|kafka|audience|pipeline|poison
                                 benchmarks that print JSON (docs/BENCHMARKS.md)
      send                       build or read a job, validate it, produce it to the jobs topic (--app … --title … --all | --file PATH|-)
      tail results|metrics|dlq   follow a topic with a throwaway consumer group (--from-beginning, --json, --count N, --job ID, --timeout S)
      jobs list|watch|show|cancel|resume
                                 list jobs, follow one to completed, show one and its shards, cancel it, or resume it after a halt
      apps add|update|show|list  an app's credentials and settings (sealed; show prints fingerprints); apps rekey rotates the key
      channels list|set|delete   an app's notification channels (Android and iOS settings; jobs name them in content.channel)
      topics create              create every Herald topic with the Admin API (--partitions 12 --replication-factor 3, idempotent)
      dlq replay                 re-produce dead letters to their source topics (--since T --until T --reason-contains X --dry-run)
      dev-broker                 run an embedded Kafka broker (librdkafka mock cluster) on 127.0.0.1
      sim                        run the APNs and FCM simulators (TLS HTTP/2 on 127.0.0.1); `sim token` prints an APNs token
      --version                  print the version

    `herald <command> --help` prints a command's own usage.
    """
}

/// Writes to standard error.
enum Console {
    static func error(_ message: String) {
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }
}

/// Reads a whole file, or standard input for "-".
enum InputFile {
    static func read(_ path: String) throws -> [UInt8] {
        if path == "-" {
            return Array(FileHandle.standardInput.readDataToEndOfFile())
        }
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }
}

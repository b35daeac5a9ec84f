import Foundation
import HeraldCrypto
import HeraldSim

/// `herald sim …` and `herald sim token --state-dir DIR`.
enum SimCommand {
    static let usage = """
    usage: herald sim --state-dir DIR [--apns-port P] [--fcm-port Q] [--listen ADDRESS] [--public-host HOST] [--cert-name NAME ...]
                      [--max-streams N] [--streams-before-token N] [--threads T] [--fcm-token-ttl S] [--log N] [--team-bundle-id ID ...]
                      [--unregistered-share X] [--rate-429 X] [--rate-5xx X] [--retry-after S] [--goaway-every N] [--reset-every N]
                      [--latency-ms MS] [--stall-rate X] [--stall-every S --stall-seconds D] [--refuse-connections-for S]
                      [--date-offset S]
           herald sim token --state-dir DIR
      --state-dir DIR: where it keeps, writing each unless present: ca.pem + ca-key.pem (the CA clients
      trust), server.pem + server-key.pem, apns-key.p8 + apns.json (key_id, team_id, bundle_id),
      apns-client.pem + apns-client-key.pem + apns-client.p12 (password herald-sim: an APNs client
      certificate for apns.json's bundle, signed by the CA) and fcm-service-account.json.
      APNs takes a provider token, or, without one, a client certificate the CA issued on the TLS
      connection (certificate auth: its UID is the one bundle it may push to).
      --listen ADDRESS: the IPv4 address to listen on (default 127.0.0.1; 0.0.0.0 for every interface).
      --public-host HOST: the DNS name or IPv4 address clients reach it by (default 127.0.0.1): the
      token_uri of fcm-service-account.json names it, and so does the server certificate.
      --cert-name NAME: another DNS name or IP address for the server certificate (repeatable), which
      always names 127.0.0.1, localhost and the public host. A certificate in DIR that lacks a name is
      signed again by the CA in DIR (ca.pem is kept; it is replaced only when DIR has no ca-key.pem).
      --stall-every S --stall-seconds D: every S seconds both simulators stop answering for D seconds
      (requests that arrive meanwhile are answered when the stall ends).
      --date-offset S: every answer's date header is S seconds off this host's clock (negative: behind),
      a provider with a wrong clock for `herald doctor`.
      --team-bundle-id: another bundle id of the APNs key's team (repeatable); the simulated devices
      belong to apns.json's bundle, so pushes to it are answered DeviceTokenNotForTopic.
    """

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.first == "token" { return token(Array(arguments.dropFirst())) }
        var options = OptionParser(arguments, command: "herald sim", usage: usage)
        guard let stateDir = options.string("--state-dir") else {
            Console.error("herald sim: --state-dir is required\n\(usage)")
            return 64
        }
        var configuration = Simulator.Configuration(stateDirectory: URL(fileURLWithPath: stateDir))
        configuration.apnsPort = options.int("--apns-port", in: 0...65535) ?? 0
        configuration.fcmPort = options.int("--fcm-port", in: 0...65535) ?? 0
        configuration.listenAddress = options.value("--listen", expected: "an IPv4 address such as 127.0.0.1 or 0.0.0.0") {
            var address = in_addr()
            return inet_pton(AF_INET, $0, &address) == 1 ? $0 : nil
        } ?? configuration.listenAddress
        // Not IPv6 for the public host: a URL would need brackets around it.
        configuration.publicHost = options.value("--public-host", expected: "a DNS name or an IPv4 address") {
            !$0.contains(":") && (try? CertificateNames([$0])) != nil ? $0 : nil
        } ?? configuration.publicHost
        configuration.certificateNames = options.values("--cert-name", expected: "a DNS name or an IP address") {
            try? CertificateNames([$0])
        }.reduce(CertificateNames()) { $0.union($1) }
        configuration.maxConcurrentStreams = UInt32(options.int("--max-streams", in: 1...100_000) ?? 1000)
        configuration.threads = options.int("--threads", in: 1...64) ?? 1
        configuration.dateOffsetSeconds = Int64(options.int("--date-offset", in: -31_536_000...31_536_000) ?? 0)
        configuration.streamsBeforeToken = UInt32(options.int("--streams-before-token", in: 1...100_000) ?? 1)
        configuration.fcmTokenLifetimeSeconds = Int64(options.int("--fcm-token-ttl", in: 1...86_400) ?? 3600)
        configuration.logPerToken = options.int("--log", in: 0...100_000) ?? 0
        configuration.faults.unregistered = UnregisteredShare(options.double("--unregistered-share", in: 0...1) ?? 0)
        configuration.faults.tooManyRequestsRate = options.double("--rate-429", in: 0...1) ?? 0
        configuration.faults.serverErrorRate = options.double("--rate-5xx", in: 0...1) ?? 0
        configuration.faults.retryAfterSeconds = options.int("--retry-after", in: 0...86_400) ?? 1
        configuration.faults.goawayEvery = options.int("--goaway-every", in: 0...Int(Int32.max)) ?? 0
        configuration.faults.resetEvery = options.int("--reset-every", in: 0...Int(Int32.max)) ?? 0
        configuration.faults.latencyMilliseconds = options.int("--latency-ms", in: 0...600_000) ?? 0
        configuration.faults.stallRate = options.double("--stall-rate", in: 0...1) ?? 0
        configuration.faults.stallEverySeconds = options.double("--stall-every", in: 0...86_400) ?? 0
        configuration.faults.stallSeconds = options.double("--stall-seconds", in: 0...86_400) ?? 0
        configuration.faults.refuseConnectionsForSeconds = options.double("--refuse-connections-for", in: 0...86_400) ?? 0
        configuration.apnsTeamBundleIDs = Set(options.strings("--team-bundle-id"))
        guard options.finish() else { return 64 }

        let signals = SignalSet.blocking([SIGTERM, SIGINT])
        let simulator: Simulator
        do {
            simulator = try Simulator(configuration: configuration)
        } catch {
            Console.error("herald sim: \(error)")
            return 69
        }
        switch simulator.credentials.certificateUpdate {
        case .kept, .created:
            break
        case .serverCertificateReissued(let added):
            Console.error("herald sim: server.pem did not name \(added); signed a new one with the same CA (ca.pem unchanged)")
        case .authorityReplaced(let added):
            Console.error("herald sim: server.pem did not name \(added) and \(stateDir) has no ca-key.pem to sign a new one: "
                          + "made a new CA; clients must load ca.pem again")
        case .authorityReplacedForClientCertificate:
            Console.error("herald sim: \(stateDir) has no ca-key.pem to sign an APNs client certificate: "
                          + "made a new CA; clients must load ca.pem again")
        }
        let ready = ["apns_port": simulator.apnsPort, "fcm_port": simulator.fcmPort] as [String: Any]
        var line = String(decoding: (try? JSONSerialization.data(withJSONObject: ready, options: [.sortedKeys])) ?? Data(), as: UTF8.self)
        line.removeLast()
        let path = simulator.credentials.directory.standardizedFileURL.path.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        print(line + ",\"state_dir\":\"\(path)\"}")
        fflush(nil)
        _ = signals.wait()
        simulator.stop()
        return 0
    }

    private static func token(_ arguments: [String]) -> Int32 {
        var options = OptionParser(arguments, command: "herald sim token", usage: usage)
        guard let stateDir = options.string("--state-dir"), options.finish() else {
            Console.error("herald sim token: --state-dir is required")
            return 64
        }
        let directory = URL(fileURLWithPath: stateDir)
        guard FileManager.default.fileExists(atPath: directory.appendingPathComponent("apns-key.p8").path) else {
            Console.error("herald sim token: \(stateDir) has no apns-key.p8 (start herald sim with --state-dir first)")
            return 66
        }
        do {
            // The service account file exists already: its host and port are passed back, so that
            // neither it nor the server certificate changes.
            let account = try? JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("fcm-service-account.json"))) as? [String: Any]
            let tokenURI = (account?["token_uri"] as? String).flatMap { URL(string: $0) }
            let credentials = try SimulatorCredentials.prepare(directory: directory, fcmPort: tokenURI?.port ?? 0,
                                                               publicHost: tokenURI?.host ?? "127.0.0.1")
            print(try credentials.apnsProviderToken())
            return 0
        } catch {
            Console.error("herald sim token: \(error)")
            return 65
        }
    }
}

import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP2
import Synchronization

/// `herald bench http2`: a closed-loop HTTP/2 load like h2load's (`-c C -m S -t 1`), through
/// Herald's own client, printing JSON.
enum BenchHTTP2Command {
    static let usage = """
    usage: herald bench http2 --url https://HOST:PORT/PATH --requests N --connections C [--streams S]
                              [--ca FILE] [--header 'name: value']... [--body FILE] [--timeout-ms MS] --json
    """

    static func run(_ arguments: [String]) -> Int32 {
        var options = OptionParser(arguments, command: "herald bench http2", usage: usage)
        let urlText = options.string("--url")
        let requests = options.int("--requests", in: 1...100_000_000) ?? 10_000
        let connections = options.int("--connections", in: 1...1000) ?? 1
        let streams = options.int("--streams", in: 1...100_000)
        let caFile = options.string("--ca")
        let headerTexts = options.strings("--header")
        let bodyFile = options.string("--body")
        let timeoutMilliseconds = options.int("--timeout-ms", in: 1...3_600_000) ?? 30_000
        _ = options.flag("--json")
        guard options.finish() else { return 64 }
        guard let urlText, let url = URL(string: urlText), url.scheme == "https", let host = url.host else {
            Console.error("herald bench http2: --url https://HOST:PORT/PATH is required\n\(usage)")
            return 64
        }
        var headers: [HeaderField] = []
        for text in headerTexts {
            guard let colon = text.firstIndex(of: ":") else {
                Console.error("herald bench http2: --header takes 'name: value', not \(text)")
                return 64
            }
            headers.append(HeaderField(text[..<colon].lowercased().trimmingCharacters(in: .whitespaces),
                                       text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var body: [UInt8] = []
        if let bodyFile {
            guard let data = FileManager.default.contents(atPath: bodyFile) else {
                Console.error("herald bench http2: cannot read \(bodyFile)")
                return 66
            }
            body = Array(data)
        }
        let path = url.path.isEmpty ? "/" : url.path + (url.query.map { "?" + $0 } ?? "")
        let request = HTTP2Request(method: bodyFile == nil ? "GET" : "POST", path: path, headers: headers, body: body,
                                   timeoutNanoseconds: UInt64(timeoutMilliseconds) * 1_000_000)
        do {
            let result = try measure(host: host, port: url.port ?? 443, caFile: caFile, request: request, total: requests,
                                     connections: connections, streams: streams ?? 1000)
            print(result.serialized())
            return result["errors"] == .int(0) ? 0 : 1
        } catch {
            Console.error("herald bench http2: \(error)")
            return 69
        }
    }

    /// Runs the load on one event loop: each connection keeps `streams` requests in flight and
    /// sends the next as soon as one completes, until `total` completed.
    static func measure(host: String, port: Int, caFile: String?, request: HTTP2Request, total: Int, connections: Int,
                        streams: Int) throws -> JSONValue {
        let loop = try EventLoop(name: "herald-bench")
        let tls = try TLSContext(client: caFile)
        let pools: [HTTP2Client] = (0..<connections).map { _ in
            var configuration = HTTP2Client.Configuration(host: host, port: port)
            configuration.maxConnections = 1
            return HTTP2Client(configuration: configuration, tls: tls, loop: loop)
        }
        let state = BenchState(total: total)
        let done = DispatchSemaphore(value: 0)
        let started = Date()
        loop.execute {
            for pool in pools {
                for _ in 0..<streams { issue(pool) }
            }
            func issue(_ pool: HTTP2Client) {
                guard state.issued < state.total else { return }
                state.issued += 1
                pool.executeOnLoop(request) { result in
                    switch result {
                    case .success(let response) where (200..<300).contains(response.status): state.ok += 1
                    case .success(let response): state.statuses[response.status, default: 0] += 1
                    case .failure(let error): state.failures["\(error.code)", default: 0] += 1
                    }
                    state.completed += 1
                    if state.completed == state.total {
                        done.signal()
                    } else {
                        issue(pool)
                    }
                }
            }
        }
        done.wait()
        let seconds = Date().timeIntervalSince(started)
        pools.forEach { $0.shutdown() }
        // The semaphore orders the loop's last writes before these reads.
        let summary = state.summary(seconds: seconds)
        loop.shutdown()
        return summary
    }
}

/// The closed loop's counters: touched only on the bench's event loop.
final class BenchState: @unchecked Sendable {
    let total: Int
    var issued = 0
    var completed = 0
    var ok = 0
    var statuses: [Int: Int] = [:]
    var failures: [String: Int] = [:]

    init(total: Int) { self.total = total }

    func summary(seconds: Double) -> JSONValue {
        let errors = total - ok
        return JSONValue.object([
            "requests": .int(total), "ok": .int(ok), "errors": .int(errors),
            "seconds": .double((seconds * 1000).rounded() / 1000),
            "requests_per_second": .double((Double(total) / seconds).rounded()),
            "error_statuses": .object(Dictionary(uniqueKeysWithValues: statuses.map { (String($0.key), .int($0.value)) })),
            "transport_errors": .object(failures.mapValues { .int($0) }),
        ])
    }
}

import HeraldHTTP2
import Synchronization

/// The worker's `/healthz`, `/readyz` and `/metrics` endpoint: an ``HTTP1Server`` on an event
/// loop of its own (never a provider pool's, so a busy provider connection cannot starve a
/// probe), started and stopped with the worker.
final class HealthServer: Sendable {
    /// What the handler answers for a path.
    typealias Response = HTTP1Response

    /// The address this server listens on.
    let host: String
    private let requestedPort: Int
    private let handler: HTTP1Server.Handler
    private let limits: HealthServerLimits
    private let lifecycle = Mutex(Lifecycle.idle)

    private enum Lifecycle {
        case idle
        case running(HTTP1Server, port: Int)
        case stopped(port: Int)
    }

    /// Creates a server for `host`:`port` (`port` 0 = an ephemeral port, see ``port`` after
    /// ``start()``); `handler` answers every GET or HEAD with the path, query string removed,
    /// and is where 404 comes from.
    init(host: String = "0.0.0.0", port: Int, limits: HealthServerLimits = HealthServerLimits(),
         handler: @escaping @Sendable (_ path: String) async -> Response) {
        self.host = host
        self.requestedPort = port
        self.limits = limits
        self.handler = handler
    }

    deinit {
        stop()
    }

    /// The bound port after ``start()`` (the requested one before).
    var port: Int {
        lifecycle.withLock { state in
            switch state {
            case .idle: requestedPort
            case .running(_, let port), .stopped(let port): port
            }
        }
    }

    /// Binds, listens and starts serving on a loop of its own. Throws a ``HealthServerError``
    /// naming the address when it cannot bind (port in use, no permission, bad host), or when
    /// started twice.
    func start() throws(HealthServerError) {
        try lifecycle.withLock { (state: inout Lifecycle) throws(HealthServerError) in
            guard case .idle = state else {
                throw HealthServerError(.alreadyStarted, "the health server on \(host):\(requestedPort) was already started")
            }
            let loop: EventLoop
            do throws(HTTP2Error) {
                loop = try EventLoop(name: "herald-health")
            } catch {
                throw HealthServerError(.resources, "cannot start the health server's event loop: \(error.message)")
            }
            let server = HTTP1Server(loop: loop, limits: limits, handler: handler)
            do throws(HTTP2Error) {
                let port = try server.start(host: host, port: requestedPort)
                state = .running(server, port: port)
            } catch {
                loop.shutdown()
                throw HealthServerError(.cannotBind, error.message)
            }
        }
    }

    /// Closes the listener and every open connection, then the loop. Idempotent; a handler
    /// still running finds nobody to answer.
    func stop() {
        let server: HTTP1Server? = lifecycle.withLock { state in
            switch state {
            case .idle:
                state = .stopped(port: requestedPort)
                return nil
            case .running(let server, let port):
                state = .stopped(port: port)
                return server
            case .stopped:
                return nil
            }
        }
        guard let server else { return }
        server.stop()
        server.loop.shutdown()
    }
}

/// Limits and timeouts of a ``HealthServer``; tests shorten the timeouts.
typealias HealthServerLimits = HTTP1Server.Limits

/// Why a ``HealthServer`` could not start.
struct HealthServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    struct Code: Sendable, Hashable {
        private let value: Int
        /// Binding or listening failed (the message says why and where).
        static let cannotBind = Code(value: 1)
        /// ``HealthServer/start()`` was called twice, or after ``HealthServer/stop()``.
        static let alreadyStarted = Code(value: 2)
        /// The event loop could not be made (out of descriptors or threads).
        static let resources = Code(value: 3)
    }

    /// What went wrong.
    let code: Code
    /// A message for people, naming the address.
    let message: String
    /// Where the error was raised.
    let file: String
    /// The line where the error was raised.
    let line: Int

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    /// Starting again will not help without a change (another port, a free one, more descriptors).
    var isRetryable: Bool { false }
    /// The message.
    var description: String { message }
}

// `tokensignin serve`: wires the configuration, Google's key cache and the FastCGI server together.
import FastCGI
import IDToken
import Store

public enum Serve {
    /// Runs the responder until SIGTERM/SIGINT (graceful: in-flight requests finish). Throws at start-up
    /// for a setting that cannot work (naming it), or when the server fails.
    public static func run(_ configuration: Configuration, log: Log, clock: @escaping @Sendable () -> Int64) throws(SignInError) {
        let server: Server
        do {
            let listen = try Listen.parse(configuration.listen)
            server = try Server(listen: listen, lanes: lanes(configuration),
                                limits: Limits(maxBodyBytes: Configuration.maxBodyBytes,
                                               requestTimeout: .seconds(configuration.requestTimeout)))
            // Before any other thread exists, so every thread inherits the blocked signals.
            try server.stopOnTerminationSignals()
        } catch {
            throw SignInError(.invalidConfiguration, "TOKENSIGNIN_LISTEN: cannot listen on \(configuration.listen ?? "fd 0"): \(error.detail)")
        }

        let keys: KeyCache
        if let file = configuration.jwksFile {
            keys = KeyCache(source: .file(file))
            do {
                _ = try keys.currentKeys()
            } catch {
                throw SignInError(.invalidConfiguration, "TOKENSIGNIN_JWKS_FILE: cannot load a key set from \(file): \(error.code.name) \(error.detail)")
            }
        } else {
            keys = KeyCache(source: .url(configuration.jwksURL))
            keys.start()
        }

        // A database that is down at start-up is not fatal: requests get 503 until it is back.
        do {
            _ = try Connection(conninfo: configuration.conninfo).query("SELECT 1", [])
        } catch {
            log.warning("database_unavailable_at_start", ["code": error.code.name, "sqlstate": error.sqlState])
        }

        let service = Service(configuration: configuration, keys: keys, log: log, clock: clock)
        log.info("started", ["listen": server.address, "workers": String(configuration.workers),
                             "check_workers": String(configuration.checkWorkers),
                             "client_ids": configuration.clientIDs.joined(separator: ","),
                             "keys": configuration.jwksFile ?? configuration.jwksURL])
        do {
            try server.run(classify: lane(of:), overloaded: { _ in overloadedResponse },
                           report: { event in reportFastCGI(event, log: log) },
                           makeHandler: { worker in service.makeHandler(worker: worker) })
        } catch {
            throw SignInError(.serverFailed, "the FastCGI server failed: \(error.code.name) \(error.detail)")
        }
        log.info("stopped", [:])
    }

    /// The default lane (index 0) takes sign-ins and everything else; the checks lane (index 1) the requests
    /// a protected site or a monitor waits on, so a slow database under sign-ins never delays them.
    static func lanes(_ configuration: Configuration) -> [Lane] {
        [Lane(name: "default", workers: configuration.workers, queueLimit: 16 * configuration.workers, maxWait: .seconds(5)),
         Lane(name: "checks", workers: configuration.checkWorkers, queueLimit: 64 * configuration.checkWorkers, maxWait: .seconds(2))]
    }

    static let checkPaths: Set<String> = ["/auth/session", "/healthz", "/readyz", "/metrics"]

    /// The lane of a request: 1 (checks) for the paths in `checkPaths`, else 0.
    @Sendable static func lane(of request: Request) -> Int {
        checkPaths.contains(request.path) ? 1 : 0
    }

    /// What the FastCGI server answers itself when a lane's queue is full or a request waited too long.
    static let overloadedResponse: Response = {
        let reply = HTTPReply.temporarilyUnavailable(retryAfter: 1, "the service is busy, retry shortly")
        return Response(status: reply.status, headers: reply.headers.map { (name: $0.0, value: $0.1) }, body: reply.body)
    }()

    /// One log line per connection the FastCGI layer closed, overload answer or replaced response (no request data).
    static func reportFastCGI(_ event: FastCGIError, log: Log) {
        switch event.code {
        case .overloaded: log.warning("overloaded", ["detail": event.detail])
        case .invalidResponse: log.error("invalid_response", ["detail": event.detail])
        default: log.warning("fastcgi_connection_closed", ["reason": event.code.name, "detail": event.detail])
        }
    }
}

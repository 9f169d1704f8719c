// `tokensignin serve`: wires the configuration, Google's key cache and the FastCGI server together.
import FastCGI
import GoogleKeys
import IDToken
import Store

public enum Serve {
    /// Runs the responder until SIGTERM/SIGINT (graceful: in-flight requests finish). Throws at start-up
    /// for a setting that cannot work (naming it), or when the server fails.
    public static func run(_ configuration: Configuration, log: Log, clock: @escaping @Sendable () -> Int64,
                           metrics: Metrics = Metrics()) throws(SignInError) {
        let server: Server
        do {
            let listen = try Listen.parse(configuration.listen)
            server = try Server(listen: listen, workers: configuration.workers, maxBodyBytes: Configuration.maxBodyBytes)
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
            _ = try Connection(conninfo: configuration.conninfo, pooler: configuration.databasePooler).query("SELECT 1", [])
        } catch {
            // libpq's own words say what is wrong (a bad password, a misspelt database, an unknown parameter).
            log.warning("database_unavailable_at_start", ["code": error.code.name, "sqlstate": error.sqlState,
                                                          "detail": configuration.redacted(error.detail)])
        }

        log.info("started", ["version": Version.number, "build": Version.build,
                             "listen": server.address, "workers": String(configuration.workers),
                             "client_ids": configuration.clientIDs.joined(separator: ","),
                             "keys": configuration.jwksFile ?? configuration.jwksURL])
        do {
            let service = Service(configuration: configuration, tokens: keys, log: log, clock: clock, metrics: metrics)
            try server.run { _ in
                Application(service: service, store: PostgresStore(configuration, log: log, metrics: metrics))
            }
        } catch {
            throw SignInError(.serverFailed, "the FastCGI server failed: \(error.code.name) \(error.detail)")
        }
        log.info("stopped", [:])
    }
}

// One worker's application: a request matched to its route in the table, answered, logged and counted.
import FastCGI
import GoogleKeys
import IDToken
import Logging
import Sessions

/// What every worker shares: settings, the verifier, the log, the clock, the metrics. Immutable.
package struct Service: Sendable {
    package var site: Site
    package var tokens: any TokenVerifying
    /// Where `tokens` gets its keys (`/readyz` and `/metrics` show it).
    package var keySource: KeySource
    package var log: Log
    package var clock: @Sendable () -> Int64
    package var metrics: Metrics
    /// Gauges read when `/metrics` is scraped (the FastCGI server's workers).
    package var samples: @Sendable () -> [Metrics.Sample]
    /// Which refused sign-ins reach the audit.
    package var refusalAudit: RefusalAudit
    /// The sessions checks are answered from, when the cache is on.
    package var sessionCache: SessionCache?
    /// When the responder started and how many `/readyz` answers were not ready (one per process).
    package var readiness = Readiness()

    package init(site: Site, tokens: any TokenVerifying, keySource: KeySource = .google, log: Log, clock: @escaping @Sendable () -> Int64,
                 metrics: Metrics, samples: @escaping @Sendable () -> [Metrics.Sample] = { [] },
                 refusalAudit: RefusalAudit = RefusalAudit(), sessionCache: SessionCache? = nil) {
        self.site = site
        self.tokens = tokens
        self.keySource = keySource
        self.log = log
        self.clock = clock
        self.metrics = metrics
        self.samples = samples
        self.refusalAudit = refusalAudit
        self.sessionCache = sessionCache
    }
}

/// One worker's application: the routes of docs/http.md (`Routes.table`) over this worker's store. Not shared between
/// threads.
package final class Application: Handler {
    let site: Site
    let service: Service
    let tokens: any TokenVerifying
    let verifier: Verifier
    let eventVerifier: SecurityEventVerifier
    /// Every call that reaches the database timed into `metrics` (`TimedStore`); checks answered from the session
    /// cache when it is on (`CachedSessionStore`).
    let store: any SessionStore & SecurityEventStore
    let log: Log
    let clock: @Sendable () -> Int64
    let metrics: Metrics
    let originCheck: OriginCheck

    package init(service: Service, store: any SessionStore & SecurityEventStore) {
        self.service = service
        self.site = service.site
        self.tokens = service.tokens
        self.verifier = Verifier(policy: service.site.policy)
        self.eventVerifier = SecurityEventVerifier(policy: service.site.securityEventPolicy)
        let timed = TimedStore(store, metrics: service.metrics)
        self.store = service.sessionCache.map { CachedSessionStore(timed, cache: $0, clock: service.clock) } ?? timed
        self.log = service.log
        self.clock = service.clock
        self.metrics = service.metrics
        self.originCheck = service.site.originCheck
    }

    /// Answers one request; every failure goes through `Failure` and every request through `LogLine`.
    package func handle(_ request: Request) -> Response {
        let (response, line) = answer(request, Routes.matching(request), prior: nil, since: ContinuousClock.now)
        if let line { log.write(lines: [line]) }
        return response
    }

    /// The response and the log line (nil: not logged) of one request. `match`: its route (`Routes.match`);
    /// `prior`: what `handle(batch:)` already did for it; `started`: when its handling began.
    func answer(_ request: Request, _ match: Result<MatchedRoute, SignInError>, prior: Prior?,
                since started: ContinuousClock.Instant) -> (Response, String?) {
        var line = LogLine()
        var route: Route?
        let response: Response
        do {
            let matched = try match.get()
            route = matched.route
            response = try matched.route.handler(self, request, matched.parameter, &line, prior)
        } catch {
            let failure = route?.answersAsReceiver == true ? Failure(securityEvent: error) : Failure(error)
            line.failure = failure
            response = failure.response
        }
        let id = Self.requestID(request)
        let logged = line.text(route: route, request: request, requestID: id, status: response.status, since: started)
        metrics.request(route: route?.name ?? "none", status: response.status, reason: line.failure?.reason,
                        seconds: Metrics.seconds(since: started))
        guard let id else { return (response, logged) }
        var answered = response
        answered.headers.append(("X-Request-Id", id))
        return (answered, logged)
    }

    /// nginx's `$request_id` (the `REQUEST_ID` parameter the shipped snippets pass): 32 hex digits; anything
    /// that is not 1...64 letters, digits, `-`, `_` or `.` is ignored.
    static func requestID(_ request: Request) -> String? {
        guard let id = request.params["REQUEST_ID"], (1...64).contains(id.utf8.count),
              id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) || $0 == 0x2d || $0 == 0x5f || $0 == 0x2e })
        else { return nil }
        return id
    }
}

// What `GET /metrics` exposes, in Prometheus' text format: counters and histograms the workers update, and
// gauges read when scraped (the key set, the server's workers).
import Synchronization

/// The process's metrics, shared by every worker. Updates take one short uncontended lock.
public final class Metrics: Sendable {
    /// Upper bounds (seconds) of the latency histograms' buckets.
    static let buckets: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    struct Histogram: Sendable {
        var counts = [Int](repeating: 0, count: Metrics.buckets.count)
        var sum: Double = 0
        var count = 0

        mutating func observe(_ seconds: Double) {
            if let bucket = Metrics.buckets.firstIndex(where: { seconds <= $0 }) { counts[bucket] += 1 }
            sum += seconds
            count += 1
        }
    }

    private struct State: Sendable {
        var requests: [RequestKey: Int] = [:]
        var refusals: [String: Int] = [:]
        /// Refused sign-ins not written to the audit (`RefusalAudit`), by reason.
        var auditsSuppressed: [String: Int] = [:]
        var verification = Histogram()
        /// The responder's handling time of each answered request, by route (what the log's `duration_us` says).
        var durations: [String: Histogram] = [:]
        var database: [String: Histogram] = [:]
        var reconnects = 0
        /// Round trips that carried several calls (`liveSessions`), and the calls they carried, by operation.
        var batches: [String: Int] = [:]
        var batchedCalls: [String: Int] = [:]
        var securityEvents: [SecurityEventKey: Int] = [:]
    }

    private struct RequestKey: Hashable, Sendable {
        var route: String
        var status: Int
    }

    private struct SecurityEventKey: Hashable, Sendable {
        var type: String
        var outcome: String
    }

    private let state = Mutex(State())

    public init() {}

    /// One answered request, handled in `seconds`; `reason` is the refusal's or fault's reason code, if it failed.
    func request(route: String, status: Int, reason: String?, seconds: Double) {
        state.withLock { state in
            state.requests[RequestKey(route: route, status: status), default: 0] += 1
            if let reason { state.refusals[reason, default: 0] += 1 }
            state.durations[route, default: Histogram()].observe(seconds)
        }
    }

    func auditSuppressed(reason: String) { state.withLock { $0.auditsSuppressed[reason, default: 0] += 1 } }

    func verification(seconds: Double) { state.withLock { $0.verification.observe(seconds) } }

    func database(operation: String, seconds: Double) {
        state.withLock { $0.database[operation, default: Histogram()].observe(seconds) }
    }

    /// `statements` calls of `operation` that went to the database together, in one round trip of `seconds`.
    func databaseBatch(operation: String, statements: Int, seconds: Double) {
        state.withLock { state in
            state.batches[operation, default: 0] += 1
            state.batchedCalls[operation, default: 0] += statements
            for _ in 0..<statements { state.database[operation, default: Histogram()].observe(seconds) }
        }
    }

    /// Seconds since `started`, as the histograms take them.
    static func seconds(since started: ContinuousClock.Instant) -> Double {
        let elapsed = (ContinuousClock.now - started).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }

    package func reconnect() { state.withLock { $0.reconnects += 1 } }

    func securityEvent(type: String, outcome: String) {
        state.withLock { $0.securityEvents[SecurityEventKey(type: type, outcome: outcome), default: 0] += 1 }
    }

    /// A gauge or counter read at scrape time.
    public struct Sample: Sendable {
        public var name: String
        public var help: String
        public var type: String
        public var labels: [(String, String)]
        public var value: Double

        public init(name: String, help: String, type: String = "gauge", labels: [(String, String)] = [], value: Double) {
            self.name = name
            self.help = help
            self.type = type
            self.labels = labels
            self.value = value
        }
    }

    /// The text exposition (version 0.0.4), with `samples` read by the caller at scrape time.
    func exposition(_ samples: [Sample]) -> String {
        let state = self.state.withLock { $0 }
        var out = Exposition()
        out.family("tokensignin_requests_total", "Requests answered, by route and HTTP status.", "counter",
                   state.requests.sorted { ($0.key.route, $0.key.status) < ($1.key.route, $1.key.status) }.map {
                       ([("route", $0.key.route), ("status", String($0.key.status))], Double($0.value))
                   })
        out.family("tokensignin_refusals_total", "Requests refused or failed, by reason (the log's reason codes).", "counter",
                   state.refusals.sorted { $0.key < $1.key }.map { ([("reason", $0.key)], Double($0.value)) })
        out.family("tokensignin_sign_in_audits_suppressed_total",
                   "Refused sign-ins not written to signin.sign_ins because their network and reason, or all of them, were over the audit's rate, by reason.",
                   "counter", state.auditsSuppressed.sorted { $0.key < $1.key }.map { ([("reason", $0.key)], Double($0.value)) })
        out.histogram("tokensignin_request_duration_seconds",
                      "Time the responder took to answer a request, from its handling's start to the answer (the log's duration_us), by route.",
                      state.durations.sorted { $0.key < $1.key }.map { ([("route", $0.key)], $0.value) })
        out.histogram("tokensignin_verification_seconds", "Time to verify an ID token (keys at hand).", [([], state.verification)])
        out.histogram("tokensignin_database_seconds", "Time of one database call, by operation.",
                      state.database.sorted { $0.key < $1.key }.map { ([("operation", $0.key)], $0.value) })
        out.family("tokensignin_database_batches_total", "Round trips that carried several calls at once, by operation.",
                   "counter", state.batches.sorted { $0.key < $1.key }.map { ([("operation", $0.key)], Double($0.value)) })
        out.family("tokensignin_database_batched_calls_total",
                   "Calls made in those round trips (also counted in tokensignin_database_seconds), by operation.",
                   "counter", state.batchedCalls.sorted { $0.key < $1.key }.map { ([("operation", $0.key)], Double($0.value)) })
        out.family("tokensignin_database_reconnects_total", "Database connections let go to be re-established: lost, or found read-only.", "counter",
                   [([], Double(state.reconnects))])
        out.family("tokensignin_security_events_total", "Cross-Account Protection events received, by type and outcome.", "counter",
                   state.securityEvents.sorted { ($0.key.type, $0.key.outcome) < ($1.key.type, $1.key.outcome) }.map {
                       ([("type", $0.key.type), ("outcome", $0.key.outcome)], Double($0.value))
                   })
        var byName: [String: [Sample]] = [:]
        var order: [String] = []
        for sample in samples {
            if byName[sample.name] == nil { order.append(sample.name) }
            byName[sample.name, default: []].append(sample)
        }
        for name in order {
            let group = byName[name]!
            out.family(name, group[0].help, group[0].type, group.map { ($0.labels, $0.value) })
        }
        return out.text
    }
}

/// Prometheus text format: `# HELP`, `# TYPE`, then `name{label="value"} number` lines.
private struct Exposition {
    var text = ""

    mutating func family(_ name: String, _ help: String, _ type: String, _ samples: [([(String, String)], Double)]) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        for (labels, value) in samples { line(name, labels, value) }
    }

    mutating func histogram(_ name: String, _ help: String, _ series: [([(String, String)], Metrics.Histogram)]) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        for (labels, histogram) in series {
            var cumulative = 0
            for (bound, count) in zip(Metrics.buckets, histogram.counts) {
                cumulative += count
                line(name + "_bucket", labels + [("le", Self.number(bound))], Double(cumulative))
            }
            line(name + "_bucket", labels + [("le", "+Inf")], Double(histogram.count))
            line(name + "_sum", labels, histogram.sum)
            line(name + "_count", labels, Double(histogram.count))
        }
    }

    private mutating func line(_ name: String, _ labels: [(String, String)], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.0)=\"\(Self.escaped($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " " + Self.number(value) + "\n"
    }

    /// Label values escape backslash, double quote and newline.
    static func escaped(_ value: String) -> String {
        var out = ""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}

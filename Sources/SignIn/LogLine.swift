// One request's log line: what every route writes about a request, and what it leaves out.
import FastCGI
import Logging

/// One request's log line: route, status, duration, request id, the failure's reason, and the fields a route adds.
struct LogLine {
    var failure: Failure?
    private var fields: [(String, String)] = []

    subscript(name: String) -> String? {
        get { fields.first { $0.0 == name }?.1 }
        set {
            guard let newValue else { return }
            if fields.isEmpty { fields.reserveCapacity(4) }  // a sign-in adds four
            fields.append((name, newValue))
        }
    }

    /// The request's line for `Log.write(lines:)`; nil for successful session checks and operators' probes,
    /// which are not logged (nginx's access log has them; every page view makes a check, and monitoring
    /// scrapes every few seconds).
    func text(route: Route?, request: Request, requestID: String?, status: Int, since started: ContinuousClock.Instant) -> String? {
        if route?.quietOnSuccess == true && failure == nil { return nil }
        let elapsed = ContinuousClock.now - started
        let micros = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        var line = Log.LineBuilder(level: failure?.isServerFault == true ? "error" : "info", event: "request")
        line.field("route", route?.name ?? "none")
        line.field("method", request.method)
        line.field("status", String(status))
        line.field("duration_us", String(micros))
        line.field("request_id", requestID)
        line.field("reason", failure?.reason)
        line.field("sqlstate", failure?.sqlState)
        line.field("ip", request.remoteAddress)
        for (name, value) in fields { line.field(name, value) }
        return line.text()
    }
}

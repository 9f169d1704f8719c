// The operators' endpoints through nginx: /healthz, /readyz, /metrics (checked by Prometheus' own parser), and
// nginx keeping them to this host.
import Foundation
import Testing
import TestSupport

@Suite(.serialized) final class OperatorEndToEndTests {
    let stack: Stack
    init() throws { stack = try SharedStacks.stack("operator") }

    @Test func healthAndReadinessAnswerJSON() throws {
        let health = try stack.request("GET", "/healthz")
        #expect(health.status == 200 && health.json["status"] as? String == "ok", "\(health)")
        let ready = try stack.request("GET", "/readyz")
        #expect(ready.status == 200 && ready.json["status"] as? String == "ready", "\(ready)")
    }

    @Test func metricsAreValidPrometheusTextAndCountWhatHappened() throws {
        let answer = try stack.signIn(try stack.token(sub: "190000000000000000001"))
        #expect(answer.status == 200, "\(answer)")
        #expect(try stack.request("DELETE", "/sessions/abc").status == 404)  // reaches the responder, which knows no such path
        let page = try stack.request("GET", "/metrics")
        #expect(page.status == 200, "\(page)")
        #expect(page.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)

        // Prometheus' reference parser (prometheus_client, installed by `make deps` into .build/venv).
        let python = Paths.repository.appendingPathComponent(".build/venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("\(python) is missing: run `make deps`")
            return
        }
        let script = """
            import sys
            from prometheus_client.parser import text_string_to_metric_families
            for family in text_string_to_metric_families(sys.stdin.read()):
                for sample in family.samples:
                    labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                    print(f"{family.type}\\t{sample.name}\\t{labels}\\t{sample.value}")
            """
        let parsed = try run(python, ["-c", script], stdin: page.body)
        #expect(parsed.status == 0, "the exposition does not parse: \(parsed.stderr)")
        let samples = parsed.stdout.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        func value(_ name: String, _ labels: String = "") -> Double? {
            samples.first { $0.count == 4 && $0[1] == name && $0[2] == labels }.flatMap { Double($0[3]) }
        }
        #expect((value("tokensignin_requests_total", "route=sign_in,status=200") ?? 0) >= 1)
        #expect((value("tokensignin_requests_total", "route=none,status=404") ?? 0) >= 1)
        #expect((value("tokensignin_refusals_total", "reason=not_found") ?? 0) >= 1)
        #expect((value("tokensignin_verification_seconds_count") ?? 0) >= 1)
        #expect((value("tokensignin_database_seconds_count", "operation=sign_in") ?? 0) >= 1)
        #expect(value("tokensignin_keys_loaded") == 1)
        #expect(samples.contains { $0.first == "histogram" && $0[1] == "tokensignin_verification_seconds_bucket" })
    }

    /// nginx answers the operators' endpoints only for this host: a request from another address (127.0.0.2 is
    /// loopback too, but not an allowed address) gets 403 and never reaches the responder.
    @Test func operatorsEndpointsAreForThisHostOnly() throws {
        for path in ["/healthz", "/readyz", "/metrics"] {
            let result = try run("/usr/bin/curl", ["-sk", "--interface", "127.0.0.2", "-w", "\n%{http_code}",
                                                   "--max-time", "10", "https://127.0.0.1:\(stack.port)\(path)"])
            #expect(result.stdout.hasSuffix("\n403"), "\(path) from 127.0.0.2: \(result.stdout) \(result.stderr)")
            #expect(result.stdout.hasPrefix(#"{"error":"access_denied""#), "JSON, not nginx's HTML: \(result.stdout)")
        }
    }
}

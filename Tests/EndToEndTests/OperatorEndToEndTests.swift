// The operators' endpoints through nginx's loopback-only listener (tokensignin-metrics.conf): /healthz, /readyz,
// /metrics (checked by Prometheus' own parser), nothing else there, and none of them on the public site.
import Foundation
import Testing
import TestSupport

@Suite(.serialized) final class OperatorEndToEndTests {
    let stack: Stack
    init() throws { stack = try SharedStacks.stack("operator") }

    @Test func healthAndReadinessAnswerJSON() throws {
        let health = try stack.operatorsRequest("GET", "/healthz")
        #expect(health.status == 200 && health.json["status"] as? String == "ok", "\(health)")
        let ready = try stack.operatorsRequest("GET", "/readyz")
        #expect(ready.status == 200 && ready.json["status"] as? String == "ready", "\(ready)")
    }

    @Test func metricsAreValidPrometheusTextAndCountWhatHappened() throws {
        let answer = try stack.signIn(try stack.token(sub: "190000000000000000001"))
        #expect(answer.status == 200, "\(answer)")
        #expect(try stack.request("DELETE", "/sessions/abc").status == 404)  // reaches the responder, which knows no such path
        let page = try stack.operatorsRequest("GET", "/metrics")
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

    /// The public site does not serve them, not even to 127.0.0.1: a local tunnel or proxy in front of nginx makes
    /// every client 127.0.0.1, so an address check there would let everyone in. nginx answers 404 itself; the
    /// responder never sees the request (its own counts of the three routes do not move).
    @Test func thePublicSiteDoesNotServeTheOperatorsEndpoints() throws {
        func answered() throws -> [Double] {
            let page = try stack.operatorsRequest("GET", "/metrics").body.split(separator: "\n")
            return ["healthz", "readyz", "metrics"].map { route in
                page.first { $0.hasPrefix(#"tokensignin_requests_total{route="\#(route)",status="200"} "#) }
                    .flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
            }
        }
        _ = try stack.operatorsRequest("GET", "/healthz")
        _ = try stack.operatorsRequest("GET", "/readyz")
        let before = try answered()
        for path in ["/healthz", "/readyz", "/metrics"] {
            let answer = try stack.request("GET", path)
            #expect(answer.status == 404, "\(path) on the public site: \(answer)")
            #expect(!answer.body.contains("tokensignin_"), "\(path) on the public site: \(answer)")
        }
        let after = try answered()
        #expect(after == [before[0], before[1], before[2] + 1], "only the listener's own /metrics read reached the responder: \(before) -> \(after)")
    }

    /// The listener answers those three and nothing else: not the sign-in, not the session check, not the
    /// internal location of auth_request. nginx answers 404 in the responder's JSON shape.
    @Test(arguments: [("GET", "/"), ("POST", "/tokensignin"), ("GET", "/auth/session"), ("GET", "/_tokensignin/auth"),
                      ("GET", "/sessions"), ("POST", "/risc"), ("GET", "/healthz/x"), ("GET", "/metricsz")])
    func theOperatorsListenerServesNothingElse(method: String, path: String) throws {
        let answer = try stack.operatorsRequest(method, path)
        #expect(answer.status == 404 && answer.errorCode == "not_found", "\(method) \(path): \(answer)")
        #expect(answer.header("Content-Type") == "application/json" && answer.header("Cache-Control") == "no-store", "\(answer)")
    }

    /// The listener is on loopback only: in the shipped file (one `listen`, where the port is written once),
    /// included at http level by the example site; and in the configuration the stack's nginx runs, where it is
    /// the only server with the three endpoints.
    @Test func theOperatorsListenerIsOnLoopbackOnly() throws {
        let nginx = Paths.repository.appendingPathComponent("nginx")
        let shipped = try NginxConfiguration.parse(String(contentsOf: nginx.appendingPathComponent("tokensignin-metrics.conf"), encoding: .utf8))
        #expect(shipped.map(\.name) == ["server"])
        #expect(shipped.first?.all("listen").map(\.arguments) == [["127.0.0.1:9464"]])
        let site = try NginxConfiguration.parse(String(contentsOf: nginx.appendingPathComponent("tokensignin-site.conf"), encoding: .utf8))
        #expect(site.contains { $0.name == "include" && $0.firstArgument == "/etc/nginx/tokensignin/tokensignin-metrics.conf" })

        let directory = stack.directory.appendingPathComponent("nginx").path
        let running = try NginxConfiguration(nginxT: directory + "/nginx.conf", prefix: directory)
        let operators = running.servers.filter { server in
            server.all("location").contains { $0.arguments.joined(separator: " ").contains("healthz") }
        }
        #expect(operators.count == 1, "one server has the operators' endpoints: \(operators.count)")
        #expect(operators.first?.all("listen").map(\.arguments) == [["127.0.0.1:\(stack.operatorsPort)"]])
    }
}

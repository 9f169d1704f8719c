// /metrics as Prometheus sees it: promtool lints a real page, and Debian's Prometheus, configured by the shipped
// example, scrapes a responder through nginx's operators' listener, records the rules' series and fires the one
// alert this stack deserves.
import Foundation
import Testing
import TestSupport

@Suite(.serialized) final class PrometheusEndToEndTests {
    let stack: Stack
    init() throws { stack = try SharedStacks.stack("prometheus") }

    /// A page with every kind of series in it: a sign-in, a check of its session, a refused token, a readiness probe.
    private func exercise() throws {
        let answer = try stack.signIn(try stack.token(sub: "191000000000000000001"))
        try #require(answer.status == 200, "\(answer)")
        let session = try #require((answer.json["session"] as? [String: Any])?["token"] as? String)
        #expect(try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"]).status == 200)
        #expect(try stack.signIn(try stack.token(sub: "191000000000000000002", aud: stack.otherClientID + "x")).status == 401)
        #expect(try stack.operatorsRequest("GET", "/readyz").status == 200)
    }

    /// promtool's lint (names, units, help texts, counters' `_total`) finds nothing on a real page; its families are
    /// the ones docs/operations.md lists, with the same types (only the RISC configuration's, off in tests, absent).
    @Test func promtoolFindsNothingToLintOnALiveMetricsPage() throws {
        try exercise()
        let page = try stack.operatorsRequest("GET", "/metrics")
        try #require(page.status == 200, "\(page)")
        let lint = try Promtool.run(["check", "metrics"], stdin: page.body)
        #expect(lint.status == 0 && lint.stdout.isEmpty && lint.stderr.isEmpty, "promtool check metrics:\n\(lint.stdout)\(lint.stderr)")

        var onPage: [String: String] = [:]
        for line in page.body.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            onPage[String(parts[2])] = String(parts[3])
        }
        #expect(onPage["tokensignin_verification_seconds"] == "histogram" && onPage["tokensignin_database_seconds"] == "histogram")
        let documented = try DocumentedMetrics.table()
        for (name, type) in onPage.sorted(by: { $0.key < $1.key }) {
            #expect(documented[name] == type, "\(name) (\(type)) is not in docs/operations.md's table as a \(type)")
        }
        let notOnPage = Set(documented.keys).subtracting(onPage.keys)
        #expect(notOnPage.allSatisfy { $0.hasPrefix("tokensignin_risc_configuration_") }, "documented but not exposed: \(notOnPage.sorted())")
    }

    /// The shipped example configuration, pointed at this stack's operators' listener (port, rules' path and
    /// intervals changed, nothing else): the target is up, the request counters move with the requests made, the
    /// rules evaluate without error and record their series, the dashboard's queries run, and the only alert is
    /// TokensigninNonGoogleKeys (the stack trusts a key file).
    @Test func prometheusScrapesTheResponderThroughTheOperatorsListener() throws {
        let started = Date()
        var configuration = try String(contentsOfFile: MonitoringFiles.exampleConfiguration, encoding: .utf8)
        for (shipped, test) in [(#"targets: ["127.0.0.1:9464"]"#, #"targets: ["127.0.0.1:\#(stack.operatorsPort)"]"#),
                                ("scrape_interval: 15s", "scrape_interval: 1s"),
                                ("- /etc/prometheus/tokensignin.rules.yml", "- \(MonitoringFiles.rules)")] {
            try #require(configuration.components(separatedBy: shipped).count == 2, "the example has one `\(shipped)`")
            configuration = configuration.replacingOccurrences(of: shipped, with: test)
        }
        configuration = "global:\n  evaluation_interval: 1s\n" + configuration
        let prometheus = try TestPrometheus(configuration: configuration, directory: stack.directory.appendingPathComponent("prometheus"))
        defer { prometheus.stop() }

        func target() throws -> [String: Any]? {
            let targets = (try prometheus.api("targets") as? [String: Any])?["activeTargets"] as? [[String: Any]] ?? []
            return targets.first { ($0["labels"] as? [String: String])?["job"] == "tokensignin" }
        }
        // Prometheus hands new targets to its scrapers every 5 s.
        let up = try waitUntil(seconds: 30, every: 0.2) { try target()?["health"] as? String == "up" }
        #expect(up, "target: \(String(describing: try? target())) \(prometheus.log)")
        #expect(try target()?["scrapeUrl"] as? String == "http://127.0.0.1:\(stack.operatorsPort)/metrics")

        let signIns = #"sum(tokensignin_requests_total{job="tokensignin",route="sign_in",status="200"})"#
        let before = try prometheus.query(signIns).first?.value ?? 0
        for index in 0..<3 {
            #expect(try stack.signIn(try stack.token(sub: "19200000000000000000\(index)")).status == 200)
        }
        let moved = try waitUntil(seconds: 20, every: 0.2) { (try prometheus.query(signIns).first?.value ?? 0) >= before + 3 }
        #expect(moved, "\(signIns): \(String(describing: try? prometheus.query(signIns))), before \(before)")
        let recorded = try waitUntil(seconds: 20, every: 0.2) {
            !(try prometheus.query(#"instance_route:tokensignin_requests:rate5m{route="sign_in"} > 0"#)).isEmpty
        }
        #expect(recorded, "the recording rules made no request rate")

        // Once Prometheus has scraped and evaluated, the one alert is the key file's (TokensigninDown is pending
        // only until the first scrape: `absent(up)`).
        func active() throws -> [String] {
            try prometheus.query("ALERTS").map { "\($0.labels["alertname"] ?? "") \($0.labels["alertstate"] ?? "")" }.sorted()
        }
        let onlyNonGoogleKeys = try waitUntil(seconds: 20, every: 0.2) { try active() == ["TokensigninNonGoogleKeys firing"] }
        #expect(onlyNonGoogleKeys, "alerts: \(String(describing: try? active()))")
        let firing = try #require(try prometheus.query(#"ALERTS{alertname="TokensigninNonGoogleKeys"}"#).first)
        #expect(firing.labels["kind"] == "file" && firing.labels["severity"] == "critical", "\(firing.labels)")

        let groups = (try prometheus.api("rules") as? [String: Any])?["groups"] as? [[String: Any]] ?? []
        let rules = groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
        #expect(rules.count == (try RuleFile.shipped().rules.count))
        for rule in rules {
            #expect(rule["health"] as? String == "ok", "\(rule["name"] ?? ""): \(rule["lastError"] ?? "")")
        }

        for query in try DashboardQueries.load().queries {
            #expect(throws: Never.self, "\(query.title)") { _ = try prometheus.query(try DashboardQueries.substituted(query.expr, interval: "1m")) }
        }
        #expect(Date().timeIntervalSince(started) < 60)
    }
}

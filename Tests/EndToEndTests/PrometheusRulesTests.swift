// The shipped Prometheus rules and Grafana dashboard, without a stack: promtool checks and unit-tests the rules,
// every alert says what to check first and has its runbook, every query parses and selects series that exist.
import Foundation
import Testing

@Suite struct PrometheusRulesTests {
    @Test func promtoolAcceptsTheRules() throws {
        let result = try Promtool.run(["check", "rules", MonitoringFiles.rules])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("SUCCESS"), "\(result.stdout)")
        #expect(!(result.stdout + result.stderr).lowercased().contains("warning"), "\(result.stdout)\(result.stderr)")
    }

    @Test func theRulesPassTheirUnitTests() throws {
        let result = try Promtool.run(["test", "rules", MonitoringFiles.ruleTests])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
    }

    /// Each alert: a severity, a summary, a description that says what to check first, a `for:` unless it fires on
    /// an event, and a runbook_url pointing at its own section of docs/operations.md, which exists (and no section
    /// there outlives its alert).
    @Test func everyAlertSaysWhatToCheckFirstAndHasItsRunbook() throws {
        let alerts = try RuleFile.shipped().alerts
        #expect(alerts.count >= 11)
        let operations = try String(contentsOfFile: MonitoringFiles.operations, encoding: .utf8)
        let runbookHeadings = Set(operations.split(separator: "\n").filter { $0.hasPrefix("#### Tokensignin") }.map { String($0.dropFirst(5)) })
        for alert in alerts {
            let name = alert.alert ?? ""
            #expect(name.hasPrefix("Tokensignin"), "\(name)")
            #expect(["critical", "warning"].contains(alert.labels?["severity"]), "\(name): severity")
            #expect(alert.annotations?["summary"]?.isEmpty == false, "\(name): summary")
            #expect(alert.annotations?["description"]?.contains("Check first") == true, "\(name): the description says what to check first")
            #expect(alert.annotations?["runbook_url"] == "docs/operations.md#\(name.lowercased())", "\(name): runbook_url")
            #expect(runbookHeadings.contains(name), "\(name): no `#### \(name)` runbook section in docs/operations.md")
        }
        #expect(runbookHeadings == Set(alerts.compactMap(\.alert)), "runbook sections without an alert")
    }

    /// For every alert, `promtool test rules` has a case where it fires and one where it does not.
    @Test func everyAlertHasAFiringAndAQuietCase() throws {
        let alerts = Set(try RuleFile.shipped().alerts.compactMap(\.alert))
        let tests = try decodeYAML(RuleTestFile.self, at: MonitoringFiles.ruleTests)
        #expect(tests.rule_files == ["tokensignin.rules.yml"])
        let cases = tests.tests.flatMap { $0.alert_rule_test ?? [] }
        for alert in alerts.sorted() {
            #expect(cases.contains { $0.alertname == alert && !($0.exp_alerts ?? []).isEmpty }, "\(alert): no case where it fires")
            #expect(cases.contains { $0.alertname == alert && ($0.exp_alerts ?? []).isEmpty }, "\(alert): no case where it does not fire")
        }
        #expect(Set(cases.map(\.alertname)).isSubset(of: alerts), "tests of alerts that do not exist")
    }

    /// A misspelt metric in a rule would make it silently never fire: every series a rule selects is one the
    /// responder exposes (the table of docs/operations.md, which PrometheusEndToEndTests holds to the live page) or
    /// one the rules record; the unit tests feed only series the responder exposes.
    @Test func theRulesSelectOnlySeriesThatExist() throws {
        let rules = try RuleFile.shipped()
        let known = try DocumentedMetrics.selectable().union(rules.recordedNames)
        for rule in rules.rules {
            let unknown = PromQL.metricNames(in: rule.expr).subtracting(known)
            #expect(unknown.isEmpty, "\(rule.record ?? rule.alert ?? ""): \(unknown.sorted())")
        }
        for record in rules.recordedNames {
            #expect(record.split(separator: ":").count == 3, "\(record): level:metric:operations")
        }
        let exposed = try DocumentedMetrics.selectable()
        let tests = try decodeYAML(RuleTestFile.self, at: MonitoringFiles.ruleTests)
        for series in tests.tests.flatMap(\.input_series) {
            let name = String(series.series.prefix { $0 != "{" })
            #expect(exposed.contains(name), "a test series the responder does not expose: \(series.series)")
        }
    }

    /// The dashboard imports anywhere (a `${DS_PROMETHEUS}` input), and each panel's query parses (promtool, as a
    /// recording rule) and selects only exposed or recorded series; it shows each thing the runbook talks about.
    @Test func everyDashboardQueryParsesAndSelectsSeriesThatExist() throws {
        let (dashboard, queries) = try DashboardQueries.load()
        let inputs = dashboard["__inputs"] as? [[String: Any]] ?? []
        #expect(inputs.contains { $0["name"] as? String == "DS_PROMETHEUS" && $0["pluginId"] as? String == "prometheus" })
        #expect((dashboard["schemaVersion"] as? Int ?? 0) >= 36, "a current Grafana's schema")
        #expect(dashboard["uid"] as? String == "tokensignin")
        let panels = (dashboard["panels"] as? [[String: Any]] ?? []).filter { $0["type"] as? String != "row" }
        #expect(Set(panels.compactMap { $0["id"] as? Int }).count == panels.count, "panel ids are unique")
        for panel in panels {
            let uid = (panel["datasource"] as? [String: Any])?["uid"] as? String
            #expect(uid == "${DS_PROMETHEUS}", "\(panel["title"] ?? ""): datasource \(uid ?? "none")")
        }

        // Each query as a JSON string, which YAML reads as a double-quoted scalar (without `\/`: Go's YAML knows no such escape).
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        var file = "groups:\n  - name: dashboard\n    rules:\n"
        for (index, query) in queries.enumerated() {
            let expr = String(decoding: try encoder.encode(try DashboardQueries.substituted(query.expr)), as: UTF8.self)
            file += "      - record: dashboard_query_\(index)\n        expr: \(expr)\n"
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("dashboard-queries-\(getpid()).yml").path
        try file.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let check = try Promtool.run(["check", "rules", path])
        #expect(check.status == 0, "a dashboard query does not parse: \(check.stdout)\(check.stderr)")
        #expect(check.stdout.contains("SUCCESS: \(queries.count) rules found"), "\(check.stdout)")

        let known = try DocumentedMetrics.selectable().union(try RuleFile.shipped().recordedNames)
        var used = Set<String>()
        for query in queries {
            let names = PromQL.metricNames(in: query.expr)
            #expect(!names.isEmpty && names.isSubset(of: known), "\(query.title): \(names.subtracting(known).sorted())")
            used.formUnion(names)
        }
        // Rates and errors, latency, refusals, RISC events, keys, lanes, the session cache.
        for name in ["instance_route:tokensignin_requests:rate5m", "instance_route_status:tokensignin_requests:rate5m",
                     "instance:tokensignin_verification_seconds:quantile5m", "instance_operation:tokensignin_database_seconds:quantile5m",
                     "instance_reason:tokensignin_refusals:rate5m", "instance_type_outcome:tokensignin_security_events:increase1h",
                     "tokensignin_key_set_age_seconds", "tokensignin_key_source", "tokensignin_busy_workers", "tokensignin_lane_capacity",
                     "tokensignin_queued_requests", "instance:tokensignin_session_cache_hits:ratio_rate5m", "tokensignin_session_cache_usable"] {
            #expect(used.contains(name), "no panel shows \(name)")
        }
    }

    @Test(arguments: [
        ("rate(tokensignin_requests_total[5m])", ["tokensignin_requests_total"]),
        (#"sum without (status) (rate(tokensignin_requests_total{status=~"5..",route!="a_b"}[5m])) or x:y:z * 0"#,
         ["tokensignin_requests_total", "x:y:z"]),
        (#"histogram_quantile(0.99, rate(tokensignin_database_seconds_bucket{le!="+Inf"}[1d])) > 0.25"#, ["tokensignin_database_seconds_bucket"]),
        ("a > 4 * b offset 1d and ignoring (quantile) c unless on (job, instance) group_left (lane) d", ["a", "b", "c", "d"]),
        (#"count(ALERTS{alertname=~"T.*"}) or vector(0)"#, ["ALERTS"]),
        (#"up{job="tokensignin"} == 0 or absent(up{job="tokensignin"})"#, ["up"]),
        ("sum by (operation) (rate(x_count[$__rate_interval])) / (sum by (operation) (rate(y_total[1m])) - 1e3)", ["x_count", "y_total"]),
    ])
    func metricNamesOfAnExpression(expression: String, names: [String]) {
        #expect(PromQL.metricNames(in: expression) == Set(names))
    }
}

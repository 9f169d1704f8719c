// What the monitoring tests read: the shipped rules, their unit tests, the Grafana dashboard, the metric table of
// docs/operations.md, promtool, and the metric names a PromQL expression selects.
import Foundation
import Testing

/// The shipped monitoring files (packaging/prometheus, packaging/grafana) and the page that documents them.
enum MonitoringFiles {
    static let rules = path("packaging/prometheus/tokensignin.rules.yml")
    static let ruleTests = path("packaging/prometheus/tokensignin.rules.test.yml")
    static let exampleConfiguration = path("packaging/prometheus/prometheus.example.yml")
    static let dashboard = path("packaging/grafana/tokensignin.json")
    static let operations = path("docs/operations.md")

    private static func path(_ relative: String) -> String { Paths.repository.appendingPathComponent(relative).path }
}

/// Debian's promtool (the `prometheus` package, `make deps`).
enum Promtool {
    static let path = "/usr/bin/promtool"

    static func run(_ arguments: [String], stdin: String? = nil) throws -> CommandResult {
        guard FileManager.default.isExecutableFile(atPath: path) else { throw StackError("\(path) is missing: run `make deps`") }
        return try EndToEndTests.run(path, arguments, stdin: stdin)
    }
}

/// A YAML file as its JSON twin, read by Debian's PyYAML (python3-yaml, `make deps`): Swift has no YAML parser.
func decodeYAML<T: Decodable>(_ type: T.Type, at path: String) throws -> T {
    let script = "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"
    let result = try run("/usr/bin/python3", ["-c", script], stdin: try String(contentsOfFile: path, encoding: .utf8))
    guard result.status == 0 else { throw StackError("cannot read \(path) as YAML (python3-yaml, `make deps`): \(result.stderr)") }
    return try JSONDecoder().decode(T.self, from: Data(result.stdout.utf8))
}

/// A Prometheus rule file (`groups:` of recording rules and alerts).
struct RuleFile: Decodable {
    struct Group: Decodable {
        var name: String
        var rules: [Rule]
    }

    struct Rule: Decodable {
        var record: String?
        var alert: String?
        var expr: String
        var duration: String?
        var labels: [String: String]?
        var annotations: [String: String]?

        enum CodingKeys: String, CodingKey {
            case record, alert, expr, labels, annotations
            case duration = "for"
        }
    }

    var groups: [Group]

    var rules: [Rule] { groups.flatMap(\.rules) }
    var alerts: [Rule] { rules.filter { $0.alert != nil } }
    var recordedNames: Set<String> { Set(rules.compactMap(\.record)) }

    static func shipped() throws -> RuleFile { try decodeYAML(RuleFile.self, at: MonitoringFiles.rules) }
}

/// A `promtool test rules` file: the parts the tests look at.
struct RuleTestFile: Decodable {
    struct Group: Decodable {
        struct Series: Decodable { var series: String }
        struct AlertTest: Decodable {
            struct Expected: Decodable { var exp_labels: [String: String]? }
            var alertname: String
            var eval_time: String
            var exp_alerts: [Expected]?
        }

        var input_series: [Series]
        var alert_rule_test: [AlertTest]?
    }

    var rule_files: [String]
    var tests: [Group]
}

/// The metrics docs/operations.md documents in its table ("Monitoring"): name and type. A histogram's series are
/// selected as `_bucket`, `_sum` and `_count`.
enum DocumentedMetrics {
    static func table() throws -> [String: String] {
        var metrics: [String: String] = [:]
        for line in try String(contentsOfFile: MonitoringFiles.operations, encoding: .utf8).split(separator: "\n")
        where line.hasPrefix("| `tokensignin_") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count > 3 else { continue }
            for name in backticked(cells[1]) {
                metrics[String(name.prefix { $0 != "{" })] = cells[2]
            }
        }
        return metrics
    }

    /// Every series name a query may select: the documented families, a histogram's three kinds of series, and
    /// Prometheus' own `up` and `ALERTS`.
    static func selectable() throws -> Set<String> {
        var names: Set<String> = ["up", "ALERTS"]
        for (name, type) in try table() {
            names.insert(name)
            if type == "histogram" { names.formUnion(["_bucket", "_sum", "_count"].map { name + $0 }) }
        }
        return names
    }

    private static func backticked(_ cell: String) -> [Substring] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
    }
}

/// The Grafana dashboard's queries: every `expr` of its panels, and the expression inside each `label_values(...)`
/// of its variables.
enum DashboardQueries {
    static func load() throws -> (dashboard: [String: Any], queries: [(title: String, expr: String)]) {
        let data = try Data(contentsOf: URL(fileURLWithPath: MonitoringFiles.dashboard))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var queries: [(String, String)] = []
        func walk(_ value: Any, title: String) {
            if let object = value as? [String: Any] {
                let title = object["title"] as? String ?? title
                if let expr = object["expr"] as? String { queries.append((title, expr)) }
                for (key, child) in object where key != "expr" { walk(child, title: title) }
            } else if let array = value as? [Any] {
                for child in array { walk(child, title: title) }
            }
        }
        walk(dashboard["panels"] ?? [], title: "")
        for variable in (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? [] {
            guard let query = variable["query"] as? String, query.hasPrefix("label_values("), let comma = query.lastIndex(of: ",") else { continue }
            queries.append(("variable " + (variable["name"] as? String ?? "?"), String(query[query.index(query.startIndex, offsetBy: 13)..<comma])))
        }
        return (dashboard, queries)
    }

    /// Grafana's variables replaced by what Prometheus can parse: its intervals by durations, `$instance` by a regex.
    static func substituted(_ expr: String, interval: String = "5m") throws -> String {
        var text = expr
        for (variable, value) in [("$__rate_interval", interval), ("$__interval", interval), ("$__range", "1h"), ("$instance", ".*")] {
            text = text.replacingOccurrences(of: variable, with: value)
        }
        guard !text.contains("$") else { throw StackError("a Grafana variable the tests do not know: \(expr)") }
        return text
    }
}

/// The metric names a PromQL expression selects: its identifiers that are not functions, aggregations, keywords,
/// label names (in `{...}`, `by (...)`, `on (...)`, ...), strings, numbers or durations. Enough for the expressions
/// of our rules and dashboard; Prometheus itself checks that they parse.
enum PromQL {
    private static let keywords: Set<String> = [
        "and", "or", "unless", "bool", "offset", "inf", "nan",
        "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
    ]
    /// Followed by a parenthesised list of label names.
    private static let labelLists: Set<String> = ["by", "without", "on", "ignoring", "group_left", "group_right"]

    static func metricNames(in expression: String) -> Set<String> {
        let text = Array(expression.unicodeScalars)
        var names = Set<String>()
        var index = 0
        func isIdentifierStart(_ c: Unicode.Scalar) -> Bool { c == "_" || c == ":" || (c.isASCII && c.properties.isAlphabetic) }
        func isIdentifier(_ c: Unicode.Scalar) -> Bool { isIdentifierStart(c) || ("0"..."9").contains(c) }
        func skipSpaces() { while index < text.count, text[index].properties.isWhitespace { index += 1 } }
        // Skips from an opening bracket to its closing one, strings inside included.
        func skipGroup(_ open: Unicode.Scalar, _ close: Unicode.Scalar) {
            var depth = 0
            while index < text.count {
                let c = text[index]
                if c == "\"" || c == "'" || c == "`" { skipString(); continue }
                if c == open { depth += 1 } else if c == close { depth -= 1; if depth == 0 { index += 1; return } }
                index += 1
            }
        }
        func skipString() {
            let quote = text[index]
            index += 1
            while index < text.count, text[index] != quote { index += text[index] == "\\" ? 2 : 1 }
            index += 1
        }
        while index < text.count {
            let c = text[index]
            if c == "\"" || c == "'" || c == "`" {
                skipString()
            } else if c == "{" {
                skipGroup("{", "}")
            } else if c == "[" {
                skipGroup("[", "]")
            } else if ("0"..."9").contains(c) || (c == "." && index + 1 < text.count && ("0"..."9").contains(text[index + 1])) {
                while index < text.count, isIdentifier(text[index]) || text[index] == "." { index += 1 }  // 0.5, 1e3, 5m
            } else if isIdentifierStart(c) {
                let start = index
                while index < text.count, isIdentifier(text[index]) { index += 1 }
                let word = String(String.UnicodeScalarView(text[start..<index]))
                skipSpaces()
                let opensParenthesis = index < text.count && text[index] == "("
                if labelLists.contains(word) {
                    if opensParenthesis { skipGroup("(", ")") }
                } else if !opensParenthesis && !keywords.contains(word.lowercased()) {
                    names.insert(word)
                }
            } else {
                index += 1
            }
        }
        return names
    }
}

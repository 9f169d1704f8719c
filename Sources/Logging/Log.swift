// Structured log lines (logfmt) for operators. Never given a token: callers pass codes and ids only.

/// Writes one `key=value` line per event to a sink the executable provides (stderr, with a timestamp).
public struct Log: Sendable {
    public typealias Sink = @Sendable (String) -> Void
    private let sink: Sink
    /// Several lines at once (a batch's request lines: one write to stderr); by default one `sink` call each.
    private let sinkLines: @Sendable ([String]) -> Void

    public init(sink: @escaping Sink, lines: (@Sendable ([String]) -> Void)? = nil) {
        self.sink = sink
        self.sinkLines = lines ?? { for line in $0 { sink(line) } }
    }

    /// Logs `event` with its fields; values with spaces, quotes or `=` are quoted.
    public func info(_ event: String, _ fields: KeyValuePairs<String, String?> = [:]) { write("info", event, fields) }
    public func warning(_ event: String, _ fields: KeyValuePairs<String, String?> = [:]) { write("warn", event, fields) }
    public func error(_ event: String, _ fields: KeyValuePairs<String, String?> = [:]) { write("error", event, fields) }

    /// The same with fields built at run time; a nil value is left out.
    public func info(_ event: String, _ fields: [(String, String?)]) { write("info", event, fields) }
    public func error(_ event: String, _ fields: [(String, String?)]) { write("error", event, fields) }

    private func write(_ level: String, _ event: String, _ fields: KeyValuePairs<String, String?>) {
        write(level, event, fields.map { ($0.key, $0.value) })
    }

    /// Writes lines made by `Log.line(_:_:_:)` together, in order.
    package func write(lines: [String]) {
        if !lines.isEmpty { sinkLines(lines) }
    }

    private func write(_ level: String, _ event: String, _ fields: [(String, String?)]) {
        sink(Self.line(level, event, fields))
    }

    /// The line `info` or `error` would write (`level` "info" or "error"), for `write(lines:)`.
    package static func line(_ level: String, _ event: String, _ fields: [(String, String?)]) -> String {
        var line = LineBuilder(level: level, event: event)
        for (key, value) in fields { line.field(key, value) }
        return line.text()
    }

    /// A line assembled as bytes and made a String once (appending to a String costs more per piece): `level=`
    /// and `event=`, then each field that has a value, in order.
    package struct LineBuilder {
        private var bytes: [UInt8] = []

        package init(level: String, event: String) {
            bytes.reserveCapacity(256)
            bytes.append(contentsOf: "level=".utf8)
            bytes.append(contentsOf: level.utf8)
            bytes.append(contentsOf: " event=".utf8)
            bytes.append(contentsOf: event.utf8)
        }

        package mutating func field(_ key: String, _ value: String?) {
            guard let value else { return }
            bytes.append(UInt8(ascii: " "))
            bytes.append(contentsOf: key.utf8)
            bytes.append(UInt8(ascii: "="))
            Log.appendQuoted(value, to: &bytes)
        }

        package consuming func text() -> String { String(decoding: bytes, as: UTF8.self) }
    }

    /// `value` as it is when it is plain printable ASCII without `"`, `=` or `\\`; otherwise in quotes, with
    /// quotes, backslashes and control characters escaped.
    package static func appendQuoted(_ value: String, to out: inout [UInt8]) {
        var value = value
        let plain = value.withUTF8 { bytes in
            !bytes.isEmpty && bytes.allSatisfy { $0 > 0x20 && $0 < 0x7f && $0 != 0x22 && $0 != 0x3d && $0 != 0x5c }
        }
        if plain {
            out.append(contentsOf: value.utf8)
            return
        }
        var quoted = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": quoted.append("\\\"")
            case "\\": quoted.append("\\\\")
            case "\n": quoted.append("\\n")
            case "\r": quoted.append("\\r")
            default:
                if scalar.value < 0x20 || scalar.value == 0x7f { quoted.append("\\u{\(String(scalar.value, radix: 16))}") } else { quoted.unicodeScalars.append(scalar) }
            }
        }
        quoted.append("\"")
        out.append(contentsOf: quoted.utf8)
    }
}

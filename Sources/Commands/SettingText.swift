// How a setting's text reads: durations, counts, lists, origins, client IDs, domains, redirects; each rule once.
import SignIn

/// The text rules of the settings table (`Setting.entry`) and of the commands' own options.
enum SettingText {
    /// The longest accepted duration: ten years, far beyond any sane session and far from overflow.
    static let maxDurationSeconds: Int64 = 10 * 365 * 86_400

    /// Only ASCII digits (no sign, no spaces), at most 18 of them so the value fits in Int64.
    static func decimal(_ text: some StringProtocol) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(text)
    }

    /// Parses a positive duration: plain seconds (`90`) or a number with a unit `s`, `m`, `h` or `d` (`90s`, `15m`,
    /// `12h`, `30d`). Returns seconds, or nil for zero, signs, spaces, other units, empty text, or anything above
    /// `maxDurationSeconds`.
    static func seconds(_ text: some StringProtocol) -> Int64? {
        var digits = Substring(text)
        var unit: Int64 = 1
        switch digits.last {
        case "s": unit = 1; digits = digits.dropLast()
        case "m": unit = 60; digits = digits.dropLast()
        case "h": unit = 3_600; digits = digits.dropLast()
        case "d": unit = 86_400; digits = digits.dropLast()
        default: break
        }
        guard let number = decimal(digits) else { return nil }
        let (seconds, overflow) = number.multipliedReportingOverflow(by: unit)
        guard !overflow, seconds > 0, seconds <= maxDurationSeconds else { return nil }
        return seconds
    }

    /// Whole milliseconds from `250ms`, `1s` or `0`, or nil.
    static func milliseconds(_ text: some StringProtocol) -> Int64? {
        var digits = Substring(text)
        var unit: Int64 = 1_000
        if digits.hasSuffix("ms") {
            unit = 1; digits = digits.dropLast(2)
        } else if digits.hasSuffix("s") {
            digits = digits.dropLast()
        } else if digits != "0" {
            return nil
        }
        guard digits.utf8.count <= 6, let number = decimal(digits) else { return nil }
        return number * unit
    }

    /// `true`/`false` (also `yes`/`no`, `1`/`0`), nil for anything else.
    static func boolean(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "yes", "1": true
        case "false", "no", "0": false
        default: nil
        }
    }

    /// A comma-separated list, items trimmed; nil when an item is empty.
    static func list(_ text: String) -> [String]? {
        let items = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingASCIIWhitespace() }
        return items.contains(where: \.isEmpty) ? nil : items
    }

    /// `<digits>-<lower-case letters and digits>.apps.googleusercontent.com`, the shape of every OAuth client ID
    /// Google issues (web, iOS, Android).
    static func isClientID(_ id: String) -> Bool {
        let suffix = ".apps.googleusercontent.com"
        guard id.hasSuffix(suffix), id.utf8.count <= 255 else { return false }
        let stem = id.utf8.dropLast(suffix.utf8.count)
        guard let dash = stem.firstIndex(of: UInt8(ascii: "-")) else { return false }
        let number = stem[..<dash], name = stem[stem.index(after: dash)...]
        return !number.isEmpty && number.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            && !name.isEmpty && name.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) }
    }

    /// 127.0.0.0/8, ::1 and localhost.
    static func isLoopbackHost(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.") && host.split(separator: ".").count == 4
    }

    static func isDomainName(_ domain: String) -> Bool {
        guard domain.utf8.count <= 253 else { return false }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        return labels.allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
        }
    }

    /// A local path (one leading '/', not '//' or '/\', which browsers read as another host) or an https URL whose
    /// origin is a site origin. No spaces or control characters.
    static func isAcceptableRedirect(_ target: String, siteOrigins: [Origin]) -> Bool {
        guard target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        if target.hasPrefix("/") {
            let second = target.dropFirst().first
            return second != "/" && second != "\\"
        }
        guard let separator = target.firstRange(of: "://") else { return false }
        let afterScheme = target[separator.upperBound...]
        let authorityEnd = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? afterScheme.endIndex
        guard afterScheme[authorityEnd...].first.map({ $0 == "/" }) ?? true else { return false }
        guard let origin = Origin(parsing: target[..<authorityEnd]), origin.scheme == "https" else { return false }
        return siteOrigins.contains(origin)
    }

    /// The password of `scheme://user:password@host...`, as written and percent-decoded.
    static func passwords(inURL url: String) -> [String] {
        guard let start = url.firstRange(of: "://")?.upperBound else { return [] }
        let authority = url[start...].prefix { $0 != "/" && $0 != "?" }
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return [] }
        let raw = String(authority[authority.index(after: colon)..<at])
        guard !raw.isEmpty else { return [] }
        let decoded = (try? FormURLEncoded.unescape(ArraySlice(raw.utf8), plusIsSpace: false)) ?? raw
        return decoded == raw ? [raw] : [raw, decoded]
    }

    /// Seconds in the largest unit that divides them (`7d`, `36h`, `90m`, `45s`), as the duration settings read.
    static func duration(_ seconds: Int64) -> String {
        for (unit, size) in [("d", Int64(86_400)), ("h", 3_600), ("m", 60)] where seconds > 0 && seconds % size == 0 {
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }

    /// The candidate nearest `name` (at most two edits away), for a misspelt variable.
    static func closest(to name: String, among candidates: [String]) -> String? {
        let wanted = Array(name.utf8)
        func distance(_ other: [UInt8]) -> Int {
            var previous = Array(0...other.count)
            for (i, a) in wanted.enumerated() {
                var current = [i + 1]
                for (j, b) in other.enumerated() {
                    current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (a == b ? 0 : 1)))
                }
                previous = current
            }
            return previous[other.count]
        }
        guard wanted.count <= 64,
              let (best, edits) = candidates.map({ ($0, distance(Array($0.utf8))) }).min(by: { $0.1 < $1.1 }) else { return nil }
        return edits <= 2 ? best : nil
    }
}

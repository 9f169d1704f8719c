// A cheap single pass over JSON text before JSONDecoder: object at the top, bounded nesting, no duplicate top-level names.
import FoundationEssentials

enum JSONPrecheck {
    /// Deeper nesting than this is refused before JSONDecoder (which recurses) ever sees it.
    static let maxDepth = 16

    enum Failure: Error { case notObject, tooDeep, duplicateName, malformed }

    /// Checks that `bytes` is shaped like one JSON object with nesting at most `maxDepth` and
    /// no member name repeated at the top level. Full syntax validation is left to JSONDecoder.
    static func check(_ bytes: UnsafeRawBufferPointer) -> Failure? {
        var i = 0
        let n = bytes.count
        while i < n, isSpace(bytes[i]) { i += 1 }
        guard i < n, bytes[i] == UInt8(ascii: "{") else { return .notObject }
        var depth = 0
        var inString = false
        var escaped = false
        var stringStart = 0
        var stringHasEscape = false
        var expectName = false          // at depth 1, the next string is a member name
        var names: [(start: Int, end: Int, escaped: Bool)] = []
        names.reserveCapacity(24)
        var currentIsName = false
        var closedTop = false
        while i < n {
            if inString && !escaped {
                // Skip plain string content in a tight loop (most of a token's bytes are inside strings).
                while i + 8 <= n, !hasQuoteOrBackslash(bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i += 8 }
                while i < n, bytes[i] != UInt8(ascii: "\""), bytes[i] != UInt8(ascii: "\\") { i += 1 }
                if i == n { break }
            }
            let c = bytes[i]
            if inString {
                if escaped { escaped = false }
                else if c == UInt8(ascii: "\\") { escaped = true; stringHasEscape = true }
                else if c == UInt8(ascii: "\"") {
                    inString = false
                    if currentIsName {
                        let name = (start: stringStart, end: i, escaped: stringHasEscape)
                        for other in names where sameName(bytes, other, name) { return .duplicateName }
                        names.append(name)
                    }
                }
                i += 1
                continue
            }
            if closedTop && !isSpace(c) { return .malformed }
            switch c {
            case UInt8(ascii: "\""):
                inString = true; stringStart = i + 1; stringHasEscape = false
                currentIsName = depth == 1 && expectName
                expectName = false
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                if depth > maxDepth { return .tooDeep }
                if depth == 1 { expectName = true }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth < 0 { return .malformed }
                if depth == 0 { closedTop = true }
            case UInt8(ascii: ","):
                if depth == 1 { expectName = true }
            default:
                break
            }
            i += 1
        }
        return (inString || depth != 0) ? .malformed : nil
    }

    /// True when one of the eight bytes of `word` is `"` or `\` (exact SWAR zero-byte tests).
    @inline(__always)
    private static func hasQuoteOrBackslash(_ word: UInt64) -> Bool {
        let low7 = 0x7F7F_7F7F_7F7F_7F7F as UInt64
        func hasZero(_ x: UInt64) -> Bool { ~(((x & low7) &+ low7) | x | low7) != 0 }
        return hasZero(word ^ 0x2222_2222_2222_2222) || hasZero(word ^ 0x5C5C_5C5C_5C5C_5C5C)
    }

    private static func isSpace(_ c: UInt8) -> Bool {
        c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D
    }

    private static func sameName(_ bytes: UnsafeRawBufferPointer, _ a: (start: Int, end: Int, escaped: Bool),
                                 _ b: (start: Int, end: Int, escaped: Bool)) -> Bool {
        if !a.escaped && !b.escaped {
            guard a.end - a.start == b.end - b.start else { return false }
            return memcmpEqual(bytes, a.start, b.start, a.end - a.start)
        }
        // Rare: a name with escapes ("\u0061lg") is compared after JSON-unescaping both.
        return unescape(bytes, a) == unescape(bytes, b)
    }

    private static func memcmpEqual(_ bytes: UnsafeRawBufferPointer, _ a: Int, _ b: Int, _ count: Int) -> Bool {
        for k in 0..<count where bytes[a + k] != bytes[b + k] { return false }
        return true
    }

    private static func unescape(_ bytes: UnsafeRawBufferPointer, _ r: (start: Int, end: Int, escaped: Bool)) -> String? {
        let quoted = Data([UInt8(ascii: "\"")] + Array(bytes[r.start..<r.end]) + [UInt8(ascii: "\"")])
        return try? JSONDecoder().decode(String.self, from: quoted)
    }
}

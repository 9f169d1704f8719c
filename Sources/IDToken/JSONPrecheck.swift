// One linear pass over JSON text before JSONDecoder: an object at the top, bounded nesting and member counts, no name twice.
import FoundationEssentials

/// The shape checks JSONDecoder does not make (or makes recursively), in one pass whose work is linear in the
/// input: each member name is unescaped at most once and looked up in a hash table of its object's names.
/// Full syntax validation is left to JSONDecoder.
package enum JSONPrecheck {
    /// Deeper nesting than this is refused before JSONDecoder (which recurses) ever sees it.
    package static let maxDepth = 16
    /// Members of any object below the top level (JWKS entries, event payloads, subjects).
    package static let maxNestedMembers = 64

    package enum Failure: Error, Hashable {
        case notObject, tooDeep, tooManyMembers, duplicateName, malformed
    }

    /// Checks that `bytes` is one JSON object with nesting at most `maxDepth`, at most `maxMembers` members at the
    /// top level and `nestedMembers` (by default `maxNestedMembers`) in every nested object, and no object naming a
    /// member twice (also not through `\u` escapes).
    package static func check(_ bytes: UnsafeRawBufferPointer, maxMembers: Int, nestedMembers: Int = maxNestedMembers) -> Failure? {
        var steps = 0
        return check(bytes, maxMembers: maxMembers, nestedMembers: nestedMembers, steps: &steps)
    }

    /// `check`, adding to `steps` one per unit of work (a byte or an 8-byte word scanned, a byte hashed, unescaped
    /// or compared), so tests can pin that the work is linear in the input.
    package static func check(_ bytes: UnsafeRawBufferPointer, maxMembers: Int, nestedMembers: Int = maxNestedMembers,
                              steps: inout Int) -> Failure? {
        var scanner = Scanner(bytes, topMembers: maxMembers, nestedMembers: nestedMembers)
        let failure = scanner.run()
        steps += scanner.steps
        return failure
    }

    /// The pass itself, over a stack of open containers.
    private struct Scanner {
        let bytes: UnsafeRawBufferPointer
        let topMembers: Int
        let nestedMembers: Int
        var steps = 0
        /// Bit d set when the container at depth d is an object.
        var objectAtDepth: UInt32 = 0
        /// Members seen so far in the open object at each depth, and that object's id in `names`.
        var members = [Int](repeating: 0, count: maxDepth + 1)
        var objectIDs = [UInt32](repeating: 0, count: maxDepth + 1)
        var nextObjectID: UInt32 = 0
        var names: NameTable
        /// Unescaped copies of names written with escapes (rare: most names are plain).
        var unescaped: [UInt8] = []

        init(_ bytes: UnsafeRawBufferPointer, topMembers: Int, nestedMembers: Int) {
            self.bytes = bytes
            self.topMembers = topMembers
            self.nestedMembers = nestedMembers
            names = NameTable(maxMembers: max(topMembers, nestedMembers))
        }

        mutating func run() -> Failure? {
            let n = bytes.count
            guard n < Int(Int32.max) else { return .malformed }  // name offsets are 32-bit; callers cap far lower
            var i = 0
            while i < n, isSpace(bytes[i]) { i += 1; steps += 1 }
            guard i < n, bytes[i] == UInt8(ascii: "{") else { return .notObject }
            var depth = 0
            var expectName = false   // in an object, after `{` or `,`: the next string is a member name
            var closedTop = false
            while i < n {
                steps += 1
                let c = bytes[i]
                if closedTop {
                    guard isSpace(c) else { return .malformed }
                    i += 1
                    continue
                }
                switch c {
                case UInt8(ascii: "\""):
                    let start = i + 1
                    guard let (end, hasEscape) = skipString(from: start) else { return .malformed }
                    if expectName {
                        expectName = false
                        if let failure = addName(start: start, end: end, hasEscape: hasEscape, depth: depth) { return failure }
                    }
                    i = end + 1
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    if depth > maxDepth { return .tooDeep }
                    if c == UInt8(ascii: "{") {
                        objectAtDepth |= 1 << depth
                        members[depth] = 0
                        nextObjectID += 1
                        objectIDs[depth] = nextObjectID
                        expectName = true
                    } else {
                        objectAtDepth &= ~(1 << depth)
                        expectName = false
                    }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    guard depth > 0, (objectAtDepth >> depth) & 1 == (c == UInt8(ascii: "}") ? 1 : 0) else { return .malformed }
                    depth -= 1
                    expectName = false
                    if depth == 0 { closedTop = true }
                case UInt8(ascii: ","):
                    expectName = (objectAtDepth >> depth) & 1 == 1
                default:
                    break
                }
                i += 1
            }
            return closedTop ? nil : .malformed
        }

        /// The index of the closing quote of the string whose content starts at `start`, and whether it has escapes.
        private mutating func skipString(from start: Int) -> (end: Int, hasEscape: Bool)? {
            let n = bytes.count
            var i = start
            var hasEscape = false
            while true {
                // Plain string content eight bytes at a time (most of a token's bytes are inside strings).
                while i + 8 <= n, !hasQuoteOrBackslash(bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i += 8; steps += 1 }
                while i < n, bytes[i] != UInt8(ascii: "\""), bytes[i] != UInt8(ascii: "\\") { i += 1; steps += 1 }
                guard i < n else { return nil }
                if bytes[i] == UInt8(ascii: "\"") { return (i, hasEscape) }
                hasEscape = true
                i += 2  // the backslash and the escaped byte (a `\u` escape's hex digits are plain content)
                steps += 1
                guard i <= n else { return nil }
            }
        }

        private mutating func addName(start: Int, end: Int, hasEscape: Bool, depth: Int) -> Failure? {
            members[depth] += 1
            if members[depth] > (depth == 1 ? topMembers : nestedMembers) { return .tooManyMembers }
            let name: Name
            if hasEscape {
                let offset = unescaped.count
                guard unescape(start: start, end: end) else { return .malformed }
                name = Name(start: Int32(offset), end: Int32(unescaped.count), inScratch: true)
            } else {
                name = Name(start: Int32(start), end: Int32(end), inScratch: false)
            }
            let (input, object) = (bytes, objectIDs[depth])
            var steps = self.steps
            let inserted = unescaped.withUnsafeBytes { scratch in
                names.insert(name, object: object, depth: depth, input: input, scratch: scratch, steps: &steps)
            }
            self.steps = steps
            return inserted ? nil : .duplicateName
        }

        /// Appends the unescaped UTF-8 of the JSON string content `bytes[start..<end]` to `unescaped`.
        private mutating func unescape(start: Int, end: Int) -> Bool {
            steps += end - start
            return JSONString.unescape(bytes, start, end, into: &unescaped)
        }
    }

    /// A member name: a range of the input, or (when it had escapes) of the unescaped copies.
    private struct Name {
        var start: Int32
        var end: Int32
        var inScratch: Bool
        var count: Int { Int(end - start) }
    }

    /// Open addressing over the names of the open objects: one region of slots per depth (only one object is open
    /// at each depth), each sized for twice the member cap. A slot remembers which object wrote it, so a new object
    /// overwrites its closed predecessors' slots instead of clearing them; all-zero is an empty slot, so a region
    /// is made by a plain zero fill.
    private struct NameTable {
        /// Two words a slot: the object id and the scratch flag, then the name's start and end.
        private var words: [UInt64] = []
        private let size: Int

        init(maxMembers: Int) {
            var size = 16
            while size < 2 * maxMembers { size *= 2 }
            self.size = size
        }

        /// Adds `name` to the names of `object` (open at `depth`); false when it is already there.
        mutating func insert(_ name: Name, object: UInt32, depth: Int, input: UnsafeRawBufferPointer,
                             scratch: UnsafeRawBufferPointer, steps: inout Int) -> Bool {
            func text(_ name: Name) -> UnsafeRawBufferPointer {
                UnsafeRawBufferPointer(rebasing: (name.inScratch ? scratch : input)[Int(name.start)..<Int(name.end)])
            }
            let bytes = text(name)
            var hasher = Hasher()
            hasher.combine(bytes: bytes)
            steps += name.count
            let base = (depth - 1) * size
            if words.isEmpty {
                words = [UInt64](repeating: 0, count: 2 * depth * size)
            } else if words.count < 2 * (base + size) {
                words.append(contentsOf: [UInt64](repeating: 0, count: 2 * (base + size) - words.count))
            }
            var probe = hasher.finalize() & (size - 1)
            // Terminates: the object has at most size / 2 names, so a slot that is not its own is always found.
            while true {
                let slot = 2 * (base + probe)
                if UInt32(truncatingIfNeeded: words[slot]) != object {
                    words[slot] = UInt64(object) | (name.inScratch ? 1 << 32 : 0)
                    words[slot + 1] = UInt64(UInt32(name.start)) << 32 | UInt64(UInt32(name.end))
                    return true
                }
                let other = Name(start: Int32(truncatingIfNeeded: words[slot + 1] >> 32), end: Int32(truncatingIfNeeded: words[slot + 1]),
                                 inScratch: words[slot] >> 32 & 1 == 1)
                if other.count == name.count {
                    steps += name.count
                    if text(other).elementsEqual(bytes) { return false }
                }
                probe = (probe + 1) & (size - 1)
                steps += 1
            }
        }
    }

    /// True when one of the eight bytes of `word` is `"` or `\` (exact SWAR zero-byte tests).
    @inline(__always)
    private static func hasQuoteOrBackslash(_ word: UInt64) -> Bool {
        JSONString.hasByte(word, 0x22) || JSONString.hasByte(word, 0x5C)
    }

    private static func isSpace(_ c: UInt8) -> Bool {
        c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D
    }
}

/// Byte tests on eight bytes at once (SWAR), exact: no false positives from carries between bytes.
extension JSONString {
    private static let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F

    /// True when one of the eight bytes of `word` is `byte`.
    @inline(__always)
    static func hasByte(_ word: UInt64, _ byte: UInt8) -> Bool {
        let x = word ^ (UInt64(byte) &* 0x0101_0101_0101_0101)
        return ~(((x & low7) &+ low7) | x | low7) != 0
    }

    /// True when one of the eight bytes of `word` is below 0x20 (a control character).
    @inline(__always)
    static func hasControl(_ word: UInt64) -> Bool {
        // A byte below 0x80 gets its high bit from adding 0x60 exactly when it is 0x20 or more.
        ~(((word & low7) &+ 0x6060_6060_6060_6060) | word) & 0x8080_8080_8080_8080 != 0
    }
}

/// JSON string content with its escapes decoded (RFC 8259 section 7): shared by the precheck's member names and
/// the application's request bodies.
package enum JSONString {
    /// The index of the first byte at or after `start` that ends plain string content: `"`, `\\` or a control
    /// character (below 0x20), and when `forOutput` also DEL and 0xE2 (the lead byte of U+2028 and U+2029, which
    /// the encoder escapes); `bytes.count` when there is none. Eight bytes at a time: a token is ~1 KB of it.
    package static func plainEnd(_ bytes: UnsafeRawBufferPointer, from start: Int, forOutput: Bool = false) -> Int {
        var at = start
        let count = bytes.count
        while count - at >= 8 {
            let word = bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)
            if hasByte(word, 0x22) || hasByte(word, 0x5C) || hasControl(word) { break }
            if forOutput && (hasByte(word, 0x7F) || hasByte(word, 0xE2)) { break }
            at += 8
        }
        while at < count {
            let byte = bytes[at]
            if byte == 0x22 || byte == 0x5C || byte < 0x20 || (forOutput && (byte == 0x7F || byte == 0xE2)) { return at }
            at += 1
        }
        return count
    }

    /// Appends the UTF-8 of the string content `bytes[start..<end]` (between the quotes) to `out`, escapes decoded.
    /// False for an invalid escape, a lone surrogate or a truncated `\u`. Linear in `end - start`.
    package static func unescape(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int, into out: inout [UInt8]) -> Bool {
        var i = start
        while i < end {
            // The run up to the next escape is copied as it is.
            var run = i
            while run < end && bytes[run] != UInt8(ascii: "\\") { run += 1 }
            if run > i {
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<run]))
                i = run
                continue
            }
            guard i + 1 < end else { return false }
            let escape = bytes[i + 1]
            i += 2
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard let unit = hex4(bytes, i, end) else { return false }
                i += 4
                var scalar = UInt32(unit)
                if (0xD800..<0xDC00).contains(unit) {
                    // A high surrogate must be followed by `\u` and a low one.
                    guard i + 6 <= end, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u"),
                          let low = hex4(bytes, i + 2, end), (0xDC00..<0xE000).contains(low) else { return false }
                    i += 6
                    scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                } else if (0xDC00..<0xE000).contains(unit) {
                    return false
                }
                guard let value = Unicode.Scalar(scalar) else { return false }
                out.append(contentsOf: UTF8.encode(value)!)
            default:
                return false
            }
        }
        return true
    }

    /// The value of one hexadecimal digit, either case.
    package static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func hex4(_ bytes: UnsafeRawBufferPointer, _ i: Int, _ end: Int) -> UInt16? {
        guard i + 4 <= end else { return nil }
        var value: UInt16 = 0
        for k in i..<(i + 4) {
            guard let digit = hexValue(bytes[k]) else { return nil }
            value = value << 4 | UInt16(digit)
        }
        return value
    }
}

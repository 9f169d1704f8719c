// Strict unpadded base64url (RFC 4648 §5) as JOSE requires: no padding, no whitespace, canonical trailing bits.

public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    // 0xFF marks a byte outside the base64url alphabet ('=', '+', '/', whitespace included).
    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()

    /// Encodes without padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(v >> 18 & 63)]); out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)]); out.append(alphabet[Int(v & 63)])
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let v = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(v >> 18 & 63)]); out.append(alphabet[Int(v >> 12 & 63)])
        } else if rest == 2 {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(v >> 18 & 63)]); out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes strictly: nil on any byte outside the alphabet, on padding, on a length of 4k+1,
    /// or on non-zero unused trailing bits (so every byte string has exactly one accepted encoding).
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        if let fast = text.utf8.withContiguousStorageIfAvailable({ decode(bytes: UnsafeRawBufferPointer($0)) }) {
            return fast
        }
        let copy = Array(text.utf8)
        return copy.withUnsafeBytes { decode(bytes: $0) }
    }

    /// Decodes a slice of ASCII bytes (used on token segments without making Strings).
    package static func decode(bytes input: UnsafeRawBufferPointer) -> [UInt8]? {
        let n = input.count
        if n % 4 == 1 { return nil }
        let capacity = n / 4 * 3 + max(0, n % 4 - 1)
        var valid = true
        // Written straight into the array's storage: no per-byte append and capacity check.
        let out = [UInt8](unsafeUninitializedCapacity: capacity) { out, initialized in
            initialized = 0
            valid = reverse.withUnsafeBufferPointer { table -> Bool in
                var i = 0, o = 0
                while i + 4 <= n {
                    let a = table[Int(input[i])], b = table[Int(input[i + 1])]
                    let c = table[Int(input[i + 2])], d = table[Int(input[i + 3])]
                    if (a | b | c | d) & 0xC0 != 0 { return false }
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    out[o] = UInt8(truncatingIfNeeded: v >> 16)
                    out[o + 1] = UInt8(truncatingIfNeeded: v >> 8)
                    out[o + 2] = UInt8(truncatingIfNeeded: v)
                    i += 4; o += 3
                }
                let rest = n - i
                if rest == 2 {
                    let a = table[Int(input[i])], b = table[Int(input[i + 1])]
                    if (a | b) & 0xC0 != 0 || b & 0x0F != 0 { return false }
                    out[o] = a << 2 | b >> 4
                    o += 1
                } else if rest == 3 {
                    let a = table[Int(input[i])], b = table[Int(input[i + 1])], c = table[Int(input[i + 2])]
                    if (a | b | c) & 0xC0 != 0 || c & 0x03 != 0 { return false }
                    out[o] = a << 2 | b >> 4
                    out[o + 1] = (b & 0x0F) << 4 | c >> 2
                    o += 2
                }
                return true
            }
            if valid { initialized = capacity }
        }
        return valid ? out : nil
    }
}

// Session tokens: 256 random bits handed to the client once; only their SHA-256 is ever stored.
import IDToken
import Signing
import Store

/// A session secret as the client holds it (base64url of 32 random bytes, 43 characters).
package struct SessionToken {
    package let value: String

    /// SHA-256 of the exact token string: what `signin.sessions.token_hash` holds.
    package struct Hash: Hashable, Sendable, SQLParameter {
        package let bytes: [UInt8]
        /// The 32 bytes hashed at once (the synthesized hash fed them to the hasher one by one).
        package func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
        /// Bound as hex for `decode($n, 'hex')`.
        package func appendSQLText(to text: inout [UInt8]) -> Bool { SQLHexBytes(bytes).appendSQLText(to: &text) }
    }

    /// A new token from OpenSSL's CSPRNG.
    package static func generate() -> SessionToken {
        generate(count: 1)[0]
    }

    /// `count` new tokens from one draw of OpenSSL's CSPRNG: a batch's sign-ins pay its fixed cost (the
    /// generator's lock, its fork check, a system call, and its update after every draw) once, not each.
    package static func generate(count: Int) -> [SessionToken] {
        let random = SecureRandom.bytes(32 * count)
        return (0..<count).map { SessionToken(value: Base64URL.encode(Array(random[$0 * 32 ..< $0 * 32 + 32]))) }
    }

    /// A presented token, if it has the exact shape tokensignin hands out (anything else cannot match a
    /// session, so it is refused without a database round trip).
    package init?(presented: some StringProtocol) {
        let utf8 = presented.utf8
        guard utf8.count == 43, utf8.allSatisfy(Self.isBase64URL) else { return nil }
        value = String(presented)
    }

    private init(value: String) { self.value = value }

    package var hash: Hash { Hash(bytes: Digest.sha256(Array(value.utf8))) }

    private static func isBase64URL(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x5f
    }
}

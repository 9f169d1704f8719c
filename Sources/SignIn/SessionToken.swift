// Session tokens: 256 random bits handed to the client once; only their SHA-256 is ever stored.
import IDToken
import Signing

/// A session secret as the client holds it (base64url of 32 random bytes, 43 characters).
struct SessionToken {
    let value: String

    /// A new token from OpenSSL's CSPRNG.
    static func generate() -> SessionToken {
        SessionToken(value: Base64URL.encode(SecureRandom.bytes(32)))
    }

    /// A presented token, if it has the exact shape tokensignin hands out (anything else cannot match a
    /// session, so it is refused without a database round trip).
    init?(presented: some StringProtocol) {
        let utf8 = presented.utf8
        guard utf8.count == 43, utf8.allSatisfy(Self.isBase64URL) else { return nil }
        value = String(presented)
    }

    private init(value: String) { self.value = value }

    /// Hex SHA-256 of the exact token string: what `signin.sessions.token_hash` holds.
    var hashHex: String {
        let digest = Digest.sha256(Array(value.utf8))
        var hex = [UInt8]()
        hex.reserveCapacity(64)
        for byte in digest {
            hex.append(Self.hexDigits[Int(byte >> 4)])
            hex.append(Self.hexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: hex, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func isBase64URL(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x5f
    }
}

// A private key that signs compact JWS (RS256 or ES256): a Google service account's key, or a development key.
import COpenSSL
import IDToken

/// A private signing key: RSA of 2048 to 16384 bits (RS256) or P-256 (ES256). The key material stays inside
/// OpenSSL: nothing here returns, prints or logs it.
// SAFETY: the EVP_PKEY is never mutated after init; OpenSSL 3 allows concurrent signing with one EVP_PKEY
// (each signature uses its own EVP_MD_CTX).
public final class SigningKey: @unchecked Sendable {
    public let algorithm: SignatureAlgorithm
    let pkey: OpaquePointer

    /// Larger PEM text is refused unread (an RSA-16384 PKCS#8 PEM is about 12 KB).
    public static let maxPEMBytes = 64 * 1024
    static let minimumRSABits: Int32 = 2048
    static let maximumRSABits: Int32 = 16384

    /// Takes ownership of `pkey`: kept when it is an accepted key, freed when refused.
    init(taking pkey: OpaquePointer) throws(SigningError) {
        if EVP_PKEY_is_a(pkey, "RSA") == 1 {
            let bits = EVP_PKEY_get_bits(pkey)
            guard bits >= Self.minimumRSABits && bits <= Self.maximumRSABits else {
                EVP_PKEY_free(pkey)
                throw SigningError(.badPrivateKey, "RSA key of \(bits) bits (accepted: \(Self.minimumRSABits) to \(Self.maximumRSABits))")
            }
            algorithm = .rs256
        } else if EVP_PKEY_is_a(pkey, "EC") == 1 && Self.isP256(pkey) {
            algorithm = .es256
        } else {
            EVP_PKEY_free(pkey)
            throw SigningError(.badPrivateKey, "only RSA (at least 2048 bits) and P-256 keys are supported")
        }
        self.pkey = pkey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// Loads an unencrypted PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`, as in a Google service-account JSON
    /// key's `private_key`) or the traditional RSA/EC forms.
    public convenience init(pem: String) throws(SigningError) {
        let bytes = Array(pem.utf8)
        guard bytes.count <= Self.maxPEMBytes else { throw SigningError(.badPrivateKey, "PEM text over \(Self.maxPEMBytes) bytes") }
        let loaded: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            // A passphrase callback that has none: an encrypted key is refused instead of OpenSSL asking the terminal.
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let pkey = loaded else {
            ERR_clear_error()
            throw SigningError(.badPrivateKey, "not an unencrypted PEM private key")
        }
        try self.init(taking: pkey)
    }

    /// The compact JWS `base64url(header).base64url(payload).base64url(signature)`; the header names the
    /// algorithm (`algorithm.rawValue`) and the key's `kid`, which the caller writes.
    public func sign(header: [UInt8], payload: [UInt8]) -> String {
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        return signingInput + "." + Base64URL.encode(signature(over: Array(signingInput.utf8)))
    }

    /// The JOSE signature over `message`: RSASSA-PKCS1-v1_5 with SHA-256, or ECDSA P-256 with SHA-256 as r‖s.
    /// Traps when libcrypto fails to sign with a key it accepted: there is nothing safe to return instead.
    func signature(over message: [UInt8]) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { preconditionFailure("EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit_ex(ctx, nil, "SHA256", nil, nil, pkey, nil) == 1 else { preconditionFailure("EVP_DigestSignInit_ex failed") }
        var length = 0
        let sized = message.withUnsafeBufferPointer { EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }
        precondition(sized == 1, "EVP_DigestSign (size) failed")
        var out = [UInt8](repeating: 0, count: length)
        let signed = out.withUnsafeMutableBufferPointer { o in
            message.withUnsafeBufferPointer { EVP_DigestSign(ctx, o.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        precondition(signed == 1, "EVP_DigestSign failed")
        out.removeLast(out.count - length)
        if algorithm == .rs256 { return out }
        guard let raw = JOSESignature.raw(fromDER: out) else { preconditionFailure("unexpected ECDSA signature encoding") }
        return raw
    }

    /// True for a key on NIST P-256 (OpenSSL's name prime256v1); other 256-bit curves (secp256k1, brainpool) are not.
    private static func isP256(_ pkey: OpaquePointer) -> Bool {
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pkey, &name, name.count, &length) == 1, length < name.count else { return false }
        let group = String(decoding: name[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return group == "prime256v1" || group == "P-256"
    }
}

/// JOSE's fixed-width ECDSA signature from the DER ECDSA-Sig-Value OpenSSL produces.
enum JOSESignature {
    /// 64 bytes r‖s from `SEQUENCE { INTEGER r, INTEGER s }`; nil for anything else.
    static func raw(fromDER der: [UInt8]) -> [UInt8]? {
        var i = 0
        func readLength() -> Int? {
            guard i < der.count else { return nil }
            let b = der[i]; i += 1
            if b < 0x80 { return Int(b) }
            guard b == 0x81, i < der.count else { return nil }
            let l = Int(der[i]); i += 1
            return l
        }
        guard der.count > 2, der[0] == 0x30 else { return nil }
        i = 1
        guard let total = readLength(), total == der.count - i else { return nil }
        var out: [UInt8] = []
        for _ in 0..<2 {
            guard i < der.count, der[i] == 0x02 else { return nil }
            i += 1
            guard let l = readLength(), l > 0, i + l <= der.count else { return nil }
            let value = Array(der[i..<(i + l)].drop(while: { $0 == 0 }))
            guard value.count <= 32 else { return nil }
            out += [UInt8](repeating: 0, count: 32 - value.count) + value
            i += l
        }
        return i == der.count ? out : nil
    }
}

// A verification key built once from a JWK (RSA n/e or P-256 x/y) into an OpenSSL 3 EVP_PKEY, and the RS256/ES256 check.
import COpenSSL

/// The only two JWS algorithms accepted.
public enum SignatureAlgorithm: String, Sendable, Hashable, CaseIterable {
    case rs256 = "RS256"
    case es256 = "ES256"
}

/// One public key. EVP_PKEY is built at key-set load time and freed in deinit.
// SAFETY: the EVP_PKEY is an immutable public key after init; OpenSSL 3 allows concurrent verify
// operations on one EVP_PKEY, each with its own EVP_PKEY_CTX (handed out by the pool, one thread at a time).
package final class PublicKey: @unchecked Sendable {
    package let algorithm: SignatureAlgorithm
    /// Exact signature length in bytes: the modulus length for RS256, 64 (r‖s) for ES256.
    package let signatureLength: Int
    private let pkey: OpaquePointer
    private let contexts: VerifyContextPool

    private init(algorithm: SignatureAlgorithm, signatureLength: Int, pkey: OpaquePointer) {
        self.algorithm = algorithm
        self.signatureLength = signatureLength
        self.pkey = pkey
        contexts = VerifyContextPool(pkey: pkey, algorithm: algorithm)
    }

    // Each pooled EVP_PKEY_CTX holds its own reference to the key, so the order of frees does not matter.
    deinit { EVP_PKEY_free(pkey) }

    static let minimumRSABits = 2048
    static let maximumRSABits = 8192

    /// Builds an RSA public key from big-endian n and e. Refuses moduli under 2048 bits and bad exponents.
    static func rsa(modulus rawN: [UInt8], exponent rawE: [UInt8]) throws(IDTokenError) -> PublicKey {
        let n = Array(rawN.drop(while: { $0 == 0 }))
        let e = Array(rawE.drop(while: { $0 == 0 }))
        guard let top = n.first else { throw IDTokenError(.unusableKey, "empty RSA modulus") }
        let bits = (n.count - 1) * 8 + (8 - top.leadingZeroBitCount)
        if bits < minimumRSABits { throw IDTokenError(.weakKey, "RSA modulus of \(bits) bits (minimum \(minimumRSABits))") }
        if bits > maximumRSABits { throw IDTokenError(.unusableKey, "RSA modulus of \(bits) bits (maximum \(maximumRSABits))") }
        if n[n.count - 1] & 1 == 0 { throw IDTokenError(.weakKey, "even RSA modulus") }
        guard let last = e.last, e.count <= 8 else { throw IDTokenError(.unusableKey, "RSA exponent missing or too long") }
        if last & 1 == 0 || (e.count == 1 && e[0] < 3) {
            throw IDTokenError(.weakKey, "RSA public exponent must be odd and at least 3")
        }
        if ROCA.isFingerprinted(modulus: n) {
            throw IDTokenError(.weakKey, "RSA modulus has the ROCA fingerprint (CVE-2017-15361)")
        }
        guard let bld = OSSL_PARAM_BLD_new() else { throw IDTokenError(.unusableKey, "OSSL_PARAM_BLD_new failed") }
        defer { OSSL_PARAM_BLD_free(bld) }
        guard let bnN = n.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else {
            throw IDTokenError(.unusableKey, "BN_bin2bn(n) failed")
        }
        defer { BN_free(bnN) }
        guard let bnE = e.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else {
            throw IDTokenError(.unusableKey, "BN_bin2bn(e) failed")
        }
        defer { BN_free(bnE) }
        guard OSSL_PARAM_BLD_push_BN(bld, cString("n"), bnN) == 1,
              OSSL_PARAM_BLD_push_BN(bld, cString("e"), bnE) == 1 else {
            throw IDTokenError(.unusableKey, "OSSL_PARAM_BLD_push_BN failed")
        }
        let pkey = try fromData(type: "RSA", builder: bld)
        let size = Int(EVP_PKEY_get_size(pkey))
        guard size == n.count else {
            EVP_PKEY_free(pkey)
            throw IDTokenError(.unusableKey, "unexpected RSA key size")
        }
        return PublicKey(algorithm: .rs256, signatureLength: size, pkey: pkey)
    }

    /// Builds a P-256 public key from 32-byte x and y; refuses points not on the curve.
    static func p256(x: [UInt8], y: [UInt8]) throws(IDTokenError) -> PublicKey {
        guard x.count == 32, y.count == 32 else { throw IDTokenError(.unusableKey, "P-256 coordinates must be 32 bytes") }
        let point: [UInt8] = [0x04] + x + y
        guard let bld = OSSL_PARAM_BLD_new() else { throw IDTokenError(.unusableKey, "OSSL_PARAM_BLD_new failed") }
        defer { OSSL_PARAM_BLD_free(bld) }
        let pushed = point.withUnsafeBytes { p in
            OSSL_PARAM_BLD_push_utf8_string(bld, cString("group"), cString("prime256v1"), 0) == 1
                && OSSL_PARAM_BLD_push_octet_string(bld, cString("pub"), p.baseAddress, p.count) == 1
        }
        guard pushed else { throw IDTokenError(.unusableKey, "OSSL_PARAM_BLD push failed") }
        let pkey = try fromData(type: "EC", builder: bld)
        // fromdata does not promise an on-curve check; do it explicitly.
        guard let check = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
            EVP_PKEY_free(pkey)
            throw IDTokenError(.unusableKey, "EVP_PKEY_CTX_new_from_pkey failed")
        }
        defer { EVP_PKEY_CTX_free(check) }
        guard EVP_PKEY_public_check(check) == 1 else {
            EVP_PKEY_free(pkey)
            ERR_clear_error()
            throw IDTokenError(.unusableKey, "P-256 point is not on the curve")
        }
        return PublicKey(algorithm: .es256, signatureLength: 64, pkey: pkey)
    }

    private static func fromData(type: String, builder bld: OpaquePointer) throws(IDTokenError) -> OpaquePointer {
        guard let params = OSSL_PARAM_BLD_to_param(bld) else { throw IDTokenError(.unusableKey, "OSSL_PARAM_BLD_to_param failed") }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { throw IDTokenError(.unusableKey, "no \(type) key type") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_fromdata_init(ctx) == 1,
              EVP_PKEY_fromdata(ctx, &pkey, COpenSSL_selection_public_key(), params) == 1,
              let pkey else {
            ERR_clear_error()
            throw IDTokenError(.unusableKey, "EVP_PKEY_fromdata(\(type)) failed")
        }
        return pkey
    }

    /// True when `signature` is a valid signature by this key over `message` (SHA-256).
    /// The caller has already checked `signature.count == signatureLength`.
    package func verify(signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> Bool {
        guard signature.count == signatureLength else { return false }
        switch algorithm {
        case .rs256:
            return contexts.withContext { $0.verify(signature: signature, message: message) }
        case .es256:
            guard let der = ECDSASignature.der(fromRaw: signature) else { return false }
            return der.withUnsafeBytes { der in contexts.withContext { $0.verify(signature: der, message: message) } }
        }
    }
}

/// Detection of RSA moduli from Infineon's flawed generator (ROCA, CVE-2017-15361): such a modulus is,
/// modulo every small prime r below 168, a power of 65537. A random modulus passes all these tests with
/// negligible probability (the method of the published `roca-detect` tool).
enum ROCA {
    static let primes: [UInt32] = [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89,
                                   97, 101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167]

    static func isFingerprinted(modulus n: [UInt8]) -> Bool {
        for r in primes {
            var residue: UInt32 = 0
            for byte in n { residue = (residue << 8 | UInt32(byte)) % r }
            // Walk the subgroup generated by 65537 mod r.
            let g = 65537 % r
            var x: UInt32 = 1
            var member = false
            repeat {
                if x == residue { member = true; break }
                x = x * g % r
            } while x != 1
            if !member { return false }
        }
        return true
    }
}

/// A C string that lives forever. OSSL_PARAM_BLD keeps the key-name and value pointers (not copies) until
/// OSSL_PARAM_BLD_to_param, so Swift's temporary String-to-pointer bridging must not be used there.
/// Names are the values of OSSL_PKEY_PARAM_RSA_N ("n"), _RSA_E ("e"), _GROUP_NAME ("group"), _PUB_KEY ("pub").
private func cString(_ s: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// Conversion between JOSE's fixed-width r‖s and the DER ECDSA-Sig-Value OpenSSL expects.
enum ECDSASignature {
    /// DER `SEQUENCE { INTEGER r, INTEGER s }` from 64 bytes r‖s; nil when r or s is zero.
    static func der(fromRaw raw: UnsafeRawBufferPointer) -> [UInt8]? {
        guard raw.count == 64 else { return nil }
        guard let r = integer(raw[0..<32]), let s = integer(raw[32..<64]) else { return nil }
        let body = r + s
        return [0x30, UInt8(body.count)] + body   // at most 2 * 35 bytes: short-form length
    }

    private static func integer(_ bytes: Slice<UnsafeRawBufferPointer>) -> [UInt8]? {
        let trimmed = Array(bytes.drop(while: { $0 == 0 }))
        guard let first = trimmed.first else { return nil }     // zero is never a valid r or s
        let content = first & 0x80 != 0 ? [0] + trimmed : trimmed
        return [0x02, UInt8(content.count)] + content
    }

}

// DEVELOPMENT AND TEST ONLY: a local signing key that mints Google-shaped ID tokens for tests, benchmarks and demos.
import COpenSSL
import FoundationEssentials
import IDToken

/// A claim value for `DevelopmentKey.sign(claims:)` (development and tests only; replies use SignIn.JSONValue).
public enum ClaimValue: Sendable, Hashable, Encodable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByFloatLiteral {
    case string(String), integer(Int64), number(Double), bool(Bool), array([ClaimValue]), object([String: ClaimValue]), null

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: ClaimValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, ClaimValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let v): try c.encode(v)
        case .integer(let v): try c.encode(v)
        case .number(let v): try c.encode(v)
        case .bool(let v): try c.encode(v)
        case .array(let v): try c.encode(v)
        case .object(let v): try c.encode(v)
        case .null: try c.encodeNil()
        }
    }

    /// Compact JSON with sorted keys.
    public var jsonString: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding strings, numbers and containers of them cannot fail except for non-finite doubles.
        guard let data = try? encoder.encode(self) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }
}

/// DEVELOPMENT AND TEST ONLY. A signing key (RSA-2048 or P-256) that signs arbitrary claims into compact
/// RS256/ES256 tokens, with its public JWKS and its PEM. Production never signs ID tokens: Google does.
public final class DevelopmentKey: Sendable {
    public enum Kind: String, Sendable { case rsa2048, p256 }

    public let kind: Kind
    /// RFC 7638 JWK thumbprint (base64url SHA-256), used as `kid`.
    public let kid: String
    /// The public key as one JWK JSON object (kty, kid, alg, use and n/e or crv/x/y).
    public let publicJWK: String
    public let signingKey: SigningKey

    public var algorithm: SignatureAlgorithm { signingKey.algorithm }

    private init(_ key: SigningKey) throws(SigningError) {
        signingKey = key
        let members: [(String, String)]
        switch key.algorithm {
        case .rs256:
            guard let n = Self.bnParam(key.pkey, OSSL_PKEY_PARAM_RSA_N, width: 0),
                  let e = Self.bnParam(key.pkey, OSSL_PKEY_PARAM_RSA_E, width: 0) else {
                throw SigningError(.badPrivateKey, "cannot read RSA public parameters")
            }
            kind = .rsa2048
            members = [("e", Base64URL.encode(e)), ("kty", "RSA"), ("n", Base64URL.encode(n))]
        case .es256:
            guard let x = Self.bnParam(key.pkey, OSSL_PKEY_PARAM_EC_PUB_X, width: 32),
                  let y = Self.bnParam(key.pkey, OSSL_PKEY_PARAM_EC_PUB_Y, width: 32) else {
                throw SigningError(.badPrivateKey, "cannot read EC public parameters")
            }
            kind = .p256
            members = [("crv", "P-256"), ("kty", "EC"), ("x", Base64URL.encode(x)), ("y", Base64URL.encode(y))]
        }
        // RFC 7638: required members only, sorted, no whitespace.
        let canonical = "{" + members.map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ",") + "}"
        kid = Base64URL.encode(Digest.sha256(Array(canonical.utf8)))
        publicJWK = "{" + (members + [("alg", key.algorithm.rawValue), ("kid", kid), ("use", "sig")]).sorted { $0.0 < $1.0 }
            .map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ",") + "}"
    }

    /// Generates a fresh key.
    public static func generate(_ kind: Kind = .rsa2048) throws(SigningError) -> DevelopmentKey {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, kind == .rsa2048 ? "RSA" : "EC", nil) else {
            throw SigningError(.keyGenerationFailed, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1 else { throw SigningError(.keyGenerationFailed, "keygen_init failed") }
        let configured = kind == .rsa2048
            ? EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) == 1
            : EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1
        guard configured else { throw SigningError(.keyGenerationFailed, "cannot set key size") }
        var pkey: OpaquePointer?
        guard EVP_PKEY_generate(ctx, &pkey) == 1, let pkey else {
            ERR_clear_error()
            throw SigningError(.keyGenerationFailed, "EVP_PKEY_generate failed")
        }
        return try DevelopmentKey(SigningKey(taking: pkey))
    }

    /// Loads an unencrypted PEM private key (RSA of at least 2048 bits, or P-256), as `SigningKey(pem:)` does.
    public convenience init(pem: String) throws(SigningError) {
        try self.init(SigningKey(pem: pem))
    }

    /// The private key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), for `tokensignin dev keygen` to write.
    public var pem: String {
        guard let bio = BIO_new(BIO_s_mem()) else { preconditionFailure("BIO_new failed") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, signingKey.pkey, nil, nil, 0, nil, nil) == 1 else { preconditionFailure("PEM_write_bio_PrivateKey failed") }
        let count = Int(BIO_ctrl_pending(bio))
        var out = [UInt8](repeating: 0, count: count)
        let read = out.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(count)) }
        precondition(Int(read) == count, "BIO_read short")
        return String(decoding: out, as: UTF8.self)
    }

    /// The public JWKS document (`{"keys":[...]}`) holding this key.
    public var jwks: String { "{\"keys\":[\(publicJWK)]}" }

    /// Signs `claims` with a `{"alg","kid","typ":"JWT"}` header.
    public func sign(claims: [String: ClaimValue], kid: String? = nil) -> String {
        sign(payloadJSON: ClaimValue.object(claims).jsonString, kid: kid)
    }

    /// Signs a payload given as JSON text (or any text) with a `{"alg","kid","typ":"JWT"}` header.
    public func sign(payloadJSON: String, kid: String? = nil) -> String {
        let header = "{\"alg\":\"\(algorithm.rawValue)\",\"kid\":\"\(kid ?? self.kid)\",\"typ\":\"JWT\"}"
        return sign(headerJSON: header, payloadJSON: payloadJSON)
    }

    /// Signs an arbitrary header and payload text (tests use this to build hostile headers).
    public func sign(headerJSON: String, payloadJSON: String) -> String {
        sign(header: Array(headerJSON.utf8), payload: Array(payloadJSON.utf8))
    }

    /// Signs arbitrary header and payload bytes (which need not be UTF-8 or JSON).
    public func sign(header: [UInt8], payload: [UInt8]) -> String {
        signingKey.sign(header: header, payload: payload)
    }

    private static func bnParam(_ pkey: OpaquePointer, _ name: String, width: Int) -> [UInt8]? {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, name, &bn) == 1, let bn else { return nil }
        defer { BN_free(bn) }
        let count = (Int(BN_num_bits(bn)) + 7) / 8
        var out = [UInt8](repeating: 0, count: max(count, width))
        let written = out.withUnsafeMutableBufferPointer { BN_bn2bin(bn, $0.baseAddress! + (max(count, width) - count)) }
        guard Int(written) == count else { return nil }
        return out
    }
}

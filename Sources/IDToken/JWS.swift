// The JWS layer: compact serialization parsing, header policy and the signature check, returning the payload bytes.
import FoundationEssentials

/// A compact JWS whose header passed the policy and whose signature verified with the named key.
package struct VerifiedJWS: Sendable {
    package let algorithm: SignatureAlgorithm
    package let keyID: String
    /// The decoded payload bytes (not necessarily JSON at this layer).
    package let payload: [UInt8]
}

package enum JWS {
    /// Tokens longer than this are refused before any decoding (Google ID tokens are about 1 KB).
    package static let maxTokenBytes = 16 * 1024
    /// Members of the protected header (Google sends three: alg, kid, typ).
    package static let maxHeaderMembers = 16

    /// Parses `compact` and checks its signature against `keys`. Policy: three segments, strict base64url,
    /// header a UTF-8 JSON object with `alg` RS256 or ES256, no `jwk`/`jku`/`x5u`/`x5c`, no `crit`, a `kid`
    /// found exactly in `keys` whose key type matches `alg`, signature of the exact length.
    package static func verify(_ compact: String, keys: KeySet) -> Result<VerifiedJWS, IDTokenError> {
        var token = compact
        return token.withUTF8 { verify(bytes: UnsafeRawBufferPointer($0), keys: keys) }
    }

    static func verify(bytes: UnsafeRawBufferPointer, keys: KeySet) -> Result<VerifiedJWS, IDTokenError> {
        guard bytes.count <= maxTokenBytes else { return .failure(IDTokenError(.tokenTooLarge, "\(bytes.count) bytes")) }
        // Exactly two dots.
        var firstDot = -1, secondDot = -1
        var i = 0
        while i < bytes.count {
            // Eight bytes at a time while none of them is a dot (the segments are long base64url runs).
            if i + 8 <= bytes.count && !containsDot(bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) {
                i += 8
                continue
            }
            if bytes[i] == UInt8(ascii: ".") {
                if firstDot < 0 { firstDot = i } else if secondDot < 0 { secondDot = i } else {
                    return .failure(IDTokenError(.malformed, "more than three segments"))
                }
            }
            i += 1
        }
        guard secondDot > 0 else { return .failure(IDTokenError(.malformed, "fewer than three segments")) }
        let headerPart = UnsafeRawBufferPointer(rebasing: bytes[0..<firstDot])
        let payloadPart = UnsafeRawBufferPointer(rebasing: bytes[(firstDot + 1)..<secondDot])
        let signaturePart = UnsafeRawBufferPointer(rebasing: bytes[(secondDot + 1)...])
        let signedPart = UnsafeRawBufferPointer(rebasing: bytes[0..<secondDot])

        let known = keys.knownHeader(headerPart)
        let headerBytes: [UInt8]
        if known != nil {
            headerBytes = []
        } else {
            guard let decoded = Base64URL.decode(bytes: headerPart) else { return .failure(IDTokenError(.badBase64, "header")) }
            headerBytes = decoded
        }
        guard let payload = Base64URL.decode(bytes: payloadPart) else { return .failure(IDTokenError(.badBase64, "payload")) }
        guard let signature = Base64URL.decode(bytes: signaturePart) else { return .failure(IDTokenError(.badBase64, "signature")) }

        let header: JOSEHeader
        if let known {
            header = known
        } else {
            switch JOSEHeader.decode(headerBytes) {
            case .success(let h): header = h
            case .failure(let e): return .failure(e)
            }
        }
        guard let algorithm = SignatureAlgorithm(rawValue: header.alg) else {
            return .failure(IDTokenError(.unsupportedAlgorithm, "alg is not RS256 or ES256"))   // never echo header text
        }
        if header.embedsKey { return .failure(IDTokenError(.embeddedKey, "header supplies a key")) }
        if header.hasCrit { return .failure(IDTokenError(.unknownCrit, "crit extensions are not understood")) }
        guard let kid = header.kid else { return .failure(IDTokenError(.missingKid, "")) }
        let key: PublicKey
        switch keys.key(for: kid) {
        case .success(let k): key = k
        case .failure(let e): return .failure(e)
        }
        guard key.algorithm == algorithm else {
            return .failure(IDTokenError(.algorithmMismatch, "alg \(algorithm.rawValue) with a \(key.algorithm.rawValue) key"))
        }
        guard signature.count == key.signatureLength else {
            return .failure(IDTokenError(.badSignature, "signature length \(signature.count), expected \(key.signatureLength)"))
        }
        let ok = signature.withUnsafeBytes { key.verify(signature: $0, message: signedPart) }
        guard ok else { return .failure(IDTokenError(.badSignature, "")) }
        return .success(VerifiedJWS(algorithm: algorithm, keyID: kid, payload: payload))
    }
}

/// True when one of the eight bytes of `word` is `.` (the exact SWAR zero-byte test on `word ^ "........"`).
@inline(__always)
private func containsDot(_ word: UInt64) -> Bool {
    let x = word ^ 0x2E2E_2E2E_2E2E_2E2E
    let low7 = 0x7F7F_7F7F_7F7F_7F7F as UInt64
    return ~(((x & low7) &+ low7) | x | low7) != 0
}

/// The protected header members this verifier looks at.
struct JOSEHeader: Decodable, Sendable {
    var alg: String
    var kid: String?
    var hasCrit: Bool
    var embedsKey: Bool

    enum CodingKeys: String, CodingKey { case alg, kid, crit, jwk, jku, x5u, x5c }

    init(alg: String, kid: String?, hasCrit: Bool, embedsKey: Bool) {
        self.alg = alg
        self.kid = kid
        self.hasCrit = hasCrit
        self.embedsKey = embedsKey
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        alg = try c.decode(String.self, forKey: .alg)
        kid = try c.decodeIfPresent(String.self, forKey: .kid)
        hasCrit = c.contains(.crit)
        embedsKey = c.contains(.jwk) || c.contains(.jku) || c.contains(.x5u) || c.contains(.x5c)
    }

    static func decode(_ bytes: [UInt8]) -> Result<JOSEHeader, IDTokenError> {
        switch JSONObject.decode(JOSEHeader.self, from: bytes, maxMembers: JWS.maxHeaderMembers) {
        case .success(let h): return .success(h)
        case .failure(let why): return .failure(IDTokenError(.badHeader, why.summary))
        }
    }
}

/// JSON objects through FoundationEssentials' JSONDecoder, after UTF-8 validation and JSONPrecheck.
enum JSONObject {
    enum Failure: Error {
        case notUTF8, precheck(JSONPrecheck.Failure), decoding(any Error)
        /// A log-safe summary (never echoes values from the token).
        var summary: String {
            switch self {
            case .notUTF8: "not UTF-8"
            case .precheck(let f): "JSON precheck: \(f)"
            case .decoding: "JSON does not decode as expected"
            }
        }
    }

    // One shared decoder: JSONDecoder is Sendable and its options are never changed.
    private static let decoder = JSONDecoder()

    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8], maxMembers: Int) -> Result<T, Failure> {
        decodeKeepingText(type, from: bytes, maxMembers: maxMembers).map(\.value)
    }

    /// Like `decode`, also returning the validated text (so callers need not validate and copy it again).
    /// `nestedMembers`: the cap on every nested object's members (JSONPrecheck's).
    static func decodeKeepingText<T: Decodable>(_ type: T.Type, from bytes: [UInt8], maxMembers: Int,
                                                nestedMembers: Int = JSONPrecheck.maxNestedMembers) -> Result<(value: T, text: String), Failure> {
        guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(.notUTF8) }
        return bytes.withUnsafeBytes { raw in
            if let failure = JSONPrecheck.check(raw, maxMembers: maxMembers, nestedMembers: nestedMembers) { return .failure(.precheck(failure)) }
            guard let base = raw.baseAddress else { return .failure(.precheck(.notObject)) }   // unreachable: the precheck refuses empty input
            do {
                // A view of `bytes` without copying; JSONDecoder copies what it decodes and keeps no reference.
                let data = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: raw.count, deallocator: .none)
                return .success((try decoder.decode(T.self, from: data), text))
            } catch {
                return .failure(.decoding(error))
            }
        }
    }
}

/// Any member name of a JSON object, as a coding key (JWKS entries, the event types of `events`).
struct MemberName: CodingKey {
    var stringValue: String
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

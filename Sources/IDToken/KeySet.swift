// A set of Google's public signing keys by kid, parsed from a JWKS document; unusable entries are recorded, not used.
import FoundationEssentials

/// Public verification keys by `kid`. Immutable; EVP_PKEYs are built once here, at load time.
///
/// Loading rules (see docs/verification.md):
/// - The document must be a JSON object with a `keys` array, at most `maxDocumentBytes`; otherwise `invalid_key_set`.
/// - An entry is *rejected* (kept out of the set, its reason recorded) when it has no string `kid`, a `use` other
///   than `sig`, `key_ops` without `verify`, a `kty` other than `RSA`/`EC`, an `alg` other than the one its key
///   type allows (RSA → RS256, EC P-256 → ES256), missing or malformed key fields (`unusable_key`), or an RSA
///   modulus under 2048 bits / an exponent that is even or below 3 (`weak_key`).
/// - Two entries with the same `kid` are both dropped (`duplicate_kid`): the kid is ambiguous.
/// - A document left with no usable key is refused as a whole (`invalid_key_set`).
/// A token naming a rejected kid fails with that entry's reason; any other unknown kid with `unknown_kid`.
public struct KeySet: Sendable {
    /// A JWKS entry that was not loaded, and why.
    package struct RejectedKey: Sendable, Hashable {
        package let kid: String?
        package let reason: IDTokenError
    }

    public static let maxDocumentBytes = 1 << 20
    /// Entries of one document (Google lists two or three; each costs an OpenSSL key to build).
    public static let maxKeys = 64

    /// The kids of the usable keys, sorted.
    public let keyIDs: [String]
    /// Entries that were not loaded, in document order.
    package let rejectedKeys: [RejectedKey]
    let keys: [String: PublicKey]
    let rejectedByKid: [String: IDTokenError]
    /// Base64url header segments Google (and DevelopmentKey) send for each key, e.g. `{"alg":"RS256","kid":"…","typ":"JWT"}`.
    /// A token whose header segment equals one byte for byte has exactly that header, so JSON decoding is skipped.
    let knownHeaders: [(segment: [UInt8], header: JOSEHeader)]

    private static func knownHeaders(_ keys: [String: PublicKey]) -> [(segment: [UInt8], header: JOSEHeader)] {
        var out: [(segment: [UInt8], header: JOSEHeader)] = []
        for (kid, key) in keys.sorted(by: { $0.key < $1.key }) {
            // Only kids that need no JSON escaping.
            guard kid.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") && $0 < 0x7F }) else { continue }
            let alg = key.algorithm.rawValue
            let header = JOSEHeader(alg: alg, kid: kid, hasCrit: false, embedsKey: false)
            for json in ["{\"alg\":\"\(alg)\",\"kid\":\"\(kid)\",\"typ\":\"JWT\"}", "{\"alg\":\"\(alg)\",\"kid\":\"\(kid)\"}"] {
                out.append((Array(Base64URL.encode(Array(json.utf8)).utf8), header))
            }
        }
        return out
    }

    /// The pre-decoded header whose segment equals `segment`, if any.
    func knownHeader(_ segment: UnsafeRawBufferPointer) -> JOSEHeader? {
        for known in knownHeaders where known.segment.count == segment.count {
            if known.segment.withUnsafeBytes({ memEqual($0, segment) }) { return known.header }
        }
        return nil
    }

    /// Parses a JWKS document (`{"keys": [...]}`).
    public init(jwks: [UInt8]) throws(IDTokenError) {
        guard jwks.count <= Self.maxDocumentBytes else {
            throw IDTokenError(.invalidKeySet, "JWKS larger than \(Self.maxDocumentBytes) bytes")
        }
        if let failure = jwks.withUnsafeBytes({ JSONPrecheck.check($0, maxMembers: JSONPrecheck.maxNestedMembers) }) {
            throw IDTokenError(.invalidKeySet, "JWKS is not a well-formed JSON object (\(failure))")
        }
        let document: JWKSDocument
        do {
            document = try JSONDecoder().decode(JWKSDocument.self, from: Data(jwks))
        } catch {
            throw IDTokenError(.invalidKeySet, "JWKS does not decode as {\"keys\": [objects]}")
        }
        guard document.keys.count <= Self.maxKeys else {
            throw IDTokenError(.invalidKeySet, "JWKS with \(document.keys.count) keys (at most \(Self.maxKeys))")
        }
        var loaded: [String: PublicKey] = [:]
        var rejected: [RejectedKey] = []
        var duplicates: Set<String> = []
        for entry in document.keys {
            do throws(IDTokenError) {
                let (kid, key) = try entry.publicKey()
                if loaded[kid] != nil || duplicates.contains(kid) || rejected.contains(where: { $0.kid == kid }) {
                    duplicates.insert(kid)
                    loaded[kid] = nil
                } else {
                    loaded[kid] = key
                }
            } catch {
                if let kid = entry.kid, loaded[kid] != nil || duplicates.contains(kid) {
                    duplicates.insert(kid)
                    loaded[kid] = nil
                }
                rejected.append(RejectedKey(kid: entry.kid, reason: error))
            }
        }
        var byKid: [String: IDTokenError] = [:]
        for r in rejected { if let kid = r.kid { byKid[kid] = r.reason } }
        for kid in duplicates.sorted() {
            let reason = IDTokenError(.duplicateKid, "kid \(kid) appears more than once")
            rejected.append(RejectedKey(kid: kid, reason: reason))
            byKid[kid] = reason
        }
        guard !loaded.isEmpty else {
            let reasons = rejected.map { "\($0.kid ?? "?"): \($0.reason.code.name) \($0.reason.detail)" }.joined(separator: ", ")
            throw IDTokenError(.invalidKeySet, "no usable key in JWKS [\(reasons)]")
        }
        keys = loaded
        keyIDs = loaded.keys.sorted()
        knownHeaders = Self.knownHeaders(loaded)
        rejectedKeys = rejected
        rejectedByKid = byKid
    }

    package func contains(kid: String) -> Bool { keys[kid] != nil }

    /// The usable key for `kid`, or the reason there is none (exact lookup; never another key).
    package func key(for kid: String) -> Result<PublicKey, IDTokenError> {
        if let key = keys[kid] { return .success(key) }
        if let reason = rejectedByKid[kid] { return .failure(reason) }
        return .failure(IDTokenError(.unknownKid, "kid not in key set"))
    }
}

private func memEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    for i in 0..<a.count where a[i] != b[i] { return false }
    return true
}

private struct JWKSDocument: Decodable {
    let keys: [JWKEntry]
}

/// One JWKS entry with every member optional; type errors are remembered, not thrown, so one odd entry
/// does not poison the whole set.
private struct JWKEntry: Decodable {
    var kid, kty, alg, use: String?
    var keyOps: [String]?
    /// An RSA key's modulus and exponent.
    var n, e: String?
    /// An EC key's curve and point.
    var crv, x, y: String?
    /// The first member found with the wrong JSON type.
    var badMember: String?

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: MemberName.self)
        func string(_ name: String) -> String? {
            guard c.contains(MemberName(name)) else { return nil }
            if let v = try? c.decode(String.self, forKey: MemberName(name)) { return v }
            badMember = badMember ?? name
            return nil
        }
        kid = string("kid"); kty = string("kty"); alg = string("alg"); use = string("use"); crv = string("crv")
        n = string("n"); e = string("e"); x = string("x"); y = string("y")
        if c.contains(MemberName("key_ops")) {
            if let ops = try? c.decode([String].self, forKey: MemberName("key_ops")) { keyOps = ops } else { badMember = badMember ?? "key_ops" }
        }
    }

    func publicKey() throws(IDTokenError) -> (String, PublicKey) {
        if let badMember { throw IDTokenError(.unusableKey, "member \(badMember) has the wrong type") }
        guard let kid else { throw IDTokenError(.unusableKey, "entry without kid") }
        if let use, use != "sig" { throw IDTokenError(.unusableKey, "use is \(use), not sig") }
        if let keyOps, !keyOps.contains("verify") { throw IDTokenError(.unusableKey, "key_ops without verify") }
        switch kty {
        case "RSA":
            if let alg, alg != SignatureAlgorithm.rs256.rawValue { throw IDTokenError(.unusableKey, "RSA key with alg \(alg)") }
            guard let n, let e, let nBytes = Base64URL.decode(n), let eBytes = Base64URL.decode(e) else {
                throw IDTokenError(.unusableKey, "RSA key without valid n and e")
            }
            return (kid, try PublicKey.rsa(modulus: nBytes, exponent: eBytes))
        case "EC":
            if let alg, alg != SignatureAlgorithm.es256.rawValue { throw IDTokenError(.unusableKey, "EC key with alg \(alg)") }
            guard crv == "P-256" else { throw IDTokenError(.unusableKey, "EC curve \(crv ?? "missing") is not P-256") }
            guard let x, let y, let xBytes = Base64URL.decode(x), let yBytes = Base64URL.decode(y) else {
                throw IDTokenError(.unusableKey, "EC key without valid x and y")
            }
            return (kid, try PublicKey.p256(x: xBytes, y: yBytes))
        default:
            throw IDTokenError(.unusableKey, "key type \(kty ?? "missing") is not RSA or EC")
        }
    }
}

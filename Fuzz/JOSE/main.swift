// libFuzzer target: arbitrary bytes as a compact JWS through the JSON precheck, the JWS layer, and the ID-token
// and security-event verifiers, with a real key set. Built only by scripts/fuzz (`make fuzz`).
import IDToken
import Signing

/// One RSA and one P-256 key; tokens the fuzzer builds from the corpus are checked against them.
private let rsa = try! DevelopmentKey.generate(.rsa2048)
private let ec = try! DevelopmentKey.generate(.p256)
private let keys = try! KeySet(jwks: Array("{\"keys\":[\(rsa.publicJWK),\(ec.publicJWK)]}".utf8))
private let policy = Policy(clientIDs: ["1234-fuzz.apps.googleusercontent.com"])
private let idTokens = Verifier(policy: policy)
private let events = SecurityEventVerifier(policy: policy)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ count: Int) -> Int32 {
    let input = UnsafeRawBufferPointer(start: data, count: count)
    // The raw bytes as JSON text (a header or payload after base64url decoding).
    _ = JSONPrecheck.check(input, maxMembers: JSONPrecheck.maxNestedMembers)
    guard let first = input.first else { return 0 }
    let rest = UnsafeRawBufferPointer(rebasing: input.dropFirst())
    let text = String(decoding: rest, as: UTF8.self)
    switch first % 3 {
    case 0:
        // The bytes as the token itself.
        _ = JWS.verify(text, keys: keys)
        _ = idTokens.verify(text, keys: keys, now: 1_800_000_000)
        _ = events.verify(text, keys: keys, now: 1_800_000_000)
    default:
        // The bytes as a header and payload, split at the first zero byte, signed for real: what is left to
        // refuse is everything after the signature (claims, events, types, sizes).
        let split = rest.firstIndex(of: 0) ?? rest.endIndex
        let key = first % 3 == 1 ? rsa : ec
        let token = key.signingKey.sign(header: Array(rest[rest.startIndex..<split]),
                                        payload: Array(rest[(split == rest.endIndex ? split : split + 1)...]))
        let claims = idTokens.verify(token, keys: keys, now: 1_800_000_000)
        let event = events.verify(token, keys: keys, now: 1_800_000_000)
        // A token cannot be both: an ID token carries no events, a security event token carries them.
        if case .success = claims, case .success = event { preconditionFailure("a token passed as an ID token and as a SET") }
    }
    return 0
}

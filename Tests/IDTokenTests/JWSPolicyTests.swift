// The JOSE layer: token shape, strict base64url, header policy (algorithms, embedded keys, crit, kid) and signatures.
import Dispatch
import IDToken
import Signing
import Synchronization
import Testing

struct HeaderCase: Sendable, CustomTestStringConvertible {
    let name: String
    let header: String
    let expected: String
    var testDescription: String { name }
}

let rsaKid = Keys.rsa.kid
let ecKid = Keys.ec.kid

@Test(arguments: [
    HeaderCase(name: "algNoneIsRejected", header: #"{"alg":"none","kid":"\#(rsaKid)"}"#, expected: "unsupported_algorithm"),
    HeaderCase(name: "algNoneCapitalisedIsRejected", header: #"{"alg":"None","kid":"\#(rsaKid)"}"#, expected: "unsupported_algorithm"),
    HeaderCase(name: "hmacIsRejected", header: #"{"alg":"HS256","kid":"\#(rsaKid)"}"#, expected: "unsupported_algorithm"),
    HeaderCase(name: "rs384IsRejected", header: #"{"alg":"RS384","kid":"\#(rsaKid)"}"#, expected: "unsupported_algorithm"),
    HeaderCase(name: "ps256IsRejected", header: #"{"alg":"PS256","kid":"\#(rsaKid)"}"#, expected: "unsupported_algorithm"),
    HeaderCase(name: "es384IsRejected", header: #"{"alg":"ES384","kid":"\#(ecKid)"}"#, expected: "unsupported_algorithm"),
    HeaderCase(name: "lowercaseAlgIsRejected", header: #"{"alg":"rs256","kid":"\#(rsaKid)"}"#, expected: "unsupported_algorithm"),
    HeaderCase(name: "missingAlgIsABadHeader", header: #"{"kid":"\#(rsaKid)"}"#, expected: "bad_header"),
    HeaderCase(name: "algAsNumberIsABadHeader", header: #"{"alg":256,"kid":"\#(rsaKid)"}"#, expected: "bad_header"),
    HeaderCase(name: "embeddedJwkIsRejected", header: #"{"alg":"RS256","kid":"\#(rsaKid)","jwk":{"kty":"RSA"}}"#, expected: "embedded_key"),
    HeaderCase(name: "jkuIsRejected", header: #"{"alg":"RS256","kid":"\#(rsaKid)","jku":"https://evil.example/k"}"#, expected: "embedded_key"),
    HeaderCase(name: "x5uIsRejected", header: #"{"alg":"RS256","kid":"\#(rsaKid)","x5u":"https://evil.example/c"}"#, expected: "embedded_key"),
    HeaderCase(name: "x5cIsRejected", header: #"{"alg":"RS256","kid":"\#(rsaKid)","x5c":["MIIB"]}"#, expected: "embedded_key"),
    HeaderCase(name: "unknownCritIsRejected", header: #"{"alg":"RS256","kid":"\#(rsaKid)","crit":["exp"],"exp":1}"#, expected: "unknown_crit"),
    HeaderCase(name: "critB64IsRejected", header: #"{"alg":"RS256","kid":"\#(rsaKid)","crit":["b64"],"b64":false}"#, expected: "unknown_crit"),
    HeaderCase(name: "missingKidIsRejected", header: #"{"alg":"RS256"}"#, expected: "missing_kid"),
    HeaderCase(name: "kidAsNumberIsABadHeader", header: #"{"alg":"RS256","kid":1}"#, expected: "bad_header"),
    HeaderCase(name: "unknownKidIsRejected", header: #"{"alg":"RS256","kid":"no-such-key"}"#, expected: "unknown_kid"),
    HeaderCase(name: "kidIsMatchedExactlyNotByCase", header: #"{"alg":"RS256","kid":"\#(rsaKid.uppercased())x"}"#, expected: "unknown_kid"),
    HeaderCase(name: "rs256WithAnECKeyIsAnAlgorithmMismatch", header: #"{"alg":"RS256","kid":"\#(ecKid)"}"#, expected: "algorithm_mismatch"),
    HeaderCase(name: "es256WithAnRSAKeyIsAnAlgorithmMismatch", header: #"{"alg":"ES256","kid":"\#(rsaKid)"}"#, expected: "algorithm_mismatch"),
    HeaderCase(name: "headerThatIsNotJSONIsRejected", header: "alg=RS256", expected: "bad_header"),
    HeaderCase(name: "headerThatIsAnArrayIsRejected", header: #"["RS256"]"#, expected: "bad_header"),
    HeaderCase(name: "headerWithDuplicateAlgIsRejected", header: #"{"alg":"none","kid":"\#(rsaKid)","alg":"RS256"}"#, expected: "bad_header"),
    HeaderCase(name: "deeplyNestedHeaderIsRejected",
               header: #"{"alg":"RS256","kid":"\#(rsaKid)","x":"# + String(repeating: "[", count: 2000) + String(repeating: "]", count: 2000) + "}",
               expected: "bad_header"),
    HeaderCase(name: "typAndUnknownMembersAreIgnored", header: #"{"alg":"RS256","kid":"\#(rsaKid)","typ":"JWT","x-extra":1}"#, expected: "ok"),
    HeaderCase(name: "whitespaceInsideHeaderJSONIsAccepted", header: "{ \"alg\" : \"RS256\",\n \"kid\": \"\(rsaKid)\" }", expected: "ok"),
])
func headerPolicy(_ c: HeaderCase) {
    // Signed with the RSA key: a header naming another algorithm still carries a real RS256 signature.
    let token = Keys.rsa.sign(headerJSON: c.header, payloadJSON: Fixture.claimsText)
    #expect(Fixture.code(Fixture.verify(token)) == c.expected)
}

@Test func es256TokenIsAccepted() {
    #expect(Fixture.code(Fixture.verify(Keys.ec.sign(claims: Fixture.claims))) == "ok")
}

@Test func tokenSignedByAnotherKeyUnderTheSameKidIsRejected() {
    let token = Keys.rsa2.sign(claims: Fixture.claims, kid: Keys.rsa.kid)
    #expect(Fixture.code(Fixture.verify(token)) == "bad_signature")
}

struct ShapeCase: Sendable, CustomTestStringConvertible {
    let name: String
    let token: String
    let expected: String
    var testDescription: String { name }
}

let goodRSAToken = Keys.rsa.sign(claims: Fixture.claims)
let goodECToken = Keys.ec.sign(claims: Fixture.claims)
let parts = goodRSAToken.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
let ecParts = goodECToken.split(separator: ".", omittingEmptySubsequences: false).map(String.init)

func withSignature(_ p: [String], _ sig: [UInt8]) -> String { p[0] + "." + p[1] + "." + Base64URL.encode(sig) }
func flipLastBit(_ s: String) -> String {
    var bytes = Base64URL.decode(s)!
    bytes[bytes.count - 1] ^= 1
    return Base64URL.encode(bytes)
}

@Test(arguments: [
    ShapeCase(name: "validTokenIsAccepted", token: goodRSAToken, expected: "ok"),
    ShapeCase(name: "emptyStringIsMalformed", token: "", expected: "malformed"),
    ShapeCase(name: "twoSegmentsAreMalformed", token: parts[0] + "." + parts[1], expected: "malformed"),
    ShapeCase(name: "fourSegmentsAreMalformed", token: goodRSAToken + ".", expected: "malformed"),
    ShapeCase(name: "jweShapedTokenIsMalformed", token: parts[0] + ".." + parts[1] + ".." + parts[2], expected: "malformed"),
    ShapeCase(name: "tokenOver16KBIsRefusedUnparsed", token: String(repeating: "A", count: 16 * 1024 + 1), expected: "token_too_large"),
    ShapeCase(name: "paddingInSignatureIsBadBase64", token: goodRSAToken + "==", expected: "bad_base64"),
    ShapeCase(name: "paddingInHeaderIsBadBase64", token: parts[0] + "=." + parts[1] + "." + parts[2], expected: "bad_base64"),
    ShapeCase(name: "plusInPayloadIsBadBase64", token: parts[0] + "." + parts[1].dropLast() + "+." + parts[2], expected: "bad_base64"),
    ShapeCase(name: "slashInSignatureIsBadBase64", token: parts[0] + "." + parts[1] + "." + parts[2].dropLast() + "/", expected: "bad_base64"),
    ShapeCase(name: "whitespaceInPayloadIsBadBase64", token: parts[0] + ". " + parts[1] + "." + parts[2], expected: "bad_base64"),
    ShapeCase(name: "surroundingWhitespaceIsBadBase64", token: goodRSAToken + "\n", expected: "bad_base64"),
    ShapeCase(name: "signatureLengthOfFourKPlusOneIsBadBase64", token: goodRSAToken + "AAA", expected: "bad_base64"),
    ShapeCase(name: "nonCanonicalTrailingBitsAreBadBase64", token: parts[0] + "." + parts[1] + "." + nonCanonical(parts[2]),
              expected: "bad_base64"),
    ShapeCase(name: "emptySignatureIsABadSignature", token: parts[0] + "." + parts[1] + ".", expected: "bad_signature"),
    ShapeCase(name: "truncatedRSASignatureIsRejected",
              token: withSignature(parts, Array(Base64URL.decode(parts[2])!.dropLast())), expected: "bad_signature"),
    ShapeCase(name: "rsaSignatureWithLeadingZeroByteAddedIsRejected",
              token: withSignature(parts, [0] + Base64URL.decode(parts[2])!), expected: "bad_signature"),
    ShapeCase(name: "modifiedRSASignatureIsRejected", token: parts[0] + "." + parts[1] + "." + flipLastBit(parts[2]), expected: "bad_signature"),
    ShapeCase(name: "modifiedPayloadIsRejected",
              token: parts[0] + "." + Base64URL.encode(Array(Fixture.claimsText.replacingOccurrences(of: "Test User", with: "Evil User").utf8))
                  + "." + parts[2], expected: "bad_signature"),
    ShapeCase(name: "es256TokenIsAcceptedAsIs", token: goodECToken, expected: "ok"),
    ShapeCase(name: "es256SignatureOf63BytesIsRejected",
              token: withSignature(ecParts, Array(Base64URL.decode(ecParts[2])!.dropLast())), expected: "bad_signature"),
    ShapeCase(name: "es256SignatureOf65BytesIsRejected",
              token: withSignature(ecParts, Base64URL.decode(ecParts[2])! + [0]), expected: "bad_signature"),
    ShapeCase(name: "es256DERSignatureIsRejected", token: withSignature(ecParts, derOf(Base64URL.decode(ecParts[2])!)), expected: "bad_signature"),
    ShapeCase(name: "es256WithRZeroIsRejected",
              token: withSignature(ecParts, [UInt8](repeating: 0, count: 32) + Base64URL.decode(ecParts[2])!.suffix(32)), expected: "bad_signature"),
    ShapeCase(name: "es256WithSZeroIsRejected",
              token: withSignature(ecParts, Base64URL.decode(ecParts[2])!.prefix(32) + [UInt8](repeating: 0, count: 32)), expected: "bad_signature"),
    ShapeCase(name: "es256WithBothZeroIsRejected", token: withSignature(ecParts, [UInt8](repeating: 0, count: 64)), expected: "bad_signature"),
    ShapeCase(name: "modifiedES256SignatureIsRejected", token: ecParts[0] + "." + ecParts[1] + "." + flipLastBit(ecParts[2]), expected: "bad_signature"),
])
func tokenShape(_ c: ShapeCase) {
    #expect(Fixture.code(Fixture.verify(c.token)) == c.expected)
}

/// Changes the unused low bits of the last base64url character (a second encoding of the same bytes).
func nonCanonical(_ s: String) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    var chars = Array(s)
    let i = alphabet.firstIndex(of: chars[chars.count - 1])!
    chars[chars.count - 1] = alphabet[i | 1]
    precondition(s.utf8.count % 4 != 0 && alphabet[i | 1] != alphabet[i], "needs unused trailing bits")
    return String(chars)
}

/// DER ECDSA-Sig-Value of r‖s (what some libraries wrongly put in a JWS).
func derOf(_ raw: [UInt8]) -> [UInt8] {
    func int(_ b: ArraySlice<UInt8>) -> [UInt8] {
        var v = Array(b.drop(while: { $0 == 0 }))
        if v.first.map({ $0 & 0x80 != 0 }) ?? true { v.insert(0, at: 0) }
        return [0x02, UInt8(v.count)] + v
    }
    let body = int(raw[0..<32]) + int(raw[32..<64])
    return [0x30, UInt8(body.count)] + body
}

@Test func es256SignatureWithLeadingZeroRIsAccepted() {
    // Sign until r has a leading zero byte: the r‖s → DER conversion must drop it (and keep s intact).
    var found = false
    for i in 0..<2000 {
        let token = Keys.ec.sign(claims: Fixture.claims(["jti": .integer(Int64(i))]))
        let sig = Base64URL.decode(token.split(separator: ".")[2])!
        if sig[0] == 0 || sig[32] == 0 {
            found = true
            #expect(Fixture.code(Fixture.verify(token)) == "ok")
            break
        }
    }
    #expect(found)
}

@Test func jwsLayerReturnsThePayloadBytes() throws {
    let token = Keys.rsa.sign(header: Array("{\"alg\":\"RS256\",\"kid\":\"\(Keys.rsa.kid)\"}".utf8), payload: Array("foo".utf8))
    let jws = try JWS.verify(token, keys: Keys.set).get()
    #expect(jws.payload == Array("foo".utf8))
    #expect(jws.algorithm == .rs256 && jws.keyID == Keys.rsa.kid)
}

struct Base64Case: Sendable, CustomTestStringConvertible {
    let text: String
    let bytes: [UInt8]?
    var testDescription: String { "\"\(text)\"" }
}

@Test(arguments: [
    Base64Case(text: "", bytes: []),
    Base64Case(text: "Zg", bytes: Array("f".utf8)),
    Base64Case(text: "Zm8", bytes: Array("fo".utf8)),
    Base64Case(text: "Zm9v", bytes: Array("foo".utf8)),
    Base64Case(text: "-_8", bytes: [0xFB, 0xFF]),
    Base64Case(text: "Zg==", bytes: nil),
    Base64Case(text: "Zh", bytes: nil),
    Base64Case(text: "Zm9", bytes: nil),
    Base64Case(text: "Z", bytes: nil),
    Base64Case(text: "+/8", bytes: nil),
    Base64Case(text: "Zm 9v", bytes: nil),
    Base64Case(text: "Zm9v\n", bytes: nil),
    Base64Case(text: "Zm9v=", bytes: nil),
])
func base64URLIsStrict(_ c: Base64Case) {
    #expect(Base64URL.decode(c.text) == c.bytes)
    if let bytes = c.bytes { #expect(Base64URL.encode(bytes) == c.text) }
}

@Test func base64URLRoundTripsEveryLength() {
    for count in 0..<70 {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
    }
}

@Test func digestIsSHA256() {
    #expect(Digest.sha256(Array("abc".utf8)) == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
    #expect(Digest.sha256([]) == hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
}

func hex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var it = s.makeIterator()
    while let a = it.next(), let b = it.next() { out.append(UInt8(String([a, b]), radix: 16)!) }
    return out
}

@Test(arguments: [
    #"{"alg":"RS256","kid":"\#(rsaKid)","typ":"JWT"}"#,
    #"{"alg":"RS256","kid":"\#(rsaKid)"}"#,
    #"{"kid":"\#(rsaKid)","alg":"RS256","typ":"JWT"}"#,
    #"{"alg":"RS256","typ":"JWT","kid":"\#(rsaKid)"}"#,
])
func googleShapedAndOtherHeadersAreDecidedAlike(_ header: String) {
    // The first two match a pre-encoded header segment and skip JSON decoding; the others are decoded.
    let token = Keys.rsa.sign(headerJSON: header, payloadJSON: Fixture.claimsText)
    #expect(Fixture.code(Fixture.verify(token)) == "ok")
    let forged = Keys.rsa2.sign(headerJSON: header, payloadJSON: Fixture.claimsText)
    #expect(Fixture.code(Fixture.verify(forged)) == "bad_signature")
}

@Test func concurrentVerificationsWithSharedKeysAgree() {
    let good = Keys.rsa.sign(claims: Fixture.claims)
    let goodEC = Keys.ec.sign(claims: Fixture.claims)
    let forged = Keys.rsa2.sign(claims: Fixture.claims, kid: Keys.rsa.kid)
    let outcomes = Mutex<[String: Int]>([:])
    DispatchQueue.concurrentPerform(iterations: 600) { i in
        let token = [good, goodEC, forged][i % 3]
        let code = Fixture.code(Fixture.verify(token))
        outcomes.withLock { $0[code, default: 0] += 1 }
    }
    #expect(outcomes.withLock { $0 } == ["ok": 400, "bad_signature": 200])
}

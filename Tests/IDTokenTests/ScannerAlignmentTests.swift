// The word-at-a-time scans (dots in the token, quotes and backslashes in JSON strings) decide alike at every byte offset.
import IDToken
import Signing
import Testing

let alignmentToken = Keys.rsa.sign(claims: Fixture.claims)

@Test(arguments: Array(1..<24) + Array(alignmentToken.utf8.count - 24..<alignmentToken.utf8.count))
func extraDotAtAnyOffsetIsMalformed(_ offset: Int) {
    var bytes = Array(alignmentToken.utf8)
    bytes.insert(UInt8(ascii: "."), at: offset)
    #expect(Fixture.code(Fixture.verify(String(decoding: bytes, as: UTF8.self))) == "malformed")
}

/// The standard claims after a padding claim of `padding` characters, so later quotes land at every offset.
func paddedPayload(_ padding: Int, value: String = "", then tail: String = "") -> String {
    var text = "{\"pad\":\"" + String(repeating: "p", count: padding) + value + "\","
    text += String(Fixture.claimsText.dropFirst().dropLast()) + tail + "}"
    return text
}

@Test(arguments: 0..<17)
func duplicateClaimIsFoundAtEveryOffset(_ padding: Int) {
    let token = Keys.rsa.sign(payloadJSON: paddedPayload(padding, then: ",\"sub\":\"attacker\""))
    #expect(Fixture.code(Fixture.verify(token)) == "bad_payload")
}

@Test(arguments: 0..<17)
func escapedQuoteInAStringIsNotItsEndAtEveryOffset(_ padding: Int) {
    // `"\",\"sub\":\"x` inside one string value is not a second `sub` member.
    let accepted = Keys.rsa.sign(payloadJSON: paddedPayload(padding, value: "\\\",\\\"sub\\\":\\\"x\\\\"))
    #expect(Fixture.code(Fixture.verify(accepted)) == "ok")
    let duplicated = Keys.rsa.sign(payloadJSON: paddedPayload(padding, value: "\\\"", then: ",\"sub\":\"attacker\""))
    #expect(Fixture.code(Fixture.verify(duplicated)) == "bad_payload")
}

@Test func audienceIsComparedByBytesNotCanonicalEquivalence() {
    // "café" precomposed (U+00E9) and decomposed (e + U+0301) are equal Swift Strings but different bytes.
    let policy = Policy(clientIDs: ["caf\u{E9}.apps.googleusercontent.com"])
    let decomposed = Keys.rsa.sign(claims: Fixture.claims(["aud": .string("cafe\u{301}.apps.googleusercontent.com")]))
    #expect(Fixture.code(Fixture.verify(decomposed, policy: policy)) == "bad_audience")
    // Issued to that client (azp), as a web client's token is.
    let precomposed = Keys.rsa.sign(claims: Fixture.claims(["aud": .string("caf\u{E9}.apps.googleusercontent.com"),
                                                            "azp": .string("caf\u{E9}.apps.googleusercontent.com")]))
    #expect(Fixture.code(Fixture.verify(precomposed, policy: policy)) == "ok")
}

/// `JSONString.plainEnd` stops at the first quote, backslash or control byte (and for output at DEL and 0xE2)
/// wherever it lies against its eight-byte steps, and at the end when there is none.
@Test(arguments: 0..<48)
func plainStringContentEndsAtTheFirstStopAtEveryOffset(_ offset: Int) {
    for (stop, forOutput) in [(UInt8(0x22), false), (0x5C, false), (0x00, false), (0x1F, false), (0x7F, true), (0xE2, true)] {
        var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 64)
        bytes[offset] = stop
        bytes[min(offset + 3, 63)] = 0x22
        let end = bytes.withUnsafeBytes { JSONString.plainEnd($0, from: 0, forOutput: forOutput) }
        #expect(end == offset, "byte \(stop) at \(offset)")
        // Where the byte is not a stop for this use, the scan goes past it.
        if !forOutput, stop != 0x22 {
            let output = bytes.withUnsafeBytes { JSONString.plainEnd($0, from: 0, forOutput: true) }
            #expect(output == offset)
        }
    }
    let plain = [UInt8](repeating: UInt8(ascii: "a"), count: offset) + [0x7F, 0xE2]
    #expect(plain.withUnsafeBytes { JSONString.plainEnd($0, from: 0) } == plain.count)
    #expect(plain.withUnsafeBytes { JSONString.plainEnd($0, from: offset + 5) } == plain.count)
}

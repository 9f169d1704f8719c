// Bounded work for hostile input: member caps in headers, claims and key sets, and JSON prechecks whose work is linear.
import IDToken
import Signing
import Testing

/// `count` distinct two-letter-suffixed names, each starting with an escape (`"\nAA":0,"\nAB":0,...`): the header
/// that cost 2.7 s of CPU per 16 KB token when every name was compared with every earlier one through JSONDecoder.
func escapedNames(_ count: Int) -> String {
    let letters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"), pairs = letters.count * letters.count
    let names = (0..<count).map { i in
        "\"\\n\(letters[i / letters.count % letters.count])\(letters[i % letters.count])\(i < pairs ? "" : String(i / pairs))\":0"
    }
    return "{" + names.joined(separator: ",") + "}"
}

/// The same number of members, plain names of the same length.
func plainNames(_ count: Int) -> String {
    "{" + (0..<count).map { "\"n\(String($0 + 100_000, radix: 10))\":0" }.joined(separator: ",") + "}"
}

func precheck(_ text: String, maxMembers: Int) -> (failure: JSONPrecheck.Failure?, steps: Int) {
    var steps = 0
    let failure = Array(text.utf8).withUnsafeBytes { JSONPrecheck.check($0, maxMembers: maxMembers, steps: &steps) }
    return (failure, steps)
}

func header(extraMembers: Int) -> String {
    #"{"alg":"RS256","kid":"\#(Keys.rsa.kid)""# + (0..<extraMembers).map { #","x\#($0)":\#($0)"# }.joined() + "}"
}

func payload(extraClaims: Int) -> String {
    var text = Fixture.claimsText
    text.removeLast()
    return text + (0..<extraClaims).map { #","x\#($0)":\#($0)"# }.joined() + "}"
}

@Test func headerOfSixteenMembersIsAcceptedAndSeventeenIsABadHeader() {
    #expect(Fixture.code(Fixture.verify(Keys.rsa.sign(headerJSON: header(extraMembers: 14), payloadJSON: Fixture.claimsText))) == "ok")
    #expect(Fixture.code(Fixture.verify(Keys.rsa.sign(headerJSON: header(extraMembers: 15), payloadJSON: Fixture.claimsText))) == "bad_header")
}

@Test func payloadOfSixtyFourClaimsIsAcceptedAndSixtyFiveIsABadPayload() {
    let base = Fixture.claims.count
    #expect(Fixture.code(Fixture.verify(Keys.rsa.sign(payloadJSON: payload(extraClaims: 64 - base)))) == "ok")
    #expect(Fixture.code(Fixture.verify(Keys.rsa.sign(payloadJSON: payload(extraClaims: 65 - base)))) == "bad_payload")
}

@Test func theQuadraticHeaderOfTheFindingIsRefusedAtTheMemberCap() {
    // As many escaped names as a 16 KB token holds; refused after the 17th name, not after comparing all pairs.
    let text = escapedNames(1150)
    let token = Keys.rsa.sign(headerJSON: text, payloadJSON: Fixture.claimsText)
    #expect(token.utf8.count <= JWS.maxTokenBytes)
    #expect(Fixture.code(Fixture.verify(token)) == "bad_header")
    let (failure, steps) = precheck(text, maxMembers: JWS.maxHeaderMembers)
    #expect(failure == .tooManyMembers)
    #expect(steps < 400)
}

struct WorkCase: Sendable, CustomTestStringConvertible {
    let name: String
    let document: @Sendable (Int) -> String
    var testDescription: String { name }
}

/// Work per input byte stays under a small constant, and doubling the input at most doubles the work (with slack),
/// with no member cap to stop early: a quadratic pass fails both at these sizes.
@Test(arguments: [
    WorkCase(name: "escapedDistinctNames") { escapedNames($0) },
    WorkCase(name: "plainDistinctNames") { plainNames($0) },
    WorkCase(name: "namesWithALongCommonPrefix") { count in
        "{" + (0..<count).map { "\"" + String(repeating: "p", count: 200) + "\($0)\":0" }.joined(separator: ",") + "}"
    },
    WorkCase(name: "namesMadeOfUnicodeEscapes") { count in
        "{" + (0..<count).map { i in "\"" + String(repeating: "\\u00e9", count: 20) + "\(i)\":0" }.joined(separator: ",") + "}"
    },
    WorkCase(name: "manySmallNestedObjects") { count in
        "{\"a\":[" + (0..<count).map { "{\"k\($0 % 7)\":{\"x\":[{},{}]}}" }.joined(separator: ",") + "]}"
    },
    WorkCase(name: "longEscapedStringValues") { count in
        "{\"v\":\"" + String(repeating: "\\\"\\\\\\n", count: count * 4) + "\"}"
    },
])
func precheckWorkIsLinearInTheInput(_ c: WorkCase) {
    var previous: (bytes: Int, steps: Int)?
    for count in [500, 1000, 2000, 4000] {
        let text = c.document(count)
        let (failure, steps) = precheck(text, maxMembers: 10_000)
        #expect(failure == nil, "\(c.name) \(count): \(String(describing: failure))")
        let bytes = text.utf8.count
        #expect(steps <= 3 * bytes, "\(c.name) \(count): \(steps) steps for \(bytes) bytes")
        if let previous {
            let growth = Double(steps) / Double(previous.steps), inputGrowth = Double(bytes) / Double(previous.bytes)
            #expect(growth <= inputGrowth * 1.25, "\(c.name) \(count): work grew \(growth)x for \(inputGrowth)x input")
        }
        previous = (bytes, steps)
    }
}

@Test func escapedNamesCostAboutAsMuchAsPlainOnes() {
    let escaped = precheck(escapedNames(2000), maxMembers: 10_000)
    let plain = precheck(plainNames(2000), maxMembers: 10_000)
    #expect(escaped.failure == nil && plain.failure == nil)
    #expect(Double(escaped.steps) <= 2 * Double(plain.steps), "\(escaped.steps) steps escaped, \(plain.steps) plain")
}

struct PrecheckCase: Sendable, CustomTestStringConvertible {
    let name: String
    let text: String
    let expected: JSONPrecheck.Failure?
    var testDescription: String { name }
}

@Test(arguments: [
    PrecheckCase(name: "duplicateTopLevelNameIsFound", text: #"{"a":1,"b":2,"a":3}"#, expected: .duplicateName),
    PrecheckCase(name: "duplicateWrittenWithAnEscapeIsFound", text: #"{"alg":1,"\u0061lg":2}"#, expected: .duplicateName),
    PrecheckCase(name: "duplicateWrittenWithASurrogatePairIsFound", text: #"{"\ud83d\ude00":1,"😀":2}"#, expected: .duplicateName),
    PrecheckCase(name: "duplicateInANestedObjectIsFound", text: #"{"a":{"x":1,"y":2,"x":3}}"#, expected: .duplicateName),
    PrecheckCase(name: "sameNameInSiblingObjectsIsNoDuplicate", text: #"{"a":{"x":1},"b":{"x":2},"c":[{"x":3},{"x":4}]}"#, expected: nil),
    PrecheckCase(name: "sameNameInParentAndChildIsNoDuplicate", text: #"{"x":{"x":{"x":1}}}"#, expected: nil),
    PrecheckCase(name: "parentNamesSurviveAChild", text: #"{"x":1,"c":{"y":1,"z":2},"x":2}"#, expected: .duplicateName),
    PrecheckCase(name: "namesDifferingOnlyInAnEscapedByteDiffer", text: #"{"a\n":1,"a\t":2}"#, expected: nil),
    PrecheckCase(name: "loneHighSurrogateInANameIsMalformed", text: #"{"\ud83d":1,"a":2}"#, expected: .malformed),
    PrecheckCase(name: "loneLowSurrogateInANameIsMalformed", text: #"{"\ude00":1}"#, expected: .malformed),
    PrecheckCase(name: "badEscapeInANameIsMalformed", text: #"{"\q":1,"a":2}"#, expected: .malformed),
    PrecheckCase(name: "shortUnicodeEscapeInANameIsMalformed", text: #"{"\u00":1,"a":2}"#, expected: .malformed),
    PrecheckCase(name: "mismatchedBracketsAreMalformed", text: #"{"a":[1}"#, expected: .malformed),
    PrecheckCase(name: "unterminatedStringIsMalformed", text: #"{"a":"b}"#, expected: .malformed),
    PrecheckCase(name: "trailingBytesAreMalformed", text: #"{"a":1} x"#, expected: .malformed),
    PrecheckCase(name: "anArrayIsNotAnObject", text: #"[{"a":1}]"#, expected: .notObject),
    PrecheckCase(name: "seventeenLevelsAreTooDeep", text: "{\"a\":" + String(repeating: "[", count: 16) + String(repeating: "]", count: 16) + "}",
                 expected: .tooDeep),
    PrecheckCase(name: "sixteenLevelsAreAccepted", text: "{\"a\":" + String(repeating: "[", count: 15) + String(repeating: "]", count: 15) + "}",
                 expected: nil),
    PrecheckCase(name: "nestedObjectOverSixtyFourMembersIsRefused",
                 text: "{\"a\":{" + (0..<65).map { "\"m\($0)\":0" }.joined(separator: ",") + "}}", expected: .tooManyMembers),
    PrecheckCase(name: "nestedObjectOfSixtyFourMembersIsAccepted",
                 text: "{\"a\":{" + (0..<64).map { "\"m\($0)\":0" }.joined(separator: ",") + "}}", expected: nil),
    PrecheckCase(name: "stringValuesAreNotNames", text: #"{"a":"a","b":["a","a"],"c":{"d":"d"}}"#, expected: nil),
])
func precheckShape(_ c: PrecheckCase) {
    #expect(precheck(c.text, maxMembers: 16).failure == c.expected)
}

@Test func duplicateClaimInANestedObjectIsABadPayload() {
    #expect(Fixture.code(Fixture.verify(Keys.rsa.sign(payloadJSON: payload(extraClaims: 0).dropLast() + #","x":{"a":1,"a":2}}"#))) == "bad_payload")
}

@Test func keySetOfSixtyFourKeysLoadsAndSixtyFiveIsRefused() throws {
    func document(_ count: Int) -> [UInt8] {
        jwks((0..<count).map { edited(Keys.rsa2.publicJWK, ["kid": "k\($0)"]) }.joined(separator: ","))
    }
    #expect(try KeySet(jwks: document(64)).keyIDs.count == 64)
    #expect(throws: IDTokenError(.invalidKeySet)) { try KeySet(jwks: document(65)) }
}

@Test func keySetEntryWithADuplicateMemberRefusesTheDocument() {
    // Which `n` would count? The document is malformed, not one entry.
    let entry = Keys.rsa2.publicJWK.dropLast() + #","n":"AQAB"}"#
    #expect(throws: IDTokenError(.invalidKeySet)) { try KeySet(jwks: jwks(Keys.rsa.publicJWK, String(entry))) }
}

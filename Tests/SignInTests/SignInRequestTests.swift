// POST /tokensignin bodies: the three accepted forms and every refusal, with the error each maps to.

@testable import SignIn
import Testing

private let token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"

private func parse(_ contentType: String?, _ body: String, cookie: String? = nil) throws(SignInError) -> SignInRequest {
    try SignInRequest.parse(contentType: contentType, body: Array(body.utf8), cookieHeader: cookie)
}

/// `{"idToken":"x","a":` + `depth` nested arrays/objects + `}`.
private func nested(_ depth: Int) -> String {
    #"{"idToken":"x","a":"# + String(repeating: #"[{"b":"#, count: depth / 2) + "1"
        + String(repeating: "}]", count: depth / 2) + "}"
}
private let deepArray = nested(40)
private let deepMember = nested(64)

/// (content type, body, expected code)
private let refusedBodies: [(String?, String, SignInError.Code)] = [
    (nil, #"{"idToken":"x"}"#, .unsupportedMediaType),
    ("", #"{"idToken":"x"}"#, .unsupportedMediaType),
    ("text/plain", "idtoken=x", .unsupportedMediaType),
    ("multipart/form-data; boundary=x", "idtoken=x", .unsupportedMediaType),
    ("application/jsonx", #"{"idToken":"x"}"#, .unsupportedMediaType),
    ("application/json; charset=latin1", #"{"idToken":"x"}"#, .unsupportedMediaType),
    ("application/json; charset", #"{"idToken":"x"}"#, .unsupportedMediaType),
    ("application/json", "", .malformedBody),
    ("application/json", "[]", .malformedBody),
    ("application/json", #""idToken""#, .malformedBody),
    ("application/json", "{", .malformedBody),
    ("application/json", #"{"idToken":"x"} {}"#, .malformedBody),
    ("application/json", #"{"idToken":"x",}"#, .malformedBody),
    ("application/json", #"{"idToken":1}"#, .malformedBody),
    ("application/json", #"{"idToken":null}"#, .malformedBody),
    ("application/json", #"{"idToken":"x","idToken":"y"}"#, .malformedBody),
    ("application/json", #"{'idToken':'x'}"#, .malformedBody),
    ("application/json", #"{"idToken":"x\q"}"#, .malformedBody),
    ("application/json", #"{"idToken":"\ud83d"}"#, .malformedBody),
    ("application/json", #"{"idToken":"\ude00x"}"#, .malformedBody),
    ("application/json", "{\"idToken\":\"a\u{1}b\"}", .malformedBody),
    ("application/json", #"{"a":01,"idToken":"x"}"#, .malformedBody),
    ("application/json", #"{"a":tru,"idToken":"x"}"#, .malformedBody),
    ("application/json", #"{"a":1.,"idToken":"x"}"#, .malformedBody),
    ("application/json", deepArray, .malformedBody),
    ("application/json", deepMember, .malformedBody),
    ("application/json", "{}", .missingToken),
    ("application/json", #"{"idtoken":"x"}"#, .missingToken),
    ("application/json", #"{"idToken":""}"#, .missingToken),
    ("application/x-www-form-urlencoded", "idtoken=%zz", .malformedBody),
    ("application/x-www-form-urlencoded", "idtoken=abc%", .malformedBody),
    ("application/x-www-form-urlencoded", "idtoken=abc%4", .malformedBody),
    ("application/x-www-form-urlencoded", "idtoken=%C3%28", .malformedBody),
    ("application/x-www-form-urlencoded", "idtoken=%FF", .malformedBody),
    ("application/x-www-form-urlencoded", "idtoken=a&idtoken=b", .malformedBody),
    ("application/x-www-form-urlencoded", "idtoken=a&credential=b&g_csrf_token=c", .malformedBody),
    ("application/x-www-form-urlencoded", "credential=a&credential=b&g_csrf_token=c", .malformedBody),
    ("application/x-www-form-urlencoded", "credential=a&g_csrf_token=c&g_csrf_token=c", .malformedBody),
    ("application/x-www-form-urlencoded", "", .missingToken),
    ("application/x-www-form-urlencoded", "idtoken=", .missingToken),
    ("application/x-www-form-urlencoded", "idtoken", .missingToken),
    ("application/x-www-form-urlencoded", "idToken=x", .missingToken),
    ]

@Suite struct SignInRequestTests {
    @Test(arguments: [
        "application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8",
        "application/json; charset=\"utf-8\"", "application/json ; foo=bar", "application/json;",
        "application/json; ; charset=utf-8",
    ])
    func jsonBodyYieldsItsIdToken(contentType: String) throws {
        #expect(try parse(contentType, #"{"idToken": "\#(token)"}"#) == .json(idToken: token))
    }

    @Test func jsonIgnoresOtherMembersButValidatesThem() throws {
        let body = #" { "a": [1, -2.5e+3, true, false, null, {"b": "\u00e9\ud83d\ude00"}], "idToken":"\#(token)", "z": 0 } "#
        #expect(try parse("application/json", body) == .json(idToken: token))
    }

    @Test func jsonNestedWithinTheDepthLimitIsAccepted() throws {
        #expect(try parse("application/json", nested(SignInRequest.maxJSONDepth - 2)) == .json(idToken: "x"))
    }

    @Test func jsonStringEscapesAreDecoded() throws {
        #expect(try parse("application/json", #"{"idToken": "a\/b\u0041\ud83d\ude00"}"#) == .json(idToken: "a/bA😀"))
    }

    @Test(arguments: [
        "application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=UTF-8",
    ])
    func formBodyYieldsItsIdtoken(contentType: String) throws {
        #expect(try parse(contentType, "idtoken=\(token)") == .form(idToken: token))
        #expect(try parse(contentType, "other=1&idtoken=\(token)&&x") == .form(idToken: token))
    }

    @Test func formDecodesPlusAndPercentEscapes() throws {
        #expect(try parse("application/x-www-form-urlencoded", "idtoken=a+b%2B%2fc%C3%A9") == .form(idToken: "a b+/cé"))
        #expect(try parse("application/x-www-form-urlencoded", "id%74oken=abc") == .form(idToken: "abc"))
    }

    @Test func webFormWithMatchingCsrfCookieYieldsCredential() throws {
        let request = try parse("application/x-www-form-urlencoded", "credential=\(token)&g_csrf_token=abc123&select_by=btn",
                                cookie: "other=1; g_csrf_token=abc123; __Host-tokensignin=s")
        #expect(request == .webForm(credential: token, csrfToken: "abc123"))
        #expect(request.idToken == token)
        #expect(request.isWebForm)
    }

    /// (content type, body, expected code): see `refusedBodies`.
    @Test(arguments: refusedBodies)
    func refusedBodyHasItsCode(contentType: String?, body: String, code: SignInError.Code) {
        #expect(throws: SignInError(code)) { try parse(contentType, body) }
    }

    @Test func invalidUTF8InJSONIsMalformed() {
        let body: [UInt8] = Array(#"{"idToken":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(throws: SignInError(.malformedBody)) {
            try SignInRequest.parse(contentType: "application/json", body: body, cookieHeader: nil)
        }
    }

    /// (body, cookie header)
    @Test(arguments: [
        ("credential=t&g_csrf_token=abc", nil),
        ("credential=t&g_csrf_token=abc", ""),
        ("credential=t&g_csrf_token=abc", "g_csrf_token=abd"),
        ("credential=t&g_csrf_token=abc", "g_csrf_token=abcd"),
        ("credential=t&g_csrf_token=abc", "g_csrf_token=ABC"),
        ("credential=t&g_csrf_token=abc", "x_g_csrf_token=abc"),
        ("credential=t&g_csrf_token=", "g_csrf_token="),
        ("credential=t", "g_csrf_token=abc"),
        ("credential=&g_csrf_token=abc", "g_csrf_token=xyz"),
    ] as [(String, String?)])
    func webFormWithoutMatchingCsrfCookieIsRefused(body: String, cookie: String?) {
        #expect(throws: SignInError(.csrfMismatch)) { try parse("application/x-www-form-urlencoded", body, cookie: cookie) }
    }

    @Test func webFormCsrfUsesTheFirstCookieOfThatName() throws {
        let body = "credential=t&g_csrf_token=first"
        #expect(try parse("application/x-www-form-urlencoded", body, cookie: "g_csrf_token=first; g_csrf_token=second").idToken == "t")
        #expect(throws: SignInError(.csrfMismatch)) {
            try parse("application/x-www-form-urlencoded", body, cookie: "g_csrf_token=second; g_csrf_token=first")
        }
    }

    @Test func webFormWithMatchingCsrfButEmptyCredentialIsMissingToken() {
        #expect(throws: SignInError(.missingToken)) {
            try parse("application/x-www-form-urlencoded", "credential=&g_csrf_token=abc", cookie: "g_csrf_token=abc")
        }
    }

    @Test(arguments: ["application/json", "application/x-www-form-urlencoded"])
    func tokenAtTheCapIsAcceptedAndOneByteMoreIsTooLarge(contentType: String) throws {
        let atCap = String(repeating: "a", count: SignInRequest.maxTokenBytes)
        let body = { (token: String) in contentType == "application/json" ? #"{"idToken":"\#(token)"}"# : "idtoken=\(token)" }
        #expect(try parse(contentType, body(atCap)).idToken == atCap)
        #expect(throws: SignInError(.tokenTooLarge)) { try parse(contentType, body(atCap + "a")) }
    }

    @Test func tooLargeWebFormCredentialIsRefused() {
        let credential = String(repeating: "a", count: SignInRequest.maxTokenBytes + 1)
        #expect(throws: SignInError(.tokenTooLarge)) {
            try parse("application/x-www-form-urlencoded", "credential=\(credential)&g_csrf_token=c", cookie: "g_csrf_token=c")
        }
    }

    @Test(arguments: [("abc", "abc", true), ("abc", "abd", false), ("abc", "ab", false), ("", "", true), ("é", "e", false)])
    func constantTimeEqualComparesExactly(lhs: String, rhs: String, equal: Bool) {
        #expect(SignInRequest.constantTimeEqual(lhs, rhs) == equal)
    }

    @Test func errorDetailNeverContainsTheToken() {
        let long = String(repeating: "Z", count: SignInRequest.maxTokenBytes + 1)
        for body in ["idtoken=\(long)", "idtoken=\(token)&idtoken=\(token)"] {
            do {
                _ = try parse("application/x-www-form-urlencoded", body)
                Issue.record("accepted")
            } catch {
                #expect(!error.detail.contains("ZZZZ") && !error.detail.contains(token))
                #expect(!String(decoding: Failure(error).response.body, as: UTF8.self).contains(token))
            }
        }
    }
}

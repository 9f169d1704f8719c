// JSON replies: error bodies and statuses, the JSON string encoder, and RFC 3339 timestamps.

import Testing
@testable import SignIn

private func text(_ reply: HTTPReply) -> String { String(decoding: reply.body, as: UTF8.self) }

@Suite struct ResponsesTests {
    @Test(arguments: [
        (ErrorCode.invalidRequest, 400), (.invalidToken, 401), (.accessDenied, 403), (.csrfCheckFailed, 403),
        (.notFound, 404), (.methodNotAllowed, 405), (.requestTooLarge, 413), (.unsupportedMediaType, 415),
        (.serverError, 500), (.temporarilyUnavailable, 503),
    ])
    func errorReplyHasItsStatusBodyAndHeaders(code: ErrorCode, status: Int) {
        let reply = HTTPReply.error(code, "why \"quoted\"")
        #expect(reply.status == status)
        #expect(text(reply) == #"{"error":"\#(code.rawValue)","error_description":"why \"quoted\""}"# + "\n")
        #expect(reply.header("Content-Type") == "application/json")
        #expect(reply.header("cache-control") == "no-store")
    }

    @Test func methodNotAllowedListsAllow() {
        let reply = HTTPReply.methodNotAllowed(allow: ["POST", "OPTIONS"])
        #expect(reply.status == 405)
        #expect(reply.header("Allow") == "POST, OPTIONS")
        #expect(text(reply).contains(#""error":"method_not_allowed""#))
    }

    @Test func temporarilyUnavailableCarriesRetryAfter() {
        let reply = HTTPReply.temporarilyUnavailable(retryAfter: 5)
        #expect(reply.status == 503)
        #expect(reply.header("Retry-After") == "5")
        #expect(text(reply).contains(#""error":"temporarily_unavailable""#))
    }

    /// (request error, status, error code)
    @Test(arguments: [
        (SignInError.Code.unsupportedMediaType, 415, "unsupported_media_type"),
        (.malformedBody, 400, "invalid_request"),
        (.missingToken, 400, "invalid_request"),
        (.tokenTooLarge, 400, "invalid_request"),
        (.csrfMismatch, 403, "csrf_check_failed"),
        (.invalidConfiguration, 500, "server_error"),
    ])
    func requestErrorMapsToItsDocumentedReply(code: SignInError.Code, status: Int, error: String) {
        let reply = HTTPReply.error(for: SignInError(code, "detail that must not leak"))
        #expect(reply.status == status)
        #expect(text(reply).hasPrefix(#"{"error":"\#(error)","#))
        #expect(!text(reply).contains("must not leak"))
    }

    @Test func jsonReplyKeepsExtraHeadersAfterTheStandardOnes() {
        let reply = HTTPReply.json(.object([("ok", .bool(true))]), headers: [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])
        #expect(reply.status == 200)
        #expect(reply.headers.map(\.0) == ["Content-Type", "Cache-Control", "X-Content-Type-Options", "Set-Cookie", "Set-Cookie"])
        #expect(reply.header("X-Content-Type-Options") == "nosniff")
        #expect(text(reply) == "{\"ok\":true}\n")
    }

    @Test func seeOtherRedirectsWithoutCaching() {
        let reply = HTTPReply.seeOther("/welcome", headers: [("Set-Cookie", "a=1")])
        #expect(reply.status == 303)
        #expect(reply.header("Location") == "/welcome")
        #expect(reply.header("Cache-Control") == "no-store")
        #expect(reply.header("Set-Cookie") == "a=1")
        #expect(reply.body.isEmpty)
    }

    /// (string, its JSON encoding)
    @Test(arguments: [
        ("", #""""#),
        ("plain", #""plain""#),
        ("a\"b", #""a\"b""#),
        ("a\\b", #""a\\b""#),
        ("/", #""/""#),
        ("\n\r\t\u{8}\u{C}", #""\n\r\t\b\f""#),
        ("\u{0}\u{1}\u{1F}\u{7F}", #""\u0000\u0001\u001f\u007f""#),
        ("\u{2028}\u{2029}", #""\u2028\u2029""#),
        ("é日本😀", "\"é日本😀\""),
        ("e\u{301}", "\"e\u{301}\""),
    ])
    func jsonStringIsEscaped(value: String, encoded: String) {
        #expect(JSONValue.string(value).json == encoded)
        #expect(String(validating: JSONValue.string(value).encoded(), as: UTF8.self) != nil)
    }

    @Test func jsonValuesEncodeCompactlyInKeyOrder() {
        let value = JSONValue.object([
            ("user", .object([("sub", .string("123")), ("name", .string(nil as String?)), ("verified", .bool(false))])),
            ("n", .int(-42)), ("list", .array([.int(1), .null, .array([])])), ("empty", .object([])),
        ])
        #expect(value.json == #"{"user":{"sub":"123","name":null,"verified":false},"n":-42,"list":[1,null,[]],"empty":{}}"#)
    }

    @Test func encodedJSONRoundTripsThroughTheRequestParser() throws {
        let token = "a\"b\\c\n\u{1}é😀"
        let body = JSONValue.object([("idToken", .string(token))]).encoded()
        #expect(try SignInRequest.parse(contentType: "application/json", body: body, cookieHeader: nil) == .json(idToken: token))
    }

    /// (Unix seconds, RFC 3339)
    @Test(arguments: [
        (0, "1970-01-01T00:00:00Z"),
        (1, "1970-01-01T00:00:01Z"),
        (-1, "1969-12-31T23:59:59Z"),
        (86_399, "1970-01-01T23:59:59Z"),
        (951_782_400, "2000-02-29T00:00:00Z"),
        (951_868_800, "2000-03-01T00:00:00Z"),
        (1_709_164_800, "2024-02-29T00:00:00Z"),
        (1_234_567_890, "2009-02-13T23:31:30Z"),
        (2_147_483_647, "2038-01-19T03:14:07Z"),
        (1_795_953_600, "2026-11-29T12:00:00Z"),
        (4_102_444_800, "2100-01-01T00:00:00Z"),
        (-2_208_988_800, "1900-01-01T00:00:00Z"),
        (253_402_300_799, "9999-12-31T23:59:59Z"),
        (-62_167_219_200, "0000-01-01T00:00:00Z"),
        (Int64.max, "9999-12-31T23:59:59Z"),
        (Int64.min, "0000-01-01T00:00:00Z"),
    ] as [(Int64, String)])
    func rfc3339FormatsKnownInstants(seconds: Int64, expected: String) {
        #expect(RFC3339.format(unixSeconds: seconds) == expected)
    }
}

@Suite struct OperatorOutputTests {
    @Test(arguments: [
        ("Mozilla/5.0", "Mozilla/5.0"),
        ("evil\u{1b}]0;title\u{07}", "evil\\u{1b}]0;title\\u{7}"),
        ("tab\there", "tab\\u{9}here"),
        ("ünïcode ✓", "ünïcode ✓"),
    ])
    func controlCharactersAreShownNotSentToTheTerminal(raw: String, shown: String) {
        #expect(OperatorCommands.printable(raw) == shown)
    }
}

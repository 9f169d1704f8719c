// JSON replies: error bodies and statuses, the JSON string encoder, and RFC 3339 timestamps.

@testable import Commands
import FastCGI
import IDToken
import Logging
@testable import SignIn
import Store
import Testing

private func text(_ reply: Response) -> String { String(decoding: reply.body, as: UTF8.self) }

extension Array {
    fileprivate var pair: (Element, Element) { (self[0], self[1]) }
}

@Suite struct FailureTests {
    @Test(arguments: [
        (ErrorCode.invalidRequest, 400), (.invalidToken, 401), (.accessDenied, 403), (.csrfCheckFailed, 403),
        (.notFound, 404), (.methodNotAllowed, 405), (.requestTooLarge, 413), (.unsupportedMediaType, 415),
        (.serverError, 500), (.temporarilyUnavailable, 503),
    ])
    func errorReplyHasItsStatusBodyAndHeaders(code: ErrorCode, status: Int) {
        let reply = Failure(code, "why \"quoted\"", reason: "test").response
        #expect(reply.status == status)
        #expect(text(reply) == #"{"error":"\#(code.rawValue)","error_description":"why \"quoted\""}"# + "\n")
        #expect(reply.header("Content-Type") == "application/json")
        #expect(reply.header("cache-control") == "no-store")
    }

    /// (request error, status, error code, extra header) — every SignInError code has its documented answer.
    @Test(arguments: [
        (SignInError.Code.unsupportedMediaType, 415, "unsupported_media_type", nil),
        (.malformedBody, 400, "invalid_request", nil),
        (.missingToken, 400, "invalid_request", nil),
        (.tokenTooLarge, 400, "invalid_request", nil),
        (.invalidQuery, 400, "invalid_request", nil),
        (.csrfMismatch, 403, "csrf_check_failed", nil),
        (.crossSite, 403, "csrf_check_failed", nil),
        (.accountRefused, 403, "access_denied", nil),
        (.bodyTooLarge, 413, "request_too_large", nil),
        (.notFound, 404, "not_found", nil),
        (.sessionNotFound, 404, "not_found", nil),
        (.notSignedIn, 401, "invalid_token", "WWW-Authenticate: Bearer"),
        (.methodNotAllowed, 405, "method_not_allowed", "Allow: POST, OPTIONS"),
        (.identityNotRepresentable, 500, "server_error", nil),
    ] as [(SignInError.Code, Int, String, String?)])
    func requestErrorMapsToItsDocumentedReply(code: SignInError.Code, status: Int, error: String, header: String?) {
        let reply = Failure(SignInError(code, "detail that must not leak", allow: ["POST", "OPTIONS"])).response
        #expect(reply.status == status)
        #expect(text(reply).hasPrefix(#"{"error":"\#(error)","#))
        #expect(!text(reply).contains("must not leak"))
        if let header {
            let (name, value) = header.split(separator: ":", maxSplits: 1).map { $0.trimmingASCIIWhitespace() }.pair
            #expect(reply.header(name) == value)
        }
    }

    /// (token refusal, status, error code, Retry-After)
    @Test(arguments: [
        (IDTokenError.Code.keysUnavailable, 503, "temporarily_unavailable", "5"),
        (.hostedDomainNotAllowed, 403, "access_denied", nil),
        (.expired, 401, "invalid_token", nil),
        (.badSignature, 401, "invalid_token", nil),
        (.unknownKid, 401, "invalid_token", nil),
        (.badAudience, 401, "invalid_token", nil),
    ] as [(IDTokenError.Code, Int, String, String?)])
    func tokenRefusalMapsToItsReply(code: IDTokenError.Code, status: Int, error: String, retryAfter: String?) {
        let failure = Failure(IDTokenError(code, "detail"))
        #expect(failure.response.status == status)
        #expect(text(failure.response).hasPrefix(#"{"error":"\#(error)","#))
        #expect(failure.response.header("Retry-After") == retryAfter)
        #expect(failure.reason == code.name)
    }

    /// Outages are 503 with Retry-After (clients retry); faults of the deployment or the code are 500 with the
    /// SQLSTATE kept for the log, never "unavailable" (which would have clients retry forever and alerts fire).
    @Test(arguments: [
        (StoreError(.connectionFailed, "no server"), 503),
        (StoreError(.connectionLost, sqlState: "57P01", "terminating"), 503),
        (StoreError(.serializationFailure, sqlState: "40001", "could not serialize"), 503),
        (StoreError(.serializationFailure, sqlState: "40P01", "deadlock"), 503),
        (StoreError(.timedOut, sqlState: "57014", "statement timeout"), 503),
        (StoreError(.timedOut, sqlState: "55P03", "lock timeout"), 503),
        (StoreError(.queryFailed, sqlState: "53300", "too many connections"), 503),
        (StoreError(.connectionLost, sqlState: "25006", "read-only transaction"), 503),
        (StoreError(.permissionDenied, sqlState: "42501", "permission denied for table users"), 500),
        (StoreError(.queryFailed, sqlState: "42P01", "relation does not exist"), 500),
        (StoreError(.constraintViolation, sqlState: "23514", "check constraint"), 500),
        (StoreError(.unexpectedResult, "expected 5 columns"), 500),
    ])
    func databaseErrorIsAnOutageOnlyWhenRetryable(error: StoreError, status: Int) {
        let failure = Failure(error)
        #expect(failure.response.status == status)
        #expect(failure.sqlState == error.sqlState)
        #expect(failure.reason == error.code.name)
        #expect(failure.response.header("Retry-After") == (status == 503 ? "2" : nil))
        #expect(!text(failure.response).contains(error.detail))
    }

    @Test func anyOtherErrorIsAServerFault() {
        struct Surprise: Error {}
        let failure = Failure(Surprise())
        #expect(failure.response.status == 500)
        #expect(failure.isServerFault)
    }

    @Test func jsonReplyKeepsExtraHeadersAfterTheStandardOnes() {
        let reply = Response.json(.object([("ok", .bool(true))]), headers: [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])
        #expect(reply.status == 200)
        #expect(reply.headers.map(\.name) == ["Content-Type", "Cache-Control", "X-Content-Type-Options", "Set-Cookie", "Set-Cookie"])
        #expect(reply.header("X-Content-Type-Options") == "nosniff")
        #expect(text(reply) == "{\"ok\":true}\n")
    }

    @Test func seeOtherRedirectsWithoutCaching() {
        let reply = Response.seeOther("/welcome", headers: [("Set-Cookie", "a=1")])
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

    /// The sign-in answer's writer gives the bytes JSONValue gives for the same members.
    @Test func theObjectWriterWritesWhatJSONValueEncodes() {
        var writer = JSONObjectWriter(capacity: 4)
        writer.object("user") { user in
            user.int("id", -42)
            user.string("sub", "a\"b\u{2028}")
            user.string("name", nil)
            user.bool("verified", false)
        }
        writer.object("empty") { _ in }
        writer.bool("created", true)
        let value = JSONValue.object([
            ("user", .object([("id", .int(-42)), ("sub", .string("a\"b\u{2028}")), ("name", .null), ("verified", .bool(false))])),
            ("empty", .object([])), ("created", .bool(true)),
        ])
        #expect(writer.finished() == value.encoded())
        #expect(JSONObjectWriter().finished() == Array("{}".utf8))
    }

    /// Escapes are found wherever they fall against the encoder's eight-byte steps.
    @Test(arguments: 0..<40)
    func jsonStringEscapesAtEveryOffset(_ offset: Int) {
        for special in ["\"", "\\", "\n", "\u{1}", "\u{7F}", "\u{2028}", "é"] {
            let value = String(repeating: "x", count: offset) + special + String(repeating: "y", count: 20)
            let expected = "\"" + String(repeating: "x", count: offset) + String(JSONValue.string(special).json.dropFirst().dropLast())
                + String(repeating: "y", count: 20) + "\""
            #expect(JSONValue.string(value).json == expected, "\(special.unicodeScalars.map(\.value)) at \(offset)")
        }
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

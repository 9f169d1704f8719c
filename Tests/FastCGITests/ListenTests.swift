// Listen.parse: the TOKENSIGNIN_LISTEN forms, and Request's CGI accessors.
import FastCGI
import Testing

@Suite struct ListenTests {
    @Test(arguments: [
        (String?.none, Listen.inherited), ("", .inherited),
        ("/run/tokensignin/fcgi.sock", .unix("/run/tokensignin/fcgi.sock")), ("./rel/sock", .unix("./rel/sock")),
        ("127.0.0.1:9000", .tcp(host: "127.0.0.1", port: 9000)), ("localhost:9000", .tcp(host: "localhost", port: 9000)),
        ("[::1]:9000", .tcp(host: "::1", port: 9000)), ("0.0.0.0:0", .tcp(host: "0.0.0.0", port: 0)),
    ] as [(String?, Listen)])
    func parseAcceptsTheDocumentedForms(value: String?, expected: Listen) throws {
        #expect(try Listen.parse(value) == expected)
    }

    @Test(arguments: ["9000", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:+80",
                      "example.com:80", ":9000", "::1:9000", "127.0.0.1:80 ", "/" + String(repeating: "a", count: 120)])
    func parseRejectsEverythingElse(value: String) {
        #expect(throws: FastCGIError(.badListenAddress)) { try Listen.parse(value) }
    }

    @Test func errorDescriptionIsTheCodeOnly() {
        let error = FastCGIError(.listenFailed, "bind /secret/path: Permission denied")
        #expect(error.description == "listen_failed")
        #expect(error == FastCGIError(.listenFailed))
    }
}

@Suite struct RequestTests {
    @Test(arguments: [("User-Agent", "HTTP_USER_AGENT"), ("cookie", "HTTP_COOKIE"), ("X-Forwarded-For", "HTTP_X_FORWARDED_FOR"),
                      ("content-type", "CONTENT_TYPE"), ("Content-Length", "CONTENT_LENGTH")])
    func headerNamesMapToCGIParameters(header: String, parameter: String) {
        #expect(Request.parameterName(forHeader: header) == parameter)
        #expect(Request(params: [parameter: "v"]).header(header) == "v")
    }

    @Test(arguments: [
        (["DOCUMENT_URI": "/a b", "REQUEST_URI": "/a%20b?x=1"], "/a b"),
        (["REQUEST_URI": "/a%20b?x=1"], "/a%20b"),
        (["REQUEST_URI": "/plain"], "/plain"),
        ([:], ""),
    ])
    func pathPrefersDocumentURI(params: [String: String], path: String) {
        #expect(Request(params: params).path == path)
    }

    @Test(arguments: [
        ("192.0.2.7", true), ("2001:db8::1", true), ("::1", true), ("::ffff:192.0.2.7", true),
        ("unix:", false), (":::", false), ("1.2.3", false), ("192.0.2.256", false), ("example.com", false),
        ("192.0.2.7 ", false), ("", false),
    ])
    func remoteIPIsOnlyAnAddress(value: String, isAddress: Bool) {
        #expect(Request(params: ["REMOTE_ADDR": value]).remoteIP == (isAddress ? value : nil))
    }

    @Test func absentOrEmptyOptionalParametersAreNil() {
        let request = Request(params: ["CONTENT_TYPE": "", "REMOTE_ADDR": ""])
        #expect(request.contentType == nil)
        #expect(request.remoteAddress == nil)
        #expect(request.method == "")
        #expect(request.query == "")
        #expect(request.header("Cookie") == nil)
    }
}

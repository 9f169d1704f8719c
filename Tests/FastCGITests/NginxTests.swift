// The Server behind a real nginx with the distribution's stock fastcgi_params, as in production.
import FastCGI
import Foundation
import Testing

@Suite(.serialized) struct NginxTests {
    @Test func stockFastcgiParamsCarryMethodPathQueryHeadersAndBody() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 2, maxBodyBytes: 4096),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        let nginx = try NginxFixture(fastcgiPass: "unix:" + dir.file("s"))
        let body: [UInt8] = Array(0...255) + Array("{\"idToken\":\"x\"}".utf8)
        let response = try nginx.request("POST", "/token%20signin/./x/../?a=1&b=%2F", headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("User-Agent", "Tester/2.0"),
            ("Cookie", "g_csrf_token=abc; other=1"), ("X-Custom-Header", "v"),
        ], body: body)
        #expect(response.status == 200)
        let request = try #require(recorder.requests.first)
        #expect(request.method == "POST")
        #expect(request.path == "/token signin/")  // DOCUMENT_URI: decoded and normalised by nginx
        #expect(request.params["REQUEST_URI"] == "/token%20signin/./x/../?a=1&b=%2F")
        #expect(request.query == "a=1&b=%2F")
        #expect(request.contentType == "application/json; charset=utf-8")
        #expect(request.header("User-Agent") == "Tester/2.0")
        #expect(request.header("Cookie") == "g_csrf_token=abc; other=1")
        #expect(request.header("x-custom-header") == "v")
        #expect(request.remoteAddress == "127.0.0.1")
        #expect(request.body == body)
        #expect(!request.bodyTooLarge)
    }

    @Test func aFastcgiParamOverridingAStockOneWins() throws {
        // nginx sends both values: the stock one from fastcgi_params, then the override.
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 4096),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        let nginx = try NginxFixture(fastcgiPass: "unix:" + dir.file("s"), locations: """
            location / {
                include /etc/nginx/fastcgi_params;
                fastcgi_param CONTENT_LENGTH "";
                fastcgi_param HTTP_PROXY "";
                fastcgi_pass_request_body off;
                fastcgi_pass {{FASTCGI_PASS}};
            }
            """)
        let response = try nginx.request("POST", "/x", headers: [("Proxy", "http://evil.example")], body: Array("abc".utf8))
        #expect(response.status == 200)
        let request = try #require(recorder.requests.first)
        #expect(request.params["CONTENT_LENGTH"] == "")
        #expect(request.params["HTTP_PROXY"] == nil, "httpoxy: the client's Proxy header never reaches the responder")
        #expect(request.body.isEmpty)
    }

    @Test func emptyPostBodyArrivesEmpty() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        let nginx = try NginxFixture(fastcgiPass: "unix:" + dir.file("s"))
        #expect(try nginx.request("POST", "/tokensignin", body: []).text == "ok 0")
        let request = try #require(recorder.requests.first)
        #expect(request.body.isEmpty && !request.bodyTooLarge)
    }

    @Test func statusHeadersAndRepeatedSetCookieSurviveNginx() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16)) { _ in
            Response(status: 503, contentType: "application/json", body: "{\"error\":\"unavailable\"}", headers: [
                ("Retry-After", "5"), ("Cache-Control", "no-store"),
                ("Set-Cookie", "session=a; Secure; HttpOnly; SameSite=Lax; Path=/"), ("Set-Cookie", "g_csrf_token=; Max-Age=0"),
            ])
        }
        defer { running.stop() }
        let nginx = try NginxFixture(fastcgiPass: "unix:" + dir.file("s"))
        let response = try nginx.request("GET", "/tokensignin")
        #expect(response.status == 503)
        #expect(response.values("Content-Type") == ["application/json"])
        #expect(response.values("Retry-After") == ["5"])
        #expect(response.values("Cache-Control") == ["no-store"])
        #expect(response.values("Set-Cookie") == ["session=a; Secure; HttpOnly; SameSite=Lax; Path=/", "g_csrf_token=; Max-Age=0"])
        #expect(response.text == "{\"error\":\"unavailable\"}")
    }

    /// A response with a header that cannot be sent reaches the client as a 500 without any of its headers
    /// (never as the 200 with one header quietly missing).
    @Test func anUnsendableHeaderBecomesA500ThroughNginx() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16)) { _ in
            Response(status: 200, contentType: "text/plain", body: "user 42", headers: [
                ("X-User-Id", "42\r\nX-Injected: yes"), ("Set-Cookie", "session=a"),
            ])
        }
        defer { running.stop() }
        let nginx = try NginxFixture(fastcgiPass: "unix:" + dir.file("s"))
        let response = try nginx.request("GET", "/x")
        #expect(response.status == 500)
        #expect(response.values("X-User-Id").isEmpty && response.values("X-Injected").isEmpty)
        #expect(response.values("Set-Cookie").isEmpty)
        #expect(!response.text.contains("user 42"))
    }

    /// nginx 1.22 passes each Cookie header line as its own HTTP_COOKIE parameter: the handler sees them
    /// joined with "; " in the order the client sent them.
    @Test func cookieHeaderLinesArriveAsOneCookieHeader() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        let nginx = try NginxFixture(fastcgiPass: "unix:" + dir.file("s"))
        let response = try nginx.request("GET", "/x", headers: [("Cookie", "a=1; b=2"), ("User-Agent", "t"), ("Cookie", "g_csrf_token=z")])
        #expect(response.status == 200)
        #expect(recorder.requests.first?.header("Cookie") == "a=1; b=2; g_csrf_token=z")
    }

    @Test func bodyOverTheCapIsFlaggedAndAnswered413() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16)) { request in
            recorder.record(request)
            return Response(status: request.bodyTooLarge ? 413 : 200)
        }
        defer { running.stop() }
        let nginx = try NginxFixture(fastcgiPass: "unix:" + dir.file("s"))
        #expect(try nginx.request("POST", "/", body: Array(repeating: 7, count: 100_000)).status == 413)
        #expect(try nginx.request("POST", "/", body: Array(repeating: 7, count: 16)).status == 200)
        let requests = recorder.requests
        try #require(requests.count == 2)
        #expect(requests[0].bodyTooLarge && requests[0].body.isEmpty)
        #expect(!requests[1].bodyTooLarge && requests[1].body.count == 16)
    }

    @Test func keptConnectionsAreServedAndDoNotBlockStop() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 2, maxBodyBytes: 16),
                                    handler: recordingHandler(recorder))
        let nginx = try NginxFixture(
            fastcgiPass: "responder",
            locations: """
                location / {
                    include /etc/nginx/fastcgi_params;
                    fastcgi_keep_conn on;
                    fastcgi_pass {{FASTCGI_PASS}};
                }
                """,
            http: "upstream responder { server unix:\(dir.file("s")); keepalive 4; }")
        for index in 0..<5 {
            #expect(try nginx.request("GET", "/n/\(index)").status == 200)
        }
        #expect(recorder.requests.map(\.path) == (0..<5).map { "/n/\($0)" })
        // A worker idling on a connection nginx keeps open still returns promptly on stop().
        let started = Date()
        #expect(running.stop() != nil)
        #expect(Date().timeIntervalSince(started) < 3)
        _ = nginx
    }

    @Test func tcpListenerBehindNginx() throws {
        let recorder = Recorder()
        let server = try Server(listen: .tcp(host: "127.0.0.1", port: 0), workers: 1, maxBodyBytes: 16)
        let running = RunningServer(server, handler: recordingHandler(recorder))
        defer { running.stop() }
        let nginx = try NginxFixture(fastcgiPass: server.address)
        #expect(try nginx.request("GET", "/over/tcp").status == 200)
        #expect(recorder.requests.first?.path == "/over/tcp")
    }
}

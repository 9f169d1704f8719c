// The identity headers (X-User-*) through nginx: the shipped snippets replace a client's own with the session
// check's for every upstream kind (proxy_pass, fastcgi_pass, uwsgi_pass, grpc_pass), in every location that
// passes to an application, including one with setter lines of its own (which inherits none from its server);
// and the check behind auth_request is an internal location no client reaches.
import Foundation
import Testing
import TestSupport

@Suite(.serialized) final class IdentityHeadersEndToEndTests {
    let stack: Stack
    init() throws { stack = try SharedStacks.stack("identity") }

    /// What a client sends to pass itself off as someone else.
    static let forged = ["X-User-Id: 1", "X-User-Sub: 100000000000000000001", "X-User-Email: admin@example.com",
                         "X-User-Email-Verified: true"]

    struct Session {
        var token: String
        var identity: [String: String]
    }

    /// A fresh session of `sub`, and the identity headers its check gives the application.
    private func signedIn(_ sub: String) throws -> Session {
        let email = "u\(sub.suffix(4))@example.com"
        let answer = try stack.signIn(try stack.token(sub: sub, email: email))
        try #require(answer.status == 200, "\(answer)")
        let token = try #require((answer.json["session"] as? [String: Any])?["token"] as? String)
        let id = try #require((answer.json["user"] as? [String: Any])?["id"])
        return Session(token: token, identity: ["X-User-Id": "\(id)", "X-User-Sub": sub, "X-User-Email": email,
                                                "X-User-Email-Verified": "true"])
    }

    private var nginxDirectory: String { stack.directory.appendingPathComponent("nginx").path }
    private var conf: String { nginxDirectory + "/conf" }

    /// `nginx -T` of the example as `make run` serves it (scripts/nginx-local: the shipped snippets, paths
    /// replaced): every location that passes to an application sets the four headers from the check's
    /// variables, after nginx's inheritance rule, and every auth_request goes to an internal location.
    @Test func everyLocationThatPassesToAnApplicationSetsTheFourHeaders() throws {
        let configuration = try NginxConfiguration(nginxT: nginxDirectory + "/nginx.conf", prefix: nginxDirectory)
        let forwarding = configuration.forwardingLocations()
        #expect(Set(forwarding.map(\.location)).isSuperset(of: ["/app/", "/app/api/", "/app/public/"]), "\(forwarding.map(\.location))")
        #expect(forwarding.contains { $0.location == "/app/api/" && $0.ownsSetters }, "a location with its own proxy_set_header is covered")
        for location in forwarding {
            #expect(location.identityProblems.isEmpty, "\(location.identityProblems)")
        }
        #expect(configuration.authRequestProblems.isEmpty, "\(configuration.authRequestProblems)")
        let checks = forwarding.filter { $0.location.hasPrefix("/app/") && $0.location != "/app/public/" }
        #expect(checks.count == 2)
    }

    /// Through the example as shipped: a client's own X-User-* never reaches the application, whether the
    /// location inherits the server-level snippet (/app/), sets proxy_set_header lines of its own (/app/api/),
    /// or checks no session at all (/app/public/). The stand-in application echoes what it received.
    @Test func aClientsOwnIdentityHeadersNeverReachTheExampleApplication() throws {
        let session = try signedIn("310000000000000000001")
        let expected = "app user_id=\(session.identity["X-User-Id"]!) sub=310000000000000000001 email=\(session.identity["X-User-Email"]!) verified=true"
        var forged = Dictionary(uniqueKeysWithValues: Self.forged.map { line in
            let parts = line.split(separator: ":", maxSplits: 1)
            return (String(parts[0]), parts[1].trimmingCharacters(in: .whitespaces))
        })
        forged["Authorization"] = "Bearer \(session.token)"
        for path in ["/app/whoami", "/app/api/whoami"] {
            let answer = try stack.request("GET", path, headers: forged)
            #expect(answer.status == 200 && answer.body.trimmingCharacters(in: .newlines) == expected, "\(path): \(answer)")
        }
        // Lower case, and the header twice: nginx's replacement does not depend on the spelling.
        let twice = try run("/usr/bin/curl", ["-sk", "-H", "Authorization: Bearer \(session.token)", "-H", "x-user-id: 1", "-H", "X-USER-ID: 2",
                                              "https://127.0.0.1:\(stack.port)/app/api/whoami"])
        #expect(twice.stdout.trimmingCharacters(in: .newlines) == expected, "\(twice.stdout)")

        forged["Authorization"] = nil
        let public_ = try stack.request("GET", "/app/public/whoami", headers: forged)
        #expect(public_.status == 200 && public_.body == "app user_id= sub= email= verified=\n", "\(public_)")
        // Without a session the protected locations never reach the application.
        #expect(try stack.request("GET", "/app/api/whoami", headers: forged).status == 401)
        #expect(try stack.request("GET", "/app/whoami", headers: forged).status == 302)
    }

    /// The check behind auth_request is internal: asked for directly it is 404 from nginx, even with a live
    /// session, and the responder is not asked.
    @Test func theSessionCheckOfAuthRequestIsNotReachableFromOutside() throws {
        let session = try signedIn("310000000000000000002")
        for method in ["GET", "POST"] {
            let answer = try stack.request(method, "/_tokensignin/auth", headers: ["Authorization": "Bearer \(session.token)"])
            #expect(answer.status == 404 && answer.header("X-User-Id") == nil, "\(method): \(answer)")
        }
        // The protected pages still pass through it.
        #expect(try stack.request("GET", "/app/x", headers: ["Authorization": "Bearer \(session.token)"]).status == 200)
    }

    /// Each upstream kind's snippet, live and in `nginx -T`: a second nginx built from the same shipped snippets
    /// passes to a stand-in application of that kind (HTTP, FastCGI, uwsgi; for gRPC an nginx HTTP/2 server) at
    /// a location that inherits the server-level include, one with its own setter lines that includes it again,
    /// one without a check, and one with its own setter lines that forgets the include. The check of
    /// `nginx -T` flags exactly the last, and a client's forged X-User-Id reaches the application there and only
    /// there: the inheritance rule the snippets' comments warn about is real.
    @Test(arguments: UpstreamKind.allCases)
    func eachUpstreamKindsSnippetReplacesTheClientsHeaders(kind: UpstreamKind) throws {
        let session = try signedIn("3200000000000000000\(UpstreamKind.allCases.firstIndex(of: kind)! + 10)")
        let root = stack.directory.appendingPathComponent("kind-\(kind)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let application = root + "/application.sock"
        var recorder: IdentityRecorder?
        let pass: String, own: String, extra: String
        switch kind {
        case .proxy:
            recorder = try IdentityRecorder(.http, socket: application)
            pass = "proxy_pass http://unix:\(application):;"
            own = "proxy_set_header Host $host;"
            extra = ""
        case .fastcgi:
            recorder = try IdentityRecorder(.fastcgi, socket: application)
            pass = "fastcgi_pass unix:\(application);"
            own = "include /etc/nginx/fastcgi_params;"
            extra = ""
        case .uwsgi:
            recorder = try IdentityRecorder(.uwsgi, socket: application)
            pass = "uwsgi_pass unix:\(application);"
            own = "include /etc/nginx/uwsgi_params;"
            extra = ""
        case .grpc:
            pass = "grpc_pass unix:\(application);"
            own = "grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for;"
            let echo = identityHeaders.map { #""\#($0.header)":"$http_\#($0.header.lowercased().replacingOccurrences(of: "-", with: "_"))""# }
            extra = """
                server {
                    listen unix:\(application) http2;
                    location / { default_type application/json; return 200 '{\(echo.joined(separator: ","))}'; }
                }
                """
        }
        defer { recorder?.stop() }
        let nginx = try TestNginx("kind-\(kind)") { directory in """
            include \(conf)/tokensignin-http.conf;
            server {
                listen unix:\(directory)/http.sock;
                include \(conf)/tokensignin-locations.conf;
                include \(conf)/tokensignin-identity-\(kind).conf;
                location /inherits/ { include \(conf)/tokensignin-auth.conf; \(pass) }
                location /own/ { include \(conf)/tokensignin-auth.conf; \(own) include \(conf)/tokensignin-identity-\(kind).conf; \(pass) }
                location /public/ { \(pass) }
                location /forgot/ { include \(conf)/tokensignin-auth.conf; \(own) \(pass) }
            }
            \(extra)
            """
        }
        try nginx.start()
        defer { nginx.stop() }

        let configuration = try NginxConfiguration(nginxT: nginx.configuration, prefix: nginx.directory)
        let problems = configuration.forwardingLocations().filter { !$0.identityProblems.isEmpty }.map(\.location)
        #expect(problems == ["/forgot/"], "\(configuration.forwardingLocations().flatMap(\.identityProblems))")

        func received(_ path: String, bearer: String?) throws -> [String: String] {
            let headers = Self.forged + (bearer.map { ["Authorization: Bearer \($0)"] } ?? [])
            let answer = try nginx.request("GET", path, headers: headers)
            try #require(answer.status == 200, "\(kind) \(path): \(answer)")
            let object = try #require(answer.json as? [String: String], "\(kind) \(path): \(answer)")
            return object.filter { !$0.value.isEmpty }  // the gRPC echo cannot tell an absent header from an empty one
        }
        #expect(try received("/inherits/x", bearer: session.token) == session.identity)
        #expect(try received("/own/x", bearer: session.token) == session.identity)
        #expect(try received("/public/x", bearer: nil) == [:])
        #expect(try received("/forgot/x", bearer: session.token)["X-User-Id"] == "1", "the trap the check above must catch")
        #expect(try nginx.request("GET", "/own/x", headers: Self.forged).status == 401)
    }
}

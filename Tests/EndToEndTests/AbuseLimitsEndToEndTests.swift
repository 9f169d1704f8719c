// nginx's rate limits at the trust edges (the shipped limits, not the tests' lifted ones): session checks sent
// straight to /auth/session and Google's /risc are limited per client, an IPv6 client by its /64, refused in
// JSON; auth_request's checks are not counted.
import Foundation
import Testing
import TestSupport

@Suite(.serialized) final class AbuseLimitsEndToEndTests {
    let stack: Stack
    init() throws { stack = try SharedStacks.stack("limits", rateLimit: true) }

    /// One answer of a burst: its status, Content-Type, Retry-After and body.
    struct Transfer {
        var status: Int
        var contentType: String
        var retryAfter: String
        var body: String
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:] }
    }

    /// `count` requests sent back to back by one curl over one connection (far faster than the limits'
    /// rates) from the loopback address `client` (each test its own, so each has the limits' whole allowance),
    /// each answer as it came.
    private func burst(_ method: String, _ path: String, count: Int, from client: String, headers: [String] = [],
                       body: String? = nil) throws -> [Transfer] {
        let marker = "\n@@transfer "
        let entry = curlEntry(url: "https://127.0.0.1:\(stack.port)\(path)", headers: headers, data: body, output: "-",
                              writeOut: marker.replacingOccurrences(of: "\n", with: "\\n") + "%{http_code}|%{content_type}|%header{retry-after}\\n")
            + "request = \"\(method)\"\ninterface = \"\(client)\"\n"
        let config = stack.directory.appendingPathComponent("burst.curl").path
        try Array(repeating: entry, count: count).joined(separator: "next\n").write(toFile: config, atomically: true, encoding: .utf8)
        let result = try run("/usr/bin/curl", ["-K", config])
        var pieces = result.stdout.components(separatedBy: marker)
        var transfers: [Transfer] = []
        var previousBody = pieces.removeFirst()
        for piece in pieces {
            let line = piece.prefix { $0 != "\n" }
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 3, let status = Int(fields[0]) else { throw StackError("bad write-out: \(line)") }
            transfers.append(Transfer(status: status, contentType: fields[1], retryAfter: fields[2], body: previousBody))
            previousBody = String(piece.dropFirst(line.count + 1))
        }
        guard transfers.count == count else { throw StackError("\(transfers.count) of \(count) transfers answered: \(result.stderr)") }
        return transfers
    }

    private func expectRefusedInJSON(_ transfers: [Transfer], _ what: String) {
        let refused = transfers.filter { $0.status == 429 }
        #expect(!refused.isEmpty, "\(what): a burst beyond the limit is refused: \(transfers.map(\.status))")
        for answer in refused {
            #expect(answer.contentType == "application/json" && answer.retryAfter == "1", "\(what): \(answer)")
            #expect(answer.json["error"] as? String == "too_many_requests", "\(what): JSON like every refusal, not nginx's HTML: \(answer.body)")
        }
    }

    /// Session checks sent straight to /auth/session (a native app's Bearer token, or someone trying tokens) are
    /// limited per client (50/s, bursts of 100): within the burst they reach the responder (401 for a token that
    /// is no session), beyond it nginx refuses them with 429 in JSON.
    @Test func directSessionChecksAreLimitedPerClient() throws {
        let transfers = try burst("GET", "/auth/session", count: 400, from: "127.0.0.3", headers: ["Authorization: Bearer not-a-session"])
        let statuses = transfers.map(\.status)
        #expect(statuses.prefix(100).allSatisfy { $0 == 401 }, "the burst reaches the responder: \(statuses)")
        #expect(Set(statuses).isSubset(of: [401, 429]), "\(statuses)")
        expectRefusedInJSON(transfers, "/auth/session")
    }

    /// auth_request's checks go to the internal location, which has no limit: a protected page loaded far beyond
    /// the direct checks' limit (here right after a burst that used the client's whole allowance) keeps passing.
    @Test func protectedPagesAreNotHeldToTheDirectChecksLimit() throws {
        let signIn = try stack.signIn(try stack.token(sub: "330000000000000000001"))
        let token = try #require((signIn.json["session"] as? [String: Any])?["token"] as? String, "\(signIn)")
        _ = try burst("GET", "/auth/session", count: 200, from: "127.0.0.4", headers: ["Authorization: Bearer not-a-session"])
        let transfers = try burst("GET", "/app/page", count: 300, from: "127.0.0.4", headers: ["Authorization: Bearer \(token)"])
        #expect(transfers.allSatisfy { $0.status == 200 }, "\(Set(transfers.map(\.status)))")
    }

    /// /risc has a generous limit of its own (20/s, bursts of 200): within it the responder answers (RFC 8935's
    /// 400 for a body that is no security event token), beyond it nginx refuses with 429 in the JSON shape of the
    /// other refusals (which Google retries, unlike a 400).
    @Test func securityEventsAreLimitedPerClient() throws {
        let transfers = try burst("POST", "/risc", count: 400, from: "127.0.0.5", headers: ["Content-Type: application/secevent+jwt"], body: "x")
        let statuses = transfers.map(\.status)
        #expect(statuses.prefix(200).allSatisfy { $0 == 400 }, "the burst reaches the responder: \(statuses)")
        #expect(transfers.first?.json["err"] as? String == "invalid_request", "\(transfers.first.map(\.body) ?? "")")
        #expect(Set(statuses).isSubset(of: [400, 429]), "\(statuses)")
        expectRefusedInJSON(transfers, "/risc")
    }

    /// The limits' key ($tokensignin_client of tokensignin-http.conf): an IPv4 address, an IPv6 address by its
    /// /64, an IPv4-mapped IPv6 address as its IPv4 address. A second nginx with the shipped http settings takes
    /// the client address from X-Forwarded-For (realip) and limits a location to one request a minute per key.
    @Test func anIPv6ClientIsCountedByItsSlash64() throws {
        let file = stack.directory.appendingPathComponent("limited.txt").path
        try "ok\n".write(toFile: file, atomically: true, encoding: .utf8)
        let conf = stack.directory.appendingPathComponent("nginx/conf").path
        let nginx = try TestNginx("clientkey") { directory in """
            include \(conf)/tokensignin-http.conf;
            limit_req_zone $tokensignin_client zone=test_client:1m rate=1r/m;
            server {
                listen unix:\(directory)/http.sock;
                set_real_ip_from unix:;
                real_ip_header X-Forwarded-For;
                location = /limited { limit_req zone=test_client nodelay; alias \(file); }
            }
            """
        }
        try nginx.start()
        defer { nginx.stop() }
        let cases: [(address: String, status: Int)] = [
            ("2001:db8:1:2::1", 200), ("2001:db8:1:2:ffff:ffff:ffff:ffff", 429),  // the same /64
            ("2001:db8:1:3::1", 200),                                             // the next /64
            ("2001:db8:a0a:a0a::1", 200), ("2001:db8:a0a:a0a::2", 429),           // newline bytes in the prefix
            ("192.0.2.1", 200), ("192.0.2.2", 200),                               // IPv4: each address its own
            ("::ffff:192.0.2.1", 429),                                            // IPv4-mapped: its IPv4 address
        ]
        for (address, status) in cases {
            let answer = try nginx.request("GET", "/limited", headers: ["X-Forwarded-For: \(address)"])
            #expect(answer.status == status, "\(address): \(answer.status)")
        }
    }
}

// The refused sign-ins' audit under a flood: rows per network and reason and in all bounded each second, the rest counted.
import FastCGI
import Foundation
@testable import Sessions
@testable import SignIn
import Testing

@Suite struct RefusalAuditTests {
    @Test func eachNetworkAndReasonGetsItsRowsASecondAndNoMore() {
        let audit = RefusalAudit(perKey: 2, total: 100)
        let t: Int64 = 1_800_000_000
        #expect((0..<5).map { _ in audit.admit(network: "192.0.2.1", reason: "expired", now: t) } == [true, true, false, false, false])
        #expect(audit.admit(network: "192.0.2.1", reason: "bad_signature", now: t), "another reason has its own budget")
        #expect(audit.admit(network: "192.0.2.2", reason: "expired", now: t), "another network has its own budget")
        #expect(audit.admit(network: "192.0.2.1", reason: "expired", now: t + 1), "the next second starts afresh")
    }

    @Test func allNetworksTogetherGetAtMostTheTotalASecond() {
        let audit = RefusalAudit(perKey: 2, total: 10)
        let t: Int64 = 1_800_000_000
        let admitted = (0..<1000).filter { audit.admit(network: "198.51.100.\($0 % 250)|\($0)", reason: "expired", now: t) }.count
        #expect(admitted == 10)
        #expect(audit.admit(network: "203.0.113.1", reason: "expired", now: t + 1))
    }

    /// Rate limits key an IPv6 client by its /64: one subscriber's whole prefix is one key.
    @Test(arguments: [
        ("192.0.2.9", "192.0.2.9"), ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"), ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"), ("::1", "0:0:0:0::/64"), ("unix:", nil), ("", nil),
    ] as [(String, String?)])
    func theNetworkOfAnAddress(address: String, network: String?) {
        #expect(Request(params: ["REMOTE_ADDR": address]).remoteNetwork == network)
    }

    /// Through the route: a flood of refused tokens from one network writes two rows a second; the rest are counted
    /// in /metrics by reason, and every one is still answered 401.
    @Test func aFloodOfBadTokensWritesBoundedAuditRowsAndCountsTheRest() throws {
        let h = try RouteHarness()
        for _ in 0..<6 { #expect(h.signIn("expired").status == 401) }
        for _ in 0..<3 { #expect(h.signIn("forged").status == 401) }
        #expect(h.store.audit.map(\.reason) == ["expired", "expired", "malformed", "malformed"])
        let metrics = h.request("GET", "/metrics").text
        #expect(metrics.contains(#"tokensignin_sign_in_audits_suppressed_total{reason="expired"} 4"# + "\n"), "\(metrics)")
        #expect(metrics.contains(#"tokensignin_sign_in_audits_suppressed_total{reason="malformed"} 1"# + "\n"))
        #expect(metrics.contains(#"tokensignin_refusals_total{reason="expired"} 6"# + "\n"), "every refusal still counts")
    }
}

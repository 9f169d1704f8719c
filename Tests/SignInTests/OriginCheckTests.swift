// Origin parsing and the Origin / Sec-Fetch-Site check for cookie-authenticated state changes.

@testable import SignIn
import Testing

private let check = OriginCheck(siteOrigins: [Origin(parsing: "https://example.com")!, Origin(parsing: "http://localhost:8080")!])

@Suite struct OriginCheckTests {
    /// (text, normalised origin or nil when refused)
    @Test(arguments: [
        ("https://example.com", "https://example.com"),
        ("HTTPS://EXAMPLE.com", "https://example.com"),
        ("https://example.com:443", "https://example.com"),
        ("http://example.com:80", "http://example.com"),
        ("https://example.com:8443", "https://example.com:8443"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("http://127.0.0.1", "http://127.0.0.1"),
        ("https://example.com/", nil),
        ("https://example.com/path", nil),
        ("https://example.com?q", nil),
        ("https://user@example.com", nil),
        ("https://", nil),
        ("https://:443", nil),
        ("https://example.com:", nil),
        ("https://example.com:0", nil),
        ("https://example.com:65536", nil),
        ("https://example.com:+1", nil),
        ("ftp://example.com", nil),
        ("example.com", nil),
        ("null", nil),
        ("https://exa mple.com", nil),
        ("https://[::1", nil),
        ("https://[]", nil),
        ("https://[zz]", nil),
    ] as [(String, String?)])
    func originParsesAndNormalises(text: String, expected: String?) {
        #expect(Origin(parsing: text)?.description == expected)
    }

    /// (Origin header, Sec-Fetch-Site header, allowed)
    @Test(arguments: [
        ("https://example.com", nil, true),
        ("https://EXAMPLE.COM:443", nil, true),
        ("http://localhost:8080", "same-origin", true),
        ("https://example.com", "cross-site", true),
        (nil, "same-origin", true),
        (nil, " Same-Origin ", true),
        ("https://evil.example", "same-origin", false),
        ("https://example.com.evil.example", nil, false),
        ("http://example.com", nil, false),
        ("https://example.com:8443", nil, false),
        ("http://localhost:8081", nil, false),
        ("null", "same-origin", false),
        ("https://example.com/", nil, false),
        ("", "same-origin", false),
        (nil, "same-site", false),
        (nil, "cross-site", false),
        (nil, "none", false),
        (nil, nil, false),
    ] as [(String?, String?, Bool)])
    func stateChangeIsAllowedOnlyFromASiteOrigin(origin: String?, secFetchSite: String?, allowed: Bool) {
        #expect((check.decide(origin: origin, secFetchSite: secFetchSite) == .allowed) == allowed)
    }

    @Test func refusalCarriesAReasonForLogs() {
        #expect(check.decide(origin: "null", secFetchSite: nil) == .refused(reason: "opaque Origin (null)"))
        #expect(check.decide(origin: nil, secFetchSite: nil) == .refused(reason: "no Origin and Sec-Fetch-Site is not same-origin"))
    }

    /// (Origin header, allowed): the login-CSRF guard for JSON and form sign-ins.
    @Test(arguments: [
        (nil, true),
        ("https://example.com", true),
        ("https://evil.example", false),
        ("null", false),
        ("", false),
    ] as [(String?, Bool)])
    func tokenPostIsAllowedFromNativeClientsAndSiteOrigins(origin: String?, allowed: Bool) {
        #expect((check.decideTokenPost(origin: origin) == .allowed) == allowed)
    }

    /// (Sec-Fetch-Site, allowed) of a token post without Origin: a native client sends neither; a browser that leaves
    /// Origin out still says where the request comes from, and another site (or another origin of this site) is refused.
    @Test(arguments: [
        (nil, true), ("same-origin", true), ("none", true), ("cross-site", false), ("same-site", false),
        (" Cross-Site ", false), ("SAME-SITE", false),
    ] as [(String?, Bool)])
    func tokenPostWithoutOriginIsRefusedWhenTheBrowserSaysItIsCrossSite(secFetchSite: String?, allowed: Bool) {
        for webForm in [false, true] {
            #expect((check.decideTokenPost(origin: nil, secFetchSite: secFetchSite, webForm: webForm) == .allowed) == allowed)
        }
        #expect((check.decideWithoutOrigin(secFetchSite: secFetchSite) == .allowed) == allowed)
        // With an Origin, the Origin decides.
        #expect(check.decideTokenPost(origin: "https://example.com", secFetchSite: secFetchSite) == .allowed)
    }

    /// (Origin header, allowed): the web form is also posted by Google's own page, and by no other site.
    @Test(arguments: [
        (nil, true),
        ("https://accounts.google.com", true),
        ("https://example.com", true),
        ("https://evil.example", false),
        ("https://accounts.google.com.evil.example", false),
        ("http://accounts.google.com", false),
    ] as [(String?, Bool)])
    func webFormPostIsAllowedFromGoogleAndSiteOrigins(origin: String?, allowed: Bool) {
        #expect((check.decideTokenPost(origin: origin, webForm: true) == .allowed) == allowed)
        if origin == "https://accounts.google.com" {
            #expect(check.decideTokenPost(origin: origin) != .allowed, "Google's origin is for the web form only")
        }
    }

    /// (Origin header, allowed): a configured stand-in replaces Google's origin for the web form, and only for it.
    @Test(arguments: [
        ("https://localhost:8444", true),
        ("https://LOCALHOST:8444", true),
        ("https://example.com", true),
        ("https://accounts.google.com", false),
        ("https://localhost:8445", false),
        ("http://localhost:8444", false),
        (nil, true),
    ] as [(String?, Bool)])
    func configuredWebFormOriginReplacesGoogles(origin: String?, allowed: Bool) {
        let standIn = OriginCheck(siteOrigins: [Origin(parsing: "https://example.com")!],
                                  webFormOrigins: [Origin(parsing: "https://localhost:8444")!])
        #expect((standIn.decideTokenPost(origin: origin, webForm: true) == .allowed) == allowed)
        if origin == "https://localhost:8444" {
            #expect(standIn.decideTokenPost(origin: origin) != .allowed, "the stand-in's origin is for the web form only")
            #expect(standIn.decide(origin: origin, secFetchSite: nil) != .allowed, "nor for cookie-authenticated changes")
        }
    }

    @Test func noSiteOriginsAllowsOnlySameOriginFetches() {
        let empty = OriginCheck(siteOrigins: [])
        #expect(!(empty.decide(origin: "https://example.com", secFetchSite: nil) == .allowed))
        #expect((empty.decide(origin: nil, secFetchSite: "same-origin") == .allowed))
    }
}

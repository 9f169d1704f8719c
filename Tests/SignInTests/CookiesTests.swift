// Cookie header parsing and the Set-Cookie values of the session cookie.

@testable import SignIn
import Testing

@Suite struct CookiesTests {
    @Test func cookieHeaderParsesInOrder() {
        let pairs = Cookies.parse("a=1; b=two;c=\"q\"\t;  d=")
        #expect(pairs.map(\.name) == ["a", "b", "c", "d"])
        #expect(pairs.map(\.value) == ["1", "two", "\"q\"", ""])
    }

    /// (header, the pairs that survive)
    @Test(arguments: [
        ("novalue; a=1", "a=1"),
        ("=1; a=1", "a=1"),
        ("a b=1; a=1", "a=1"),
        ("a=1 2; b=2", "b=2"),
        ("a=x,y; b=2", "b=2"),
        ("a=x\\y; b=2", "b=2"),
        ("a=\"x; b=2", "b=2"),
        ("a=é; b=2", "b=2"),
        (";;; b=2 ;", "b=2"),
        ("", ""),
    ])
    func malformedPairsAreSkipped(header: String, kept: String) {
        #expect(Cookies.parse(header).map { "\($0.name)=\($0.value)" }.joined(separator: ";") == kept)
    }

    @Test func firstOccurrenceWins() {
        #expect(Cookies.value(named: "s", in: "s=first; t=1; s=second") == "first")
        #expect(Cookies.value(named: "s", in: "bad s=x; s=good") == "good")
        #expect(Cookies.value(named: "S", in: "s=lower") == nil)
        #expect(Cookies.value(named: "s", in: nil) == nil)
    }

    @Test func sessionCookieHasEveryRequiredAttribute() {
        #expect(Cookies.sessionCookie(name: "__Host-tokensignin", token: "abc-_123", maxAge: 2_592_000)
            == "__Host-tokensignin=abc-_123; Path=/; Max-Age=2592000; Secure; HttpOnly; SameSite=Lax")
    }

    @Test func sessionCookieSatisfiesTheHostPrefixRules() {
        let cookie = Cookies.sessionCookie(name: "__Host-x", token: "t", maxAge: 60)
        #expect(cookie.contains("; Secure") && cookie.contains("; Path=/;") && !cookie.lowercased().contains("domain"))
    }

    @Test func clearingCookieExpiresImmediatelyWithTheSameAttributes() {
        #expect(Cookies.clearingCookie(name: "__Host-tokensignin")
            == "__Host-tokensignin=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax")
    }

    @Test(arguments: ["", "abc", "A-z_0.9~", "\"quoted\"", "!#$%&'()*+-./:<=>?@[]^_`{|}~"])
    func cookieOctetsAreAccepted(value: String) {
        #expect(Cookies.isCookieValue(value))
    }

    @Test(arguments: [" ", "a b", "a,b", "a;b", "a\\b", "a\"b", "\"", "é", "a\u{7F}", "a\tb", "\"a b\""])
    func nonCookieOctetsAreRefused(value: String) {
        #expect(!Cookies.isCookieValue(value))
    }

    @Test(arguments: [("sid", true), ("__Host-tokensignin", true), ("", false), ("a b", false), ("a=b", false), ("a;b", false), ("(a)", false)])
    func cookieNamesMustBeTokens(name: String, valid: Bool) {
        #expect(Cookies.isCookieName(name) == valid)
    }
}

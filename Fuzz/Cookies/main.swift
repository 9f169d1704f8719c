// libFuzzer target: arbitrary bytes as a Cookie header and as Origin / Sec-Fetch-Site values. Built only by
// scripts/fuzz (`make fuzz`).
import SignIn

private let check = OriginCheck(siteOrigins: [Origin(parsing: "https://app.example")!])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ count: Int) -> Int32 {
    let text = String(decoding: UnsafeRawBufferPointer(start: data, count: count), as: UTF8.self)
    for (name, value) in Cookies.parse(text) {
        // Only well-formed pairs come out: names are tokens, values cookie-octets.
        precondition(Cookies.isCookieName(name) && Cookies.isCookieValue(value))
    }
    if let session = Cookies.value(named: "__Host-tokensignin", in: text) { precondition(Cookies.isCookieValue(session)) }
    if let origin = Origin(parsing: text) {
        // A parsed origin prints back as something that parses to itself.
        precondition(Origin(parsing: origin.description) == origin)
    }
    // Only the site's own origin (in any spelling), or Sec-Fetch-Site: same-origin, is let through.
    if check.decide(origin: text, secFetchSite: nil) == .allowed { precondition(text.lowercased().contains("app.example")) }
    _ = check.decide(origin: nil, secFetchSite: text)
    _ = check.decideTokenPost(origin: text, webForm: count % 2 == 0)
    _ = check.decideTokenPost(origin: nil, secFetchSite: text)
    return 0
}

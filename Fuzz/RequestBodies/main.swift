// libFuzzer target: arbitrary bytes as the body of POST /tokensignin (JSON, form, the web form with its CSRF
// cookie), with a fixed or an arbitrary Content-Type. Built only by scripts/fuzz (`make fuzz`).
import SignIn

private let contentTypes = ["application/json", "application/x-www-form-urlencoded", "application/json; charset=utf-8",
                            "application/x-www-form-urlencoded; charset=\"UTF-8\""]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ count: Int) -> Int32 {
    let input = UnsafeRawBufferPointer(start: data, count: count)
    guard let first = input.first else { return 0 }
    var body = Array(input.dropFirst())
    var contentType = contentTypes[Int(first) % contentTypes.count]
    if first >= 0x80, let end = body.firstIndex(of: 0) {
        // The Content-Type itself from the input: the bytes up to the first NUL.
        contentType = String(decoding: body[..<end], as: UTF8.self)
        body = Array(body[(end + 1)...])
    }
    do {
        let parsed = try SignInRequest.parse(contentType: contentType, body: body, cookieHeader: "g_csrf_token=abc")
        // Whatever is accepted is a token of bounded size, never empty.
        precondition(!parsed.idToken.isEmpty && parsed.idToken.utf8.count <= SignInRequest.maxTokenBytes)
    } catch {
        // Every refusal is a SignInError with one of the body codes (the answer's status is decided from it).
        precondition([.unsupportedMediaType, .malformedBody, .missingToken, .tokenTooLarge, .csrfMismatch].contains(error.code))
    }
    return 0
}

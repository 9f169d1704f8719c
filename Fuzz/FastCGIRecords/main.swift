// libFuzzer target: arbitrary bytes as one connection's stream into the FastCGI request parser, with the
// server's real limits. Built only by scripts/fuzz (`make fuzz`), with -sanitize=fuzzer,address.
import FastCGI

/// The limits `tokensignin serve` runs with (64 KiB bodies; everything else the defaults).
private let limits = Limits(maxBodyBytes: 64 * 1024)
/// The longest a single record can be: nothing may make the parser hold more than that plus one read.
private let maxRecord = 8 + 65_535 + 255

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ count: Int) -> Int32 {
    let input = UnsafeRawBufferPointer(start: data, count: count)
    guard let first = input.first else { return 0 }
    // The first byte picks how the stream is cut into reads (1 to 256 bytes, or all at once), so records
    // split at every boundary are covered.
    let chunk = first == 0 ? Int.max : Int(first)
    var parser = RequestParser(limits: limits)
    var offset = 1
    var requests = 0
    reading: while offset < count {
        let end = min(count, offset + min(chunk, count - offset))
        parser.receive(UnsafeRawBufferPointer(rebasing: input[offset..<end]))
        precondition(parser.bufferedBytes <= maxRecord + chunk.clamped(to: 0...count), "the buffer outgrew one record and one read")
        offset = end
        while let event = parser.next() {
            switch event {
            case .request(let request):
                requests += 1
                precondition(request.body.count <= limits.maxBodyBytes, "a body over the cap reached the handler")
                precondition(!request.bodyTooLarge || request.body.isEmpty, "a too-large body was kept")
                precondition(request.params.count <= limits.maxParams, "more parameters than the cap")
                // The answer's encoding runs on what the request carried, as a handler echoing it would.
                let echo = Response(status: 200, headers: [("X-Path", request.path)], body: request.body)
                if let head = echo.encodedHead() {
                    _ = Records.answer(requestID: parser.requestID, head: head, body: echo.body, farewell: requests % 2 == 0)
                }
                // Now and then the answer closes the connection with the body unread: the rest is skipped.
                if parser.bodyLeftUnread && requests % 3 == 0 { parser.haltWhenIdle = true }
                parser.requestAnswered()
            case .reply(let bytes, let thenClose):
                precondition(bytes.count <= 1024, "a management answer larger than the few variables it names")
                if thenClose { break reading }
            case .violation:
                break reading
            }
        }
    }
    return 0
}

extension Int {
    fileprivate func clamped(to range: ClosedRange<Int>) -> Int { Swift.min(Swift.max(self, range.lowerBound), range.upperBound) }
}

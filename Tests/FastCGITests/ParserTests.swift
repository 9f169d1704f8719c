// RequestParser on its own: records split anywhere, padding, repeated parameters, management records, and
// every reason a connection is given up.
@testable import FastCGI
import Testing

private typealias Raw = RawFastCGIConnection

/// Feeds `bytes` to a fresh parser in pieces of `chunk` bytes and collects its events until it wants more.
private func parse(_ bytes: [UInt8], chunk: Int = .max, limits: Limits = Limits(maxBodyBytes: 64)) -> [ParserEvent] {
    var parser = RequestParser(limits: limits)
    var events: [ParserEvent] = []
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + max(1, min(chunk, bytes.count - offset)))
        bytes[offset..<end].withUnsafeBytes { parser.receive($0) }
        offset = end
        while let event = parser.next() {
            events.append(event)
            if case .request = event { parser.requestAnswered() }
            if case .violation = event { return events }
        }
    }
    return events
}

private func requests(_ events: [ParserEvent]) -> [Request] {
    events.compactMap { if case .request(let request) = $0 { request } else { nil } }
}

private func violation(_ events: [ParserEvent]) -> FastCGIError.Code? {
    events.compactMap { if case .violation(let error) = $0 { error.code } else { nil } }.first
}

private func replies(_ events: [ParserEvent]) -> [[UInt8]] {
    events.compactMap { if case .reply(let bytes, _) = $0 { bytes } else { nil } }
}

@Suite struct ParserTests {
    @Test(arguments: [1, 2, 3, 7, 8, 9, 100])
    func aRequestSplitAnywhereParsesTheSame(chunk: Int) {
        let bytes = Raw.request(params: ["DOCUMENT_URI": "/x", "CONTENT_LENGTH": "5", "HTTP_LONG": String(repeating: "v", count: 300)],
                                stdin: Array("hello".utf8), keep: true)
        let parsed = requests(parse(bytes, chunk: chunk))
        #expect(parsed.count == 1)
        #expect(parsed.first?.path == "/x")
        #expect(parsed.first?.body == Array("hello".utf8))
        #expect(parsed.first?.params["HTTP_LONG"]?.count == 300)
    }

    /// Every record's padding is skipped, BEGIN_REQUEST's included (libfcgi's reader is not the reference).
    @Test func paddingOfEveryRecordIsSkipped() {
        let bytes = Raw.begin(keep: true, padding: 7)
            + Raw.record(type: 4, Raw.pairs([("DOCUMENT_URI", "/pad"), ("CONTENT_LENGTH", "3")]), padding: 255)
            + Raw.record(type: 4, [], padding: 1)
            + Raw.record(type: 5, Array("abc".utf8), padding: 5)
            + Raw.record(type: 5, [], padding: 3)
            + Raw.request(params: ["DOCUMENT_URI": "/next"], keep: true)
        let parsed = requests(parse(bytes))
        #expect(parsed.map(\.path) == ["/pad", "/next"])
        #expect(parsed.first?.body == Array("abc".utf8))
    }

    /// nginx 1.22 sends one HTTP_COOKIE per Cookie header line: they are one header, joined in order.
    @Test func repeatedCookieParamsAreJoinedAndOtherRepeatsKeepTheLastValue() {
        let bytes = Raw.begin(keep: true)
            + Raw.record(type: 4, Raw.pairs([("HTTP_COOKIE", "a=1; b=2"), ("CONTENT_LENGTH", "9"), ("HTTP_COOKIE", "c=3"),
                                             ("CONTENT_LENGTH", ""), ("HTTP_COOKIE", "d=4")]))
            + Raw.record(type: 4, []) + Raw.record(type: 5, [])
        let request = requests(parse(bytes)).first
        #expect(request?.header("Cookie") == "a=1; b=2; c=3; d=4")
        #expect(request?.params["CONTENT_LENGTH"] == "")
    }

    /// Parameters stay as the bytes they came in: a lookup is by exact name, absent names are nil, bytes that
    /// are not UTF-8 read as U+FFFD, an empty name or value is kept, and every name is found however many.
    @Test func parametersAreLookedUpByExactNameInTheBytesTheyCameIn() throws {
        var pairs: [UInt8] = []
        NameValuePairs.append(name: Array("HTTP_X".utf8), value: [0x61, 0xFF, 0x62], to: &pairs)
        NameValuePairs.append(name: [], value: Array("nameless".utf8), to: &pairs)
        NameValuePairs.append(name: Array("EMPTY".utf8), value: [], to: &pairs)
        for index in 0..<300 { NameValuePairs.append(name: Array("P\(index)".utf8), value: Array("v\(index)".utf8), to: &pairs) }
        let bytes = Raw.begin(keep: false) + Raw.record(type: 4, pairs) + Raw.record(type: 4, []) + Raw.record(type: 5, [])
        let request = try #require(requests(parse(bytes, limits: Limits(maxBodyBytes: 64))).first)
        #expect(request.params["HTTP_X"] == "a\u{FFFD}b")
        #expect(request.params["EMPTY"] == "")
        #expect(request.params["http_x"] == nil && request.params["HTTP_"] == nil && request.params["HTTP_XY"] == nil)
        #expect(request.params["P0"] == "v0" && request.params["P299"] == "v299" && request.params["P300"] == nil)
        #expect(request.params.count == 303)
        #expect(request.params.dictionary[""] == "nameless")
        // Equality is of bytes: the dictionary's U+FFFD reading of the value is not what came.
        #expect(request.params != Parameters(request.params.dictionary))
        #expect(Parameters(["B": "2", "A": "1"]) == Parameters(["A": "1", "B": "2"]))
        #expect(Parameters(["A": "1"]) != Parameters(["A": "2"]))
        #expect(Parameters(["": ""])[""] == "")
    }

    /// Names are bytes: one that only equals `HTTP_COOKIE` after Unicode normalisation (a Kelvin sign for the K)
    /// is another parameter, not a cookie line, and a name that is not UTF-8 is not found by its U+FFFD reading.
    @Test func parameterNamesAreComparedByteForByte() throws {
        var pairs: [UInt8] = []
        NameValuePairs.append(name: Array("HTTP_COOKIE".utf8), value: Array("sid=good".utf8), to: &pairs)
        NameValuePairs.append(name: Array("HTTP_COO\u{212A}IE".utf8), value: Array("sid=evil".utf8), to: &pairs)
        NameValuePairs.append(name: [0xFF], value: Array("x".utf8), to: &pairs)
        let bytes = Raw.begin(keep: false) + Raw.record(type: 4, pairs) + Raw.record(type: 4, []) + Raw.record(type: 5, [])
        let request = try #require(requests(parse(bytes)).first)
        #expect("HTTP_COO\u{212A}IE" == "HTTP_COOKIE", "Swift's String equality, which the old dictionary used")
        #expect(request.header("Cookie") == "sid=good")
        #expect(request.params["HTTP_COO\u{212A}IE"] == "sid=evil")
        #expect(request.params["\u{FFFD}"] == nil)
        #expect(request.params.count == 3)
    }

    @Test func pipelinedRequestsWaitForTheAnswerBeforeTheNextIsParsed() {
        var parser = RequestParser(limits: Limits(maxBodyBytes: 64))
        let bytes = Raw.request(params: ["DOCUMENT_URI": "/1"], keep: true) + Raw.request(params: ["DOCUMENT_URI": "/2"], keep: true)
        bytes.withUnsafeBytes { parser.receive($0) }
        guard case .request(let first) = parser.next() else { Issue.record("no first request"); return }
        #expect(first.path == "/1")
        #expect(parser.next() == nil)  // the second waits until the first is answered
        parser.requestAnswered()
        guard case .request(let second) = parser.next() else { Issue.record("no second request"); return }
        #expect(second.path == "/2")
        parser.requestAnswered()
        #expect(parser.isQuiet)
    }

    /// FCGI_GET_VALUES listing FCGI_MAX_CONNS four times once overflowed libfcgi's 64-byte stack buffer.
    @Test func getValuesIsAnsweredOncePerKnownVariable() {
        let asked = Raw.pairs([("FCGI_MAX_CONNS", ""), ("FCGI_MAX_CONNS", ""), ("FCGI_MAX_CONNS", ""), ("FCGI_MAX_CONNS", ""),
                               ("FCGI_MPXS_CONNS", ""), ("UNKNOWN", ""), ("FCGI_MAX_REQS", "")])
        let events = parse(Raw.record(type: 9, id: 0, asked), limits: Limits(maxBodyBytes: 1, maxConnections: 77))
        let expected = Raw.record(type: 10, id: 0, Raw.pairs([("FCGI_MAX_CONNS", "77"), ("FCGI_MAX_REQS", "77"), ("FCGI_MPXS_CONNS", "0")]))
        #expect(replies(events) == [expected])
        #expect(violation(events) == nil)
    }

    @Test func anUnknownManagementTypeGetsUnknownType() {
        #expect(replies(parse(Raw.record(type: 42, id: 0, [1, 2, 3]))) == [Raw.record(type: 11, id: 0, [42, 0, 0, 0, 0, 0, 0, 0])])
    }

    @Test func aSecondRequestIDWhileOneIsActiveGetsCantMultiplex() {
        let bytes = Raw.begin(id: 1, keep: true) + Raw.record(type: 4, id: 1, Raw.pairs([("DOCUMENT_URI", "/one")]))
            + Raw.begin(id: 2, keep: true) + Raw.record(type: 4, id: 2, Raw.pairs([("DOCUMENT_URI", "/two")]))
            + Raw.record(type: 4, id: 1, []) + Raw.record(type: 5, id: 1, [])
        let events = parse(bytes)
        #expect(replies(events) == [Raw.record(type: 3, id: 2, [0, 0, 0, 0, 1, 0, 0, 0])])
        #expect(requests(events).map(\.path) == ["/one"])
    }

    @Test func anAbortedRequestIsEndedAndNeverDelivered() {
        let bytes = Raw.begin(id: 3, keep: true) + Raw.record(type: 4, id: 3, Raw.pairs([("DOCUMENT_URI", "/gone")]))
            + Raw.record(type: 2, id: 3, []) + Raw.request(params: ["DOCUMENT_URI": "/after"], keep: true)
        let events = parse(bytes)
        #expect(replies(events) == [Raw.record(type: 3, id: 3, [0, 0, 0, 0, 0, 0, 0, 0])])
        #expect(requests(events).map(\.path) == ["/after"])
    }

    @Test func aBodyDeclaredOverTheCapIsDeliveredAtOnceThenSkipped() {
        let bytes = Raw.request(params: ["DOCUMENT_URI": "/big", "CONTENT_LENGTH": "100"], stdin: Array(repeating: 1, count: 100), keep: true)
            + Raw.request(params: ["DOCUMENT_URI": "/next", "CONTENT_LENGTH": "1"], stdin: [7], keep: true)
        let parsed = requests(parse(bytes, limits: Limits(maxBodyBytes: 10)))
        #expect(parsed.map(\.path) == ["/big", "/next"])
        #expect(parsed.map(\.bodyTooLarge) == [true, false])
        #expect(parsed.last?.body == [7])
    }

    @Test func aBodyWithoutLengthOverTheCapIsTooLarge() {
        let bytes = Raw.request(params: ["DOCUMENT_URI": "/x"], stdin: Array(repeating: 1, count: 11), keep: true)
        #expect(requests(parse(bytes, limits: Limits(maxBodyBytes: 10))).map(\.bodyTooLarge) == [true])
        let atCap = Raw.request(params: ["DOCUMENT_URI": "/x"], stdin: Array(repeating: 1, count: 10), keep: true)
        #expect(requests(parse(atCap, limits: Limits(maxBodyBytes: 10))).map(\.body.count) == [10])
    }

    /// Every way a connection is given up, each with its own reason.
    @Test(arguments: [
        ("not FastCGI", FastCGIError.Code.badVersion), ("short BEGIN_REQUEST", .malformedBegin),
        ("lengths that overflow", .malformedParams), ("a value running past the params", .malformedParams),
        ("params over the cap", .paramsTooLarge), ("too many params", .tooManyParams),
        ("stdin before params ended", .unexpectedRecord), ("a second BEGIN_REQUEST for the active id", .unexpectedRecord),
        ("DATA to a responder", .unexpectedRecord), ("STDOUT from the web server", .unexpectedRecord),
        ("endless stray records", .tooManyStrayRecords), ("endless management records", .tooManyStrayRecords),
        ("malformed GET_VALUES", .malformedParams), ("a body far past its length", .bodyTooLarge),
        ("a request before the skipped body ended", .unexpectedRecord),
        ("endless empty PARAMS while a body is skipped", .bodyTooLarge), ("a skipped body in padding", .bodyTooLarge),
        ("params in padding", .paramsTooLarge), ("a body in padding", .bodyTooLarge),
    ] as [(String, FastCGIError.Code)])
    func violationsNameTheirReason(_ name: String, code: FastCGIError.Code) throws {
        let bytes = try #require(Self.violations[name])
        let limits = Limits(maxBodyBytes: 8, maxParamsBytes: 1024, maxParams: 10, maxStrayRecords: 4, bodySlackBytes: 16,
                            maxDiscardBytes: 1000)
        #expect(violation(parse(bytes, limits: limits)) == code)
        #expect(violation(parse(bytes, chunk: 1, limits: limits)) == code, "a byte at a time")
    }

    static let violations: [String: [UInt8]] = [
        "not FastCGI": Array("GET / HTTP/1.1\r\n\r\n".utf8),
        "short BEGIN_REQUEST": Raw.record(type: 1, [0, 1, 0]),
        // 28 bytes: name and value lengths of 0x7ffffffe each once overflowed libfcgi's length sum.
        "lengths that overflow": Raw.begin(keep: false) + Raw.record(type: 4, [0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xfe])
            + Raw.record(type: 4, []),
        "a value running past the params": Raw.begin(keep: false) + Raw.record(type: 4, [1, 5, 65, 66]) + Raw.record(type: 4, []),
        "params over the cap": Raw.begin(keep: false) + Raw.record(type: 4, Raw.pairs([("A", String(repeating: "x", count: 2000))])),
        "too many params": Raw.begin(keep: false) + Raw.record(type: 4, Raw.pairs((0..<20).map { ("P\($0)", "") })) + Raw.record(type: 4, []),
        "stdin before params ended": Raw.begin(keep: false) + Raw.record(type: 5, [1]),
        "a second BEGIN_REQUEST for the active id": Raw.begin(keep: false) + Raw.begin(keep: false),
        "DATA to a responder": Raw.begin(keep: false) + Raw.record(type: 4, []) + Raw.record(type: 8, [1]),
        "STDOUT from the web server": Raw.begin(keep: false) + Raw.record(type: 6, [1]),
        "endless stray records": Array(repeating: Raw.record(type: 5, id: 9, [1]), count: 5).flatMap { $0 },
        "endless management records": Array(repeating: Raw.record(type: 9, id: 0, []), count: 5).flatMap { $0 },
        "malformed GET_VALUES": Raw.record(type: 9, id: 0, [0x80]),
        "a body far past its length": Raw.begin(keep: true) + Raw.record(type: 4, Raw.pairs([("CONTENT_LENGTH", "2")]))
            + Raw.record(type: 4, []) + Array(repeating: Raw.record(type: 5, Array(repeating: 0, count: 900)), count: 3).flatMap { $0 },
        "a request before the skipped body ended": Raw.begin(keep: true) + Raw.record(type: 4, Raw.pairs([("CONTENT_LENGTH", "99")]))
            + Raw.record(type: 4, []) + Raw.record(type: 5, [1]) + Raw.begin(id: 2, keep: true),
        // Every record costs what it takes on the wire. Empty PARAMS records while a body is skipped once cost
        // nothing, and a peer streaming them held a worker (and the reading) for ever.
        "endless empty PARAMS while a body is skipped": Raw.begin(keep: true) + Raw.record(type: 4, Raw.pairs([("CONTENT_LENGTH", "99")]))
            + Raw.record(type: 4, []) + Array(repeating: Raw.record(type: 4, []), count: 200).flatMap { $0 },
        "a skipped body in padding": Raw.begin(keep: true) + Raw.record(type: 4, Raw.pairs([("CONTENT_LENGTH", "99")]))
            + Raw.record(type: 4, []) + Array(repeating: Raw.record(type: 5, [1], padding: 255), count: 5).flatMap { $0 },
        "params in padding": Raw.begin(keep: false) + Array(repeating: Raw.record(type: 4, [0], padding: 255), count: 5).flatMap { $0 },
        "a body in padding": Raw.begin(keep: true) + Raw.record(type: 4, Raw.pairs([("CONTENT_LENGTH", "8")]))
            + Raw.record(type: 4, []) + Array(repeating: Raw.record(type: 5, [1], padding: 255), count: 2).flatMap { $0 },
    ]

    /// Memory stays bounded whatever lengths the peer declares: nothing is allocated at a declared size.
    @Test func declaredLengthsAllocateNothing() {
        var parser = RequestParser(limits: Limits(maxBodyBytes: 8, maxParamsBytes: 4096))
        let header = Raw.begin(keep: false) + [1, 4, 0, 1, 0xff, 0xff, 0, 0] + [0xff, 0xff, 0xff, 0xff]
        header.withUnsafeBytes { parser.receive($0) }
        #expect(parser.next() == nil)  // waits for the rest of the 64 KiB record, holding only what arrived
        #expect(parser.bufferedBytes == 12)
    }
}

extension ParserEvent: Equatable {
    public static func == (lhs: ParserEvent, rhs: ParserEvent) -> Bool {
        switch (lhs, rhs) {
        case (.request(let a), .request(let b)): a.params == b.params && a.body == b.body && a.bodyTooLarge == b.bodyTooLarge
        case (.reply(let a, let x), .reply(let b, let y)): a == b && x == y
        case (.violation(let a), .violation(let b)): a == b
        default: false
        }
    }
}

/// A connection that once sent a request at the limits lets go of that memory while it is idle; nginx-sized
/// buffers are kept for the next request.
@Test func anIdleConnectionShedsLargeBuffers() {
    var parser = RequestParser(limits: Limits(maxBodyBytes: 64))
    let big = RawFastCGIConnection.request(params: ["DOCUMENT_URI": "/", "HTTP_X": String(repeating: "x", count: 60_000)], keep: true)
    big.withUnsafeBytes { parser.receive($0) }
    guard case .request? = parser.next() else { Issue.record("no request"); return }
    parser.requestAnswered()
    #expect(parser.next() == nil && parser.retainedBytes > 60_000)
    parser.shed()
    #expect(parser.retainedBytes < 3 * RequestParser.keptCapacity)
    let small = RawFastCGIConnection.request(params: ["DOCUMENT_URI": "/next"], keep: true)
    small.withUnsafeBytes { parser.receive($0) }
    guard case .request(let next)? = parser.next() else { Issue.record("no request after shedding"); return }
    #expect(next.path == "/next")
}

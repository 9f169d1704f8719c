// Reading one connection's FastCGI records incrementally, with hard limits, into complete responder requests.

/// What one connection may send, and how long it may take. Every byte read from a connection is bounded by
/// these before any work is done on it: memory per connection, CPU per byte, time per request.
public struct Limits: Sendable, Equatable {
    /// The longest request body handed to the handler; a longer one reaches it as `bodyTooLarge`.
    public var maxBodyBytes: Int
    /// All PARAMS bytes of one request (names, values and their lengths), each record counted whole (header and
    /// padding too). nginx sends about 1 KiB plus the client's headers, which its own
    /// `large_client_header_buffers` caps at 32 KiB by default.
    public var maxParamsBytes: Int
    /// Parameters in one request.
    public var maxParams: Int
    /// Records that belong to no request (management records, records of request ids that are not active,
    /// refused BEGIN_REQUESTs) between two requests; more closes the connection.
    public var maxStrayRecords: Int
    /// Request body bytes read past `maxBodyBytes` (or past CONTENT_LENGTH) before the connection is given up
    /// instead of read to the end of the request.
    public var bodySlackBytes: Int
    /// Body bytes of a request answered as `bodyTooLarge` that are read and dropped so the connection can
    /// carry the next request, each record counted whole (header and padding too, so empty or padding-only
    /// records cannot be streamed for free); past this the connection is closed instead. The default is 1 MiB
    /// of body (nginx's default `client_max_body_size`) and room for its records' headers and padding.
    public var maxDiscardBytes: Int
    /// Open connections; at this number the responder stops accepting until one closes.
    public var maxConnections: Int
    /// Bytes a worker reads from one connection before it gives the connection back to the line (as after
    /// `Dispatcher.turn` requests), so one peer's stream cannot keep a worker, nor the reading, to itself.
    public var readPerTurn: Int
    /// From a request's first byte to its last (the whole request must arrive within it).
    public var requestTimeout: Duration
    /// The longest pause between two bytes of a request that has begun (the minimum-progress rule).
    public var stallTimeout: Duration
    /// Waiting for a peer to read answers, in all until the connection is next idle with nothing buffered.
    public var writeTimeout: Duration
    /// A kept connection with no request this long is closed (nginx closes its own idle ones after its
    /// `keepalive_timeout`, 60 s by default; this is for peers that never do).
    public var idleTimeout: Duration
    /// How long a graceful stop waits for kept connections to be used or closed before it closes them.
    public var drainTimeout: Duration
    /// During a graceful stop, an idle kept connection that the web server has not closed this long after
    /// the farewell record asked it to is closed by the responder.
    public var drainIdle: Duration

    public init(maxBodyBytes: Int, maxParamsBytes: Int = 128 * 1024, maxParams: Int = 512, maxStrayRecords: Int = 64,
                bodySlackBytes: Int = 64 * 1024, maxDiscardBytes: Int = (1 << 20) + (1 << 15), maxConnections: Int = 1024, readPerTurn: Int = 1 << 20, requestTimeout: Duration = .seconds(10),
                stallTimeout: Duration = .seconds(2), writeTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(300),
                drainTimeout: Duration = .seconds(10), drainIdle: Duration = .seconds(1)) {
        self.maxBodyBytes = maxBodyBytes
        self.maxParamsBytes = maxParamsBytes
        self.maxParams = maxParams
        self.maxStrayRecords = maxStrayRecords
        self.bodySlackBytes = bodySlackBytes
        self.maxDiscardBytes = maxDiscardBytes
        self.maxConnections = maxConnections
        self.readPerTurn = readPerTurn
        self.requestTimeout = requestTimeout
        self.stallTimeout = stallTimeout
        self.writeTimeout = writeTimeout
        self.idleTimeout = idleTimeout
        self.drainTimeout = drainTimeout
        self.drainIdle = drainIdle
    }

    var isValid: Bool {
        maxBodyBytes >= 0 && maxParamsBytes >= 0 && maxParams >= 1 && maxStrayRecords >= 1 && bodySlackBytes >= 0 && maxDiscardBytes >= 0
            && maxConnections >= 1 && readPerTurn >= 1 && requestTimeout > .zero && stallTimeout > .zero && writeTimeout > .zero && idleTimeout > .zero
            && drainTimeout >= .zero && drainIdle >= .zero
    }
}

/// What the parser found in the bytes received so far.
package enum ParserEvent {
    /// A complete responder request (parameters, and the body up to the limit). `keepRequested` and
    /// `canContinue` tell what happens to the connection after its answer.
    case request(Request)
    /// Records to write back at once (a management answer, an END_REQUEST refusing a request); then the
    /// connection is closed if `thenClose`.
    case reply([UInt8], thenClose: Bool)
    /// The peer broke the protocol or a limit: close the connection (nothing can be answered on it).
    case violation(FastCGIError)
}

/// One connection's incoming byte stream, parsed record by record.
///
/// Linear in the bytes received: each record is looked at once, pairs are decoded once when PARAMS ends, and
/// the buffer holds at most the record being received plus what one read brought after a complete request
/// (pipelining). A request delivered by `next()` is answered before `next()` is called again
/// (`requestAnswered()`), so records after it wait in the buffer.
package struct RequestParser {
    package let limits: Limits
    private var buffer: [UInt8] = []
    private var start = 0

    private enum Phase { case idle, params, stdin, answering, discarding }
    private var phase = Phase.idle
    package private(set) var requestID: UInt16 = 0
    /// The web server asked to keep the connection for further requests (FCGI_KEEP_CONN).
    package private(set) var keepRequested = false
    /// The delivered request was read to its end, so the connection can carry another one.
    package private(set) var canContinue = false
    private var paramBytes: [UInt8] = []
    /// Wire bytes of the current request's PARAMS records (headers and padding included), for `maxParamsBytes`.
    private var paramsWireBytes = 0
    private var params = Parameters.none
    private var body: [UInt8] = []
    private var stdinBytes = 0
    /// Wire bytes of the current request's STDIN records (headers and padding included).
    private var stdinWireBytes = 0
    private var declaredLength: ContentLength = .unknown
    private var strayRecords = 0
    /// The delivered request's body was not read to its end: after the answer, the rest is read and dropped.
    private var discardRest = false
    private var discarded = 0

    package init(limits: Limits) { self.limits = limits }

    /// Appends bytes read from the connection.
    package mutating func receive(_ bytes: UnsafeRawBufferPointer) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Bytes received and not yet parsed.
    package var bufferedBytes: Int { buffer.count - start }

    /// A body is being skipped after its answer.
    package var isDiscarding: Bool { phase == .discarding }

    /// The delivered request's body was not read to its end (it is skipped once the request is answered).
    package var bodyLeftUnread: Bool { phase == .answering && discardRest }

    /// Parse nothing past the end of the current request (or the body being skipped): the connection closes.
    package var haltWhenIdle = false

    /// No request has begun and no partial record is waiting: the connection is idle between requests.
    package var isQuiet: Bool { phase == .idle && start == buffer.count }

    /// Lets go of large buffers while the connection is idle between requests (a peer that once sent a
    /// request at the limits does not keep that memory for as long as it keeps the connection).
    package mutating func shed() {
        guard phase == .idle, start == buffer.count else { return }
        if buffer.capacity > Self.keptCapacity { buffer = [] } else { buffer.removeAll(keepingCapacity: true) }
        start = 0
        if paramBytes.capacity > Self.keptCapacity { paramBytes = [] }
    }

    /// Bytes of buffer a connection keeps between requests (nginx's requests are a few KiB).
    static let keptCapacity = 16 * 1024

    /// The buffers' capacity in bytes, for tests of `shed()`.
    package var retainedBytes: Int { buffer.capacity + paramBytes.capacity + body.capacity }

    /// Called after the answer to the request `next()` delivered was written: the records after it may be parsed.
    package mutating func requestAnswered() {
        guard phase == .answering else { return }
        phase = discardRest ? .discarding : .idle
        discardRest = false
        discarded = 0
        params = Parameters.none
        body = []
    }

    /// The next event in the bytes received so far, or nil when more bytes are needed (or a delivered request
    /// has not been answered yet).
    package mutating func next() -> ParserEvent? {
        while phase != .answering && !(haltWhenIdle && phase == .idle) {
            let available = buffer.count - start
            guard available >= Wire.headerLength else { return nil }
            let header = (buffer[start], buffer[start + 1], UInt16(buffer[start + 2]) << 8 | UInt16(buffer[start + 3]),
                          Int(buffer[start + 4]) << 8 | Int(buffer[start + 5]), Int(buffer[start + 6]))
            let (version, type, id, contentLength, padding) = header
            guard version == Wire.version else {
                return fail(.badVersion, "record version \(version)")
            }
            // At most 8 + 65535 + 255 bytes: no record can make the buffer grow further.
            let total = Wire.headerLength + contentLength + padding
            guard available >= total else { return nil }
            let content = (start + Wire.headerLength)..<(start + Wire.headerLength + contentLength)
            start += total
            if let event = record(type: type, id: id, content: content, wireBytes: total) { return event }
        }
        return nil
    }

    /// One complete record; `wireBytes` is all it took on the wire (header, content, padding), which is what the
    /// caps on a request's PARAMS, its body and a skipped body are charged: work per record is bounded by its
    /// size, never free.
    private mutating func record(type: UInt8, id: UInt16, content: Range<Int>, wireBytes: Int) -> ParserEvent? {
        if id == 0 { return management(type: type, content: content) }
        if phase == .discarding && id == requestID {
            switch type {
            case Wire.stdin where content.isEmpty, Wire.abortRequest:
                phase = .idle
                return nil
            case Wire.stdin, Wire.params:
                discarded += wireBytes
                guard discarded <= limits.maxDiscardBytes else {
                    return fail(.bodyTooLarge, "more than \(limits.maxDiscardBytes) body bytes to skip")
                }
                return nil
            default:
                return fail(.unexpectedRecord, "record type \(type) while skipping the body of request \(id)")
            }
        }
        let active = id == requestID && (phase == .params || phase == .stdin)
        switch type {
        case Wire.beginRequest:
            if active { return fail(.unexpectedRecord, "a second BEGIN_REQUEST for request \(id)") }
            guard content.count == 8 else { return fail(.malformedBegin, "BEGIN_REQUEST of \(content.count) bytes") }
            let role = UInt16(buffer[content.lowerBound]) << 8 | UInt16(buffer[content.lowerBound + 1])
            let keep = buffer[content.lowerBound + 2] & Wire.keepConnection != 0
            if phase != .idle {
                if phase == .discarding { return fail(.unexpectedRecord, "BEGIN_REQUEST before the last body ended") }
                // One request at a time per connection (FCGI_MPXS_CONNS=0).
                return stray() ?? .reply(Records.endRequest(requestID: id, protocolStatus: Wire.cantMultiplex), thenClose: false)
            }
            guard role == Wire.responder else {
                return stray() ?? .reply(Records.endRequest(requestID: id, protocolStatus: Wire.unknownRole), thenClose: !keep)
            }
            requestID = id
            keepRequested = keep
            canContinue = false
            phase = .params
            paramBytes.removeAll(keepingCapacity: true)
            paramsWireBytes = 0
            params = Parameters.none
            body = []
            stdinBytes = 0
            stdinWireBytes = 0
            declaredLength = .unknown
            return nil
        case Wire.abortRequest where active:
            // The web server gave up on the request before it was complete: end it, handle nothing.
            phase = .idle
            strayRecords = 0
            return .reply(Records.endRequest(requestID: id, protocolStatus: Wire.requestComplete), thenClose: !keepRequested)
        case Wire.params where active && phase == .params:
            if content.isEmpty { return paramsComplete() }
            paramsWireBytes += wireBytes
            guard paramsWireBytes <= limits.maxParamsBytes else {
                return fail(.paramsTooLarge, "PARAMS over \(limits.maxParamsBytes) bytes")
            }
            paramBytes.append(contentsOf: buffer[content])
            return nil
        case Wire.stdin where active && phase == .stdin:
            return stdin(content, wireBytes: wireBytes)
        default:
            if active { return fail(.unexpectedRecord, "record type \(type) inside request \(id)") }
            // A record of a request id that is not active is ignored (FastCGI 1.0, section 3.3).
            return stray()
        }
    }

    private mutating func management(type: UInt8, content: Range<Int>) -> ParserEvent? {
        if let refused = stray() { return refused }
        guard type == Wire.getValues else { return .reply(Records.unknownType(type), thenClose: false) }
        var maxConns = false, maxReqs = false, mpxs = false
        let wellFormed = buffer[content].withUnsafeBytes { bytes in
            NameValuePairs.forEach(in: bytes) { name, _ in
                // Each known variable is answered once, however often it is asked for.
                if name.elementsEqual(Wire.maxConnsName.utf8) { maxConns = true }
                if name.elementsEqual(Wire.maxReqsName.utf8) { maxReqs = true }
                if name.elementsEqual(Wire.mpxsConnsName.utf8) { mpxs = true }
                return true
            }
        }
        guard wellFormed else { return fail(.malformedParams, "GET_VALUES pairs run past the record") }
        var pairs: [(String, String)] = []
        if maxConns { pairs.append((Wire.maxConnsName, String(limits.maxConnections))) }
        if maxReqs { pairs.append((Wire.maxReqsName, String(limits.maxConnections))) }
        if mpxs { pairs.append((Wire.mpxsConnsName, "0")) }
        return .reply(Records.getValuesResult(pairs), thenClose: false)
    }

    /// Counts a record that belongs to no request; nil while under the limit.
    private mutating func stray() -> ParserEvent? {
        strayRecords += 1
        guard strayRecords <= limits.maxStrayRecords else {
            return fail(.tooManyStrayRecords, "more than \(limits.maxStrayRecords) records outside a request")
        }
        return nil
    }

    private mutating func paramsComplete() -> ParserEvent? {
        var pairs: [(name: Range<Int>, value: Range<Int>)] = []
        pairs.reserveCapacity(32)
        let maxParams = limits.maxParams
        var tooMany = false
        let wellFormed = paramBytes.withUnsafeBytes { bytes in
            NameValuePairs.forEach(in: bytes) { name, value in
                guard pairs.count < maxParams else {
                    tooMany = true
                    return false
                }
                let nameStart = name.baseAddress.map { $0 - bytes.baseAddress! } ?? 0
                let valueStart = value.baseAddress.map { $0 - bytes.baseAddress! } ?? nameStart + name.count
                pairs.append((nameStart..<(nameStart + name.count), valueStart..<(valueStart + value.count)))
                return true
            }
        }
        guard !tooMany else { return fail(.tooManyParams, "more than \(maxParams) parameters") }
        guard wellFormed else { return fail(.malformedParams, "a PARAMS length runs past the parameters") }
        // The bytes go with the request; the next request's PARAMS start a buffer of their own.
        params = Parameters(bytes: paramBytes, pairs: pairs)
        paramBytes = []
        declaredLength = ContentLength(params["CONTENT_LENGTH"])
        switch declaredLength {
        case .tooLarge:
            return deliver(tooLarge: true, readToEnd: false)
        case .length(let length) where length > limits.maxBodyBytes:
            // Not read at all: answered at once (413); the body is skipped after the answer.
            return deliver(tooLarge: true, readToEnd: false)
        default:
            phase = .stdin
            return nil
        }
    }

    private mutating func stdin(_ content: Range<Int>, wireBytes: Int) -> ParserEvent? {
        let wanted: Int
        switch declaredLength {
        case .length(let length): wanted = length
        default: wanted = limits.maxBodyBytes + 1  // one byte past the cap tells "too large"
        }
        if content.isEmpty {
            return deliver(tooLarge: body.count > limits.maxBodyBytes, readToEnd: true)
        }
        stdinBytes += content.count
        stdinWireBytes += wireBytes
        if body.count < wanted {
            let take = min(content.count, wanted - body.count)
            body.append(contentsOf: buffer[content.lowerBound..<(content.lowerBound + take)])
        }
        if stdinBytes > min(wanted, limits.maxBodyBytes) + limits.bodySlackBytes {
            // Far more than will be used: answer now, and skip the rest after the answer.
            return deliver(tooLarge: body.count > limits.maxBodyBytes, readToEnd: false)
        }
        // Records that are mostly headers and padding: no web server sends a body that way.
        guard stdinWireBytes <= limits.maxBodyBytes + limits.bodySlackBytes else {
            return fail(.bodyTooLarge, "body records over \(limits.maxBodyBytes + limits.bodySlackBytes) bytes on the wire")
        }
        return nil
    }

    private mutating func deliver(tooLarge: Bool, readToEnd: Bool) -> ParserEvent {
        phase = .answering
        canContinue = keepRequested
        discardRest = !readToEnd
        strayRecords = 0
        let request = tooLarge ? Request(parameters: params, body: [], bodyTooLarge: true)
            : Request(parameters: params, body: body, bodyTooLarge: false)
        params = Parameters.none
        body = []
        return .request(request)
    }

    private mutating func fail(_ code: FastCGIError.Code, _ detail: String) -> ParserEvent {
        phase = .answering  // nothing more is parsed on this connection
        canContinue = false
        return .violation(FastCGIError(code, detail))
    }

    /// Drops parsed bytes from the front (amortised: only once they are half the buffer or more).
    private mutating func compact() {
        guard start > 0 else { return }
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 256 * 1024)
            start = 0
        } else if start >= buffer.count / 2 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }
}

/// CONTENT_LENGTH as the web server declared it.
enum ContentLength: Equatable {
    /// Absent, empty or not a decimal number: read to the end of the stream (capped).
    case unknown
    case length(Int)
    /// Digits too many to fit an Int.
    case tooLarge

    init(_ text: String?) {
        guard let text, !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            self = .unknown
            return
        }
        if let value = Int(text) { self = .length(value) } else { self = .tooLarge }
    }
}

// One worker's FCGX_Request: reading the parameters and body out of it, writing the response into it.
import CFastCGI
import Glibc

/// Owns one FCGX_Request for the life of a worker thread (never shared between threads).
final class RequestSlot {
    let request: UnsafeMutablePointer<FCGX_Request>

    init() {
        request = .allocate(capacity: 1)
        // FCGX_InitRequest only zeroes the struct and records the socket; it cannot fail. No listening
        // socket (-1): the Dispatcher accepts connections, libfcgi only reads requests from them, so when a
        // connection ends without a request libfcgi's own accept fails at once (EBADF) instead of blocking.
        _ = FCGX_InitRequest(request, -1, 0)
    }

    deinit {
        FCGX_Free(request, 1)
        request.deallocate()
    }

    /// Reads the next request's parameters from `fd` (which the caller owns). False when the connection
    /// ended or carried no valid responder request: it has then been closed.
    func begin(on fd: Int32) -> Bool {
        request.pointee.ipcFd = fd
        // FCGX_Accept_r first finishes "the previous request" and would close ipcFd unless it is marked kept;
        // the web server's own keep flag is read from the request's BEGIN record right after.
        request.pointee.keepConnection = 1
        // "Detached": when libfcgi closes the connection (end of file, garbage, a stream error, here or in
        // `finish`) it closes it plainly, instead of first waiting up to 2 s, or for as long as data trickles
        // in, for the peer to hang up, with this worker blocked. libfcgi clears the flag only when it closes.
        request.pointee.detached = 1
        guard FCGX_Accept_r(request) == 0 else {
            request.pointee.ipcFd = -1
            return false
        }
        guard request.pointee.role == 1 else {  // FCGI_RESPONDER: authorizer and filter requests are not served
            request.pointee.keepConnection = 0
            FCGX_Finish_r(request)  // ends it without output and closes the connection (still detached)
            return false
        }
        return true
    }

    /// Whether reading the request's input failed (the peer went away, or stalled past the I/O timeout).
    var inputFailed: Bool {
        guard let input = request.pointee.in else { return false }
        return FCGX_GetError(input) != 0
    }

    /// Ends the request (libfcgi flushes the output and sends END_REQUEST). True when the connection stays
    /// open for its next request: the web server asked to keep it (`fastcgi_keep_conn on`), the request was
    /// read to its end and the connection is sound. Otherwise it is closed: at once when the request was
    /// read to its end (or the connection failed), else after `closeDiscardingInput`. With `drainingInput`,
    /// what the handler left of the body is read to its end first (at most 64 KB more); a body left unread
    /// on purpose (over the cap) is not.
    func finish(drainingInput: Bool) -> Bool {
        let drained = drainingInput && drainInput(limit: 64 * 1024)
        let webServerKeeps = request.pointee.keepConnection != 0
        request.pointee.keepConnection = 1
        FCGX_Finish_r(request)  // closes the connection (plainly: still detached) only if reading or writing failed
        let fd = request.pointee.ipcFd
        guard fd >= 0 else { return false }
        request.pointee.ipcFd = -1
        if drained && webServerKeeps { return true }
        if drained { Glibc.close(fd) } else { closeDiscardingInput(fd) }
        return false
    }

    /// Closes a connection whose request was not read to its end, as libfcgi would but bounded: stop sending,
    /// read and discard what the peer still sends for at most 1 s and 1 MB, then close, so that a TCP peer
    /// reads the answer rather than a reset and a peer that keeps sending cannot hold the worker.
    private func closeDiscardingInput(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_WR))
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        var left = 1 << 20
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        while left > 0 {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1_000_000
            guard elapsed < 1000 else { break }
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pending, 1, Int32(1000 - elapsed)) == 1 else { break }
            let got = scratch.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, min($0.count, left)) }
            if got <= 0 { break }
            left -= got
        }
        Glibc.close(fd)
    }

    /// Reads the rest of the request's stdin up to its end record; false if more than `limit` bytes remain
    /// or the stream failed.
    private func drainInput(limit: Int) -> Bool {
        guard let input = request.pointee.in else { return true }
        var scratch = [CChar](repeating: 0, count: 4096)
        var left = limit
        while FCGX_HasSeenEOF(input) == 0 {
            let wanted = Int32(min(scratch.count, left + 1))
            let got = scratch.withUnsafeMutableBufferPointer { FCGX_GetStr($0.baseAddress, wanted, input) }
            if got <= 0 { break }
            left -= Int(got)
            if left < 0 { return false }
        }
        return FCGX_GetError(input) == 0
    }

    /// Copies the accepted request's parameters and up to `maxBodyBytes` of its body.
    func read(maxBodyBytes: Int) -> Request {
        var params: [String: String] = [:]
        if var entry = request.pointee.envp {
            while let pair = entry.pointee {
                let bytes = UnsafeRawBufferPointer(start: pair, count: strlen(pair))
                if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                    let name = String(decoding: bytes[..<equals], as: UTF8.self)
                    // The last value wins: nginx sends a parameter twice when a `fastcgi_param` after
                    // `include fastcgi_params` overrides it, and the override must count (as in php-fpm).
                    params[name] = String(decoding: bytes[(equals + 1)...], as: UTF8.self)
                }
                entry += 1
            }
        }
        let limit: Int
        switch ContentLength(params["CONTENT_LENGTH"]) {
        case .tooLarge:
            return Request(params: params, body: [], bodyTooLarge: true)
        case .length(let declared) where declared > maxBodyBytes:
            return Request(params: params, body: [], bodyTooLarge: true)
        case .length(let declared):
            limit = declared
        case .unknown:
            // Read to the end of the stream, but never more than one byte past the cap.
            limit = maxBodyBytes + 1
        }
        let body = readBody(upTo: limit)
        if body.count > maxBodyBytes {
            return Request(params: params, body: [], bodyTooLarge: true)
        }
        return Request(params: params, body: body)
    }

    private func readBody(upTo limit: Int) -> [UInt8] {
        var body: [UInt8] = []
        guard limit > 0, let input = request.pointee.in else { return body }
        body.reserveCapacity(min(limit, 1 << 20))
        var chunk = [CChar](repeating: 0, count: 16 * 1024)
        while body.count < limit {
            let wanted = Int32(min(chunk.count, limit - body.count))
            let got = chunk.withUnsafeMutableBufferPointer { FCGX_GetStr($0.baseAddress, wanted, input) }
            if got <= 0 { break }
            chunk.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: UInt8.self) { body.append(contentsOf: $0.prefix(Int(got))) }
            }
            if got < wanted { break }  // end of the request's stdin
        }
        return body
    }

    /// Writes the CGI head and the body; a write error (the web server went away) is left to FCGX_Finish_r.
    func write(_ response: Response) {
        guard let output = request.pointee.out else { return }
        if put(response.encodedHead(), to: output) {
            _ = put(response.body, to: output)
        }
    }

    private func put(_ bytes: [UInt8], to output: UnsafeMutablePointer<FCGX_Stream>) -> Bool {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let count = min(raw.count - offset, 1 << 30)
                let pointer = raw.baseAddress!.advanced(by: offset).assumingMemoryBound(to: CChar.self)
                if FCGX_PutStr(pointer, Int32(count), output) < 0 { return false }
                offset += count
            }
            return true
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

// FastCGI records on the wire (the FastCGI 1.0 specification; constants from fastcgi.h): their header,
// the name-value pair encoding, and the records the responder writes.
import CLinuxFastCGI

/// Record types, roles and status codes, from fastcgi.h.
enum Wire {
    static let version = UInt8(FCGI_VERSION_1)
    static let headerLength = Int(FCGI_HEADER_LEN)
    static let maxContent = Int(FCGI_MAX_LENGTH)

    static let beginRequest = UInt8(FCGI_BEGIN_REQUEST)
    static let abortRequest = UInt8(FCGI_ABORT_REQUEST)
    static let endRequest = UInt8(FCGI_END_REQUEST)
    static let params = UInt8(FCGI_PARAMS)
    static let stdin = UInt8(FCGI_STDIN)
    static let stdout = UInt8(FCGI_STDOUT)
    static let stderr = UInt8(FCGI_STDERR)
    static let data = UInt8(FCGI_DATA)
    static let getValues = UInt8(FCGI_GET_VALUES)
    static let getValuesResult = UInt8(FCGI_GET_VALUES_RESULT)
    static let unknownType = UInt8(FCGI_UNKNOWN_TYPE)

    static let keepConnection = UInt8(FCGI_KEEP_CONN)
    static let responder = UInt16(FCGI_RESPONDER)

    static let requestComplete = UInt8(FCGI_REQUEST_COMPLETE)
    static let cantMultiplex = UInt8(FCGI_CANT_MPX_CONN)
    static let unknownRole = UInt8(FCGI_UNKNOWN_ROLE)

    static let maxConnsName = FCGI_MAX_CONNS
    static let maxReqsName = FCGI_MAX_REQS
    static let mpxsConnsName = FCGI_MPXS_CONNS
}

/// Writing records: the bytes of whole records appended to an output buffer.
package enum Records {
    /// Appends one record header for `contentLength` bytes of content (no padding).
    static func appendHeader(_ type: UInt8, requestID: UInt16, contentLength: Int, to out: inout [UInt8]) {
        out.append(Wire.version)
        out.append(type)
        out.append(UInt8(requestID >> 8))
        out.append(UInt8(requestID & 0xff))
        out.append(UInt8(contentLength >> 8))
        out.append(UInt8(contentLength & 0xff))
        out.append(0)
        out.append(0)
    }

    /// `bytes` as a stream of records of `type` (at most 32 KiB each, so every record is a multiple of 8 bytes
    /// but the last), without the empty record that would end the stream.
    static func appendStream(_ type: UInt8, requestID: UInt16, _ bytes: [UInt8], to out: inout [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = min(bytes.count - offset, 32 * 1024)
            appendHeader(type, requestID: requestID, contentLength: count, to: &out)
            out.append(contentsOf: bytes[offset..<(offset + count)])
            offset += count
        }
    }

    /// END_REQUEST with an application status of 0 and `protocolStatus`.
    static func appendEndRequest(requestID: UInt16, protocolStatus: UInt8, to out: inout [UInt8]) {
        appendHeader(Wire.endRequest, requestID: requestID, contentLength: 8, to: &out)
        out.append(contentsOf: [0, 0, 0, 0, protocolStatus, 0, 0, 0])
    }

    static func endRequest(requestID: UInt16, protocolStatus: UInt8) -> [UInt8] {
        var out: [UInt8] = []
        appendEndRequest(requestID: requestID, protocolStatus: protocolStatus, to: &out)
        return out
    }

    /// A whole answer: the CGI head and body on STDOUT, the empty STDOUT record, END_REQUEST. With `farewell`,
    /// an empty STDERR record follows END_REQUEST in the same write: nginx then does not keep the connection
    /// (ngx_http_fastcgi_input_filter keeps it only when END_REQUEST ends what it read), so it never sends
    /// another request on a connection this responder is about to close.
    package static func answer(requestID: UInt16, head: [UInt8], body: [UInt8], farewell: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(head.count + body.count + 48 + (head.count + body.count) / (32 * 1024) * 8)
        appendStream(Wire.stdout, requestID: requestID, head, to: &out)
        appendStream(Wire.stdout, requestID: requestID, body, to: &out)
        appendHeader(Wire.stdout, requestID: requestID, contentLength: 0, to: &out)
        appendEndRequest(requestID: requestID, protocolStatus: Wire.requestComplete, to: &out)
        if farewell { appendHeader(Wire.stderr, requestID: requestID, contentLength: 0, to: &out) }
        return out
    }

    /// The farewell alone (an empty STDERR record), sent on an idle kept connection when the server stops. In
    /// nginx's keepalive cache any byte that arrives makes nginx close the connection itself (its close
    /// handler peeks and closes on anything but EAGAIN); had nginx just sent a request on it, the record reads
    /// as an empty STDERR before the answer, which nginx skips.
    static func farewell(requestID: UInt16) -> [UInt8] {
        var out: [UInt8] = []
        appendHeader(Wire.stderr, requestID: requestID, contentLength: 0, to: &out)
        return out
    }

    /// UNKNOWN_TYPE for a management record of a type this responder does not know.
    static func unknownType(_ type: UInt8) -> [UInt8] {
        var out: [UInt8] = []
        appendHeader(Wire.unknownType, requestID: 0, contentLength: 8, to: &out)
        out.append(contentsOf: [type, 0, 0, 0, 0, 0, 0, 0])
        return out
    }

    /// GET_VALUES_RESULT with the given pairs (names and values are short ASCII).
    static func getValuesResult(_ pairs: [(String, String)]) -> [UInt8] {
        var content: [UInt8] = []
        for (name, value) in pairs { NameValuePairs.append(name: Array(name.utf8), value: Array(value.utf8), to: &content) }
        var out: [UInt8] = []
        appendHeader(Wire.getValuesResult, requestID: 0, contentLength: content.count, to: &out)
        out.append(contentsOf: content)
        return out
    }
}

/// The name-value pair encoding of PARAMS and GET_VALUES: each length in 1 byte (< 128) or 4 bytes (high bit set,
/// 31 bits), then the name, then the value.
enum NameValuePairs {
    static func appendLength(_ count: Int, to out: inout [UInt8]) {
        if count < 128 {
            out.append(UInt8(count))
        } else {
            out.append(UInt8(truncatingIfNeeded: count >> 24) | 0x80)
            out.append(UInt8(truncatingIfNeeded: count >> 16))
            out.append(UInt8(truncatingIfNeeded: count >> 8))
            out.append(UInt8(truncatingIfNeeded: count))
        }
    }

    static func append(name: [UInt8], value: [UInt8], to out: inout [UInt8]) {
        appendLength(name.count, to: &out)
        appendLength(value.count, to: &out)
        out.append(contentsOf: name)
        out.append(contentsOf: value)
    }

    /// Calls `body` with each pair's name and value ranges in `bytes`; false when a length runs past the end
    /// (every length is checked against what is left before it is used, so no sum can overflow) or when
    /// `body` returns false. Linear in `bytes.count`.
    static func forEach(in bytes: UnsafeRawBufferPointer,
                        _ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Bool) -> Bool {
        var offset = 0
        func length() -> Int? {
            guard offset < bytes.count else { return nil }
            let first = bytes[offset]
            if first < 128 {
                offset += 1
                return Int(first)
            }
            guard bytes.count - offset >= 4 else { return nil }
            let value = Int(first & 0x7f) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            offset += 4
            return value
        }
        while offset < bytes.count {
            guard let nameLength = length(), let valueLength = length() else { return false }
            guard nameLength <= bytes.count - offset else { return false }
            let name = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + nameLength)])
            offset += nameLength
            guard valueLength <= bytes.count - offset else { return false }
            let value = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + valueLength)])
            offset += valueLength
            guard body(name, value) else { return false }
        }
        return true
    }
}

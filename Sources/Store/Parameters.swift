// Statement parameters as libpq takes them: their texts in one buffer, checked before anything is sent.
#if canImport(Glibc)
import Glibc
#endif

extension Connection {
    /// Lays the parameters out in one NUL-separated buffer and hands libpq pointers into it (NULL for nil).
    static func withParameters<R>(
        _ params: [any SQLParameter], _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?) -> R
    ) throws(StoreError) -> R {
        withTexts(try texts(params), body)
    }

    /// The parameters' text, checked: the protocol's limit on their number, and no NUL (libpq reads text
    /// parameters up to the first NUL; refused rather than silently truncated). Refused here, before anything
    /// is sent (in a pipeline, half of it would be).
    static func texts(_ params: [any SQLParameter]) throws(StoreError) -> ParameterTexts {
        guard params.count <= 65_535 else { throw StoreError(.invalidParameter, "more than 65535 parameters") }
        var texts = ParameterTexts(count: params.count)
        for index in params.indices {
            let start = texts.bytes.count
            guard params[index].appendSQLText(to: &texts.bytes) else {
                assert(texts.bytes.count == start, "a NULL parameter appended text")
                texts.offsets.append(-1)
                continue
            }
            let clean = texts.bytes.withUnsafeBufferPointer { all in
                all.count == start || memchr(all.baseAddress! + start, 0, all.count - start) == nil
            }
            guard clean else { throw StoreError(.invalidParameter, "a parameter contains a NUL character") }
            texts.offsets.append(start)
            texts.bytes.append(0)
        }
        return texts
    }

    static func withTexts<R>(_ texts: ParameterTexts, _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
        texts.bytes.withUnsafeBufferPointer { bytes in bytes.withMemoryRebound(to: CChar.self) { chars in
            withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: max(texts.offsets.count, 1)) { pointers in
                for (index, offset) in texts.offsets.enumerated() {
                    pointers[index] = offset < 0 ? nil : UnsafePointer(chars.baseAddress! + offset)
                }
                return body(Int32(texts.offsets.count), UnsafePointer(pointers.baseAddress))
            }
        } }
    }
}

/// One statement's parameters as libpq takes them: their texts in one buffer, each ended by a NUL, and where
/// each starts (-1 for SQL NULL). Built once per statement (`Connection.texts`), read by every send of it.
struct ParameterTexts {
    var bytes: [UInt8] = []
    var offsets: [Int] = []

    init(count: Int) {
        offsets.reserveCapacity(count)
        bytes.reserveCapacity(count * 16)
    }
}

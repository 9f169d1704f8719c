// Statement parameters as libpq takes them: their texts in one buffer, checked before anything is sent.
#if canImport(Glibc)
import Glibc
#endif

extension Connection {
    /// The parameters' texts, in order, checked (`ParameterTexts`).
    static func texts(_ params: [any SQLParameter]) throws(StoreError) -> ParameterTexts {
        var texts = try ParameterTexts(checkedCount: params.count)
        for index in params.indices {
            let start = texts.bytes.count
            let written = params[index].appendSQLText(to: &texts.bytes)
            try texts.endParameter(startingAt: start, written: written)
        }
        return texts
    }

    /// Hands libpq the parameters: pointers into the one buffer (NULL for SQL NULL).
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
/// each starts (-1 for SQL NULL). Built once per statement (`Connection.texts`, `TypedStatement.texts`), read by
/// every send of it. Checked as it is built: the protocol's limit on their number, and no NUL (libpq reads text
/// parameters up to the first NUL; refused rather than silently truncated). Refused here, before anything is sent
/// (in a pipeline, half of it would be).
struct ParameterTexts {
    var bytes: [UInt8] = []
    var offsets: [Int] = []

    init(count: Int) {
        offsets.reserveCapacity(count)
        bytes.reserveCapacity(count * 16)
    }

    /// Room for `count` parameters, as many as the protocol carries at most.
    @inline(__always)
    init(checkedCount count: Int) throws(StoreError) {
        guard count <= 65_535 else { throw StoreError(.invalidParameter, "more than 65535 parameters") }
        self.init(count: count)
    }

    /// Writes the next parameter's text straight into the buffer (no String per parameter).
    mutating func append(_ parameter: some SQLParameter) throws(StoreError) {
        let start = bytes.count
        let written = parameter.appendSQLText(to: &bytes)
        try endParameter(startingAt: start, written: written)
    }

    /// Records the parameter whose text was just appended from `start` on (`written` false: SQL NULL), once checked.
    /// Apart from `append`, and inlined, so that positional parameters call `appendSQLText` on the existential itself
    /// and cost what one loop did: a generic `append` of each opened existential cost some 35 instructions more.
    @inline(__always)
    mutating func endParameter(startingAt start: Int, written: Bool) throws(StoreError) {
        guard written else {
            assert(bytes.count == start, "a NULL parameter appended text")
            offsets.append(-1)
            return
        }
        let clean = bytes.withUnsafeBufferPointer { all in
            all.count == start || memchr(all.baseAddress! + start, 0, all.count - start) == nil
        }
        guard clean else { throw StoreError(.invalidParameter, "a parameter contains a NUL character") }
        offsets.append(start)
        bytes.append(0)
    }
}

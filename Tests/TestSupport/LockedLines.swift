// Lines collected from several threads (a log sink, a command's output), for tests to read afterwards.
import Foundation

public final class LockedLines: @unchecked Sendable {
    // SAFETY: every access holds `lock`.
    private let lock = NSLock()
    private var lines: [String] = []
    public init() {}
    public func append(_ line: String) { lock.withLock { lines.append(line) } }
    public var all: [String] { lock.withLock { lines } }
}

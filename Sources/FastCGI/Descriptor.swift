// An owned file descriptor: one owner closes it, and closing it twice does not compile.
import Glibc

/// A descriptor this module opened (an accepted connection, the epoll set, the wake-up eventfd).
///
/// Moving it hands over the duty to close it; `close()` consumes it, and the deinit closes one that was
/// dropped, so there is no "caller owns it" convention to get wrong and no second close of a number the
/// kernel may already have given to someone else.
struct Descriptor: ~Copyable {
    let raw: Int32

    init(_ raw: Int32) { self.raw = raw }

    consuming func close() {
        Glibc.close(raw)
        discard self
    }

    deinit { Glibc.close(raw) }
}

// An owned file descriptor: one owner closes it, and closing it twice does not compile.
import Glibc

/// A descriptor this module opened (a listening socket, an accepted connection, the epoll set, an eventfd), or
/// the listening socket a process manager passed.
///
/// Moving it hands over the duty to close it; `close()` consumes it, and the deinit closes one that was
/// dropped, so there is no "caller owns it" convention to get wrong and no second close of a number the
/// kernel may already have given to someone else. Its number is read only for a system call (`raw`).
struct Descriptor: ~Copyable {
    let raw: Int32

    init(_ raw: Int32) { self.raw = raw }

    consuming func close() {
        Glibc.close(raw)
        discard self
    }

    /// Lets go of it without closing it: a socket the process manager passed, which it may still use (to hand
    /// it, with the connections queued on it, to the next process).
    consuming func relinquish() {
        discard self
    }

    deinit { Glibc.close(raw) }
}

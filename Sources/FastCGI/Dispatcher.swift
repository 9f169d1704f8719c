// One epoll set shared by all workers: the listening socket, every connection the web server keeps open
// between requests, and the stop pipe. A ready connection goes to whichever worker is free next.
import CFastCGI
import Glibc
import Synchronization

/// Hands out what is ready to the workers, one event per `next()` call.
///
/// Every socket is registered `EPOLLONESHOT`: the worker that receives its event owns it (no other worker
/// sees it again) until it gives it back with `park` (a connection after its request, kept open for the
/// next) or `rearmListener`. So one worker at a time touches a connection, and no connection is tied to a
/// worker: with more kept connections than workers, the next request on any of them is served by the next
/// free worker instead of waiting behind an idle connection. One wait queue (epoll's) wakes one worker per
/// event, so a new connection does not wake every idle worker either.
final class Dispatcher: Sendable {
    enum Event: Equatable {
        /// A connection is waiting to be accepted; call `acceptConnection()`.
        case listener
        /// The web server sent something on this connection (a request, or its end); the caller owns it.
        case connection(Int32)
        /// `stop()` was called (stays ready: every worker sees it).
        case stop
        /// epoll_wait failed for good (with this errno).
        case failed(Int32)
    }

    /// What `acceptConnection()` did.
    enum Accepted: Equatable {
        /// A connection was accepted and its request has begun to arrive: the caller owns it and serves it at
        /// once, then gives it to `park(_:watched: false)` or reports it `closed`.
        case ready(Int32)
        /// A connection was accepted and parked until the web server writes on it, or nothing was waiting.
        case done
        /// Out of descriptors or memory: the connection stays queued; try again after a pause.
        case exhausted
        /// accept failed for good (with this errno).
        case failed(Int32)
    }

    private let epoll: Int32
    private let listenFd: Int32
    private let wakeFd: Int32
    /// Every connection accepted and not yet closed, so `closeAll()` can close the idle ones when the server
    /// stops. Touched once when a connection opens and once when it closes, not per request (a lock taken
    /// twice per request by every worker showed up as contention). Counted, because libfcgi closes a
    /// connection before the worker reports it: another worker may accept the same descriptor number in
    /// between, and its increment must survive the late decrement.
    private let open = Mutex<[Int32: Int]>([:])

    /// SO_RCVTIMEO and SO_SNDTIMEO of every accepted connection: the longest a worker blocks reading a
    /// request that has begun to arrive, or writing an answer the peer does not read.
    private let ioTimeout: timeval

    /// The set over `listenFd` (non-blocking) and `wakeFd` (stays readable once `stop()` writes to it).
    init(listenFd: Int32, wakeFd: Int32, ioTimeout: Duration = .seconds(30)) throws(FastCGIError) {
        let (seconds, attoseconds) = ioTimeout.components
        self.ioTimeout = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw FastCGIError(.startFailed, errnoText("epoll_create1")) }
        self.epoll = epoll
        self.listenFd = listenFd
        self.wakeFd = wakeFd
        guard control(EPOLL_CTL_ADD, listenFd, oneShot: true), control(EPOLL_CTL_ADD, wakeFd, oneShot: false) else {
            let error = FastCGIError(.startFailed, errnoText("epoll_ctl"))
            Glibc.close(epoll)
            throw error
        }
    }

    deinit { Glibc.close(epoll) }

    /// Waits (without a timeout) for the next event; retries on EINTR.
    func next() -> Event {
        var event = epoll_event()
        while true {
            let count = epoll_wait(epoll, &event, 1, -1)
            if count < 0 {
                if errno == EINTR { continue }
                return .failed(errno)
            }
            if count == 0 { continue }
            let fd = event.data.fd
            if fd == wakeFd { return .stop }
            if fd == listenFd { return .listener }
            return .connection(fd)
        }
    }

    /// Once stopping: the connections on which something has arrived and no worker has taken yet (without
    /// waiting; empty when there are none). The caller owns them.
    func waitingConnections() -> [Int32] {
        var events = [epoll_event](repeating: epoll_event(), count: 16)
        while true {
            let count = epoll_wait(epoll, &events, Int32(events.count), 0)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return [] }
            return events.prefix(Int(count)).map { $0.data.fd }.filter { $0 != wakeFd && $0 != listenFd }
        }
    }

    /// After a `.listener` event: accepts one connection and hands the listener back to the set. A connection
    /// whose request has begun to arrive (nginx writes right after connecting) is returned to be served at
    /// once; one that is still silent is parked until the web server writes on it, so no worker blocks on it.
    func acceptConnection() -> Accepted {
        let fd = accept(listenFd, nil, nil)  // (accept4 is hidden: the toolchain's Glibc lacks _GNU_SOURCE)
        guard fd >= 0 else {
            switch errno {
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                return .exhausted  // the caller pauses, then calls rearmListener()
            case EBADF, EINVAL, ENOTSOCK, EOPNOTSUPP, EFAULT:
                return .failed(errno)  // the listener itself is unusable
            default:
                // EAGAIN (another process sharing the socket took it), ECONNABORTED, EPROTO, and what a TCP
                // connection can die of before it is accepted (ECONNRESET, ETIMEDOUT, ...), or EPERM from a
                // security module: that connection is lost, the listener is fine.
                rearmListener()
                return .done
            }
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var timeout = ioTimeout
        let size = socklen_t(MemoryLayout<timeval>.size)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, size)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, size)
        rearmListener()  // before serving, so another worker can accept the next connection meanwhile
        open.withLock { $0[fd, default: 0] += 1 }
        var byte: UInt8 = 0
        switch recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) {
        case 1:
            return .ready(fd)
        case 0:
            close(fd)  // hung up without a word
        default:
            park(fd, watched: false)
        }
        return .done
    }

    /// Gives the listener back to the set (after `acceptConnection()` returned `.exhausted`).
    func rearmListener() {
        _ = control(EPOLL_CTL_MOD, listenFd, oneShot: true)
    }

    /// Gives a connection back to the set until its next request (`watched`: it came from `next()`, so the set
    /// knows it already; false for one from `.ready` or just accepted). A connection that cannot be watched
    /// is closed (the web server then opens a new one).
    func park(_ fd: Int32, watched: Bool = true) {
        if !control(watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, oneShot: true) { close(fd) }
    }

    /// Closes a connection the caller owns, and forgets it.
    func close(_ fd: Int32) {
        Glibc.close(fd)
        closed(fd)
    }

    /// Reports that a connection the caller owned has been closed (by libfcgi, or by the request slot).
    func closed(_ fd: Int32) {
        open.withLock { counts in
            guard let count = counts[fd] else { return }
            counts[fd] = count > 1 ? count - 1 : nil
        }
    }

    /// Closes every connection still open: the idle kept ones, when the server stops after its workers ended.
    func closeAll() {
        let idle = open.withLock { counts in
            defer { counts.removeAll() }
            return Array(counts.keys)
        }
        for fd in idle { Glibc.close(fd) }
    }

    /// Connections open right now (tests).
    var openConnections: Int { open.withLock { $0.count } }

    private func control(_ operation: Int32, _ fd: Int32, oneShot: Bool) -> Bool {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | (oneShot ? EPOLLONESHOT.rawValue : 0)
        event.data.fd = fd
        return epoll_ctl(epoll, operation, fd, &event) == 0
    }
}

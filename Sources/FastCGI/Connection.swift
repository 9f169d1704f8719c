// One connection from the web server: its socket, its parser, and who holds it right now.
import Glibc
import Synchronization
import Threads

/// A connection and its incoming stream. Exactly one thread holds it at a time: the worker that received its
/// event (or took its queued request) until it parks or closes it, or nobody while it waits in the epoll set
/// or a lane's queue. Only the holder closes it; the timer may only shut a parked one down.
final class Connection: @unchecked Sendable {
    // SAFETY: the fields other than `state` (`socket` too) are touched by the one thread that holds the
    // connection, or by the timer with `state` locked while it is parked. It changes hands through
    // epoll_ctl/epoll_wait (EPOLLONESHOT: one event per arming, armed with `state` locked), a lane's mutex or the
    // dispatcher's hand-back list, each of which orders memory between the two threads.
    /// nil once closed (by the holder only, so never under the timer).
    private var socket: Descriptor?
    var parser: RequestParser
    /// In the epoll set (added once; re-armed with EPOLL_CTL_MOD after that).
    var registered = false
    /// Since when the current request (or partial record) has been arriving, 0 when quiet (monotonic ns).
    var busySince: UInt64
    /// The last time bytes arrived.
    var lastProgress: UInt64
    /// When the stop's farewell was sent on this idle connection (0: not yet). Touched with `state` locked.
    var farewellSent: UInt64 = 0

    enum State: Equatable {
        /// Held by a worker (or the timer), or queued to a lane.
        case held
        /// Parked between requests since this time; the stop sends it the farewell.
        case idle(since: UInt64)
        /// Parked with a request (or a record) begun: on the clock of `busySince` and `lastProgress`.
        case waiting
        case closed
    }
    let state = Mutex<State>(.held)
    /// In the dispatcher's set of connections on the clock (set and cleared by the holder).
    var onTheClock = false
    /// The timer shut the socket down (`shutDown()`); touched with `state` locked.
    var isShutDown = false
    /// Nanoseconds spent waiting for the peer to take answers since the connection was last idle (`write`).
    var writeWaited: UInt64 = 0
    /// Requests and replies handled since a worker last took the connection from the epoll set or the
    /// hand-back list (the dispatcher gives it back after `Dispatcher.turn`, so one peer cannot keep a worker).
    var turnItems = 0
    /// Bytes read since then (the dispatcher gives it back after `Limits.readPerTurn`).
    var turnBytes = 0

    /// A worker took it from the epoll set or the hand-back list: a new turn begins.
    func beginTurn() {
        turnItems = 0
        turnBytes = 0
    }

    init(_ socket: consuming Descriptor, limits: Limits, now: UInt64) {
        self.socket = consume socket
        parser = RequestParser(limits: limits)
        busySince = now
        lastProgress = now
    }

    var isOpen: Bool { socket != nil }

    /// Closes the socket (once; later calls do nothing).
    func close() {
        socket.take()?.close()
    }

    /// The socket's number, read at each system call: -1 once closed, so a late call fails (EBADF) instead of
    /// reaching a number the kernel may have given to a new connection since.
    private var number: Int32 { socket?.raw ?? -1 }

    /// The tag of its events in the epoll set: its address (the epoll set does not retain it; the
    /// dispatcher's set of open connections does, until it is closed).
    var tag: UInt64 { UInt64(UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque())) }

    /// The connection whose event carries `tag`.
    static func parked(withTag tag: UInt64) -> Connection? {
        guard let pointer = UnsafeRawPointer(bitPattern: UInt(tag)) else { return nil }
        return Unmanaged<Connection>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Puts it into the epoll set until its next event (one-shot): added the first time, re-armed after that.
    func arm(in epoll: borrowing EventSet) -> Bool {
        let armed: Bool
        switch socket {
        case .some(let socket): armed = epoll.arm(socket, tag: tag, adding: !registered)
        case .none: armed = false
        }
        if armed { registered = true }
        return armed
    }

    /// The timer's way to end a parked connection (a deadline passed, or the stop gave up on it), with `state`
    /// locked: the next event ends with end of file, on which the worker that holds it then closes it.
    func shutDown() {
        isShutDown = true
        _ = Glibc.shutdown(number, Int32(SHUT_RDWR))
    }

    /// Ends our side after a closing answer, while the rest of the peer's body is read and skipped.
    func endWriting() {
        _ = Glibc.shutdown(number, Int32(SHUT_WR))
    }

    /// Bytes have arrived and wait to be read (without reading them).
    var hasBytesWaiting: Bool {
        var byte: UInt8 = 0
        return recv(number, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) == 1
    }

    enum ReadOutcome { case bytes(Int), wouldBlock, closed }

    /// One non-blocking read into `scratch`, handed to the parser.
    func read(into scratch: inout [UInt8]) -> ReadOutcome {
        while true {
            let got = scratch.withUnsafeMutableBytes { Glibc.read(number, $0.baseAddress, $0.count) }
            if got > 0 {
                scratch.withUnsafeBytes { parser.receive(UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
                return .bytes(got)
            }
            if got == 0 { return .closed }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            default: return .closed
            }
        }
    }

    /// Writes all of `bytes`. Without a budget it does not wait (the timer never blocks, and a management
    /// reply the peer leaves unread closes the connection). With one, it polls for room, but the connection
    /// may spend at most `budget` nanoseconds waiting (`writeWaited`) until it is next idle with nothing
    /// buffered: a peer that streams requests and reads a trickle cannot hold a worker answer after answer. Its
    /// waits are also added to `shared`, which may not reach the budget either (a batch's answers share one).
    /// False when the bytes could not all be written.
    func write(_ bytes: [UInt8], budget: UInt64?) -> Bool {
        var unshared: UInt64 = 0
        return write(bytes, budget: budget, alsoCounting: &unshared)
    }

    func write(_ bytes: [UInt8], budget: UInt64?, alsoCounting shared: inout UInt64) -> Bool {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let sent = send(number, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if sent > 0 {
                    offset += sent
                    continue
                }
                guard sent < 0 else { return false }
                switch errno {
                case EINTR:
                    continue
                case EAGAIN, EWOULDBLOCK:
                    guard let budget, writeWaited < budget, shared < budget else { return false }
                    let started = monotonicNanoseconds()
                    var pending = pollfd(fd: number, events: Int16(POLLOUT), revents: 0)
                    let left = budget - max(writeWaited, shared)
                    let milliseconds = Int32(min(left / 1_000_000 + 1, 60_000))
                    let polled = poll(&pending, 1, milliseconds)
                    let waited = monotonicNanoseconds() - started
                    writeWaited += waited
                    shared += waited
                    if polled < 0 && errno != EINTR { return false }
                default:
                    return false
                }
            }
            return true
        }
    }
}

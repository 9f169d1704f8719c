// The epoll set the workers wait on, with the two eventfds in it that wake them: the hand-back and the exit.
import CLinuxFastCGI
import Glibc

/// The epoll set: the listening socket, every parked connection, and two eventfds.
///
/// Each event carries a tag: the listener's and the eventfds' are fixed, a connection's is its address
/// (`Connection.tag`). Every socket and the hand-back eventfd are one-shot (`EPOLLONESHOT`): an event wakes
/// one worker, and nothing more is reported until it is armed again.
struct EventSet: ~Copyable, Sendable {
    private let set: Descriptor
    /// Written once when the server is done; stays readable, so every worker wakes and leaves.
    private let exit: Descriptor
    /// Armed one-shot: raised when work is put on the hand-back list (`Dispatcher.handOff`).
    private let handBack: Descriptor

    static let listenerTag: UInt64 = 0
    static let exitTag: UInt64 = 1
    static let handBackTag: UInt64 = 2

    init() throws(FastCGIError) {
        let setFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard setFD >= 0 else { throw FastCGIError(.startFailed, errnoText("epoll_create1")) }
        let set = Descriptor(setFD)
        let exit = try Self.eventDescriptor()
        let handBack = try Self.eventDescriptor()
        guard Self.control(set, EPOLL_CTL_ADD, exit, tag: Self.exitTag, oneShot: false),
              Self.control(set, EPOLL_CTL_ADD, handBack, tag: Self.handBackTag, oneShot: true)
        else { throw FastCGIError(.startFailed, errnoText("epoll_ctl")) }
        self.set = set
        self.exit = exit
        self.handBack = handBack
    }

    private static func eventDescriptor() throws(FastCGIError) -> Descriptor {
        let fd = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard fd >= 0 else { throw FastCGIError(.startFailed, errnoText("eventfd")) }
        return Descriptor(fd)
    }

    /// Waits for at most `count` events, at most `milliseconds` (-1: no limit; 0: only those already there);
    /// the number received, or -1 with `errno` set.
    func wait(_ events: inout [epoll_event], upTo count: Int32, milliseconds: Int32) -> Int32 {
        epoll_wait(set.raw, &events, count, milliseconds)
    }

    /// Adds a socket (`adding`) or re-arms it for its next event (one-shot), with `tag`.
    func arm(_ socket: borrowing Descriptor, tag: UInt64, adding: Bool) -> Bool {
        Self.control(set, adding ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, socket, tag: tag, oneShot: true)
    }

    func remove(_ socket: borrowing Descriptor) {
        _ = epoll_ctl(set.raw, EPOLL_CTL_DEL, socket.raw, nil)
    }

    /// Tells a worker there is work on the hand-back list.
    func raiseHandBack() { Self.raise(handBack) }

    /// Takes the hand-back event (the eventfd's count back to zero).
    func lowerHandBack() {
        var value: UInt64 = 0
        _ = Glibc.read(handBack.raw, &value, 8)
    }

    /// Lets the next hand-back event wake a worker.
    func rearmHandBack() {
        _ = Self.control(set, EPOLL_CTL_MOD, handBack, tag: Self.handBackTag, oneShot: true)
    }

    /// Wakes every worker to leave (the event is never taken, so each one sees it).
    func raiseExit() { Self.raise(exit) }

    private static func raise(_ eventfd: borrowing Descriptor) {
        var one: UInt64 = 1
        _ = Glibc.write(eventfd.raw, &one, 8)
    }

    private static func control(_ set: borrowing Descriptor, _ operation: Int32, _ target: borrowing Descriptor, tag: UInt64,
                                oneShot: Bool) -> Bool {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | (oneShot ? EPOLLONESHOT.rawValue : 0)
        event.data.u64 = tag
        return epoll_ctl(set.raw, operation, target.raw, &event) == 0
    }
}

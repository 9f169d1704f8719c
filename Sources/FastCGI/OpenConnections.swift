// The open connections: accepting them, the set the stop drains and `maxConnections` counts, the set of those
// parked on the clock, and closing one.
import Glibc
import Synchronization
import Threads

/// Every open connection, and those parked with a request begun. Touched when a connection opens, closes or is
/// parked mid-request, never for a request answered on a kept connection.
struct OpenConnections: ~Copyable, Sendable {
    /// For the drain and the idle sweep.
    private let all = Mutex<[ObjectIdentifier: Connection]>([:])
    /// The size of `all`, which the timer (and tests) wait on.
    let open: Gauge
    /// Connections parked with a request begun, each on the clock (`Dispatcher.tick`).
    private let clocked = Mutex<[ObjectIdentifier: Connection]>([:])

    init(open: Gauge) { self.open = open }

    func add(_ connection: Connection) {
        all.withLock { $0[ObjectIdentifier(connection)] = connection }
        open.add(1)
    }

    func remove(_ connection: Connection) {
        let removed = all.withLock { $0.removeValue(forKey: ObjectIdentifier(connection)) != nil }
        if removed { open.add(-1) }
    }

    /// A copy of the set, for the timer to go through without holding the lock.
    var everyOne: [Connection] { all.withLock { Array($0.values) } }

    /// Puts a connection its holder is parking on the clock.
    func startClock(_ connection: Connection) {
        connection.onTheClock = true
        clocked.withLock { $0[ObjectIdentifier(connection)] = connection }
    }

    /// Takes a connection its holder took back (or is closing) off the clock, if it was on it.
    func stopClock(_ connection: Connection) {
        guard connection.onTheClock else { return }
        connection.onTheClock = false
        _ = clocked.withLock { $0.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    var onTheClock: [Connection] { clocked.withLock { Array($0.values) } }
    var anyOnTheClock: Bool { clocked.withLock { !$0.isEmpty } }

    /// How many are parked idle between requests, and how many parked with a request (or a record) begun (tests).
    var parked: (idle: Int, begun: Int) {
        everyOne.reduce(into: (idle: 0, begun: 0)) { counts, connection in
            connection.state.withLock { state in
                switch state {
                case .idle: counts.idle += 1
                case .waiting where !connection.parser.isQuiet: counts.begun += 1
                case .waiting, .held, .closed: break
                }
            }
        }
    }
}

extension Dispatcher {
    /// Accepts one connection (the listener's event is one-shot: re-armed here, so one worker accepts at a time).
    func acceptOne() -> Connection? {
        listener.accepting.withLock { listening -> Connection? in
            guard listening.on, listening.pausedAt == nil else { return nil }
            guard connections.open.current < limits.maxConnections else {
                listening.pausedAt = monotonicNanoseconds()
                timer.poke()
                return nil
            }
            guard let socket = listening.accept() else {
                switch errno {
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors or memory: the connection stays queued; the timer resumes in 10 ms.
                    listening.pausedAt = monotonicNanoseconds()
                    timer.poke()
                case EBADF, EINVAL, ENOTSOCK, EOPNOTSUPP, EFAULT:
                    listening.on = false
                    fail(FastCGIError(.acceptFailed, errnoText("accept")))
                default:
                    // EAGAIN (another process sharing the socket took it), ECONNABORTED, EPROTO, what a TCP
                    // connection can die of before it is accepted, EPERM from a security module: that
                    // connection is lost, the listener is fine.
                    _ = listening.arm(in: epoll)
                }
                return nil
            }
            _ = listening.arm(in: epoll)
            let connection = Connection(socket, limits: limits, now: monotonicNanoseconds())
            connections.add(connection)
            counters.accepted.add(1, ordering: .relaxed)
            return connection
        }
    }

    /// Closes a connection the caller holds, and forgets it.
    func close(_ connection: Connection) {
        connection.state.withLock { $0 = .closed }
        connection.close()
        connections.remove(connection)
    }
}

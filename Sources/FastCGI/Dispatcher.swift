// The dispatcher's shared state and how it is made and stopped; its jobs have files of their own: the worker
// loop (Worker.swift), batches (Batches.swift), a connection's reads and parking (Reading.swift), answers
// (Answers.swift), the open connections (OpenConnections.swift), the timer and the drain (Timer.swift), the
// epoll set (EventSet.swift) and the counts (Statistics.swift).
import Synchronization
import Threads

/// The epoll set, the connections, the lanes, and the steps taken on a connection.
///
/// Every socket is registered EPOLLONESHOT: the worker that receives a connection's event holds it until it
/// parks it again, so one thread at a time touches a connection, and a new event wakes one worker, not all.
/// A worker never blocks on a peer: it reads what has arrived, and a request still arriving is parked with
/// its deadline. A complete request runs on the worker that read it when its lane has room, else it waits in
/// the lane's queue for the next of that lane's requests to finish (`LaneGate`), so the common path has no
/// hand-off between threads.
final class Dispatcher: Sendable {
    let limits: Limits
    let gates: [LaneGate]
    /// Each request's lane, and whether it may start or join a batch of a batching lane (`Server.run`).
    let place: @Sendable (Request) -> Placement
    let overloaded: @Sendable (Request) -> Response
    let report: @Sendable (FastCGIError) -> Void

    let listener: Listener
    let epoll: EventSet
    let connections: OpenConnections
    /// Connections the timer or a worker gives back to the workers, and requests a batching worker read for
    /// other lanes (`handOff`): the next worker that takes the hand-back event serves them.
    let returned = Mutex<[Work]>([])
    /// Held by the one worker that waits in the epoll set (`work`).
    let baton = Baton()
    let timer = TimerSleep()
    /// The last request read may join a batch of a lane that is not `quick` (a sign-in): under
    /// `WorkerScheduling.adaptive` the next reader waits under SCHED_BATCH.
    let slowBatchesRead = Atomic<Bool>(false)
    let stopping = Stopping()
    let counters = Counters()

    init(listener: Listener, lanes: [Lane], limits: Limits, open: Gauge, place: @escaping @Sendable (Request) -> Placement,
         overloaded: @escaping @Sendable (Request) -> Response,
         report: @escaping @Sendable (FastCGIError) -> Void) throws(FastCGIError) {
        let epoll = try EventSet()
        guard listener.accepting.withLock({ $0.arm(in: epoll, adding: true) }) else {
            throw FastCGIError(.startFailed, errnoText("epoll_ctl"))
        }
        self.epoll = epoll
        self.listener = listener
        self.limits = limits
        self.connections = OpenConnections(open: open)
        self.gates = lanes.enumerated().map { LaneGate(lane: $0.element, index: $0.offset) }
        self.place = place
        self.overloaded = overloaded
        self.report = report
    }

    /// A worker's next step on a connection or a request.
    enum Work {
        /// A connection whose event came: its bytes are read.
        case drive(Connection)
        /// A connection just answered: what it has buffered is parsed, else it is parked without a read (the
        /// peer's next request is rarely there yet, and re-arming reports it if it is).
        case carryOn(Connection)
        case run(Job)
    }

    var statistics: Statistics { counters.statistics }
    /// Batches that lent the baton so far (tests).
    var batonLends: Int { timer.lends }
    /// Connections given back to the line at the end of a turn so far (tests).
    var turnsEnded: Int { counters.endedTurns.load(ordering: .relaxed) }

    var failed: FastCGIError? { stopping.failure }

    /// Begins the graceful stop (any thread, any number of times).
    func requestStop() {
        stopping.request()
        timer.poke()
    }

    /// Stops the server for a failure it cannot serve through; the first one is what `run` throws.
    func fail(_ error: FastCGIError) {
        stopping.record(error)
        requestStop()
    }
}

/// The graceful stop's flags, and the first failure that forced one.
struct Stopping: ~Copyable, Sendable {
    private let requested = Atomic<Bool>(false)
    /// Set when the graceful stop begins: every answer from then on closes its connection.
    private let draining = Atomic<Bool>(false)
    private let firstFailure = Mutex<FastCGIError?>(nil)

    func request() { requested.store(true, ordering: .releasing) }
    var isRequested: Bool { requested.load(ordering: .acquiring) }

    func beginDraining() { draining.store(true, ordering: .releasing) }
    var isDraining: Bool { draining.load(ordering: .relaxed) }

    func record(_ error: FastCGIError) { firstFailure.withLock { if $0 == nil { $0 = error } } }
    var failure: FastCGIError? { firstFailure.withLock { $0 } }
}

// The FastCGI responder: worker threads that read and answer requests, within the capacity of each request's lane.
import Glibc
import Synchronization
import Threads

/// Answers requests on one worker thread. Each worker creates its own handler (on that thread), so a
/// handler may own thread-bound resources such as a database connection without locking.
public protocol Handler: AnyObject {
    func handle(_ request: Request) -> Response
    /// Requests of a batching lane (`Lane.batch`) that one worker answers together, one response each, in
    /// order: e.g. their database lookups in one round trip. By default each is handled alone.
    func handle(batch: [Request]) -> [Response]
}

extension Handler {
    public func handle(batch: [Request]) -> [Response] { batch.map { handle($0) } }
}

/// How the worker threads are scheduled (Linux scheduling policies; see docs/fastcgi.md).
public enum WorkerScheduling: String, Sendable, CaseIterable {
    /// The policy the process started with (systemd's `CPUSchedulingPolicy=`, `chrt`): no call is made.
    case inherit
    /// SCHED_OTHER, the kernel's default: a worker that wakes (a request arrived, its database answered) may
    /// preempt whatever runs on its core.
    case normal
    /// SCHED_BATCH: a worker that wakes waits for the task running on its core (nginx, PostgreSQL, another
    /// worker) to block or use up its turn, rather than preempting it. Same share of the CPU; fewer context
    /// switches, and what arrived meanwhile is served in one batch.
    case batch
    /// SCHED_BATCH while the requests being read are slow ones that batch (sign-ins), SCHED_OTHER otherwise:
    /// the worker about to wait for the next request takes SCHED_BATCH when the last request read may join a
    /// batch of a lane that is not `quick`, and SCHED_OTHER when it was any other. So a burst of sign-ins is
    /// read as under `batch` (the woken reader lets the web server finish its turn, and finds more requests
    /// when it runs), and session checks as under `normal` (read at once). Only workers that start under
    /// SCHED_OTHER adapt: under any other policy (systemd's `CPUSchedulingPolicy=`, `chrt`) this is `inherit`.
    case adaptive
}

/// A multi-threaded FastCGI responder.
///
/// `run` blocks the calling thread until `stop()` (from any thread, e.g. a signal thread) has drained the
/// server: no new connection is accepted, every request that arrives on an open connection is answered, kept
/// connections are closed once idle (or at `Limits.drainTimeout`), and `run` returns.
public final class Server: Sendable {
    public let listen: Listen
    public let lanes: [Lane]
    public let limits: Limits
    /// The worker threads' scheduling policy: set by each worker as it starts, or (`adaptive`) changed by the
    /// worker before each wait for the next request.
    public let scheduling: WorkerScheduling
    /// What the socket is bound to, for logs: the unix path, `host:port` (the real port when 0 was
    /// asked for), or `fd N` when inherited.
    public var address: String { listener.address }
    /// Worker threads: the lanes' `workers` together, plus one. At most that sum of requests run at once, so
    /// one thread is always free to read: a request that cannot run yet is still read, queued and, if it waits
    /// too long, answered with the overload response.
    public var workers: Int { lanes.reduce(1) { $0 + $1.workers } }

    let listener: Listener
    private let stopping = Atomic<Bool>(false)
    private let phase = Mutex<Phase>(.ready)
    let current = Mutex<Dispatcher?>(nil)
    /// Open connections (tests wait on it).
    let open = Gauge()
    /// The sigwait thread of `stopOnTerminationSignals`, reachable by tests through pthread_kill.
    let signalThread = Mutex<pthread_t?>(nil)
    /// A worker could not take `scheduling` (reported once, not by every worker).
    private let schedulingRefused = Atomic<Bool>(false)

    private enum Phase { case ready, running, finished }

    /// Opens (or adopts) the listening socket. The server runs `workers` threads (the lanes' together, plus one).
    /// `socketMode` is
    /// the permission of a unix socket file: the default 0o660 lets the owner and the group connect, so run
    /// the service with nginx's group (www-data) or pass 0o666 and protect the socket's directory instead.
    public init(listen: Listen, lanes: [Lane], limits: Limits, socketMode: UInt32 = 0o660,
                backlog: Int32 = SOMAXCONN, scheduling: WorkerScheduling = .inherit) throws(FastCGIError) {
        try Self.validate(lanes: lanes, limits: limits)
        guard socketMode <= 0o777 else { throw FastCGIError(.badConfiguration, "socket mode \(socketMode)") }
        self.listener = try Listener.open(listen, socketMode: socketMode, backlog: backlog)
        self.listen = listen
        self.lanes = lanes
        self.limits = limits
        self.scheduling = scheduling
    }

    /// One lane of `workers` for every request, with the default limits around `maxBodyBytes`.
    public convenience init(listen: Listen, workers: Int, maxBodyBytes: Int, socketMode: UInt32 = 0o660,
                            backlog: Int32 = SOMAXCONN, requestTimeout: Duration = .seconds(10)) throws(FastCGIError) {
        try self.init(listen: listen, lanes: [Lane(name: "default", workers: workers)],
                      limits: Limits(maxBodyBytes: maxBodyBytes, requestTimeout: requestTimeout),
                      socketMode: socketMode, backlog: backlog)
    }

    /// Adopts an already listening socket (tests use it for the `.inherited` path without fd 0). Like a socket a
    /// process manager passed, it is never closed: let go when the server is done with it, or refuses it.
    init(adopting socket: consuming Descriptor, lanes: [Lane], limits: Limits, scheduling: WorkerScheduling = .inherit) throws(FastCGIError) {
        do throws(FastCGIError) { try Self.validate(lanes: lanes, limits: limits) } catch {
            socket.relinquish()
            throw error
        }
        self.listener = try Listener.inherited(socket)
        self.listen = .inherited
        self.lanes = lanes
        self.limits = limits
        self.scheduling = scheduling
    }

    convenience init(adopting socket: consuming Descriptor, workers: Int, maxBodyBytes: Int) throws(FastCGIError) {
        try self.init(adopting: socket, lanes: [Lane(name: "default", workers: workers)], limits: Limits(maxBodyBytes: maxBodyBytes))
    }

    private static func validate(lanes: [Lane], limits: Limits) throws(FastCGIError) {
        guard !lanes.isEmpty, lanes.allSatisfy({ $0.workers >= 1 && $0.queueLimit >= 1 && $0.maxWait > .zero && (1...1024).contains($0.batch) }) else {
            throw FastCGIError(.badConfiguration, "every lane needs at least one worker, a queue, a wait bound and a batch of 1...1024")
        }
        guard limits.isValid else { throw FastCGIError(.badConfiguration, "a limit is out of range") }
    }

    deinit { listener.close() }

    /// What the running (or last) server has done; zeros before `run`.
    public var statistics: Statistics { current.withLock { $0?.statistics } ?? Statistics() }
    /// Batches that lent the baton so far (tests).
    var batonLends: Int { current.withLock { $0?.batonLends } ?? 0 }
    /// Connections given back to the line at the end of a turn (`Dispatcher.turn`, `Limits.readPerTurn`) so far (tests).
    var turnsEnded: Int { current.withLock { $0?.turnsEnded } ?? 0 }

    /// Each lane's capacity, running and waiting requests, for monitoring.
    public var laneUsage: [(name: String, workers: Int, running: Int, waiting: Int)] {
        current.withLock { dispatcher in
            dispatcher?.gates.map { ($0.lane.name, $0.lane.workers, $0.running, $0.count) }
        } ?? lanes.map { ($0.name, $0.workers, 0, 0) }
    }

    /// Connections open right now (tests).
    var openConnections: Int { open.current }

    /// Connections parked idle between requests, and parked with a request begun, right now (tests).
    var parkedConnections: (idle: Int, begun: Int) { current.withLock { $0?.connections.parked } ?? (0, 0) }

    /// Waits until the number of open connections satisfies `predicate` (tests); false on timeout.
    func waitForOpenConnections(timeout: Duration = .seconds(10), _ predicate: (Int) -> Bool) -> Bool {
        open.wait(timeout: timeout, until: predicate)
    }

    /// Serves until `stop()` has drained the server.
    ///
    /// - `place` gives each request's `Placement` once its parameters and body have arrived: its lane, and
    ///   whether it may start or join a batch. It runs on a worker, once per request, so keep it cheap.
    /// - `overloaded` is the answer the server sends itself when a lane's queue is full, or a request waited in
    ///   it longer than the lane's `maxWait` (e.g. a 503 with Retry-After).
    /// - `report` hears every connection closed for a protocol violation or timeout, every overload, every
    ///   response replaced by a 500 (codes of `FastCGIError`; details never carry request data).
    /// - `makeHandler(worker)` runs once on each worker thread (`workers`: all lanes' together, plus one); a
    ///   worker serves requests of any lane, within each lane's limit.
    ///
    /// The calling thread keeps the deadlines and the stop. SIGPIPE is ignored from then on. Throws when a thread could not start or the
    /// listening socket failed for good. A server runs once; the listening socket it opened is closed (and its
    /// unix socket file removed) when the stop begins.
    public func run(place: @escaping @Sendable (Request) -> Placement,
                    overloaded: @escaping @Sendable (Request) -> Response,
                    report: @escaping @Sendable (FastCGIError) -> Void = { _ in },
                    makeHandler: @escaping @Sendable (_ worker: Int) -> any Handler) throws(FastCGIError) {
        let started = phase.withLock { phase in
            guard phase == .ready else { return false }
            phase = .running
            return true
        }
        guard started else { throw FastCGIError(.alreadyRun, "a Server runs once") }
        defer {
            listener.close()
            phase.withLock { $0 = .finished }
        }
        // A peer that vanishes is a write error on its connection, never the end of the process (sockets are
        // written with MSG_NOSIGNAL; this covers every other write of the process, as libfcgi's init did).
        signal(SIGPIPE, SIG_IGN)
        let dispatcher = try Dispatcher(listener: listener, lanes: lanes, limits: limits, open: open, place: place,
                                        overloaded: overloaded, report: report)
        current.withLock { $0 = dispatcher }
        if stopping.load(ordering: .acquiring) { dispatcher.requestStop() }

        var threads: [pthread_t] = []
        var startError: FastCGIError?
        let refused: @Sendable (String) -> Void = { [self] detail in
            if !schedulingRefused.exchange(true, ordering: .relaxed) { report(FastCGIError(.schedulingRefused, detail)) }
        }
        for worker in 0..<workers {
            guard let thread = Threads.start({ [self] in
                if let detail = Self.schedule(scheduling) { refused(detail) }
                let adapts = scheduling == .adaptive && sched_getscheduler(0) == Int32(SCHED_OTHER)
                dispatcher.work(handler: makeHandler(worker), adapting: adapts ? refused : nil)
            }) else {
                startError = FastCGIError(.startFailed, errnoText("pthread_create"))
                dispatcher.requestStop()
                break
            }
            threads.append(thread)
        }
        dispatcher.run()
        for thread in threads { pthread_join(thread, nil) }
        if let error = startError ?? dispatcher.failed { throw error }
    }

    /// SCHED_BATCH of <linux/sched.h>, which glibc's header declares only under _GNU_SOURCE (not imported).
    static let batchPolicy: Int32 = 3

    /// Puts the calling thread under `scheduling`'s policy unless it is there already (systemd's
    /// `CPUSchedulingPolicy=` may have set it, where a system call filter refuses the change) or `inherit`
    /// leaves it alone; nil when done, else why not. The thread keeps running under its previous policy then.
    static func schedule(_ scheduling: WorkerScheduling) -> String? {
        let policy: Int32
        switch scheduling {
        case .inherit, .adaptive: return nil
        case .normal: policy = Int32(SCHED_OTHER)
        case .batch: policy = Self.batchPolicy
        }
        if sched_getscheduler(0) == policy { return nil }
        return setPolicy(policy, for: scheduling)
    }

    /// Puts the calling thread under `policy` (SCHED_OTHER or SCHED_BATCH: no priority); nil when done, else
    /// why not, naming `scheduling`.
    static func setPolicy(_ policy: Int32, for scheduling: WorkerScheduling) -> String? {
        var parameter = sched_param(sched_priority: 0)
        guard sched_setscheduler(0, policy, &parameter) == 0 else { return errnoText("sched_setscheduler(\(scheduling.rawValue))") }
        return nil
    }

    /// Serves every request in the first lane, with a plain 503 as the overload answer.
    public func run(makeHandler: @escaping @Sendable (Int) -> any Handler) throws(FastCGIError) {
        try run(place: { _ in Placement(lane: 0) },
                overloaded: { _ in Response(status: 503, contentType: "text/plain", body: "overloaded\n", headers: [("Retry-After", "1")]) },
                makeHandler: makeHandler)
    }

    /// Graceful stop, safe from any thread and more than once (also before `run`): no new connection is
    /// accepted, requests that arrive on open connections are answered (and their connections closed after the
    /// answer), idle kept connections are closed, then `run` returns. With an inherited socket, connections the
    /// web server has queued on it wait there for the next process (systemd socket activation, a socket holder).
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        current.withLock { $0 }?.requestStop()
    }

    /// Makes SIGTERM and SIGINT call `stop()`: blocks both signals in the calling thread (and so in
    /// every thread it starts afterwards, including `run`'s workers) and starts a thread that waits
    /// for them with sigwait. Call it from the main thread before any other thread is started, or a
    /// thread that does not block them may receive the signal and die of it. Later signals are
    /// ignored while the server drains; SIGKILL still ends the process.
    public func stopOnTerminationSignals() throws(FastCGIError) {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        let blocked = pthread_sigmask(SIG_BLOCK, &signals, nil)
        guard blocked == 0 else { throw FastCGIError(.startFailed, errnoText("pthread_sigmask", blocked)) }
        let thread = Threads.start { [self] in
            var waitFor = sigset_t()
            sigemptyset(&waitFor)
            sigaddset(&waitFor, SIGTERM)
            sigaddset(&waitFor, SIGINT)
            while true {
                var received: Int32 = 0
                if sigwait(&waitFor, &received) == 0 { self.stop() }
            }
        }
        guard let thread else { throw FastCGIError(.startFailed, errnoText("pthread_create")) }
        pthread_detach(thread)
        signalThread.withLock { $0 = thread }
    }
}

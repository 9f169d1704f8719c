// The dispatcher: one thread that accepts connections and reads every request (non-blocking, within the
// parser's limits and each request's deadlines), and hands complete requests to the workers of their lane.
import CFastCGI
import Glibc
import Synchronization

/// What the server has done since it started (`Server.statistics`).
public struct Statistics: Sendable, Equatable {
    public var connectionsAccepted = 0
    public var requestsAnswered = 0
    /// Connections closed because the peer broke the protocol or a limit (each also reported).
    public var protocolViolations = 0
    /// Connections closed because a request did not arrive in time.
    public var timeouts = 0
    /// Requests answered with the lane's overload response.
    public var overloaded = 0
    /// Responses replaced by a 500 because a header could not be sent.
    public var invalidResponses = 0
    public var writeFailures = 0
}

/// The shared half of the server: the epoll set, the connections, the lanes' queues, and the steps both the
/// dispatcher thread and the workers take on a connection (answer it, parse what follows, park it).
///
/// The dispatcher thread is the only one that waits on the epoll set, so no worker is ever held by a slow
/// peer: a worker sees a request only once all of it has arrived. Every connection is registered
/// EPOLLONESHOT, because a worker holds it between taking its request and parking it again.
final class Dispatcher: Sendable {
    let limits: Limits
    let queues: [LaneQueue]
    private let classify: @Sendable (Request) -> Int
    private let overloaded: @Sendable (Request) -> Response
    private let report: @Sendable (FastCGIError) -> Void
    private let listener: Listener
    private let epoll: Descriptor
    private let wake: Descriptor
    /// Every open connection, for the drain and for `maxConnections`. Touched once when a connection opens and
    /// once when it closes, never per request.
    private let registry = Mutex<[ObjectIdentifier: Connection]>([:])
    /// The registry's size, which threads (the drain, tests) can wait on.
    let open: Gauge
    /// Connections a worker hands back with part of a request already read (pipelining, a body to skip).
    private let returned = Mutex<[Connection]>([])
    private let stopRequested = Atomic<Bool>(false)
    /// Set when the graceful stop begins: every answer from then on closes its connection.
    let draining = Atomic<Bool>(false)
    private let failure = Mutex<FastCGIError?>(nil)

    private let accepted = Atomic<Int>(0)
    private let answered = Atomic<Int>(0)
    private let violations = Atomic<Int>(0)
    private let timeouts = Atomic<Int>(0)
    private let overloads = Atomic<Int>(0)
    private let invalid = Atomic<Int>(0)
    private let writeFailures = Atomic<Int>(0)

    private static let listenerTag: UInt64 = 0
    private static let wakeTag: UInt64 = 1

    init(listener: Listener, lanes: [Lane], limits: Limits, open: Gauge, classify: @escaping @Sendable (Request) -> Int,
         overloaded: @escaping @Sendable (Request) -> Response,
         report: @escaping @Sendable (FastCGIError) -> Void) throws(FastCGIError) {
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw FastCGIError(.startFailed, errnoText("epoll_create1")) }
        let epoll = Descriptor(epollFD)
        let wakeFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard wakeFD >= 0 else { throw FastCGIError(.startFailed, errnoText("eventfd")) }
        let wake = Descriptor(wakeFD)
        guard Self.control(epoll.raw, EPOLL_CTL_ADD, listener.fd, tag: Self.listenerTag, oneShot: false),
              Self.control(epoll.raw, EPOLL_CTL_ADD, wake.raw, tag: Self.wakeTag, oneShot: false)
        else { throw FastCGIError(.startFailed, errnoText("epoll_ctl")) }
        self.epoll = epoll
        self.wake = wake
        self.listener = listener
        self.limits = limits
        self.open = open
        self.queues = lanes.enumerated().map { LaneQueue(lane: $0.element, index: $0.offset) }
        self.classify = classify
        self.overloaded = overloaded
        self.report = report
    }

    var statistics: Statistics {
        Statistics(connectionsAccepted: accepted.load(ordering: .relaxed), requestsAnswered: answered.load(ordering: .relaxed),
                   protocolViolations: violations.load(ordering: .relaxed), timeouts: timeouts.load(ordering: .relaxed),
                   overloaded: overloads.load(ordering: .relaxed), invalidResponses: invalid.load(ordering: .relaxed),
                   writeFailures: writeFailures.load(ordering: .relaxed))
    }

    var openConnections: Int { registry.withLock { $0.count } }
    var failed: FastCGIError? { failure.withLock { $0 } }

    /// Begins the graceful stop (any thread, any number of times).
    func requestStop() {
        stopRequested.store(true, ordering: .releasing)
        poke()
    }

    private func poke() {
        var one: UInt64 = 1
        _ = Glibc.write(wake.raw, &one, 8)
    }

    // MARK: The dispatcher thread

    /// Runs the dispatcher until the graceful stop has closed every connection; then stops the lanes.
    func run() {
        let loop = DispatcherLoop(self)
        loop.run()
        for queue in queues { queue.stop() }
    }

    fileprivate func wait(_ events: inout [epoll_event], timeout: Int32) -> Int32 {
        epoll_wait(epoll.raw, &events, Int32(events.count), timeout)
    }

    fileprivate func takeReturned() -> [Connection] {
        var count: UInt64 = 0
        _ = Glibc.read(wake.raw, &count, 8)
        return returned.withLock { list in
            defer { list.removeAll(keepingCapacity: true) }
            return list
        }
    }

    fileprivate var stopWanted: Bool { stopRequested.load(ordering: .acquiring) }

    fileprivate func fail(_ error: FastCGIError) {
        failure.withLock { if $0 == nil { $0 = error } }
        requestStop()
    }

    fileprivate func setListening(_ on: Bool) -> Bool {
        Self.control(epoll.raw, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listener.fd, tag: Self.listenerTag, oneShot: false)
    }

    fileprivate func stopListening() { listener.close() }

    /// Accepts one connection: .some(nil) when none is waiting (or this one was lost), nil when accepting must pause.
    fileprivate func accept(now: UInt64) -> Connection?? {
        let fd = cfastcgi_accept_nonblocking(listener.fd)
        guard fd >= 0 else {
            switch errno {
            case EAGAIN, EWOULDBLOCK:
                return .some(nil)
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                return nil  // out of descriptors or memory: the connection stays queued; retry after a pause
            case EBADF, EINVAL, ENOTSOCK, EOPNOTSUPP, EFAULT:
                fail(FastCGIError(.acceptFailed, errnoText("accept")))
                return nil
            default:
                // ECONNABORTED, EPROTO, what a TCP connection can die of before it is accepted, EPERM from a
                // security module, EINTR: that connection is lost (or never was), the listener is fine.
                return .some(nil)
            }
        }
        let connection = Connection(Descriptor(fd), limits: limits, now: now)
        registry.withLock { $0[ObjectIdentifier(connection)] = connection }
        open.add(1)
        accepted.add(1, ordering: .relaxed)
        return .some(connection)
    }

    fileprivate func snapshot() -> [Connection] { registry.withLock { Array($0.values) } }

    // MARK: Steps on a connection (the dispatcher thread, or the worker holding it)

    enum Next {
        /// A request for the caller's own lane: handle it now.
        case handle(Request)
        /// The connection left the caller: queued to a lane, answered and closed, or closed.
        case gone
        /// No complete request in the buffer yet.
        case needMore
    }

    /// Parses what the connection has buffered. A request goes to its lane's queue unless it belongs to
    /// `lane` (the caller's, nil for the dispatcher), management records are answered, violations close it.
    func advance(_ connection: Connection, lane: Int?) -> Next {
        while let event = connection.parser.next() {
            switch event {
            case .request(let request):
                // The next request's clock starts with its own first byte (set before another thread may hold it).
                connection.busySince = 0
                let target = laneIndex(for: request)
                if target == lane { return .handle(request) }
                if queues[target].put(Job(connection: connection, request: request, queued: monotonicNanoseconds())) {
                    return .gone
                }
                // The lane's queue is full: the server answers for it, never drops the request.
                guard answerOverloaded(connection, request, lane: target, waiting: lane != nil) else { return .gone }
            case .reply(let bytes, let thenClose):
                let deadline = lane == nil ? nil : monotonicNanoseconds() + limits.writeTimeout.nanoseconds
                guard connection.write(bytes, until: deadline) else {
                    writeFailed(connection)
                    return .gone
                }
                if thenClose {
                    close(connection)
                    return .gone
                }
            case .violation(let error):
                violations.add(1, ordering: .relaxed)
                report(error)
                close(connection)
                return .gone
            }
        }
        return .needMore
    }

    func laneIndex(for request: Request) -> Int {
        let index = classify(request)
        return queues.indices.contains(index) ? index : 0
    }

    /// Sends the answer to the connection's current request. True when the connection carries on (its next
    /// records may be parsed); false when it was closed: the web server did not ask to keep it, the server is
    /// stopping, or writing failed. `waiting`: a worker may wait for the peer to read (the dispatcher may not).
    func answer(_ connection: Connection, _ response: Response, waiting: Bool) -> Bool {
        var body = response.body
        let head: [UInt8]
        if let encoded = response.encodedHead() {
            head = encoded
        } else {
            // Fail closed: never a head with a header left out (a missing identity header reached the app).
            invalid.add(1, ordering: .relaxed)
            report(FastCGIError(.invalidResponse, "status \(response.status) with a header that cannot be sent"))
            head = Response.invalidReplacement.encodedHead() ?? []
            body = Response.invalidReplacement.body
        }
        let closeAfter = !connection.parser.canContinue || draining.load(ordering: .relaxed)
        let bytes = Records.answer(requestID: connection.parser.requestID, head: head, body: body,
                                   farewell: closeAfter && connection.parser.keepRequested)
        guard connection.write(bytes, until: waiting ? monotonicNanoseconds() + limits.writeTimeout.nanoseconds : nil) else {
            writeFailed(connection)
            return false
        }
        answered.add(1, ordering: .relaxed)
        if closeAfter {
            close(connection)
            return false
        }
        connection.parser.requestAnswered()
        return true
    }

    func answerOverloaded(_ connection: Connection, _ request: Request, lane: Int, waiting: Bool) -> Bool {
        overloads.add(1, ordering: .relaxed)
        report(FastCGIError(.overloaded, "lane \(queues[lane].lane.name)"))
        return answer(connection, overloaded(request), waiting: waiting)
    }

    private func writeFailed(_ connection: Connection) {
        writeFailures.add(1, ordering: .relaxed)
        report(FastCGIError(.writeFailed, "the web server did not take the answer"))
        close(connection)
    }

    /// Closes a connection the caller holds, and forgets it.
    func close(_ connection: Connection) {
        connection.state.withLock { $0 = .closed }
        connection.close()
        let removed = registry.withLock { $0.removeValue(forKey: ObjectIdentifier(connection)) != nil }
        if removed { open.add(-1) }
    }

    /// A worker gives back a connection with no complete request buffered: parked until its next request when
    /// it is quiet, else handed to the dispatcher, which reads the rest within the request's deadlines.
    func release(_ connection: Connection) {
        guard connection.parser.isQuiet else {
            returned.withLock { $0.append(connection) }
            poke()
            return
        }
        let parked = connection.state.withLock { state in
            // Armed with the lock held: the drain scan must not close it while it is being armed.
            guard arm(connection) else { return false }
            state = .idle(since: monotonicNanoseconds())
            return true
        }
        if !parked { close(connection) }
    }

    /// Puts a connection (back) into the set for one event.
    fileprivate func arm(_ connection: Connection) -> Bool {
        let tag = UInt64(UInt(bitPattern: Unmanaged.passUnretained(connection).toOpaque()))
        let added = Self.control(epoll.raw, connection.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, connection.fd, tag: tag, oneShot: true)
        if added { connection.registered = true }
        return added
    }

    fileprivate func disarm(_ connection: Connection) {
        if connection.registered { _ = epoll_ctl(epoll.raw, EPOLL_CTL_DEL, connection.fd, nil) }
    }

    fileprivate static func connection(fromTag tag: UInt64) -> Connection? {
        guard tag > wakeTag, let pointer = UnsafeRawPointer(bitPattern: UInt(tag)) else { return nil }
        return Unmanaged<Connection>.fromOpaque(pointer).takeUnretainedValue()
    }

    fileprivate func countTimeout() { timeouts.add(1, ordering: .relaxed) }
    fileprivate func reportTimeout(_ detail: String) { report(FastCGIError(.requestTimedOut, detail)) }

    private static func control(_ epoll: Int32, _ operation: Int32, _ fd: Int32, tag: UInt64, oneShot: Bool) -> Bool {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | (oneShot ? EPOLLONESHOT.rawValue : 0)
        event.data.u64 = tag
        return epoll_ctl(epoll, operation, fd, &event) == 0
    }

    // MARK: A worker

    /// Serves a job on a worker of lane `lane`, then whatever follows on the same connection for this lane.
    func serve(_ job: Job, lane: Int, handler: any Handler) {
        let connection = job.connection
        var expired = monotonicNanoseconds() &- job.queued > queues[lane].lane.maxWait.nanoseconds
        var request = job.request
        while true {
            if expired {
                expired = false
                guard answerOverloaded(connection, request, lane: lane, waiting: true) else { return }
            } else {
                guard answer(connection, handler.handle(request), waiting: true) else { return }
            }
            switch advance(connection, lane: lane) {
            case .handle(let next): request = next
            case .gone: return
            case .needMore:
                release(connection)
                return
            }
        }
    }
}

/// The dispatcher thread's own state: the connections whose request is still arriving, the drain's clock.
private final class DispatcherLoop {
    let dispatcher: Dispatcher
    let limits: Limits
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    /// Parked with a request (or a record) begun: each has a deadline.
    var arriving: [ObjectIdentifier: Connection] = [:]
    var listening = true
    /// When accepting paused (out of descriptors, or at maxConnections); resumed on a later tick.
    var pausedAt: UInt64?
    var drainStart: UInt64?
    let tick: Int32 = 20  // milliseconds between deadline checks while anything is timed

    init(_ dispatcher: Dispatcher) {
        self.dispatcher = dispatcher
        self.limits = dispatcher.limits
    }

    func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        var lastTick = monotonicNanoseconds()
        while true {
            if dispatcher.stopWanted && drainStart == nil { beginDrain() }
            if drainStart != nil && dispatcher.openConnections == 0 { return }
            let timed = !arriving.isEmpty || drainStart != nil || pausedAt != nil || dispatcher.queues.contains { $0.count > 0 }
            let count = dispatcher.wait(&events, timeout: timed ? tick : -1)
            if count < 0 {
                if errno == EINTR { continue }
                dispatcher.fail(FastCGIError(.acceptFailed, errnoText("epoll_wait")))
                beginDrain()
                closeAll()
                return
            }
            for index in 0..<Int(count) {
                let tag = events[index].data.u64
                if tag == 0 {
                    acceptConnections()
                } else if tag == 1 {
                    for connection in dispatcher.takeReturned() {
                        if connection.busySince == 0 { connection.busySince = monotonicNanoseconds() }
                        drive(connection)
                    }
                } else if let connection = Dispatcher.connection(fromTag: tag) {
                    drive(connection)
                }
            }
            let now = monotonicNanoseconds()
            if timed && now &- lastTick >= UInt64(tick) * 1_000_000 {
                lastTick = now
                timers(now: now)
            }
        }
    }

    private func acceptConnections() {
        guard listening else { return }
        for _ in 0..<64 {
            if dispatcher.openConnections >= limits.maxConnections {
                pause()
                return
            }
            let now = monotonicNanoseconds()
            switch dispatcher.accept(now: now) {
            case .none:
                pause()
                return
            case .some(.none):
                return
            case .some(.some(let connection)):
                // nginx writes its request right after connecting: it is usually there already.
                drive(connection)
            }
        }
    }

    private func pause() {
        if listening, dispatcher.setListening(false) { listening = false }
        pausedAt = monotonicNanoseconds()
    }

    /// Reads and parses until the connection's request is complete (handed to its lane) or the socket is empty.
    func drive(_ connection: Connection) {
        connection.state.withLock { $0 = .held }
        arriving[ObjectIdentifier(connection)] = nil
        while true {
            switch dispatcher.advance(connection, lane: nil) {
            case .gone:
                return
            case .handle:
                return  // not reached: the dispatcher has no lane of its own
            case .needMore:
                break
            }
            switch connection.read(into: &scratch) {
            case .bytes:
                let now = monotonicNanoseconds()
                if connection.busySince == 0 { connection.busySince = now }
                connection.lastProgress = now
            case .closed:
                dispatcher.close(connection)
                return
            case .wouldBlock:
                park(connection)
                return
            }
        }
    }

    private func park(_ connection: Connection) {
        let now = monotonicNanoseconds()
        // A connection that has not begun a request yet is on the clock from its accept (nginx writes right
        // after connecting); between requests on a kept one there is no deadline (nginx bounds idle ones).
        guard connection.parser.isQuiet && connection.parser.requestID != 0 else {
            arriving[ObjectIdentifier(connection)] = connection
            if !dispatcher.arm(connection) {
                arriving[ObjectIdentifier(connection)] = nil
                dispatcher.close(connection)
            }
            return
        }
        connection.busySince = 0
        let armed = connection.state.withLock { state in
            guard dispatcher.arm(connection) else { return false }
            state = .idle(since: now)
            return true
        }
        if !armed { dispatcher.close(connection) }
    }

    private func timers(now: UInt64) {
        // Requests that are taking too long, or have gone silent half-way.
        let total = limits.requestTimeout.nanoseconds
        let stall = min(limits.stallTimeout, limits.requestTimeout).nanoseconds
        for (key, connection) in arriving {
            let overall = now &- connection.busySince >= total
            guard overall || now &- connection.lastProgress >= stall else { continue }
            arriving[key] = nil
            dispatcher.countTimeout()
            dispatcher.reportTimeout(overall ? "request not complete within \(limits.requestTimeout)"
                                             : "no byte for \(min(limits.stallTimeout, limits.requestTimeout)) mid-request")
            dispatcher.disarm(connection)
            dispatcher.close(connection)
        }
        // Requests that have waited in a lane's queue too long get the overload answer from here: the lane's
        // workers may all be held (by a database lock, say), and a request is never left unanswered.
        for queue in dispatcher.queues where queue.count > 0 {
            let cutoff = now &- min(now, queue.lane.maxWait.nanoseconds)
            for job in queue.expire(queuedBefore: cutoff) {
                job.connection.state.withLock { $0 = .held }
                if dispatcher.answerOverloaded(job.connection, job.request, lane: queue.index, waiting: false) {
                    drive(job.connection)
                }
            }
        }
        if let pausedAt, now &- pausedAt >= 10_000_000, drainStart == nil,
           dispatcher.openConnections < limits.maxConnections {
            if dispatcher.setListening(true) {
                listening = true
                self.pausedAt = nil
            }
        }
        if let drainStart { drain(now: now, since: drainStart) }
    }

    private func beginDrain() {
        drainStart = monotonicNanoseconds()
        dispatcher.draining.store(true, ordering: .releasing)
        if listening {
            _ = dispatcher.setListening(false)
            listening = false
        }
        pausedAt = nil
        // An inherited socket stays open for the next process (connections queued on it wait there); one we
        // opened is closed and its file removed, so new connections are refused at once.
        dispatcher.stopListening()
        drain(now: drainStart!, since: drainStart!)
    }

    /// Lets go of idle kept connections without racing nginx: each gets the farewell record, which makes nginx
    /// close it from its side (a close nginx initiates cannot meet a request it is sending); one still open
    /// `drainIdle` after its farewell (a peer that is not nginx) is closed here. At `drainTimeout` everything
    /// not being answered is closed.
    private func drain(now: UInt64, since start: UInt64) {
        let force = now &- start >= limits.drainTimeout.nanoseconds
        let patience = limits.drainIdle.nanoseconds
        for connection in dispatcher.snapshot() {
            let close = connection.state.withLock { state -> Bool in
                guard case .idle = state else { return false }
                if !force {
                    if connection.farewellSent == 0 {
                        connection.farewellSent = max(now, 1)
                        let farewell = Records.farewell(requestID: max(connection.parser.requestID, 1))
                        guard !connection.write(farewell, until: nil) else { return false }
                    } else {
                        guard now &- connection.farewellSent >= patience else { return false }
                        var waiting: UInt8 = 0
                        // Bytes already waiting are a request the peer sent: it is read and answered, not dropped.
                        if recv(connection.fd, &waiting, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) == 1 { return false }
                    }
                }
                dispatcher.disarm(connection)
                state = .closed
                return true
            }
            if close { dispatcher.close(connection) }
        }
        if force { closeArriving() }
    }

    private func closeArriving() {
        for connection in arriving.values {
            dispatcher.disarm(connection)
            dispatcher.close(connection)
        }
        arriving.removeAll()
    }

    private func closeAll() {
        closeArriving()
        for connection in dispatcher.snapshot() {
            let idle = connection.state.withLock { state -> Bool in
                guard case .idle = state else { return false }
                state = .closed
                return true
            }
            if idle {
                dispatcher.disarm(connection)
                dispatcher.close(connection)
            }
        }
    }
}

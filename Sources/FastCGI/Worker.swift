// A worker thread's loop: the baton that lets one worker at a time wait in the epoll set, the event it gets,
// and everything that event leads to on this worker.
import CLinuxFastCGI
import Glibc
import Threads

extension Dispatcher {
    /// A worker thread's life: take the next event, serve what it leads to, until the server is done.
    ///
    /// Only the worker holding the baton (the leader) waits in the epoll set; the others wait for the baton.
    /// The leader passes it on (waking one) before it runs a request or a batch of a lane that is not `quick`,
    /// so sign-ins never keep the next request from being read; for a quick lane's batch it only lends it (nobody is woken:
    /// events that arrive meanwhile wait for the batch's end and make the next batch) and takes it back if
    /// nobody took it. A batch that holds the lent baton longer than `lentBatonRescue` has the timer wake a
    /// waiting worker to read in its place.
    ///
    /// `adapting`: the worker follows `WorkerScheduling.adaptive` (it runs under SCHED_OTHER now), and reports
    /// a refused change there (the worker then stays under the policy it has).
    func work(handler: any Handler, adapting: (@Sendable (String) -> Void)? = nil) {
        var events = [epoll_event](repeating: epoll_event(), count: 1)
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        var ready = [epoll_event](repeating: epoll_event(), count: gates.map(\.lane.batch).max() ?? 1)
        var leading = false
        var policy: Int32? = adapting == nil ? nil : Int32(SCHED_OTHER)
        while true {
            if !leading {
                baton.take()
                leading = true
            }
            if let current = policy, let refused = adapting { policy = adapt(current, refused: refused) }
            let count = epoll.wait(&events, upTo: 1, milliseconds: -1)
            if count < 0 {
                if errno == EINTR { continue }
                baton.pass()
                fail(FastCGIError(.acceptFailed, errnoText("epoll_wait")))
                return
            }
            guard count == 1 else { continue }
            let item: Work?
            switch events[0].data.u64 {
            case EventSet.exitTag:
                baton.pass()  // the next worker sees the exit event too, and so on
                return
            case EventSet.handBackTag:
                item = takeHandedBack()
            case let tag:
                item = connection(forEvent: tag).map { .drive($0) }
            }
            if let item { serve(item, handler: handler, scratch: &scratch, ready: &ready, leading: &leading) }
        }
    }

    /// The reader's policy under `WorkerScheduling.adaptive`, taken before it waits for the next request:
    /// SCHED_BATCH after a slow request that batches, SCHED_OTHER after any other. Returns the policy it has
    /// now, or nil when the change was refused (reported; the worker stops adapting).
    private func adapt(_ current: Int32, refused: @Sendable (String) -> Void) -> Int32? {
        let wanted = slowBatchesRead.load(ordering: .relaxed) ? Server.batchPolicy : Int32(SCHED_OTHER)
        guard wanted != current else { return current }
        if let why = Server.setPolicy(wanted, for: .adaptive) {
            refused(why)
            return nil
        }
        return wanted
    }

    /// How long a batch may hold the lent baton before the timer wakes a waiting worker to read instead (the
    /// timer ticks every `TimerSleep.busyTick` ms while a baton is lent, so new requests wait about 10 ms at
    /// most behind a stuck batch).
    static let lentBatonRescue: UInt64 = 5_000_000

    /// The connection a listener or connection event gives this worker (the listener's: one just accepted).
    func connection(forEvent tag: UInt64) -> Connection? {
        if tag == EventSet.listenerTag { return acceptOne() }
        guard let connection = Connection.parked(withTag: tag) else { return nil }
        connection.beginTurn()
        return connection
    }

    /// Everything one event leads to on this worker: reading the connection, running its request (with the
    /// others of a batching lane that are ready), the next request waiting in that lane, and what follows on
    /// each connection.
    private func serve(_ first: Work, handler: any Handler, scratch: inout [UInt8], ready: inout [epoll_event],
                       leading: inout Bool) {
        var work = [first]
        while let item = work.popLast() {
            switch item {
            case .drive(let connection):
                if let job = drive(connection, scratch: &scratch, mayWait: !leading) { work.append(.run(job)) }
            case .carryOn(let connection):
                if let job = drive(connection, scratch: &scratch, readAtOnce: false, mayWait: !leading) { work.append(.run(job)) }
            case .run(let job):
                runBatch(of: job, handler: handler, scratch: &scratch, ready: &ready, leading: &leading, then: &work)
            }
        }
    }
}

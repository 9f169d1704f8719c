// Worker lanes: capacity of its own for one kind of request, and the admission that enforces it.
import Synchronization

/// A share of the workers that serves only the requests the classifier puts in it, so one kind of request
/// (slow sign-ins) can never take the capacity another kind (session checks) needs.
///
/// Every worker thread reads connections and serves whatever lane its request belongs to, but no more than
/// `workers` requests of a lane run at once, and the server has more worker threads than all lanes' `workers`
/// together: so however many requests of other lanes are running or stuck, `workers` threads are always there
/// for this lane's, and one more is always free to read. A request of a lane already at its limit waits in the
/// lane's queue for the next of that lane's requests to finish, whose worker takes it at once.
public struct Lane: Sendable, Equatable {
    /// For logs and `FastCGIError.overloaded` reports: "default", "checks", ...
    public let name: String
    /// Requests of this lane running at once (and worker threads the server adds for it).
    public let workers: Int
    /// Complete requests that may wait for the lane; the next one gets the overload answer.
    public let queueLimit: Int
    /// A request that waited this long gets the overload answer instead of being handled.
    public let maxWait: Duration
    /// Requests of this lane one worker may answer together (`Handler.handle(batch:)`), as one of the lane's
    /// `workers`: with the one it read, those already waiting in the lane's queue and those whose bytes have
    /// already arrived on other connections (taken without sleeping). 1: one at a time.
    public let batch: Int
    /// The lane's batches are answered in well under a millisecond (session checks): the worker serving one
    /// keeps reading to itself meanwhile (it lends the baton, waking nobody). Otherwise (sign-ins: a signature
    /// and a heavy statement each) it wakes another worker to read before it starts, as for a single request.
    /// Under `WorkerScheduling.adaptive`, a request that may join a batch of a lane that is not quick has the
    /// next reader wait under SCHED_BATCH.
    public let quick: Bool

    public init(name: String, workers: Int, queueLimit: Int = 256, maxWait: Duration = .seconds(5), batch: Int = 1,
                quick: Bool = false) {
        self.name = name
        self.workers = workers
        self.queueLimit = queueLimit
        self.maxWait = maxWait
        self.batch = batch
        self.quick = quick
    }
}

/// Where a request runs, as `Server.run`'s `place` decides it once per request: its lane (an index into the
/// server's lanes; out of range means lane 0), and whether it may start or join a batch of that lane when the
/// lane batches (`Lane.batch` > 1). One that may not runs alone, as in a lane that does not batch (e.g. only the
/// sign-ins of a lane batch).
public struct Placement: Sendable, Equatable {
    public var lane: Int
    public var batches: Bool
    /// What the caller matched the request to (its own index, opaque here), handed back on `Request.route` so the
    /// handler need not match it again; -1: nothing.
    public var route: Int

    public init(lane: Int, batches: Bool = true, route: Int = -1) {
        self.lane = lane
        self.batches = batches
        self.route = route
    }
}

/// A complete request waiting for its lane, with the connection it came on.
struct Job {
    let connection: Connection
    let request: Request
    /// The lane's index.
    let lane: Int
    /// When it was queued (monotonic ns), for `Lane.maxWait`.
    let queued: UInt64
    /// It may start or join a batch of its lane (a batching lane, and its `Placement` says so).
    var joins = false
    /// Taken into a batch without a slot of its own (`Dispatcher.gather`).
    var rides = false
}

/// One lane's admission: how many of its requests run, and the queue of those waiting (first in, first out).
///
/// The common path takes no lock: a slot is claimed and given back with atomic operations on `runningCount`,
/// and the queue's lock is taken only when the lane is full or jobs wait. No job is left waiting while a slot
/// is free: whoever queues a job looks at the slots again after publishing `waiting`, and whoever frees a
/// slot looks at `waiting` again after freeing it (both sequentially consistent), so one of the two sees
/// the other and runs the job.
final class LaneGate: Sendable {
    let lane: Lane
    let index: Int
    private let runningCount = Atomic<Int>(0)
    /// Jobs waiting, readable without the lock (the timer only looks when it is not zero).
    private let waiting = Atomic<Int>(0)
    private let queue = Mutex<Queue>(Queue())

    private struct Queue {
        var jobs: [Job] = []
        var head = 0

        var count: Int { jobs.count - head }
    }

    init(lane: Lane, index: Int) {
        self.lane = lane
        self.index = index
    }

    var count: Int { waiting.load(ordering: .relaxed) }

    /// Requests of this lane running now.
    var running: Int { runningCount.load(ordering: .relaxed) }

    enum Admission {
        /// The caller runs this job now: the one it brought, or an older one that was waiting for a slot.
        case run(Job)
        case queued
        case full
    }

    /// Lets the job run now, queues it, or refuses it when the queue is full.
    func admit(_ job: Job) -> Admission {
        // A newcomer does not pass jobs already waiting (it may pass one being queued at this very moment).
        if waiting.load(ordering: .sequentiallyConsistent) == 0 && claim() { return .run(job) }
        return queue.withLock { queue in
            guard queue.count < lane.queueLimit else {
                // A slot freed meanwhile (a finisher between its subtract and its second look) runs the oldest.
                guard claim() else { return .full }
                queue.jobs.append(job)
                return .run(pop(&queue))
            }
            queue.jobs.append(job)
            waiting.store(queue.count, ordering: .sequentiallyConsistent)
            // A request that finished before the store above saw nothing waiting and freed its slot: take it.
            guard claim() else { return .queued }
            return .run(pop(&queue))
        }
    }

    /// A request of this lane has finished: the oldest waiting job, which the caller runs in its place (the
    /// slot passes to it), or nil.
    func finished() -> Job? {
        while true {
            if waiting.load(ordering: .sequentiallyConsistent) > 0,
               let job = queue.withLock({ $0.count > 0 ? pop(&$0) : nil }) {
                return job
            }
            runningCount.subtract(1, ordering: .sequentiallyConsistent)
            // A job queued after the look above, while this slot was still taken, is this worker's to run.
            guard waiting.load(ordering: .sequentiallyConsistent) > 0, claim() else { return nil }
        }
    }

    /// Removes and returns up to `limit` of the oldest waiting jobs that may join a batch (`Job.joins`), to run
    /// with the caller's (which holds a slot); the others keep their places.
    func takeWaiting(upTo limit: Int) -> [Job] {
        guard limit > 0, waiting.load(ordering: .sequentiallyConsistent) > 0 else { return [] }
        return queue.withLock { queue in
            var taken: [Job] = []
            while taken.count < limit, queue.count > 0, queue.jobs[queue.head].joins { taken.append(pop(&queue)) }
            guard taken.count < limit, queue.count > 0 else { return taken }
            // One that may not join is at the head: the rest are looked at in one pass, in order.
            var kept: [Job] = []
            for job in queue.jobs[queue.head...] {
                if taken.count < limit && job.joins { taken.append(job) } else { kept.append(job) }
            }
            queue.jobs = kept
            queue.head = 0
            waiting.store(queue.count, ordering: .sequentiallyConsistent)
            return taken
        }
    }

    /// Removes and returns the jobs queued before `cutoff` (monotonic ns): they have waited too long.
    func expire(queuedBefore cutoff: UInt64) -> [Job] {
        queue.withLock { queue in
            var expired: [Job] = []
            while queue.count > 0, queue.jobs[queue.head].queued < cutoff { expired.append(pop(&queue)) }
            return expired
        }
    }

    /// Takes one of the lane's slots if one is free.
    private func claim() -> Bool {
        var current = runningCount.load(ordering: .sequentiallyConsistent)
        while current < lane.workers {
            let (exchanged, original) = runningCount.compareExchange(expected: current, desired: current + 1,
                                                                     ordering: .sequentiallyConsistent)
            if exchanged { return true }
            current = original
        }
        return false
    }

    private func pop(_ queue: inout Queue) -> Job {
        let job = queue.jobs[queue.head]
        queue.head += 1
        if queue.head == queue.jobs.count {
            queue.jobs.removeAll(keepingCapacity: true)
            queue.head = 0
        } else if queue.head >= 64 && queue.head * 2 >= queue.jobs.count {
            queue.jobs.removeSubrange(0..<queue.head)
            queue.head = 0
        }
        waiting.store(queue.count, ordering: .sequentiallyConsistent)
        return job
    }
}

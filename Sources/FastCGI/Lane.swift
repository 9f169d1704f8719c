// Worker lanes: capacity of its own for one kind of request, and the queue that feeds each lane's workers.
import Glibc
import Synchronization

/// A group of workers that serves only the requests the classifier puts in it, so one kind of request (slow
/// sign-ins) can never take the workers another kind (session checks) needs.
public struct Lane: Sendable, Equatable {
    /// For logs and `FastCGIError.overloaded` reports: "default", "checks", ...
    public let name: String
    /// Worker threads, each with its own `Handler`.
    public let workers: Int
    /// Complete requests that may wait for a free worker of this lane; the next one gets the overload answer.
    public let queueLimit: Int
    /// A request that waited this long for a worker gets the overload answer instead of being handled.
    public let maxWait: Duration

    public init(name: String, workers: Int, queueLimit: Int = 256, maxWait: Duration = .seconds(5)) {
        self.name = name
        self.workers = workers
        self.queueLimit = queueLimit
        self.maxWait = maxWait
    }
}

/// A complete request waiting for a worker of its lane, with the connection it came on.
struct Job {
    let connection: Connection
    let request: Request
    /// When it was queued (monotonic ns), for `Lane.maxWait`.
    let queued: UInt64
}

/// One lane's queue: first in, first out, bounded; workers block in `take()` until a job or the stop.
final class LaneQueue: @unchecked Sendable {
    // SAFETY: `jobs`, `head` and `stopped` are only touched with `mutex` held; the pthread objects are
    // allocated once, never moved, and freed in deinit when no thread can be waiting on them.
    let lane: Lane
    let index: Int
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var jobs: [Job] = []
    private var head = 0
    private var stopped = false
    /// Jobs waiting, readable without the lock (the dispatcher's timer only looks when it is not zero).
    private let waiting = Atomic<Int>(0)

    init(lane: Lane, index: Int) {
        self.lane = lane
        self.index = index
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    var count: Int { waiting.load(ordering: .relaxed) }

    /// Queues a job and wakes one waiting worker; false (nothing queued) when the queue is full.
    func put(_ job: Job) -> Bool {
        pthread_mutex_lock(mutex)
        let accepted = jobs.count - head < lane.queueLimit
        if accepted {
            jobs.append(job)
            waiting.store(jobs.count - head, ordering: .relaxed)
            pthread_cond_signal(condition)
        }
        pthread_mutex_unlock(mutex)
        return accepted
    }

    /// The oldest job, waiting for one if there is none; nil once `stop()` was called and the queue is empty.
    func take() -> Job? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while head == jobs.count && !stopped { pthread_cond_wait(condition, mutex) }
        guard head < jobs.count else { return nil }
        return popLocked()
    }

    /// Removes and returns the jobs queued before `cutoff` (monotonic ns): they have waited too long.
    func expire(queuedBefore cutoff: UInt64) -> [Job] {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var expired: [Job] = []
        while head < jobs.count, jobs[head].queued < cutoff { expired.append(popLocked()) }
        return expired
    }

    /// Wakes every worker; `take()` returns the jobs still queued, then nil.
    func stop() {
        pthread_mutex_lock(mutex)
        stopped = true
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    private func popLocked() -> Job {
        let job = jobs[head]
        head += 1
        if head == jobs.count {
            jobs.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= jobs.count {
            jobs.removeSubrange(0..<head)
            head = 0
        }
        waiting.store(jobs.count - head, ordering: .relaxed)
        return job
    }
}

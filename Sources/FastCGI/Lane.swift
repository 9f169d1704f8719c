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

    public init(name: String, workers: Int, queueLimit: Int = 256, maxWait: Duration = .seconds(5)) {
        self.name = name
        self.workers = workers
        self.queueLimit = queueLimit
        self.maxWait = maxWait
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
}

/// One lane's admission: how many of its requests run, and the queue of those waiting (first in, first out).
final class LaneGate: Sendable {
    let lane: Lane
    let index: Int
    private let state = Mutex<State>(State())
    /// Jobs waiting, readable without the lock (the timer only looks when it is not zero).
    private let waiting = Atomic<Int>(0)

    private struct State {
        var running = 0
        var jobs: [Job] = []
        var head = 0
    }

    init(lane: Lane, index: Int) {
        self.lane = lane
        self.index = index
    }

    var count: Int { waiting.load(ordering: .relaxed) }

    /// Requests of this lane running now.
    var running: Int { state.withLock { $0.running } }

    enum Admission { case run, queued, full }

    /// Lets the job run now (the caller handles it), queues it, or refuses it when the queue is full. One lock
    /// for the decision and the queueing, so a request that finishes meanwhile cannot miss it.
    func admit(_ job: Job) -> Admission {
        state.withLock { state in
            if state.running < lane.workers {
                state.running += 1
                return .run
            }
            guard state.jobs.count - state.head < lane.queueLimit else { return .full }
            state.jobs.append(job)
            waiting.store(state.jobs.count - state.head, ordering: .relaxed)
            return .queued
        }
    }

    /// A request of this lane has finished: the oldest waiting job, which the caller runs in its place, or nil.
    func finished() -> Job? {
        state.withLock { state in
            guard state.head < state.jobs.count else {
                state.running -= 1
                return nil
            }
            return pop(&state)
        }
    }

    /// Removes and returns the jobs queued before `cutoff` (monotonic ns): they have waited too long.
    func expire(queuedBefore cutoff: UInt64) -> [Job] {
        state.withLock { state in
            var expired: [Job] = []
            while state.head < state.jobs.count, state.jobs[state.head].queued < cutoff { expired.append(pop(&state)) }
            return expired
        }
    }

    private func pop(_ state: inout State) -> Job {
        let job = state.jobs[state.head]
        state.head += 1
        if state.head == state.jobs.count {
            state.jobs.removeAll(keepingCapacity: true)
            state.head = 0
        } else if state.head >= 64 && state.head * 2 >= state.jobs.count {
            state.jobs.removeSubrange(0..<state.head)
            state.head = 0
        }
        waiting.store(state.jobs.count - state.head, ordering: .relaxed)
        return job
    }
}

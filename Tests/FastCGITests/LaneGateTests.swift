// A lane's admission on its own: slots without a lock, a queue in order, and no job left waiting while a
// slot is free, however the threads interleave.
@testable import FastCGI
import Glibc
import Synchronization
import Testing
import Threads

/// A job on a connection nobody reads (/dev/null stands in for the socket); `tag` goes in its path.
private func job(_ connection: Connection, _ tag: Int = 0) -> Job {
    Job(connection: connection, request: Request(params: ["DOCUMENT_URI": "/\(tag)"]), lane: 0, queued: monotonicNanoseconds())
}

private func connection() -> Connection {
    Connection(Descriptor(open("/dev/null", O_RDONLY | O_CLOEXEC)), limits: Limits(maxBodyBytes: 64), now: monotonicNanoseconds())
}

private func path(_ admission: LaneGate.Admission) -> String? {
    if case .run(let job) = admission { return job.request.path }
    return nil
}

@Suite struct LaneGateTests {
    @Test func aFinishedRequestHandsItsSlotToTheOldestWaitingJob() {
        let gate = LaneGate(lane: Lane(name: "checks", workers: 1, queueLimit: 3), index: 0)
        let connection = connection()
        #expect(path(gate.admit(job(connection, 1))) == "/1")
        for tag in 2...4 {
            guard case .queued = gate.admit(job(connection, tag)) else { Issue.record("job \(tag) not queued"); return }
        }
        guard case .full = gate.admit(job(connection, 5)) else { Issue.record("a fourth waiting job was not refused"); return }
        #expect(gate.count == 3 && gate.running == 1)
        #expect(gate.finished()?.request.path == "/2")
        #expect(gate.finished()?.request.path == "/3")
        #expect(gate.finished()?.request.path == "/4")
        #expect(gate.running == 1 && gate.count == 0)  // the slot passed from job to job
        #expect(gate.finished() == nil)
        #expect(gate.running == 0)
        #expect(path(gate.admit(job(connection, 6))) == "/6")
    }

    @Test func expiredJobsLeaveTheQueueOldestFirstAndKeepTheirSlotsFree() {
        let gate = LaneGate(lane: Lane(name: "checks", workers: 1, queueLimit: 8), index: 0)
        let connection = connection()
        _ = gate.admit(job(connection, 1))
        let early = (2...3).map { job(connection, $0) }
        for queued in early { _ = gate.admit(queued) }
        let cutoff = monotonicNanoseconds()
        _ = gate.admit(job(connection, 4))
        #expect(gate.expire(queuedBefore: cutoff).map(\.request.path) == ["/2", "/3"])
        #expect(gate.count == 1 && gate.running == 1)
        #expect(gate.finished()?.request.path == "/4")
        #expect(gate.finished() == nil && gate.running == 0)
    }

    /// Eight threads admit jobs and run what they are given, then whatever `finished()` hands them, while a
    /// ninth expires jobs that waited over a millisecond (the timer's part). Every job must run or expire,
    /// never more than the lane's workers at once, and nothing may be left in the queue: a job queued just as
    /// the last running one finished would wait there (until the timer's 503), and with one slot every later
    /// one behind it. (Without `admit`'s second look at the slots this fails within a few thousand jobs.)
    @Test(arguments: [1, 3])
    func underContentionEveryJobRunsOrExpiresAndNoMoreThanTheLanesWorkersAtOnce(workers: Int) {
        let threads = 8, perThread = 12_000
        let gate = LaneGate(lane: Lane(name: "checks", workers: workers, queueLimit: threads * perThread), index: 0)
        let connection = connection()
        let inFlight = Atomic<Int>(0), mostAtOnce = Atomic<Int>(0), ran = Atomic<Int>(0), refused = Atomic<Int>(0)
        let expired = Atomic<Int>(0), admitting = Atomic<Int>(threads)
        let done = Monitor(0)
        for _ in 0..<threads {
            _ = Threads.start(detached: true) {
                func execute(_ first: Job) {
                    var next: Job? = first
                    while next != nil {
                        let now = inFlight.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
                        mostAtOnce.raise(to: now)
                        for _ in 0..<20 { _ = inFlight.load(ordering: .relaxed) }  // a moment inside
                        ran.wrappingAdd(1, ordering: .relaxed)
                        inFlight.wrappingSubtract(1, ordering: .sequentiallyConsistent)
                        next = gate.finished()
                    }
                }
                for _ in 0..<perThread {
                    switch gate.admit(job(connection)) {
                    case .run(let job): execute(job)
                    case .queued: break
                    case .full: refused.wrappingAdd(1, ordering: .relaxed)
                    }
                }
                admitting.wrappingSubtract(1, ordering: .sequentiallyConsistent)
                done.update { $0 += 1 }
            }
        }
        _ = Threads.start(detached: true) {
            while admitting.load(ordering: .sequentiallyConsistent) > 0 {
                let old = gate.expire(queuedBefore: monotonicNanoseconds() &- 1_000_000)
                expired.wrappingAdd(old.count, ordering: .relaxed)
            }
            done.update { $0 += 1 }
        }
        #expect(done.wait(timeout: .seconds(120)) { $0 == threads + 1 })
        #expect(ran.load(ordering: .relaxed) + expired.load(ordering: .relaxed) == threads * perThread)
        #expect(refused.load(ordering: .relaxed) == 0)
        #expect(gate.count == 0 && gate.running == 0)
        #expect(mostAtOnce.load(ordering: .relaxed) <= workers)
    }
}

extension Atomic<Int> {
    /// Raises the value to at least `candidate`.
    fileprivate func raise(to candidate: Int) {
        var current = load(ordering: .relaxed)
        while current < candidate {
            let (exchanged, original) = compareExchange(expected: current, desired: candidate, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}

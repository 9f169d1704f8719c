// Running a request, or a batch of a batching lane's requests that are ready together: gathering the batch,
// the baton passed or lent meanwhile, and each request's answer on its own connection.
import CLinuxFastCGI
import Threads

extension Dispatcher {
    /// Runs `job`'s request (with the others of its lane that are ready, when it may batch) and answers each
    /// on its connection, then queues what follows on this worker: the lane's next waiting request, and each
    /// connection that carries on.
    func runBatch(of job: Job, handler: any Handler, scratch: inout [UInt8], ready: inout [epoll_event],
                  leading: inout Bool, then work: inout [Work]) {
        let gate = gates[job.lane]
        var jobs = [job]
        var handedOff = false
        if job.joins { handedOff = gather(&jobs, scratch: &scratch, ready: &ready) }
        let now = monotonicNanoseconds()
        var lent = false
        if leading {
            // Lent for a quick lane's batch, unless requests of other lanes were handed off on the way:
            // then a worker must wake to run them now.
            if job.joins && gate.lane.quick && !handedOff {
                lendBaton(now: now)
                lent = true
            } else {
                baton.pass()
                leading = false
            }
        }
        var due: [Job] = []
        var carryOn: [Connection] = []
        // The batch's answers share one write budget: peers that leave their answers unread cannot add
        // their waits up in front of the others' (each connection's own budget still holds).
        var batchWaited: UInt64 = 0
        for job in jobs {
            if now &- job.queued > gate.lane.maxWait.nanoseconds {
                if answerOverloaded(job.connection, job.request, lane: job.lane, waiting: true, batchWaited: &batchWaited) {
                    carryOn.append(job.connection)
                }
            } else {
                due.append(job)
            }
        }
        let responses = due.isEmpty ? [] : due.count == 1 ? [handler.handle(due[0].request)] : handler.handle(batch: due.map(\.request))
        for (index, job) in due.enumerated() {
            // A handler that answers fewer requests than it was given: those left get the 500 (reported).
            var response = Response.invalidReplacement
            if index < responses.count {
                response = responses[index]
            } else {
                counters.invalid.add(1, ordering: .relaxed)
                report(FastCGIError(.invalidResponse, "the handler answered \(responses.count) of a batch of \(due.count)"))
            }
            if answer(job.connection, response, waiting: true, batchWaited: &batchWaited) { carryOn.append(job.connection) }
        }
        if lent { leading = baton.reclaim() }
        // The lane's next waiting request takes this one's place; first these connections are read or
        // parked, so their next requests are not held up behind the queue.
        if let next = gate.finished() { work.append(.run(next)) }
        for connection in carryOn.reversed() { work.append(.carryOn(connection)) }
    }

    /// Adds to a batch (its first job holds one of the lane's slots) the lane's waiting jobs, then the requests
    /// already complete on connections whose events are waiting, taken without sleeping. Other lanes'
    /// requests read on the way are admitted to their lanes as usual and handed off to the other workers
    /// (`handOff`), never run after the batch on this one. True when it handed some off or saw hand-back work
    /// waiting: the caller then wakes a worker for it rather than only lending the baton.
    ///
    /// A lane that is not quick (sign-ins: each member's work and its round trip add to every member's wait)
    /// takes the jobs queued for a slot, and the waiting events only once half its slots or more are taken.
    /// Below that (moderate load) the events are left to the next reader and each request runs at once on a
    /// worker of its own; batches form as the lane fills, where they save the database a round trip and a
    /// commit per member (docs/benchmarks.md weighs the threshold: all slots taken cost the peak rate more).
    private func gather(_ jobs: inout [Job], scratch: inout [UInt8], ready: inout [epoll_event]) -> Bool {
        let lane = jobs[0].lane
        let gate = gates[lane]
        let limit = gate.lane.batch
        jobs += gate.takeWaiting(upTo: limit - jobs.count)
        guard jobs.count < limit else { return false }
        guard gate.lane.quick || gate.running * 2 >= gate.lane.workers else { return false }
        let count = epoll.wait(&ready, upTo: Int32(min(limit - jobs.count, ready.count)), milliseconds: 0)
        guard count > 0 else { return false }
        var others: [Work] = []
        var handedBack = false
        for index in 0..<Int(count) {
            switch ready[index].data.u64 {
            case EventSet.handBackTag:
                // Work handed back is another worker's to take (re-armed: the event stays raised), never
                // handed off again behind newer work.
                epoll.rearmHandBack()
                handedBack = true
            case EventSet.exitTag:
                continue  // comes only once no connection is open, so never while this worker holds some
            case let tag:
                guard let connection = connection(forEvent: tag) else { continue }
                // A request of this lane that may join rides without a slot of its own while there is room; any
                // other was admitted to its lane (and holds a slot there, or waits in its queue).
                let riding = jobs.count < limit ? lane : nil
                guard let job = drive(connection, scratch: &scratch, riding: riding, mayWait: false) else { continue }
                if job.rides { jobs.append(job) } else { others.append(.run(job)) }
            }
        }
        guard !others.isEmpty else { return handedBack }
        handOff(others)
        return true
    }

    /// Lends the baton for a batch, and wakes the timer if it naps, so a batch that holds it too long is
    /// rescued in time (`run`).
    private func lendBaton(now: UInt64) {
        baton.lend(now: now)
        timer.batonLent()
    }
}

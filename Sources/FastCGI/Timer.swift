// The timer: the thread that called `run` keeps the deadlines, the lanes' waiting times, the rescue of a lent
// baton and the graceful stop, then lets the workers go.
import Synchronization
import Threads

extension Dispatcher {
    /// Keeps the clocks until the graceful stop has closed every connection, then lets the workers go.
    func run() {
        var drainStart: UInt64?
        var lastIdleSweep: UInt64 = 0
        var lastLends = 0
        while true {
            if stopping.isRequested && drainStart == nil {
                let now = monotonicNanoseconds()
                drainStart = now
                beginDrain(now: now)
            }
            if drainStart != nil && connections.open.current == 0 { break }
            // Every 20 ms while something is on the clock, else every 100 ms (how late a deadline may be noticed
            // after a connection starts arriving or a request starts waiting, which do not wake the timer).
            let timed = drainStart != nil || connections.anyOnTheClock || listener.accepting.withLock { $0.pausedAt != nil }
            timer.sleep(milliseconds: timed ? 20 : 100, baton: baton, lastLends: &lastLends)
            let now = monotonicNanoseconds()
            tick(now: now, drainStart: drainStart)
            // Kept connections idle past `Limits.idleTimeout`: looked for once a second.
            if now &- lastIdleSweep >= 1_000_000_000 {
                lastIdleSweep = now
                closeIdle(now: now)
            }
        }
        epoll.raiseExit()
    }

    func tick(now: UInt64, drainStart: UInt64?) {
        // Requests that are taking too long, or have gone silent half-way: shut down, so the next event (end of
        // file) has the worker that receives it close the connection.
        let total = limits.requestTimeout.nanoseconds
        let stall = min(limits.stallTimeout, limits.requestTimeout).nanoseconds
        for connection in connections.onTheClock {
            connection.state.withLock { state in
                guard state == .waiting, !connection.isShutDown else { return }
                let overall = elapsed(now, since: connection.busySince) >= total
                guard overall || elapsed(now, since: connection.lastProgress) >= stall else { return }
                counters.timeouts.add(1, ordering: .relaxed)
                report(FastCGIError(.requestTimedOut, overall ? "request not complete within \(limits.requestTimeout)"
                                        : "no byte for \(min(limits.stallTimeout, limits.requestTimeout)) mid-request"))
                connection.shutDown()
            }
        }
        // Requests that have waited in their lane's queue too long get the overload answer from here: the
        // lane's running requests may all be held (by a database lock, say), and none is left unanswered.
        for gate in gates where gate.count > 0 {
            for job in gate.expire(queuedBefore: now &- min(now, gate.lane.maxWait.nanoseconds)) {
                guard answerOverloaded(job.connection, job.request, lane: gate.index, waiting: false) else { continue }
                handBack(job.connection)
            }
        }
        baton.rescue(lentBefore: now &- min(now, Self.lentBatonRescue))
        listener.accepting.withLock { listening in
            guard let pausedAt = listening.pausedAt, listening.on, elapsed(now, since: pausedAt) >= 10_000_000,
                  connections.open.current < limits.maxConnections else { return }
            if listening.arm(in: epoll) { listening.pausedAt = nil }
        }
        if let drainStart { drain(now: now, since: drainStart) }
    }

    /// Kept connections idle past `idleTimeout` are shut down (the worker that gets their end of file closes
    /// them), so peers that never close cannot hold the connection slots.
    func closeIdle(now: UInt64) {
        let limit = limits.idleTimeout.nanoseconds
        for connection in connections.everyOne {
            connection.state.withLock { state in
                guard case .idle(let since) = state, !connection.isShutDown, elapsed(now, since: since) >= limit else { return }
                counters.timeouts.add(1, ordering: .relaxed)
                report(FastCGIError(.requestTimedOut, "kept connection idle for \(limits.idleTimeout)"))
                connection.shutDown()
            }
        }
    }

    // MARK: The drain

    private func beginDrain(now: UInt64) {
        stopping.beginDraining()
        listener.accepting.withLock { listening in
            listening.on = false
            listening.remove(from: epoll)
            // An inherited socket stays open for the next process (connections queued on it wait there); one we
            // opened is closed and its file removed, so new connections are refused at once.
            listener.close(&listening)
        }
        drain(now: now, since: now)
    }

    /// Lets go of idle kept connections without racing nginx: each gets the farewell record, which makes nginx
    /// close it from its side (a close nginx initiates cannot meet a request it is sending); one still open
    /// `drainIdle` after its farewell (a peer that is not nginx) is shut down. At `drainTimeout` everything
    /// parked is shut down; requests being answered still are.
    private func drain(now: UInt64, since start: UInt64) {
        let force = now &- start >= limits.drainTimeout.nanoseconds
        let patience = limits.drainIdle.nanoseconds
        for connection in connections.everyOne {
            connection.state.withLock { state in
                guard !connection.isShutDown else { return }
                switch state {
                case .idle:
                    if !force {
                        if connection.farewellSent == 0 {
                            connection.farewellSent = max(now, 1)
                            let farewell = Records.farewell(requestID: max(connection.parser.requestID, 1))
                            if connection.write(farewell, budget: nil) { return }
                        } else {
                            guard now &- connection.farewellSent >= patience else { return }
                            // Bytes already waiting are a request the peer sent: it is read and answered.
                            if connection.hasBytesWaiting { return }
                        }
                    }
                case .waiting:
                    guard force else { return }
                case .held, .closed:
                    return
                }
                connection.shutDown()
            }
        }
    }
}

/// Nanoseconds from `since` to `now`, 0 when `since` is later: the timer reads the clock once per tick, and a
/// worker may stamp a connection after that (wrapping around would make a fresh stamp look ages old).
private func elapsed(_ now: UInt64, since: UInt64) -> UInt64 {
    now > since ? now - since : 0
}

/// The timer thread's sleep, and what cuts it short: a poke (the stop, a paused listener), or the first lend
/// of the baton after a nap.
struct TimerSleep: ~Copyable, Sendable {
    private let poked = Monitor(false)
    /// Batches that lent the baton so far: while it moves, the timer ticks every `busyTick` to rescue a lent
    /// baton in time; otherwise it naps, and the first lend after a nap pokes it.
    private let lent = Atomic<Int>(0)
    private let napping = Atomic<Bool>(false)
    static let busyTick = 5

    var lends: Int { lent.load(ordering: .relaxed) }

    func poke() { poked.update { $0 = true } }

    /// Counts a lend of the baton, and pokes the timer if it naps.
    func batonLent() {
        lent.add(1, ordering: .sequentiallyConsistent)
        if napping.load(ordering: .sequentiallyConsistent), napping.exchange(false, ordering: .sequentiallyConsistent) {
            poke()
        }
    }

    /// Waits for a poke, at most `milliseconds`, or `busyTick` while batches lend `baton` (`lastLends`: the
    /// count the last sleep saw).
    func sleep(milliseconds: Int, baton: Baton, lastLends: inout Int) {
        var milliseconds = milliseconds
        // Napping is announced before the last look at the count, and a lend counts before it looks for the
        // nap, so either the timer sees the lend or the lender sees the nap (and pokes).
        napping.store(true, ordering: .sequentiallyConsistent)
        let lendsNow = lent.load(ordering: .sequentiallyConsistent)
        // A baton still lent keeps the short tick until it is taken back or rescued (a poke may have cut
        // the last wait short, before the lend was old enough to rescue).
        if lendsNow != lastLends || baton.isLent {
            napping.store(false, ordering: .sequentiallyConsistent)
            milliseconds = Self.busyTick
        }
        lastLends = lendsNow
        poked.wait(until: { $0 }, deadline: monotonicDeadline(after: .milliseconds(milliseconds)), then: { $0 = false })
        napping.store(false, ordering: .sequentiallyConsistent)
    }
}

// The dispatcher's baton (leader/followers): one holder at a time; `pass` wakes a waiter, `lend` wakes
// nobody but lets a newcomer take it, `reclaim` takes a lent baton back, `rescue` wakes a waiter for a baton
// lent too long.
import Foundation
import Testing
import Threads

@Suite struct BatonTests {
    /// Starts a thread that takes the baton and counts `taken` once it holds it.
    private func taker(_ baton: Baton, _ taken: Latch) {
        Thread { baton.take(); taken.signal() }.start()
    }

    @Test func passWakesAWaiter() {
        let baton = Baton()
        baton.take()
        let taken = Latch()
        taker(baton, taken)
        #expect(!taken.wait(for: 1, seconds: 0.2), "took a held baton")
        baton.pass()
        #expect(taken.wait(for: 1))
        #expect(!baton.reclaim(), "the waiter holds it now")
    }

    @Test func aLentBatonWakesNobodyButANewcomerTakesIt() {
        let baton = Baton()
        baton.take()
        let waiter = Latch()
        taker(baton, waiter)
        #expect(!waiter.wait(for: 1, seconds: 0.1))
        baton.lend(now: 100)
        #expect(!waiter.wait(for: 1, seconds: 0.2), "lending woke the waiter")
        #expect(baton.reclaim(), "nobody took it")
        baton.lend(now: 200)
        let newcomer = Latch()
        Thread { baton.take(); newcomer.signal() }.start()  // not waiting: finds it free
        #expect(newcomer.wait(for: 1))
        #expect(!baton.reclaim(), "the newcomer took it")
        baton.pass()
        #expect(waiter.wait(for: 1))
    }

    @Test func rescueWakesAWaiterOnlyForABatonLentBeforeTheCutoff() {
        let baton = Baton()
        baton.take()
        let taken = Latch()
        taker(baton, taken)
        #expect(!taken.wait(for: 1, seconds: 0.1))
        baton.lend(now: 1_000)
        baton.rescue(lentBefore: 1_000)  // lent at the cutoff, not before
        #expect(!taken.wait(for: 1, seconds: 0.2))
        baton.rescue(lentBefore: 1_001)
        #expect(taken.wait(for: 1))
        #expect(!baton.reclaim())
    }

    @Test func aHeldOrReclaimedBatonIsNotRescued() {
        let baton = Baton()
        baton.take()
        let taken = Latch()
        taker(baton, taken)
        #expect(!taken.wait(for: 1, seconds: 0.1))
        baton.rescue(lentBefore: .max)  // held: nothing to rescue
        baton.lend(now: 1)
        #expect(baton.reclaim())
        baton.rescue(lentBefore: .max)  // reclaimed: nothing either
        #expect(!taken.wait(for: 1, seconds: 0.2))
        baton.pass()
        #expect(taken.wait(for: 1))
    }

    /// Many threads taking and passing it: never two holders at once, nobody left waiting.
    @Test func oneHolderAtATimeUnderContention() {
        let baton = Baton()
        let holders = Latch(), done = Latch()
        let inside = NSLock()
        nonisolated(unsafe) var current = 0
        nonisolated(unsafe) var overlap = false
        for _ in 0..<8 {
            Thread {
                for round in 0..<500 {
                    baton.take()
                    inside.lock(); current += 1; if current > 1 { overlap = true }; inside.unlock()
                    holders.signal()
                    inside.lock(); current -= 1; inside.unlock()
                    if round % 2 == 0 {
                        baton.pass()
                    } else {
                        baton.lend(now: UInt64(round))
                        if baton.reclaim() { baton.pass() }
                    }
                }
                done.signal()
            }.start()
        }
        #expect(done.wait(for: 8, seconds: 30))
        #expect(holders.count == 8 * 500)
        inside.lock(); #expect(!overlap); inside.unlock()
    }
}

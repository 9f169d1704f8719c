// What the server has done since it started: the snapshot `Server.statistics` gives, and the counters behind it.
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

/// The dispatcher's counts: each bumped where it happens (relaxed: no order is needed between them), read
/// together only for a snapshot.
struct Counters: ~Copyable, Sendable {
    let accepted = Atomic<Int>(0)
    let answered = Atomic<Int>(0)
    let violations = Atomic<Int>(0)
    let timeouts = Atomic<Int>(0)
    let overloads = Atomic<Int>(0)
    let invalid = Atomic<Int>(0)
    let writeFailures = Atomic<Int>(0)
    /// Connections given back to the line at the end of a turn (tests).
    let endedTurns = Atomic<Int>(0)

    var statistics: Statistics {
        Statistics(connectionsAccepted: accepted.load(ordering: .relaxed), requestsAnswered: answered.load(ordering: .relaxed),
                   protocolViolations: violations.load(ordering: .relaxed), timeouts: timeouts.load(ordering: .relaxed),
                   overloaded: overloads.load(ordering: .relaxed), invalidResponses: invalid.load(ordering: .relaxed),
                   writeFailures: writeFailures.load(ordering: .relaxed))
    }
}

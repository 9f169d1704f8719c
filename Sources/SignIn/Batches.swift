// Requests a lane hands over together: their session checks looked up in one store call, their sign-ins opened in
// one, then each answered as `Application.handle` would.
import FastCGI
import Sessions

/// What `handle(batch:)` settled for a request before answering it.
enum Prior {
    /// Its session check, looked up with the batch's others.
    case session(Result<LiveSession?, any Error>)
    /// Its sign-in: the token verified, the session opened with the batch's others.
    case signIn(Application.AdmittedSignIn, Result<SignInOutcome, any Error>)
    /// Its sign-in, refused before the database (the body, the origin, the token).
    case refused(any Error)
}

extension Application {
    /// Answers requests that arrived together (a batching lane's): their session checks are looked up in one
    /// store call, and their sign-ins, each token verified on its own, opened in one (a round trip each for the
    /// database); every request is then answered, logged and counted as `handle` does, the log lines written
    /// together.
    package func handle(batch requests: [Request]) -> [Response] {
        let started = ContinuousClock.now
        let matches = requests.map(Routes.matching)
        let batching = matches.map { try? $0.get().route.batching }
        var priors = [Prior?](repeating: nil, count: requests.count)
        lookUpSessions(requests, batching, into: &priors)
        openSessions(requests, batching, into: &priors)
        var lines: [String] = []
        let responses = requests.indices.map { index in
            let (response, line) = answer(requests[index], matches[index], prior: priors[index], since: started)
            if let line { lines.append(line) }
            return response
        }
        log.write(lines: lines)
        return responses
    }

    /// The batch's session checks, two or more of them, in one store call; one lookup per session (a page's
    /// many subrequests with one cookie arrive together).
    private func lookUpSessions(_ requests: [Request], _ batching: [Route.Batching?], into priors: inout [Prior?]) {
        var hashes: [SessionToken.Hash] = []
        var seen: [SessionToken.Hash: Int] = [:]
        let slots = zip(requests, batching).map { request, batching -> Int? in
            guard case .sessionChecks? = batching, let token = presented(request)?.token else { return nil }
            let hash = token.hash
            if let slot = seen[hash] { return slot }
            seen[hash] = hashes.count
            hashes.append(hash)
            return hashes.count - 1
        }
        // Two or more checks: one store call, even when they all present one session.
        guard slots.lazy.compactMap({ $0 }).count > 1 else { return }
        let lookups: [Result<LiveSession?, any Error>]
        do {
            lookups = try store.liveSessions(hashes)
        } catch {
            lookups = Array(repeating: .failure(error), count: hashes.count)
        }
        for (index, slot) in slots.enumerated() { if let slot { priors[index] = .session(lookups[slot]) } }
    }

    /// The batch's sign-ins, two or more of them: each verified as `signIn` does, then those admitted opened in
    /// one store call.
    private func openSessions(_ requests: [Request], _ batching: [Route.Batching?], into priors: inout [Prior?]) {
        let indices = batching.indices.filter { if case .signIns? = batching[$0] { true } else { false } }
        guard indices.count > 1 else { return }
        var admitted: [(index: Int, signIn: AdmittedSignIn)] = []
        let sessions = SessionToken.generate(count: indices.count)
        for (index, session) in zip(indices, sessions) {
            do {
                admitted.append((index, try admitSignIn(requests[index], session: session)))
            } catch {
                priors[index] = .refused(error)
            }
        }
        guard !admitted.isEmpty else { return }
        let outcomes: [Result<SignInOutcome, any Error>]
        do {
            outcomes = try store.signIns(admitted.map { ($0.signIn.token, $0.signIn.newSession) })
        } catch {
            outcomes = Array(repeating: .failure(error), count: admitted.count)
        }
        for (item, outcome) in zip(admitted, outcomes) { priors[item.index] = .signIn(item.signIn, outcome) }
    }
}

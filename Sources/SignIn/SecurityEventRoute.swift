// POST /risc: Google's security event tokens (Cross-Account Protection), verified, recorded and applied once.
import FastCGI
import IDToken
import Sessions

extension Application {
    /// The media types a SET may come as (RFC 8417's, and plain JWT).
    static let securityEventMediaTypes: Set<String> = ["application/secevent+jwt", "application/jwt"]

    /// Cross-Account Protection (docs/risc.md): verifies the SET, records and applies each of its events once,
    /// and answers `202` (also for a SET received before: Google redelivers until it gets one). Only a SET whose
    /// signature, issuer or audience is wrong (or that is no SET) is a 400: one Google signed for us whose other
    /// claims cannot be read is recorded unparsed and accepted, since Google does not redeliver after a 400.
    func securityEvent(_ request: Request, _ line: inout LogLine) throws -> Response {
        guard !request.bodyTooLarge else { throw SignInError(.malformedSecurityEvent, "the security event token is over 64 KiB") }
        guard let mediaType = request.contentType.map(MediaType.essence(of:)), Self.securityEventMediaTypes.contains(mediaType) else {
            throw SignInError(.malformedSecurityEvent, "send the token as application/secevent+jwt")
        }
        guard let text = String(validating: request.body, as: UTF8.self) else {
            throw SignInError(.malformedSecurityEvent, "the body is not a compact JWS")
        }
        let token = text.trimmingASCIIWhitespace()
        let now = clock()
        switch try tokens.verify(token, with: eventVerifier, now: now).get() {
        case .verified(let set): try record(set, now: now, &line)
        case .unparsed(let set): try record(set, &line)
        }
        return Response(status: 202, headers: [("Cache-Control", "no-store")])
    }

    /// Records and applies each event of a verified SET once. One issued ahead of our clock beyond the skew is
    /// applied as sent (its `iat` orders it among the others), with a warning: our clock may be the one behind.
    private func record(_ set: VerifiedSecurityEvent, now: Int64, _ line: inout LogLine) throws {
        line["jti"] = Self.loggable(set.jti)
        if let ahead = set.issuedAheadBy {
            log.warning("security_event_issued_in_future", ["jti": Self.loggable(set.jti), "iat": String(set.issuedAt),
                                                            "now": String(now), "skew_seconds": String(ahead)])
        }
        let records = set.events.map { event in
            // Only a subject Google issued names one of our users (google_sub is Google's sub).
            let sub = event.subject.flatMap { SecurityEventVerifier.issuers.contains($0.issuer) ? $0.sub : nil }
            return SecurityEventRecord(jti: set.jti, issuer: set.issuer, type: event.type, subject: sub, reason: event.reason,
                                       state: event.state, issuedAt: set.issuedAt)
        }
        let applied = try store.applySecurityEvents(records)
        for event in applied { metrics.securityEvent(type: event.type, outcome: event.outcome) }
        line["events"] = applied.map { "\(Self.shortType($0.type)):\($0.outcome)" }.joined(separator: ",")
        if let user = applied.compactMap(\.userID).first { line["user_id"] = String(user) }
    }

    /// Records a SET signed by Google and addressed to us whose other claims could not be read: its payload is kept
    /// (outcome `unparsed`), nothing is applied, and a warning and `tokensignin_security_events_total{outcome="unparsed"}`
    /// tell a person to read it (docs/risc.md).
    private func record(_ set: UnparsedSecurityEvent, _ line: inout LogLine) throws {
        line["jti"] = Self.loggable(set.jti)
        let reason = set.reason.detail.isEmpty ? set.reason.code.name : "\(set.reason.code.name): \(set.reason.detail)"
        let applied = try store.recordUnparsedSecurityEvent(UnparsedSecurityEventRecord(
            jti: set.jti, issuer: set.issuer, type: set.type, issuedAt: set.issuedAt, claims: set.claimsJSON, reason: reason))
        metrics.securityEvent(type: set.type, outcome: applied.outcome)
        line["events"] = "\(Self.shortType(set.type)):\(applied.outcome)"
        line["unparsed"] = set.reason.code.name
        log.warning("security_event_unparsed", ["jti": Self.loggable(set.jti), "type": Self.shortType(set.type),
                                                "reason": set.reason.code.name, "detail": set.reason.detail, "outcome": applied.outcome])
    }

    /// The last path segment of an event type URI, for log lines (`account-disabled`).
    static func shortType(_ type: String) -> String {
        String(type.split(separator: "/").last ?? Substring(type)).filter { $0.isASCII && !$0.isWhitespace && $0 != "," }
    }

    /// A value from a token made safe for one log field: printable ASCII, at most 64 characters.
    static func loggable(_ value: String) -> String {
        String(value.unicodeScalars.filter { $0.value > 0x20 && $0.value < 0x7f }.prefix(64).map(Character.init))
    }
}

// POST /risc: Google's security event tokens (Cross-Account Protection), verified, recorded and applied once.
import FastCGI
import IDToken
import Sessions

extension Application {
    /// The media types a SET may come as (RFC 8417's, and plain JWT).
    static let securityEventMediaTypes: Set<String> = ["application/secevent+jwt", "application/jwt"]

    /// Cross-Account Protection (docs/risc.md): verifies the SET, records and applies each of its events once,
    /// and answers `202` (also for a SET received before: Google redelivers until it gets one).
    func securityEvent(_ request: Request, _ line: inout LogLine) throws -> Response {
        guard !request.bodyTooLarge else { throw SignInError(.malformedSecurityEvent, "the security event token is over 64 KiB") }
        guard let mediaType = request.contentType.map(MediaType.essence(of:)), Self.securityEventMediaTypes.contains(mediaType) else {
            throw SignInError(.malformedSecurityEvent, "send the token as application/secevent+jwt")
        }
        guard let text = String(validating: request.body, as: UTF8.self) else {
            throw SignInError(.malformedSecurityEvent, "the body is not a compact JWS")
        }
        let token = text.trimmingASCIIWhitespace()
        let set: VerifiedSecurityEvent
        switch tokens.verify(token, with: eventVerifier, now: clock()) {
        case .success(let verified): set = verified
        case .failure(let error): throw error
        }
        line["jti"] = Self.loggable(set.jti)
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
        return Response(status: 202, headers: [("Cache-Control", "no-store")])
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

// The one error type of the IDToken module: why a token or a key set was refused, or why keys are missing.

/// A verification or key-set failure. Equality is on `code` only; `detail` is for logs, never for clients.
public struct IDTokenError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, machine-readable reason (`expired`, `bad_audience`, `unknown_kid`, ...), used in logs and metrics.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }
    }

    public let code: Code
    /// Extra context for operators' logs. Never contains the token itself.
    public let detail: String

    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    public var description: String { code.name }

    /// True when trying again later may succeed (keys unavailable): the client is not at fault.
    public var isRetryable: Bool { code == .keysUnavailable }
}

extension IDTokenError.Code {
    // STUB: the IDToken helper replaces this list with the full set of rule names.
    public static let unknownKid = Self("unknown_kid")
    public static let keysUnavailable = Self("keys_unavailable")
    public static let hostedDomainNotAllowed = Self("hosted_domain_not_allowed")
    public static let invalidKeySet = Self("invalid_key_set")
}

// The scaffolding every module's one error type shares: a closed set of reason codes, equality on the code, and a
// description that is the code's name alone (details go to logs, never to whoever printed the error).

/// A module's reason codes: an enum whose raw values are the stable names logs and metrics carry. Being an enum, a
/// `switch` over it is exhaustive without `default:`, so a new code must be placed wherever codes are mapped (the
/// HTTP status, an exit code) instead of silently taking a fallback.
public protocol ReasonCode: RawRepresentable, Hashable, Sendable, CaseIterable, CustomStringConvertible
    where RawValue == String {}

extension ReasonCode {
    /// The stable name (`expired`, `connection_lost`, ...), as logs and metrics write it.
    public var name: String { rawValue }
    public var description: String { rawValue }
}

/// One module's error type: a `code` from its closed set and a `detail` for operators. Equality and hashing are on
/// the code only; `description` is the code's name, so printing an error never leaks its detail.
public protocol CodedError: Error, Hashable, Sendable, CustomStringConvertible {
    associatedtype Code: ReasonCode
    var code: Code { get }
    /// Context for operators' logs (the setting, the failing call, the server's message). Never a token or a secret.
    var detail: String { get }
}

extension CodedError {
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    public var description: String { code.name }
}

/// The error type of a module whose failures are a reason code and a detail, nothing more (the module names it:
/// `public typealias IDTokenError = CodedFailure<IDTokenReason>`).
public struct CodedFailure<Code: ReasonCode>: CodedError {
    public let code: Code
    public let detail: String

    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }
}

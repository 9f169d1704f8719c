// The one error type of the Signing module: why a private key could not be loaded or generated.

/// A private-key failure. Equality is on `code` only; `detail` is for logs and never holds key material.
public struct SigningError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, machine-readable reason (`bad_private_key`, ...).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }
    }

    public let code: Code
    public let detail: String

    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    public var description: String { code.name }
}

extension SigningError.Code {
    /// Not a PEM private key, encrypted, too large, or of a type or size that is not accepted.
    public static let badPrivateKey = Self("bad_private_key")
    public static let keyGenerationFailed = Self("key_generation_failed")
    /// A service-account key file that is not one (not JSON, a member missing, not an RSA key).
    public static let badServiceAccount = Self("bad_service_account")
}

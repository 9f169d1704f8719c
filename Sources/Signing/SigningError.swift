// The one error type of the Signing module: why a private key could not be loaded or generated.
import CodedErrors

/// A private-key failure. Equality is on `code` only; `detail` is for logs and never holds key material.
public struct SigningError: CodedError {
    /// A stable, machine-readable reason (`bad_private_key`, ...).
    public enum Code: String, ReasonCode {
        /// Not a PEM private key, encrypted, too large, or of a type or size that is not accepted.
        case badPrivateKey = "bad_private_key"
        case keyGenerationFailed = "key_generation_failed"
        /// A service-account key file that is not one (not JSON, a member missing, not an RSA key).
        case badServiceAccount = "bad_service_account"
    }

    public let code: Code
    public let detail: String

    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }
}

// The one error type of the Signing module: why a private key could not be loaded or generated.
import CodedErrors

/// A private-key failure. Equality is on `code` only; `detail` is for logs and never holds key material.
public typealias SigningError = CodedFailure<SigningReason>

/// A stable, machine-readable reason (`bad_private_key`, ...).
public enum SigningReason: String, ReasonCode {
    /// Not a PEM private key, encrypted, too large, or of a type or size that is not accepted.
    case badPrivateKey = "bad_private_key"
    case keyGenerationFailed = "key_generation_failed"
    /// A service-account key file that is not one (not JSON, a member missing, not an RSA key).
    case badServiceAccount = "bad_service_account"
}

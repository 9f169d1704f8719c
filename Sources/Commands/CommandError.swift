// The one error type of the Commands module: a setting or a command line that cannot work, or a server that failed.
import CodedErrors

/// A configuration or usage error. Unlike the request errors of the other modules, its `detail` is the message the
/// operator reads (it names the setting or the argument and never echoes a secret), so `description` is the detail.
public struct CommandError: CodedError {
    public enum Code: String, ReasonCode {
        /// A setting is missing or malformed; `detail` names it.
        case invalidConfiguration = "invalid_configuration"
        /// A command's arguments are wrong; `detail` says how.
        case usage
        /// The responder could not start or stopped on a fatal server error; `detail` says why.
        case serverFailed = "server_failed"
    }

    public let code: Code
    public let detail: String

    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    /// The operator's message.
    public var description: String { detail }
}

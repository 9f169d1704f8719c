// `tokensignin risc configure|verify|status|enable|disable|show`: register the Cross-Account Protection receiver with
// Google, and switch and look at its stream.
import GoogleKeys
import IDToken
import SignIn
import Signing

/// The RISC stream commands (docs/risc.md). Exit 0 on a 2xx answer, 1 with Google's message on another, 2 for
/// bad arguments or an unreadable key file, 3 when Google could not be reached. The key and the JWT made from it
/// are never printed.
struct RiscCommands {
    private let io: CommandIO

    init(_ io: CommandIO) { self.io = io }

    static let usage = """
        usage: tokensignin risc configure --service-account FILE --receiver-url URL [--api URL]
               tokensignin risc verify --service-account FILE --state STRING [--api URL]
               tokensignin risc status|enable|disable|show --service-account FILE [--api URL]
        """

    /// The event types `configure` asks for: every one `POST /risc` acts on or records (docs/risc.md). `token-revoked`
    /// (one OAuth refresh token) is recorded only: tokensignin stores no refresh tokens.
    static let eventsRequested = [
        SecurityEvent.sessionsRevoked, SecurityEvent.tokensRevoked, SecurityEvent.tokenRevoked, SecurityEvent.accountDisabled,
        SecurityEvent.accountEnabled, SecurityEvent.accountCredentialChangeRequired, SecurityEvent.verification,
    ]
    /// The verbs, each one call to Google's RISC API.
    static let verbs = ["configure", "verify", "status", "enable", "disable", "show"]
    static let pushDelivery = "https://schemas.openid.net/secevent/risc/delivery-method/push"

    func run(_ arguments: [String]) -> Int32 {
        do throws(CommandError) {
            guard let verb = arguments.first, Self.verbs.contains(verb) else {
                throw CommandError(.usage, "risc needs configure, verify, status, enable, disable or show")
            }
            let options = try Arguments(arguments.dropFirst(), options: ["--service-account": .value, "--receiver-url": .value,
                                                                         "--state": .value, "--api": .value])
            guard options.positionals.isEmpty else { throw CommandError(.usage, "unexpected argument \(options.positionals[0])") }
            guard let keyFile = options.value("--service-account") else { throw CommandError(.usage, "--service-account FILE is required") }
            let client = try Self.client(api: options.value("--api"))
            let request: Request
            switch verb {
            case "configure":
                guard let url = options.value("--receiver-url") else { throw CommandError(.usage, "--receiver-url URL is required") }
                guard Self.isReceiverURL(url) else {
                    throw CommandError(.usage, "--receiver-url must be an https:// URL of your receiver, e.g. https://signin.example.com/risc")
                }
                guard options.value("--state") == nil else { throw CommandError(.usage, "--state belongs to risc verify") }
                request = .configure(url)
            case "verify":
                guard let state = options.value("--state"), !state.isEmpty, state.utf8.count <= 1024 else {
                    throw CommandError(.usage, "--state STRING (1 to 1024 bytes) is required")
                }
                guard options.value("--receiver-url") == nil else { throw CommandError(.usage, "--receiver-url belongs to risc configure") }
                request = .verify(state)
            default:
                guard options.value("--receiver-url") == nil, options.value("--state") == nil else {
                    throw CommandError(.usage, "risc \(verb) takes only --service-account and --api")
                }
                switch verb {
                case "enable": request = .enable
                case "disable": request = .disable
                case "show": request = .show
                default: request = .status
                }
            }
            let account = try serviceAccount(keyFile)
            return call(request, client, account)
        } catch {
            io.err("tokensignin risc: \(error.detail)\n\(Self.usage)")
            return ExitCode.usage
        }
    }

    private enum Request {
        case configure(String)
        case verify(String)
        case status
        case enable
        case disable
        case show
    }

    /// Reads the key file; one readable by group or others still works, with a warning.
    private func serviceAccount(_ path: String) throws(CommandError) -> ServiceAccount {
        guard let bytes = io.readFile(path, ServiceAccount.maxFileBytes + 1) else {
            throw CommandError(.usage, "cannot read the service account key file \(path)")
        }
        if let mode = io.fileMode(path), mode & 0o077 != 0 {
            io.err("tokensignin risc: warning: \(path) is readable by other users (mode \(String(mode & 0o777, radix: 8))); chmod 600 it")
        }
        do {
            return try ServiceAccount(json: bytes)
        } catch {
            throw CommandError(.usage, "\(path) is not a service account key file: \(error.detail)")
        }
    }

    private func call(_ request: Request, _ client: RiscClient, _ account: ServiceAccount) -> Int32 {
        let bearer = account.assertion(audience: RiscClient.audience, now: io.now())
        let answer: RiscClient.Answer
        let name: String
        do throws(KeyFetchFailure) {
            switch request {
            case .configure(let url):
                name = "configure"
                let body: JSONValue = .object([
                    ("delivery", .object([("delivery_method", .string(Self.pushDelivery)), ("url", .string(url))])),
                    ("events_requested", .array(Self.eventsRequested.map { .string($0) })),
                ])
                answer = try client.updateStream(body.encoded(), bearer: bearer)
            case .verify(let state):
                name = "verify"
                answer = try client.verifyStream(JSONValue.object([("state", .string(state))]).encoded(), bearer: bearer)
            case .status:
                name = "status"
                answer = try client.streamStatus(bearer: bearer)
            case .enable, .disable:
                let enable = if case .enable = request { true } else { false }
                name = enable ? "enable" : "disable"
                answer = try client.updateStreamStatus(JSONValue.object([("status", .string(enable ? "enabled" : "disabled"))]).encoded(),
                                                       bearer: bearer)
            case .show:
                name = "show"
                answer = try client.stream(bearer: bearer)
            }
        } catch {
            io.err("tokensignin risc: Google's RISC API could not be reached: \(error.description)")
            return ExitCode.unavailable
        }
        guard answer.isSuccess else {
            let message = answer.errorMessage.map(OperatorCommands.printable) ?? "(no message)"
            io.err("tokensignin risc \(name): Google answered \(answer.status): \(message)")
            return ExitCode.failed
        }
        switch request {
        case .configure(let url):
            io.out("risc configure: Google delivers \(Self.eventsRequested.count) event types to \(url) (as \(account.clientEmail))")
        case .verify:
            io.out("risc verify: Google will push a verification event with this state to the receiver")
        case .status, .show:
            io.out(OperatorCommands.printable(String(decoding: answer.body, as: UTF8.self)))
        case .enable:
            io.out("risc enable: Google sends security events to the stream's receiver")
        case .disable:
            io.out("risc disable: Google sends the receiver no security events until risc enable")
        }
        return ExitCode.ok
    }

    /// Where the service account's bearer token goes: Google's RISC API, or the `--api` the operator gave, which must
    /// be `https://` (or `http://` to a loopback host, for tests) without user information: never anywhere else.
    static func client(api: String?) throws(CommandError) -> RiscClient {
        var problem: String?
        guard let client = RiscClient(api: api ?? RiscClient.defaultAPI, problem: &problem) else {
            throw CommandError(.usage, "--api: \(problem ?? "not a URL")")
        }
        return client
    }

    /// `https://host[:port]/path`: what Google can deliver to.
    static func isReceiverURL(_ url: String) -> Bool {
        guard url.hasPrefix("https://"), url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return false }
        let rest = url.dropFirst("https://".count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return !authority.isEmpty && !authority.contains("@") && Origin(parsing: "https://\(authority)") != nil
    }
}

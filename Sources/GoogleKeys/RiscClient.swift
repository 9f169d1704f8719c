// Google's RISC stream management API (Cross-Account Protection), for `tokensignin risc configure|verify|status|
// enable|disable|show`.
import FoundationEssentials

/// The calls that register, check, switch on and off, and show the stream of security events Google pushes to `POST /risc`. Each
/// is authorised by a self-signed service-account JWT the caller makes (`ServiceAccount.assertion`).
public struct RiscClient: Sendable {
    public static let defaultAPI = "https://risc.googleapis.com"
    /// The audience of the self-signed JWT.
    public static let audience = "https://risc.googleapis.com/google.identity.risc.v1beta.RiscManagementService"

    /// Google's answer: its status, its body, and the message of a Google API error body
    /// (`{"error": {"message": ...}}`) when there is one.
    public struct Answer: Sendable, Equatable {
        public var status: Int
        public var body: [UInt8]
        public var errorMessage: String?
        public var isSuccess: Bool { (200...299).contains(status) }
    }

    public let api: String
    private let limits: FetchLimits

    /// `api` is `https://...` (or `http://` to a loopback host, for tests); nil with the reason otherwise.
    public init?(api: String = RiscClient.defaultAPI, problem: inout String?) {
        var base = api
        while base.hasSuffix("/") { base.removeLast() }
        if let why = KeyFetch.urlProblem(base) {
            problem = why
            return nil
        }
        self.api = base
        limits = FetchLimits(maxBodyBytes: 1 << 20, connectTimeoutMilliseconds: 10_000, totalTimeoutMilliseconds: 30_000)
    }

    /// `POST {api}/v1beta/stream:update` with `body` (the stream's delivery and requested events).
    public func updateStream(_ body: [UInt8], bearer: String) throws(KeyFetchFailure) -> Answer {
        try call("/v1beta/stream:update", body: body, bearer: bearer)
    }

    /// `POST {api}/v1beta/stream:verify` with `body` (`{"state": ...}`): Google then pushes a verification event.
    public func verifyStream(_ body: [UInt8], bearer: String) throws(KeyFetchFailure) -> Answer {
        try call("/v1beta/stream:verify", body: body, bearer: bearer)
    }

    /// `GET {api}/v1beta/stream/status`.
    public func streamStatus(bearer: String) throws(KeyFetchFailure) -> Answer {
        try call("/v1beta/stream/status", body: nil, bearer: bearer)
    }

    /// `POST {api}/v1beta/stream/status:update` with `body` (`{"status": "enabled"}` or `"disabled"`): whether Google
    /// delivers events at all.
    public func updateStreamStatus(_ body: [UInt8], bearer: String) throws(KeyFetchFailure) -> Answer {
        try call("/v1beta/stream/status:update", body: body, bearer: bearer)
    }

    /// `GET {api}/v1beta/stream`: the stream's configuration (delivery, the event types requested and delivered).
    public func stream(bearer: String) throws(KeyFetchFailure) -> Answer {
        try call("/v1beta/stream", body: nil, bearer: bearer)
    }

    private func call(_ path: String, body: [UInt8]?, bearer: String) throws(KeyFetchFailure) -> Answer {
        var headers = ["Authorization: Bearer \(bearer)", "Accept: application/json"]
        if body != nil { headers.append("Content-Type: application/json") }
        let response = try KeyFetch.send(api + path, body: body, headers: headers, limits: limits, userAgent: "tokensignin-risc")
        return Answer(status: response.status, body: response.body, errorMessage: Self.errorMessage(response.body))
    }

    private struct ErrorBody: Decodable {
        struct Inner: Decodable { var message: String? }
        var error: Inner?
    }

    static func errorMessage(_ body: [UInt8]) -> String? {
        guard !body.isEmpty, let decoded = try? JSONDecoder().decode(ErrorBody.self, from: Data(body)) else { return nil }
        return decoded.error?.message
    }
}

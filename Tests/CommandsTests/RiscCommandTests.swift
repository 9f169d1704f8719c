// `tokensignin risc configure|verify|status|enable|disable|show` against a local server standing in for Google's RISC API: the
// self-signed JWT (signature and claims), the request bodies, and every exit code.
@testable import Commands
import Foundation
@testable import GoogleKeys
@testable import IDToken
import Signing
import TestSupport
import Testing

@Suite struct RiscCommandTests {
    let key: DevelopmentKey
    let keyFile: String
    let email = "risc@tokensignin-test.iam.gserviceaccount.com"

    init() throws {
        key = try DevelopmentKey.generate(.rsa2048)
        keyFile = NSTemporaryDirectory() + "risc-key-\(randomHex(4)).json"
        let object: [String: Any] = ["type": "service_account", "private_key_id": key.kid, "private_key": key.pem,
                                     "client_email": email, "project_id": "tokensignin-test"]
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: keyFile))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile)
    }

    /// Checks the request's bearer JWT: signed by the account's key, with the claims Google's RISC API wants.
    func expectAuthorised(_ request: RecordingServer.Recorded) throws {
        let authorization = try #require(request.headers["authorization"])
        #expect(authorization.hasPrefix("Bearer "))
        let jwt = String(authorization.dropFirst("Bearer ".count))
        let verified = try JWS.verify(jwt, keys: KeySet(jwks: Array(key.jwks.utf8))).get()
        #expect(verified.keyID == key.kid && verified.algorithm == .rs256)
        let claims = try #require(JSONSerialization.jsonObject(with: Data(verified.payload)) as? [String: Any])
        #expect(claims["iss"] as? String == email && claims["sub"] as? String == email)
        #expect(claims["aud"] as? String == "https://risc.googleapis.com/google.identity.risc.v1beta.RiscManagementService")
        let iat = try #require(claims["iat"] as? Int), exp = try #require(claims["exp"] as? Int)
        #expect(iat == 1_800_000_000 && exp > iat && exp - iat <= 3600)
    }

    func expectNoSecrets(_ run: CommandRun, _ server: RecordingServer) {
        let printed = (run.out + run.err).joined(separator: "\n")
        #expect(!printed.contains("PRIVATE KEY") && !printed.contains(String(key.pem.split(separator: "\n")[1])))
        for request in server.requests {
            if let jwt = request.headers["authorization"]?.split(separator: " ").last { #expect(!printed.contains(String(jwt))) }
        }
    }

    @Test func configureRegistersThePushDeliveryAndEveryEventType() throws {
        let server = try RecordingServer()
        let run = runCommand(["risc", "configure", "--service-account", keyFile, "--receiver-url", "https://signin.example.com/risc",
                              "--api", server.base])
        #expect(run.status == 0, "\(run.err)")
        #expect(run.out == ["risc configure: Google delivers 7 event types to https://signin.example.com/risc (as \(email))"])
        let request = try #require(server.requests.first)
        #expect(server.requests.count == 1 && request.method == "POST" && request.path == "/v1beta/stream:update")
        #expect(request.headers["content-type"] == "application/json")
        try expectAuthorised(request)
        let body = try #require(JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        let delivery = try #require(body["delivery"] as? [String: Any])
        #expect(delivery["delivery_method"] as? String == "https://schemas.openid.net/secevent/risc/delivery-method/push")
        #expect(delivery["url"] as? String == "https://signin.example.com/risc")
        #expect(body["events_requested"] as? [String] == [
            "https://schemas.openid.net/secevent/risc/event-type/sessions-revoked",
            "https://schemas.openid.net/secevent/oauth/event-type/tokens-revoked",
            "https://schemas.openid.net/secevent/oauth/event-type/token-revoked",
            "https://schemas.openid.net/secevent/risc/event-type/account-disabled",
            "https://schemas.openid.net/secevent/risc/event-type/account-enabled",
            "https://schemas.openid.net/secevent/risc/event-type/account-credential-change-required",
            "https://schemas.openid.net/secevent/risc/event-type/verification",
        ])
        expectNoSecrets(run, server)
    }

    @Test func verifySendsTheStateAndStatusPrintsGooglesAnswer() throws {
        let server = try RecordingServer()
        let verify = runCommand(["risc", "verify", "--service-account", keyFile, "--state", "check-42", "--api", server.base + "/"])
        #expect(verify.status == 0, "\(verify.err)")
        try server.answer("/v1beta/stream/status", status: 200, body: #"{"status":"enabled"}"#)
        let status = runCommand(["risc", "status", "--service-account", keyFile, "--api", server.base])
        #expect(status.status == 0 && status.out == [#"{"status":"enabled"}"#], "\(status.err)")
        let requests = server.requests
        #expect(requests.map { "\($0.method) \($0.path)" } == ["POST /v1beta/stream:verify", "GET /v1beta/stream/status"])
        #expect(try JSONSerialization.jsonObject(with: Data(requests[0].body)) as? [String: String] == ["state": "check-42"])
        #expect(requests[1].body.isEmpty)
        for request in requests { try expectAuthorised(request) }
        expectNoSecrets(status, server)
    }

    /// Item 14: `enable` and `disable` switch the stream (`stream/status:update`), `show` prints its configuration
    /// (`GET stream`), each authorised like the others and printing nothing secret.
    @Test(arguments: [("enable", #"{"status":"enabled"}"#), ("disable", #"{"status":"disabled"}"#)])
    func enableAndDisableUpdateTheStreamStatus(verb: String, body: String) throws {
        let server = try RecordingServer()
        let run = runCommand(["risc", verb, "--service-account", keyFile, "--api", server.base])
        #expect(run.status == 0, "\(run.err)")
        #expect(run.out.count == 1 && run.out[0].hasPrefix("risc \(verb): Google sends"), "\(run.out)")
        let request = try #require(server.requests.first)
        #expect(server.requests.count == 1 && request.method == "POST" && request.path == "/v1beta/stream/status:update")
        #expect(request.headers["content-type"] == "application/json")
        #expect(String(decoding: request.body, as: UTF8.self) == body)
        try expectAuthorised(request)
        expectNoSecrets(run, server)
    }

    @Test func showPrintsTheStreamGoogleHasPrintableOnly() throws {
        let server = try RecordingServer()
        try server.answer("/v1beta/stream", status: 200,
                          body: #"{"delivery":{"delivery_method":"https://schemas.openid.net/secevent/risc/delivery-method/push","url":"https://signin.example.com/risc"},"events_requested":["x"],"note":"\u001b[31m"}"# + "\u{1b}[2J")
        let run = runCommand(["risc", "show", "--service-account", keyFile, "--api", server.base])
        #expect(run.status == 0, "\(run.err)")
        let requests = server.requests
        #expect(requests.map { "\($0.method) \($0.path)" } == ["GET /v1beta/stream"] && requests[0].body.isEmpty)
        try expectAuthorised(requests[0])
        #expect(run.out.count == 1 && run.out[0].contains(#""url":"https://signin.example.com/risc""#))
        #expect(!run.out[0].contains("\u{1b}"), "a terminal escape from the answer is not printed as is")
        try server.answer("/v1beta/stream/status:update", status: 403, body: #"{"error":{"code":403,"message":"RISC API not enabled"}}"#)
        let refused = runCommand(["risc", "disable", "--service-account", keyFile, "--api", server.base])
        #expect(refused.status == 1 && refused.err == ["tokensignin risc disable: Google answered 403: RISC API not enabled"])
        let down = runCommand(["risc", "show", "--service-account", keyFile, "--api", "http://127.0.0.1:9"])
        #expect(down.status == 3)
        expectNoSecrets(run, server)
    }

    @Test func googlesRefusalIsOneWithItsMessageAndAnUnreachableAPIIsThree() throws {
        let server = try RecordingServer()
        try server.answer("/v1beta/stream:update", status: 403,
                          body: #"{"error":{"code":403,"message":"The caller does not have permission","status":"PERMISSION_DENIED"}}"#)
        let refused = runCommand(["risc", "configure", "--service-account", keyFile, "--receiver-url", "https://signin.example.com/risc",
                                  "--api", server.base])
        #expect(refused.status == 1)
        #expect(refused.err == ["tokensignin risc configure: Google answered 403: The caller does not have permission"])
        let down = runCommand(["risc", "status", "--service-account", keyFile, "--api", "http://127.0.0.1:9"])
        #expect(down.status == 3 && down.err.first?.contains("could not be reached") == true)
    }

    @Test func aKeyFileOthersCanReadWorksWithAWarning() throws {
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyFile)
        let server = try RecordingServer()
        let run = runCommand(["risc", "status", "--service-account", keyFile, "--api", server.base])
        #expect(run.status == 0)
        #expect(run.err.first?.contains("is readable by other users (mode 644)") == true, "\(run.err)")
    }

    /// The bearer token goes to Google's RISC API unless --api names another place explicitly.
    @Test func withoutAnAPITheBearerGoesOnlyToGooglesRiscAPI() throws {
        #expect(try RiscCommands.client(api: nil).api == "https://risc.googleapis.com")
        #expect(try RiscCommands.client(api: "https://risc.example/").api == "https://risc.example")
        #expect(try RiscCommands.client(api: "http://127.0.0.1:9").api == "http://127.0.0.1:9")
    }

    /// (arguments, what the message says) — every one a usage error (exit 2) that calls nobody.
    @Test(arguments: [
        (["risc"], "risc needs configure, verify, status, enable, disable or show"),
        (["risc", "frobnicate"], "risc needs configure, verify, status, enable, disable or show"),
        (["risc", "enable"], "--service-account FILE is required"),
        (["risc", "enable", "--service-account", "KEY", "--state", "x"], "risc enable takes only"),
        (["risc", "disable", "--service-account", "KEY", "--receiver-url", "https://signin.example.com/risc"], "risc disable takes only"),
        (["risc", "show", "--service-account", "KEY", "extra"], "unexpected argument extra"),
        (["risc", "status"], "--service-account FILE is required"),
        (["risc", "status", "--service-account", "/nonexistent/key.json"], "cannot read the service account key file"),
        (["risc", "configure", "--service-account", "KEY"], "--receiver-url URL is required"),
        (["risc", "configure", "--service-account", "KEY", "--receiver-url", "http://signin.example.com/risc"], "must be an https:// URL"),
        (["risc", "configure", "--service-account", "KEY", "--receiver-url", "https://user@evil.example/risc"], "must be an https:// URL"),
        (["risc", "verify", "--service-account", "KEY"], "--state STRING"),
        (["risc", "status", "--service-account", "KEY", "--state", "x"], "risc status takes only"),
        (["risc", "status", "--service-account", "KEY", "--api", "http://google.example"], "--api: http:// is allowed only to a loopback host"),
        (["risc", "status", "--service-account", "KEY", "--api", "http://10.0.0.1:8080"], "--api: http:// is allowed only to a loopback host"),
        (["risc", "status", "--service-account", "KEY", "--api", "ftp://risc.googleapis.com"], "--api:"),
        (["risc", "status", "--service-account", "KEY", "--api", "https://user:secret@risc.example"], "--api:"),
        (["risc", "status", "--service-account", "KEY", "--api", "risc.googleapis.com"], "--api:"),
        (["risc", "status", "--service-account", "KEY", "--bogus", "1"], "unknown option '--bogus'"),
    ])
    func badArgumentsAreUsageErrors(arguments: [String], message: String) throws {
        let run = runCommand(arguments.map { $0 == "KEY" ? keyFile : $0 })
        #expect(run.status == 2)
        #expect(run.err.joined(separator: "\n").contains(message), "\(run.err)")
    }

    @Test func aFileThatIsNotAServiceAccountKeyIsAUsageError() throws {
        let other = NSTemporaryDirectory() + "not-a-key-\(randomHex(4)).json"
        try #"{"type": "authorized_user"}"#.write(toFile: other, atomically: true, encoding: .utf8)
        let run = runCommand(["risc", "status", "--service-account", other])
        #expect(run.status == 2 && run.err.joined().contains("is not a service account key file"), "\(run.err)")
    }
}

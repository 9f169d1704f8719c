// Restarts that drop nothing: `serve` restarted again and again under sign-in load, through nginx keeping its
// FastCGI connections, with the socket held across restarts (scripts/socket-holder, as systemd does).
import Foundation
import Testing
import TestSupport

@Suite struct RestartEndToEndTests {
    /// Ten restarts while four clients sign in as fast as they can: every sign-in is answered 200 (none 502),
    /// and every session handed out is valid afterwards.
    @Test func tenRestartsUnderSignInLoadDropNothing() throws {
        let stack = try Stack("restart", launch: .holder)
        let clients = 4, perClient = 500
        let tokens = try mintTokens(stack, count: clients * perClient)
        let work = stack.directory.appendingPathComponent("load").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)

        var loads: [pid_t] = []
        for client in 0..<clients {
            let entries = (0..<perClient).map { index in
                curlEntry(url: "https://127.0.0.1:\(stack.port)/tokensignin", headers: ["Content-Type: application/json"],
                          data: #"{"idToken":"\#(tokens[client * perClient + index])"}"#, output: "\(work)/body-\(client)-\(index)")
            }
            try entries.joined(separator: "next\n").write(toFile: "\(work)/signin-\(client).curl", atomically: true, encoding: .utf8)
            loads.append(try spawnCurl(config: "\(work)/signin-\(client).curl", codes: "\(work)/codes-\(client)"))
        }

        var restartsUnderLoad = 0
        while restartsUnderLoad < 10 {
            try stack.restartServer()
            guard loads.contains(where: { isRunning($0) }) else { break }
            restartsUnderLoad += 1
        }
        for pid in loads { _ = waitForExit(pid) }
        #expect(restartsUnderLoad >= 10, "the load ended after \(restartsUnderLoad) restarts: make it longer")
        #expect(stack.holderGeneration >= 11)

        var sessions: [String] = []
        for client in 0..<clients {
            let codes = try String(contentsOfFile: "\(work)/codes-\(client)", encoding: .utf8).split(separator: "\n")
            #expect(codes.count == perClient)
            let failed = codes.enumerated().filter { $0.element != "200" }
            #expect(failed.isEmpty, "client \(client): \(failed.count) answers not 200, first \(failed.prefix(3).map { "\($0.offset): \($0.element)" })")
            for index in 0..<perClient {
                let body = (try? Data(contentsOf: URL(fileURLWithPath: "\(work)/body-\(client)-\(index)"))) ?? Data()
                let json = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
                if let token = (json?["session"] as? [String: Any])?["token"] as? String { sessions.append(token) }
            }
        }
        #expect(sessions.count == clients * perClient)
        #expect(try stack.count("signin.sessions") == clients * perClient)

        // Every session a client received is valid: checked through nginx, as the protected site would.
        let checks = sessions.enumerated().map { index, token in
            curlEntry(url: "https://127.0.0.1:\(stack.port)/auth/session", headers: ["Authorization: Bearer \(token)"],
                      data: nil, output: "/dev/null")
        }
        try checks.joined(separator: "next\n").write(toFile: "\(work)/check.curl", atomically: true, encoding: .utf8)
        _ = waitForExit(try spawnCurl(config: "\(work)/check.curl", codes: "\(work)/check-codes"))
        let checkCodes = try String(contentsOfFile: "\(work)/check-codes", encoding: .utf8).split(separator: "\n")
        #expect(checkCodes.count == sessions.count)
        #expect(checkCodes.allSatisfy { $0 == "200" }, "\(checkCodes.filter { $0 != "200" }.count) sessions not valid")
        #expect(stack.serverLog.components(separatedBy: "event=stopped").count - 1 >= 10, "every restart was a graceful stop")
        // Secrets do not outlive the test.
        try? FileManager.default.removeItem(atPath: work)
    }
}

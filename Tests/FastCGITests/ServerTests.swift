// The Server driven by libfcgi's own client (cgi-fcgi) over a unix socket and TCP.
@testable import FastCGI
import Foundation
import Glibc
import Synchronization
import Testing

@Suite(.serialized) struct ServerTests {
    @Test func paramsAndBinaryBodyArriveIntactOverUnixSocket() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 2, maxBodyBytes: 1024),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        let body: [UInt8] = Array(0...255) + [0, 13, 10, 0]
        let result = try cgiFCGI(connect: dir.file("s"), params: [
            "REQUEST_METHOD": "POST", "DOCUMENT_URI": "/tokensignin", "QUERY_STRING": "a=1&b=%20",
            "CONTENT_TYPE": "application/octet-stream", "REMOTE_ADDR": "192.0.2.7",
            "HTTP_USER_AGENT": "Tester/1.0", "HTTP_X_EMPTY": "", "HTTP_X_UTF8": "Zoë 🙂",
        ], body: body)
        #expect(result.status == 0)
        let request = try #require(recorder.requests.first)
        #expect(request.body == body)
        #expect(!request.bodyTooLarge)
        #expect(request.method == "POST")
        #expect(request.path == "/tokensignin")
        #expect(request.query == "a=1&b=%20")
        #expect(request.contentType == "application/octet-stream")
        #expect(request.remoteAddress == "192.0.2.7")
        #expect(request.header("user-agent") == "Tester/1.0")
        #expect(request.header("X-Empty") == "")
        #expect(request.header("X-UTF8") == "Zoë 🙂")
        #expect(request.params["CONTENT_LENGTH"] == String(body.count))
    }

    /// Each worker takes the server's scheduling policy before it serves (SCHED_BATCH = 3, SCHED_OTHER = 0), or,
    /// with `inherit`, keeps the one of the thread that started the server. The server is started from a thread
    /// under the other policy (SCHED_BATCH for `normal`), so a worker that skipped the change would answer
    /// the wrong one; every thread that answered is checked.
    /// `adaptive` is `inherit` for workers started under another policy than SCHED_OTHER, and keeps SCHED_OTHER
    /// where nothing batches (this server's one lane does not).
    @Test(arguments: [(WorkerScheduling.batch, Int32(0), Int32(3)), (.normal, Int32(3), Int32(0)),
                      (.inherit, Int32(3), Int32(3)), (.inherit, Int32(0), Int32(0)),
                      (.adaptive, Int32(3), Int32(3)), (.adaptive, Int32(0), Int32(0))])
    func workersRunUnderTheServersSchedulingPolicy(scheduling: WorkerScheduling, starter: Int32, policy: Int32) throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 3)],
                                limits: Limits(maxBodyBytes: 16), scheduling: scheduling)
        let before = sched_getscheduler(0)
        var parameter = sched_param(sched_priority: 0)
        // The server's threads inherit this thread's policy (RunningServer starts `run` from it).
        #expect(sched_setscheduler(0, starter, &parameter) == 0)
        let running = RunningServer(server) { _ in
            Response(status: 200, contentType: "text/plain", body: "\(pthread_self()) \(sched_getscheduler(0))")
        }
        #expect(sched_setscheduler(0, before, &parameter) == 0)
        defer { running.stop() }
        var threads: Set<String> = []
        for _ in 0..<12 {
            let result = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET", "REQUEST_URI": "/"])
            let answer = String(decoding: try CGIResponse(result.stdout).body, as: UTF8.self).split(separator: " ")
            #expect(answer.count == 2 && answer.last.map(String.init) == "\(policy)")
            threads.insert(String(answer.first ?? ""))
        }
        #expect(!threads.isEmpty)
        #expect(sched_getscheduler(0) == before)
    }

    /// `adaptive`: the worker about to wait for the next request takes SCHED_BATCH (3) when the last request read
    /// may join a batch of a lane that is not quick (`/slow`, a sign-in's placement), and SCHED_OTHER (0) after
    /// any other: a quick lane's (`/check`) or a slow lane's that does not batch (`/alone`). Requests go one at a
    /// time, each answering the policy of the worker that read it, so each answer is the previous request's kind.
    /// Workers started under SCHED_BATCH keep it through the same requests (`adaptive` is `inherit` for them).
    @Test(arguments: [(Int32(0), ["0", "3", "3", "0", "0", "3", "0", "0", "3", "3", "3", "0"]),
                      (Int32(3), Array(repeating: "3", count: 12))])
    func adaptiveReadersFollowTheLastRequestRead(starter: Int32, expected: [String]) throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")),
                                lanes: [Lane(name: "default", workers: 2, batch: 4), Lane(name: "checks", workers: 2, batch: 4, quick: true)],
                                limits: Limits(maxBodyBytes: 16), scheduling: .adaptive)
        let before = sched_getscheduler(0)
        var parameter = sched_param(sched_priority: 0)
        #expect(sched_setscheduler(0, starter, &parameter) == 0)
        let running = RunningServer(server, place: { request in
            switch request.path {
            case "/slow": Placement(lane: 0)
            case "/alone": Placement(lane: 0, batches: false)
            default: Placement(lane: 1)
            }
        }) { _ in Response(status: 200, contentType: "text/plain", body: "\(sched_getscheduler(0))") }
        #expect(sched_setscheduler(0, before, &parameter) == 0)
        defer { running.stop() }
        let paths = ["/slow", "/slow", "/check", "/check", "/slow", "/alone", "/alone", "/slow", "/slow", "/slow", "/check", "/slow"]
        var answers: [String] = []
        for path in paths {
            let result = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET", "REQUEST_URI": path])
            answers.append(String(decoding: try CGIResponse(result.stdout).body, as: UTF8.self))
        }
        #expect(answers == expected)
        #expect(sched_getscheduler(0) == before)
    }

    /// What the placement matched the request to comes back on the request the handler gets, so the caller matches
    /// once (tokensignin's route table).
    @Test func thePlacementsRouteReachesTheHandler() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)], limits: Limits(maxBodyBytes: 16))
        let running = RunningServer(server, place: { request in Placement(lane: 0, route: request.path == "/seven" ? 7 : -1) }) {
            Response(status: 200, contentType: "text/plain", body: "\($0.route)")
        }
        defer { running.stop() }
        for (path, route) in [("/seven", "7"), ("/other", "-1")] {
            let result = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET", "REQUEST_URI": path])
            #expect(String(decoding: try CGIResponse(result.stdout).body, as: UTF8.self) == route)
        }
    }

    @Test func emptyBodyOverTCP() throws {
        let recorder = Recorder()
        let server = try Server(listen: .tcp(host: "127.0.0.1", port: 0), workers: 1, maxBodyBytes: 1024)
        let running = RunningServer(server, handler: recordingHandler(recorder))
        defer { running.stop() }
        #expect(server.address.hasPrefix("127.0.0.1:") && !server.address.hasSuffix(":0"))
        let result = try cgiFCGI(connect: server.address, params: ["REQUEST_METHOD": "GET", "REQUEST_URI": "/x/y?z=1"])
        let response = try CGIResponse(result.stdout)
        #expect(response.headLines.first == "Status: 200 OK")
        let request = try #require(recorder.requests.first)
        #expect(request.body.isEmpty)
        #expect(!request.bodyTooLarge)
        #expect(request.path == "/x/y")  // REQUEST_URI without its query when DOCUMENT_URI is absent
    }

    @Test func statusLineHeadersAndBodyAreWrittenInOrder() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16)) { _ in
            Response(status: 405, headers: [("Allow", "POST"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")],
                     body: Array("{\"error\":\"x\"}".utf8))
        }
        defer { running.stop() }
        let result = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET"])
        let raw = String(decoding: result.stdout, as: UTF8.self)
        #expect(raw == "Status: 405 Method Not Allowed\r\nAllow: POST\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
            + "Content-Length: 13\r\n\r\n{\"error\":\"x\"}")
    }

    /// Fail closed: a response with a header that cannot be sent is replaced by a generic 500 (never sent with
    /// the header left out, which once let a 200 without its identity header through), and reported.
    @Test(arguments: [
        ("X-Value", "a\r\nX-Injected: yes", false), ("X-Value", "a\nX-Injected: yes", false), ("X-Value", "a\rb", false),
        ("X-Value", "nul\u{0}", false), ("X-Value", "bell\u{7}", false), ("X-Value", "del\u{7f}", false),
        ("Bad Name", "v", false), ("", "v", false), ("X:Y", "v", false), ("Status", "200", false), ("status", "200", false),
        ("X-Value", "tab\tand space ok", true), ("X-Value", "non-ascii é ok", true), ("X-Value", "", true),
    ])
    func responsesWithUnsendableHeadersBecomeA500(name: String, value: String, sent: Bool) throws {
        let dir = try TempDir()
        let reports = Recorder()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 16))
        let running = RunningServer(server, classify: { _ in 0 }, overloaded: Response(status: 503),
                                    report: { error in reports.record(Request(params: ["code": error.code.name])) },
                                    handlers: [{ _ in Response(status: 200, headers: [("X-Before", "1"), (name, value), ("X-After", "1")],
                                                               body: Array("secret".utf8)) }])
        defer { running.stop() }
        let response = try CGIResponse(try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET"]).stdout)
        if sent {
            #expect(response.headLines.first == "Status: 200 OK")
            #expect(response.values(name) == [value.trimmingCharacters(in: .whitespaces)])
            #expect(response.values("X-After") == ["1"])
            #expect(server.statistics.invalidResponses == 0)
        } else {
            #expect(response.headLines.first == "Status: 500 Internal Server Error")
            #expect(response.values("X-Before").isEmpty && response.values("X-After").isEmpty)
            #expect(response.values("X-Injected").isEmpty)
            #expect(String(decoding: response.body, as: UTF8.self) == "internal server error\n")
            #expect(server.statistics.invalidResponses == 1)
            #expect(reports.requests.map { $0.params["code"] } == ["invalid_response"])
        }
        #expect(response.headLines.allSatisfy { !$0.contains("\r") && !$0.contains("\n") })
    }

    @Test(arguments: ["Bad Name", "", "X:Y", "Status", "STATUS", "X-\u{1}"])
    func aHeadWithAnInvalidOrReservedNameIsNotEncoded(name: String) {
        #expect(Response(status: 200, headers: [(name, "v")]).encodedHead() == nil)
    }

    /// The word-at-a-time check agrees with the byte rule for every byte value at every place of a word and of
    /// the tail, next to clean bytes and next to a tab (which makes a word be looked at byte by byte).
    @Test(arguments: [UInt8(ascii: "a"), 0x09, 0xC3])
    func fieldValueCheckAgreesWithTheByteRuleEverywhere(filler: UInt8) {
        for byte in 0...255 {
            let allowed = byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
            for length in [1, 7, 8, 9, 16, 19] {
                for place in 0..<length {
                    var bytes = [UInt8](repeating: filler, count: length)
                    bytes[place] = UInt8(byte)
                    let verdict = bytes.withUnsafeBufferPointer { Response.isFieldValue($0) }
                    if verdict != allowed { Issue.record("byte \(byte) at \(place) of \(length): \(verdict)") }
                }
            }
        }
        #expect([UInt8]().withUnsafeBufferPointer { Response.isFieldValue($0) })
    }

    @Test func aHeadIsEncodedByteForByteInOrder() {
        let response = Response(status: 200, headers: [("Content-Type", "application/json"), ("Set-Cookie", "a=1"),
                                                       ("X-Name", "é\tx"), ("Set-Cookie", "b=2"), ("X-Empty", "")],
                                body: Array("abc".utf8))
        #expect(String(decoding: response.encodedHead() ?? [], as: UTF8.self) == """
            Status: 200 OK\r\nContent-Type: application/json\r\nSet-Cookie: a=1\r\nX-Name: é\tx\r\nSet-Cookie: b=2\r\n\
            X-Empty: \r\nContent-Length: 3\r\n\r\n
            """)
        let sized = Response(status: 200, headers: [("content-length", "3")], body: Array("abc".utf8))
        #expect(String(decoding: sized.encodedHead() ?? [], as: UTF8.self) == "Status: 200 OK\r\ncontent-length: 3\r\n\r\n")
    }

    @Test(arguments: [(204, "Status: 204 No Content\r\n\r\n"), (999, "Status: 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"),
                      (299, "Status: 299\r\nContent-Length: 0\r\n\r\n")])
    func statusLineForUnusualCodes(status: Int, head: String) {
        #expect(String(decoding: Response(status: status).encodedHead() ?? [], as: UTF8.self) == head)
    }

    @Test func bodyLongerThanTheCapIsNotReadAndFlagged() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 8),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        let atCap = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "POST"], body: Array("12345678".utf8))
        #expect(atCap.status == 0)
        _ = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "POST"], body: Array("123456789".utf8))
        // A declared length far beyond the cap is refused without reading what follows.
        _ = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "POST", "CONTENT_LENGTH": "1000000"],
                        body: Array("short".utf8))
        let requests = recorder.requests
        try #require(requests.count == 3)
        #expect(requests[0].body == Array("12345678".utf8) && !requests[0].bodyTooLarge)
        #expect(requests[1].body.isEmpty && requests[1].bodyTooLarge)
        #expect(requests[2].body.isEmpty && requests[2].bodyTooLarge)
    }

    @Test func lyingContentLengthIsCappedAtMaxBodyBytes() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 8),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        // cgi-fcgi sends CONTENT_LENGTH bytes of stdin; a non-numeric value makes us read to the end, capped.
        _ = try runProcess("/usr/bin/cgi-fcgi", ["-bind", "-connect", dir.file("s")],
                           environment: ["REQUEST_METHOD": "POST", "CONTENT_LENGTH": "20", "HTTP_X": "1"],
                           input: Array(repeating: 65, count: 20))
        let request = try #require(recorder.requests.first)
        #expect(request.bodyTooLarge)
        #expect(request.body.isEmpty)
    }

    @Test(arguments: [(nil, ContentLength.unknown), ("", .unknown), ("12a", .unknown), ("-1", .unknown),
                      ("0", .length(0)), ("42", .length(42)), ("99999999999999999999999", .tooLarge)])
    func contentLengthParsing(text: String?, expected: ContentLength) {
        #expect(ContentLength(text) == expected)
    }

    @Test func workersServeSlowRequestsInParallel() throws {
        let dir = try TempDir()
        let workers = 4
        let inside = Latch()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: workers, maxBodyBytes: 16)) { _ in
            inside.signal()
            // Only answer once every worker holds a request at the same time.
            let together = inside.wait(for: workers, seconds: 15)
            return Response(status: 200, contentType: "text/plain", body: together ? "together" : "alone")
        }
        defer { running.stop() }
        let outputs = Mutex<[String]>([])
        let finished = Latch()
        for _ in 0..<workers {
            Thread {
                let result = try? cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET"])
                let body = (try? CGIResponse(result?.stdout ?? [])).map { String(decoding: $0.body, as: UTF8.self) }
                outputs.withLock { $0.append(body ?? "failed") }
                finished.signal()
            }.start()
        }
        #expect(finished.wait(for: workers, seconds: 30))
        #expect(outputs.withLock { $0 } == Array(repeating: "together", count: workers))
    }

    @Test func stopLetsTheInFlightRequestFinishThenRunReturns() throws {
        let dir = try TempDir()
        let entered = Latch()
        let release = Latch()
        let server = try Server(listen: .unix(dir.file("s")), workers: 2, maxBodyBytes: 16)
        let running = RunningServer(server) { _ in
            entered.signal()
            _ = release.wait(for: 1, seconds: 20)
            return Response(status: 200, contentType: "text/plain", body: "finished")
        }
        let output = Mutex<ProcessResult?>(nil)
        let clientDone = Latch()
        Thread {
            let result = try? cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET"])
            output.withLock { $0 = result }
            clientDone.signal()
        }.start()
        try #require(entered.wait(for: 1))
        server.stop()
        // The stop has begun once the socket file is gone; `run` still waits for the request it is serving.
        #expect(eventually { access(dir.file("s"), F_OK) != 0 })
        #expect(!running.hasReturned)
        release.signal()
        let result = try #require(running.waitForReturn())
        #expect(throws: Never.self) { try result.get() }
        #expect(clientDone.wait(for: 1))
        let body = try CGIResponse(try #require(output.withLock { $0 }).stdout).body
        #expect(String(decoding: body, as: UTF8.self) == "finished")
        // The socket file is gone, so new connections are refused rather than queued forever.
        #expect(access(dir.file("s"), F_OK) != 0)
    }

    @Test func stopWhileIdleReturnsPromptlyAndStopBeforeRunReturnsAtOnce() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("a")), workers: 3, maxBodyBytes: 16)) { _ in
            Response(status: 204)
        }
        let started = Date()
        #expect(running.stop() != nil)
        #expect(Date().timeIntervalSince(started) < 2)

        let early = try Server(listen: .unix(dir.file("b")), workers: 2, maxBodyBytes: 16)
        early.stop()
        early.stop()
        #expect(throws: Never.self) { try early.run { _ in ClosureHandler { _ in Response(status: 204) } } }
        #expect(throws: FastCGIError(.alreadyRun)) { try early.run { _ in ClosureHandler { _ in Response(status: 204) } } }
    }

    @Test func connectionClosedBeforeItsRequestDoesNotWedgeAWorker() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16),
                                    handler: recordingHandler(recorder))
        for _ in 0..<3 {  // like a health probe: connect, send nothing, hang up (the deinit closes it)
            _ = try RawFastCGIConnection(unixPath: dir.file("s"))
        }
        _ = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET"])
        #expect(recorder.requests.count == 1)
        let started = Date()
        #expect(running.stop() != nil)
        #expect(Date().timeIntervalSince(started) < 2)
    }

    @Test func terminationSignalStopsTheServer() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16)
        let running = RunningServer(server) { _ in Response(status: 204) }
        // Install from a throwaway thread so only that thread's signal mask changes in the test process.
        let installed = Latch()
        Thread {
            try? server.stopOnTerminationSignals()
            installed.signal()
        }.start()
        try #require(installed.wait(for: 1))
        let thread = try #require(server.signalThread.withLock { $0 })
        #expect(!running.hasReturned)
        #expect(pthread_kill(thread, SIGTERM) == 0)
        #expect(running.waitForReturn() != nil)
    }

    @Test func staleSocketFileIsReplacedButOtherFilesAreNot() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let first = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16)
        _ = first  // its socket file now exists; a successor replaces it
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        _ = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET"])
        #expect(recorder.requests.count == 1)

        _ = FileManager.default.createFile(atPath: dir.file("plain"), contents: Data("keep".utf8))
        #expect(throws: FastCGIError(.listenFailed)) {
            try Server(listen: .unix(dir.file("plain")), workers: 1, maxBodyBytes: 16)
        }
        #expect(FileManager.default.contents(atPath: dir.file("plain")) == Data("keep".utf8))
    }

    @Test func unixSocketGetsTheRequestedMode() throws {
        let dir = try TempDir()
        for mode: UInt32 in [0o660, 0o666] {
            let path = dir.file("m\(mode)")
            let server = try Server(listen: .unix(path), workers: 1, maxBodyBytes: 16, socketMode: mode)
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(UInt32(info.st_mode) & 0o777 == mode)
            _ = server
        }
    }

    @Test func listenFailuresAreErrorsNotProcessExits() throws {
        #expect(throws: FastCGIError(.listenFailed)) {
            try Server(listen: .unix("/nonexistent-dir/s"), workers: 1, maxBodyBytes: 16)
        }
        let taken = try Server(listen: .tcp(host: "127.0.0.1", port: 0), workers: 1, maxBodyBytes: 16)
        let port = try #require(Int(taken.address.split(separator: ":").last ?? ""))
        #expect(throws: FastCGIError(.listenFailed)) {
            try Server(listen: .tcp(host: "127.0.0.1", port: port), workers: 1, maxBodyBytes: 16)
        }
        #expect(throws: FastCGIError(.badConfiguration)) {
            try Server(listen: .tcp(host: "127.0.0.1", port: 0), workers: 0, maxBodyBytes: 16)
        }
    }

    @Test func inheritedDescriptorMustBeAListeningSocket() throws {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        // Refused and let go, never closed: the defer above closes both ends.
        #expect(throws: FastCGIError(.notASocket)) { try Server(adopting: Descriptor(ends[0]), workers: 1, maxBodyBytes: 16) }
    }

    @Test func inheritedListeningSocketIsServedAndLeftOpen() throws {
        let dir = try TempDir()
        // Stands in for the socket spawn-fcgi or systemd would pass.
        let owner = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16)
        let recorder = Recorder()
        // Handed over by its number, as a process manager does: the adopting server lets it go, never closes it.
        let socket = try #require(owner.listener.withSocket { $0.raw })
        let running = RunningServer(try Server(adopting: Descriptor(socket), workers: 1, maxBodyBytes: 16),
                                    handler: recordingHandler(recorder))
        _ = try cgiFCGI(connect: dir.file("s"), params: ["REQUEST_METHOD": "GET"])
        #expect(recorder.requests.count == 1)
        running.stop()
        var accepting: Int32 = 0
        var length = socklen_t(4)
        #expect(owner.listener.withSocket { getsockopt($0.raw, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) } == 0 && accepting == 1)
    }

    @Test(arguments: [
        (String?.none, String?.none, Int32(0)), ("123", "1", 0), ("4242", "1", 3), ("x", "1", 0),
    ] as [(String?, String?, Int32)])
    func inheritedDescriptorIsFd3OnlyWhenSystemdAddressedThisProcess(listenPID: String?, listenFDs: String?, fd: Int32) throws {
        #expect(try inheritedDescriptor(listenPID: listenPID, listenFDs: listenFDs, pid: 4242) == fd)
    }

    @Test(arguments: [nil, "2", "0"])
    func systemdPassingOtherThanOneSocketIsRefused(listenFDs: String?) {
        #expect(throws: FastCGIError(.badListenAddress)) {
            try inheritedDescriptor(listenPID: "4242", listenFDs: listenFDs, pid: 4242)
        }
    }
}

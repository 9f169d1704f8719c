// A private nginx for tests: generated config, logs and temp paths in a temp folder, a free 127.0.0.1 port.
// Self-contained (Foundation and Glibc only) so end-to-end tests can reuse or copy it.
import Foundation
import Glibc

/// An HTTP response as curl received it from nginx.
struct HTTPResponse {
    let status: Int
    let headers: [(name: String, value: String)]
    let body: [UInt8]

    /// Every value of a header, in order (case-insensitive name).
    func values(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }
    var text: String { String(decoding: body, as: UTF8.self) }
}

struct NginxFixtureError: Error, CustomStringConvertible {
    let description: String
}

/// nginx started in the foreground as a child process (`daemon off`), stopped by `stop()` or deinit.
final class NginxFixture {
    let directory: String
    let port: Int
    var baseURL: String { "http://127.0.0.1:\(port)" }
    var errorLogPath: String { directory + "/error.log" }
    private let process: Process

    /// - Parameters:
    ///   - fastcgiPass: the `fastcgi_pass` target, e.g. `unix:/tmp/x/fcgi.sock` or `127.0.0.1:9000`.
    ///   - locations: the server block's body; `{{FASTCGI_PASS}}` is replaced by `fastcgiPass`. The
    ///     default sends every path to the responder with the distribution's stock `fastcgi_params`.
    ///   - http: extra directives for the `http` block (e.g. an `upstream` with `keepalive`).
    init(fastcgiPass: String, locations: String? = nil, http: String = "",
         fastcgiParams: String = "/etc/nginx/fastcgi_params", nginx: String = "/usr/sbin/nginx") throws {
        var template = Array("/tmp/nginx-test-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw NginxFixtureError(description: "mkdtemp failed")
        }
        directory = String(cString: made)
        port = try Self.freePort()
        let body = (locations ?? """
            location / {
                include \(fastcgiParams);
                fastcgi_pass {{FASTCGI_PASS}};
            }
            """).replacingOccurrences(of: "{{FASTCGI_PASS}}", with: fastcgiPass)
        // As root, nginx's workers would switch to "nobody" and lose access to the folder and socket.
        let user = geteuid() == 0 ? "user root root;" : ""
        let config = """
            \(user)
            daemon off;
            worker_processes 1;
            pid \(directory)/nginx.pid;
            error_log \(directory)/error.log info;
            events { worker_connections 128; }
            http {
                access_log \(directory)/access.log;
                client_body_temp_path \(directory)/client_body;
                fastcgi_temp_path \(directory)/fastcgi;
                proxy_temp_path \(directory)/proxy;
                uwsgi_temp_path \(directory)/uwsgi;
                scgi_temp_path \(directory)/scgi;
                \(http)
                server {
                    listen 127.0.0.1:\(port);
                    server_name localhost;
                    \(body)
                }
            }
            """
        try config.write(toFile: directory + "/nginx.conf", atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: nginx)
        process.arguments = ["-p", directory, "-c", directory + "/nginx.conf", "-e", directory + "/error.log"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        try waitUntilListening()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Fast shutdown (SIGTERM) and wait for the master to exit.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    var errorLog: String { (try? String(contentsOfFile: errorLogPath, encoding: .utf8)) ?? "" }

    /// Sends one HTTP/1.1 request with curl and returns the final response.
    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                 curl: String = "/usr/bin/curl") throws -> HTTPResponse {
        var arguments = ["-sS", "-i", "--path-as-is", "--max-time", "30", "-X", method, "-H", "Expect:"]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        if body != nil { arguments += ["--data-binary", "@-"] }
        arguments.append(baseURL + path)
        let curlProcess = Process()
        curlProcess.executableURL = URL(fileURLWithPath: curl)
        curlProcess.arguments = arguments
        let input = Pipe(), output = Pipe()
        curlProcess.standardInput = input
        curlProcess.standardOutput = output
        curlProcess.standardError = FileHandle.nullDevice
        try curlProcess.run()
        let payload = Data(body ?? [])
        Thread {
            try? input.fileHandleForWriting.write(contentsOf: payload)
            try? input.fileHandleForWriting.close()
        }.start()
        let raw = Array(output.fileHandleForReading.readDataToEndOfFile())
        curlProcess.waitUntilExit()
        guard curlProcess.terminationStatus == 0 else {
            throw NginxFixtureError(description: "curl exited \(curlProcess.terminationStatus); nginx log:\n\(errorLog)")
        }
        return try Self.parse(raw)
    }

    static func parse(_ raw: [UInt8]) throws -> HTTPResponse {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = raw.indices.first(where: { raw[$0...].starts(with: separator) }) else {
            throw NginxFixtureError(description: "no HTTP head in \(String(decoding: raw, as: UTF8.self))")
        }
        let lines = String(decoding: raw[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw NginxFixtureError(description: "bad status line \(lines[0])")
        }
        let headers = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return HTTPResponse(status: status, headers: headers, body: Array(raw[(end + 4)...]))
    }

    /// A port the kernel just handed out on 127.0.0.1 (closed again; nginx binds it right after).
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw NginxFixtureError(description: "socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else { throw NginxFixtureError(description: "bind to a free port failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private func waitUntilListening() throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard process.isRunning else {
                throw NginxFixtureError(description: "nginx exited \(process.terminationStatus):\n\(errorLog)")
            }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            close(fd)
            if connected { return }
            usleep(20_000)
        }
        stop()
        throw NginxFixtureError(description: "nginx did not listen on \(port):\n\(errorLog)")
    }
}

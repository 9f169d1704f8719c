// Where the responder listens (`TOKENSIGNIN_LISTEN`): the setting, how it is read, and the socket address it names.
import Glibc

/// Where the FastCGI responder accepts connections from the web server.
public enum Listen: Sendable, Hashable, CustomStringConvertible {
    /// The socket the process manager handed over: fd 3 under systemd socket activation
    /// (`LISTEN_PID` is this process and `LISTEN_FDS=1`), otherwise fd 0 (spawn-fcgi, inetd style).
    case inherited
    /// A unix stream socket at this path; a stale socket file there is replaced.
    case unix(String)
    /// A TCP socket on a numeric IPv4/IPv6 address (or `localhost`) and port (0 = any free port).
    case tcp(host: String, port: Int)

    /// Reads a listen setting: nil or empty -> `.inherited`; anything containing `/` -> `.unix`;
    /// otherwise `host:port` (IPv6 as `[::1]:9000`) -> `.tcp`.
    public static func parse(_ value: String?) throws(FastCGIError) -> Listen {
        guard let value, !value.isEmpty else { return .inherited }
        if value.contains("/") {
            // sun_path holds 108 bytes including the terminating NUL.
            guard value.utf8.count < 108, !value.utf8.contains(0) else {
                throw FastCGIError(.badListenAddress, "unix socket path is longer than 107 bytes")
            }
            return .unix(value)
        }
        guard let colon = value.lastIndex(of: ":") else {
            throw FastCGIError(.badListenAddress, "expected a socket path or host:port, got \(value)")
        }
        var host = String(value[..<colon])
        let portText = value[value.index(after: colon)...]
        guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let port = Int(portText), port <= 65535
        else { throw FastCGIError(.badListenAddress, "bad port in \(value)") }
        if host.hasPrefix("["), host.hasSuffix("]"), host.count > 2 {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            throw FastCGIError(.badListenAddress, "write an IPv6 address in brackets: [::1]:9000")
        }
        guard SocketAddress(host: host, port: port) != nil else {
            throw FastCGIError(.badListenAddress, "host must be a numeric address or localhost, got \(host)")
        }
        return .tcp(host: host, port: port)
    }

    public var description: String {
        switch self {
        case .inherited: "inherited socket"
        case .unix(let path): "unix:\(path)"
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }
}

/// A numeric socket address for `.tcp`.
struct SocketAddress {
    var storage = sockaddr_storage()
    var length: socklen_t = 0
    var family: Int32 = AF_INET

    init?(host: String, port: Int) {
        let name = host == "localhost" ? "127.0.0.1" : host
        let networkPort = in_port_t(UInt16(port).bigEndian)
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET, name, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = networkPort
            store(v4, family: AF_INET)
        } else if inet_pton(AF_INET6, name, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = networkPort
            store(v6, family: AF_INET6)
        } else {
            return nil
        }
    }

    /// Copies a `sockaddr_in` or `sockaddr_in6` into `storage`.
    private mutating func store<Address>(_ address: Address, family: Int32) {
        withUnsafeBytes(of: address) { raw in
            withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: raw) }
        }
        length = socklen_t(MemoryLayout<Address>.size)
        self.family = family
    }
}

/// The descriptor systemd or spawn-fcgi passed: 3 when `LISTEN_PID` names us and `LISTEN_FDS` is 1, else 0.
func inheritedDescriptor(listenPID: String?, listenFDs: String?, pid: Int32) throws(FastCGIError) -> Int32 {
    guard let listenPID, let owner = Int32(listenPID), owner == pid else { return 0 }
    guard listenFDs == "1" else {
        throw FastCGIError(.badListenAddress, "systemd passed LISTEN_FDS=\(listenFDs ?? "") sockets; exactly one is supported")
    }
    return 3
}

func errnoText(_ call: String, _ code: Int32 = errno) -> String {
    "\(call): \(String(cString: strerror(code)))"
}


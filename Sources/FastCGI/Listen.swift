// Where the responder listens (`TOKENSIGNIN_LISTEN`), and opening or adopting that socket.
import CLinuxFastCGI
import Glibc
import Synchronization

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
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, name, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port).bigEndian)
            withUnsafeBytes(of: v4) { raw in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: raw) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            family = AF_INET
            return
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, name, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port).bigEndian)
            withUnsafeBytes(of: v6) { raw in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: raw) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            family = AF_INET6
            return
        }
        return nil
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

/// The listening socket: opened by us (closed, and for unix sockets unlinked, by `close()`) or inherited.
final class Listener: Sendable {
    let fd: Int32
    let owned: Bool
    /// The unix socket file we created and its identity, so we never unlink a successor's socket.
    let unixPath: String?
    let unixIdentity: (dev: UInt64, ino: UInt64)?
    /// Printable address actually bound (the real port when 0 was asked for).
    let address: String
    /// Closing twice could close a descriptor number someone else has been given since.
    private let closed = Atomic<Bool>(false)

    private init(fd: Int32, owned: Bool, unixPath: String?, unixIdentity: (dev: UInt64, ino: UInt64)?, address: String) {
        self.fd = fd
        self.owned = owned
        self.unixPath = unixPath
        self.unixIdentity = unixIdentity
        self.address = address
    }

    static func open(_ listen: Listen, socketMode: UInt32, backlog: Int32) throws(FastCGIError) -> Listener {
        switch listen {
        case .inherited:
            let env = { (name: String) in getenv(name).map { String(cString: $0) } }
            let fd = try inheritedDescriptor(listenPID: env("LISTEN_PID"), listenFDs: env("LISTEN_FDS"), pid: getpid())
            return try inherited(fd: fd)
        case .unix(let path):
            return try openUnix(path: path, mode: socketMode, backlog: backlog)
        case .tcp(let host, let port):
            return try openTCP(host: host, port: port, backlog: backlog)
        }
    }

    /// Adopts an already listening stream socket (not closed by us: the process manager may own it too).
    static func inherited(fd: Int32) throws(FastCGIError) -> Listener {
        var accepting: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0, accepting == 1 else {
            throw FastCGIError(.notASocket, "fd \(fd) is not a listening socket: set TOKENSIGNIN_LISTEN or start under spawn-fcgi/systemd")
        }
        try makeNonBlocking(fd)
        return Listener(fd: fd, owned: false, unixPath: nil, unixIdentity: nil, address: "fd \(fd)")
    }

    private static func openUnix(path: String, mode: UInt32, backlog: Int32) throws(FastCGIError) -> Listener {
        var info = stat()
        if lstat(path, &info) == 0 {
            // Replace only a leftover socket; never delete a regular file someone mistyped.
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                throw FastCGIError(.listenFailed, "\(path) exists and is not a socket")
            }
            guard unlink(path) == 0 else { throw FastCGIError(.listenFailed, errnoText("unlink \(path)")) }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FastCGIError(.listenFailed, errnoText("socket")) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            let error = FastCGIError(.listenFailed, errnoText("bind \(path)"))
            Glibc.close(fd)
            throw error
        }
        // bind applies the umask; set the mode nginx needs explicitly.
        guard chmod(path, mode_t(mode)) == 0, Glibc.listen(fd, backlog) == 0, stat(path, &info) == 0 else {
            let error = FastCGIError(.listenFailed, errnoText("chmod/listen \(path)"))
            Glibc.close(fd)
            unlink(path)
            throw error
        }
        do throws(FastCGIError) { try makeNonBlocking(fd) } catch {
            Glibc.close(fd)
            unlink(path)
            throw error
        }
        return Listener(fd: fd, owned: true, unixPath: path,
                        unixIdentity: (UInt64(info.st_dev), UInt64(info.st_ino)), address: path)
    }

    private static func openTCP(host: String, port: Int, backlog: Int32) throws(FastCGIError) -> Listener {
        guard var address = SocketAddress(host: host, port: port) else {
            throw FastCGIError(.badListenAddress, "host must be a numeric address or localhost, got \(host)")
        }
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FastCGIError(.listenFailed, errnoText("socket")) }
        var on: Int32 = 1
        let bound = withUnsafePointer(to: &address.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size)) == 0
                    && bind(fd, pointer, address.length) == 0
            }
        }
        guard bound, Glibc.listen(fd, backlog) == 0 else {
            let error = FastCGIError(.listenFailed, errnoText("bind/listen \(Listen.tcp(host: host, port: port))"))
            Glibc.close(fd)
            throw error
        }
        var actual = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        var boundPort = port
        if named == 0 {
            boundPort = Int(UInt16(bigEndian: withUnsafeBytes(of: actual) { raw in
                raw.load(fromByteOffset: 2, as: UInt16.self)  // sin_port and sin6_port share this offset
            }))
        }
        do throws(FastCGIError) { try makeNonBlocking(fd) } catch {
            Glibc.close(fd)
            throw error
        }
        return Listener(fd: fd, owned: true, unixPath: nil, unixIdentity: nil,
                        address: Listen.tcp(host: host, port: boundPort).description)
    }

    /// Workers wait in the Dispatcher's epoll set; a non-blocking socket keeps a worker whose connection was
    /// taken by another process sharing the socket from sleeping inside accept(), where stop() could not
    /// wake it.
    private static func makeNonBlocking(_ fd: Int32) throws(FastCGIError) {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw FastCGIError(.listenFailed, errnoText("fcntl O_NONBLOCK"))
        }
    }

    /// Stops listening: closes a socket we opened and removes our unix socket file (if it is still ours).
    func close() {
        guard owned, !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let unixPath, let unixIdentity {
            var info = stat()
            if lstat(unixPath, &info) == 0, UInt64(info.st_dev) == unixIdentity.dev, UInt64(info.st_ino) == unixIdentity.ino {
                unlink(unixPath)
            }
        }
        Glibc.close(fd)
    }
}

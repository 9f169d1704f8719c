// The listening socket: opening or adopting it, accepting connections from it, and closing it.
import CLinuxFastCGI
import Glibc
import Synchronization

/// The listening socket: opened by us (closed, and for unix sockets unlinked, by `close()`) or inherited (let
/// go, never closed: the process manager may hand it to the next process).
final class Listener: Sendable {
    let owned: Bool
    /// The unix socket file we created and its identity, so we never unlink a successor's socket.
    let unixPath: String?
    let unixIdentity: (dev: UInt64, ino: UInt64)?
    /// Printable address actually bound (the real port when 0 was asked for).
    let address: String
    /// The socket and the dispatcher's accepting from it, under one lock: an accept never meets the close.
    let accepting: Mutex<Accepting>

    /// The socket while it is open, and whether connections are being taken from it.
    struct Accepting: ~Copyable {
        /// nil once closed or let go: closing twice could close a number someone else has been given since.
        fileprivate var socket: Descriptor?
        /// Connections are taken (false once the stop began, or accepting failed for good).
        var on = true
        /// Accepting paused (out of descriptors, or at maxConnections) since then; the timer resumes it.
        var pausedAt: UInt64?

        /// Accepts one connection, non-blocking and close-on-exec; nil with `errno` set when none was taken.
        func accept() -> Descriptor? {
            let fd: Int32
            switch socket {
            case .some(let socket): fd = clinuxfastcgi_accept_nonblocking(socket.raw)
            case .none:
                errno = EBADF
                return nil
            }
            return fd >= 0 ? Descriptor(fd) : nil
        }

        /// Adds the socket to the epoll set (`adding`) or re-arms it for its next connection (one-shot, so one
        /// worker accepts at a time).
        func arm(in epoll: borrowing EventSet, adding: Bool = false) -> Bool {
            switch socket {
            case .some(let socket): epoll.arm(socket, tag: EventSet.listenerTag, adding: adding)
            case .none: false
            }
        }

        func remove(from epoll: borrowing EventSet) {
            switch socket {
            case .some(let socket): epoll.remove(socket)
            case .none: break
            }
        }
    }

    private init(_ socket: consuming Descriptor, owned: Bool, unixPath: String?, unixIdentity: (dev: UInt64, ino: UInt64)?,
                 address: String) {
        self.accepting = Mutex(Accepting(socket: socket))
        self.owned = owned
        self.unixPath = unixPath
        self.unixIdentity = unixIdentity
        self.address = address
    }

    deinit { close() }

    static func open(_ listen: Listen, socketMode: UInt32, backlog: Int32) throws(FastCGIError) -> Listener {
        switch listen {
        case .inherited:
            let env = { (name: String) in getenv(name).map { String(cString: $0) } }
            let fd = try inheritedDescriptor(listenPID: env("LISTEN_PID"), listenFDs: env("LISTEN_FDS"), pid: getpid())
            return try inherited(Descriptor(fd))
        case .unix(let path):
            return try openUnix(path: path, mode: socketMode, backlog: backlog)
        case .tcp(let host, let port):
            return try openTCP(host: host, port: port, backlog: backlog)
        }
    }

    /// Adopts an already listening stream socket, which is never closed by us (the process manager may own it
    /// too): let go even when it is refused.
    static func inherited(_ socket: consuming Descriptor) throws(FastCGIError) -> Listener {
        let number = socket.raw
        var accepting: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(socket.raw, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0, accepting == 1 else {
            socket.relinquish()
            throw FastCGIError(.notASocket, "fd \(number) is not a listening socket: set TOKENSIGNIN_LISTEN or start under spawn-fcgi/systemd")
        }
        do throws(FastCGIError) { try makeNonBlocking(socket) } catch {
            socket.relinquish()
            throw error
        }
        return Listener(socket, owned: false, unixPath: nil, unixIdentity: nil, address: "fd \(number)")
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
        let socket = try streamSocket(family: AF_UNIX)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket.raw, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        // On each failure the socket is closed as it goes out of scope.
        guard bound == 0 else { throw FastCGIError(.listenFailed, errnoText("bind \(path)")) }
        // bind applies the umask; set the mode nginx needs explicitly.
        guard chmod(path, mode_t(mode)) == 0, Glibc.listen(socket.raw, backlog) == 0, stat(path, &info) == 0 else {
            let error = FastCGIError(.listenFailed, errnoText("chmod/listen \(path)"))
            unlink(path)
            throw error
        }
        do throws(FastCGIError) { try makeNonBlocking(socket) } catch {
            unlink(path)
            throw error
        }
        return Listener(socket, owned: true, unixPath: path, unixIdentity: (UInt64(info.st_dev), UInt64(info.st_ino)),
                        address: path)
    }

    private static func openTCP(host: String, port: Int, backlog: Int32) throws(FastCGIError) -> Listener {
        guard var address = SocketAddress(host: host, port: port) else {
            throw FastCGIError(.badListenAddress, "host must be a numeric address or localhost, got \(host)")
        }
        let socket = try streamSocket(family: address.family)
        var on: Int32 = 1
        let bound = withUnsafePointer(to: &address.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                setsockopt(socket.raw, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size)) == 0
                    && bind(socket.raw, pointer, address.length) == 0
            }
        }
        // On each failure the socket is closed as it goes out of scope.
        guard bound, Glibc.listen(socket.raw, backlog) == 0 else {
            throw FastCGIError(.listenFailed, errnoText("bind/listen \(Listen.tcp(host: host, port: port))"))
        }
        var actual = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket.raw, $0, &length) }
        }
        var boundPort = port
        if named == 0 {
            boundPort = Int(UInt16(bigEndian: withUnsafeBytes(of: actual) { raw in
                raw.load(fromByteOffset: 2, as: UInt16.self)  // sin_port and sin6_port share this offset
            }))
        }
        try makeNonBlocking(socket)
        return Listener(socket, owned: true, unixPath: nil, unixIdentity: nil,
                        address: Listen.tcp(host: host, port: boundPort).description)
    }

    private static func streamSocket(family: Int32) throws(FastCGIError) -> Descriptor {
        let fd = Glibc.socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FastCGIError(.listenFailed, errnoText("socket")) }
        return Descriptor(fd)
    }

    /// Workers wait in the Dispatcher's epoll set; a non-blocking socket keeps a worker whose connection was
    /// taken by another process sharing the socket from sleeping inside accept(), where stop() could not
    /// wake it.
    private static func makeNonBlocking(_ socket: borrowing Descriptor) throws(FastCGIError) {
        let flags = fcntl(socket.raw, F_GETFL)
        guard flags >= 0, fcntl(socket.raw, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw FastCGIError(.listenFailed, errnoText("fcntl O_NONBLOCK"))
        }
    }

    /// Stops listening: closes a socket we opened and removes our unix socket file (if it is still ours); an
    /// inherited one is let go, open.
    func close() {
        accepting.withLock { close(&$0) }
    }

    /// `close()` for a caller that holds the lock already.
    func close(_ accepting: inout Accepting) {
        guard let socket = accepting.socket.take() else { return }
        guard owned else {
            socket.relinquish()
            return
        }
        if let unixPath, let unixIdentity {
            var info = stat()
            if lstat(unixPath, &info) == 0, UInt64(info.st_dev) == unixIdentity.dev, UInt64(info.st_ino) == unixIdentity.ino {
                unlink(unixPath)
            }
        }
        socket.close()
    }

    /// Runs `body` with the socket while it is open (tests, which stand in for a process manager that hands a
    /// socket over by its number).
    func withSocket<Result>(_ body: (borrowing Descriptor) -> Result) -> Result? {
        accepting.withLock { accepting in
            switch accepting.socket {
            case .some(let socket): body(socket)
            case .none: nil
            }
        }
    }
}

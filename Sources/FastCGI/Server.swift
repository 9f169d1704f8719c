// The FastCGI responder: N worker threads, each accepting and answering requests with its own Handler.
import CFastCGI
import Glibc
import Synchronization

/// Answers requests on one worker thread. Each worker creates its own handler (on that thread), so a
/// handler may own thread-bound resources such as a database connection without locking.
public protocol Handler: AnyObject {
    func handle(_ request: Request) -> Response
}

/// A multi-threaded FastCGI responder over libfcgi.
///
/// `run` blocks the calling thread until `stop()` (from any thread, e.g. a signal thread): the workers
/// stop accepting, finish the request each one is serving, and `run` returns.
public final class Server: Sendable {
    public let listen: Listen
    public let workers: Int
    public let maxBodyBytes: Int
    /// What the socket is bound to, for logs: the unix path, `host:port` (the real port when 0 was
    /// asked for), or `fd N` when inherited.
    public var address: String { listener.address }

    let listener: Listener
    let dispatcher: Dispatcher
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let stopping = Atomic<Bool>(false)
    private let phase = Mutex<Phase>(.ready)
    private let failure = Mutex<FastCGIError?>(nil)
    /// The sigwait thread of `stopOnTerminationSignals`, reachable by tests through pthread_kill.
    let signalThread = Mutex<pthread_t?>(nil)

    private enum Phase { case ready, running, finished }

    /// Opens (or adopts) the listening socket. `socketMode` is the permission of a unix socket file:
    /// the default 0o660 lets the owner and the group connect, so run the service with nginx's group
    /// (www-data) or pass 0o666 and protect the socket's directory instead.
    ///
    /// `ioTimeout` bounds how long a worker blocks on one connection: reading a request that has begun to
    /// arrive, or writing an answer the web server does not read (the connection is then closed).
    public init(listen: Listen, workers: Int, maxBodyBytes: Int, socketMode: UInt32 = 0o660,
                backlog: Int32 = SOMAXCONN, ioTimeout: Duration = .seconds(30)) throws(FastCGIError) {
        guard workers >= 1, maxBodyBytes >= 0, socketMode <= 0o777 else {
            throw FastCGIError(.badConfiguration, "workers must be >= 1 and maxBodyBytes >= 0")
        }
        guard fastCGILibraryStatus == 0 else {
            throw FastCGIError(.startFailed, "FCGX_Init returned \(fastCGILibraryStatus)")
        }
        let pipeEnds = try makeWakePipe()
        do throws(FastCGIError) {
            let listener = try Listener.open(listen, socketMode: socketMode, backlog: backlog)
            do throws(FastCGIError) {
                self.dispatcher = try Dispatcher(listenFd: listener.fd, wakeFd: pipeEnds[0], ioTimeout: ioTimeout)
            } catch {
                listener.close()
                throw error
            }
            self.listener = listener
        } catch {
            Glibc.close(pipeEnds[0])
            Glibc.close(pipeEnds[1])
            throw error
        }
        self.listen = listen
        self.workers = workers
        self.maxBodyBytes = maxBodyBytes
        self.wakeRead = pipeEnds[0]
        self.wakeWrite = pipeEnds[1]
    }

    /// Adopts an already listening socket (tests use it for the `.inherited` path without fd 0).
    init(adopting fd: Int32, workers: Int, maxBodyBytes: Int) throws(FastCGIError) {
        guard fastCGILibraryStatus == 0 else {
            throw FastCGIError(.startFailed, "FCGX_Init returned \(fastCGILibraryStatus)")
        }
        let pipeEnds = try makeWakePipe()
        do throws(FastCGIError) {
            let listener = try Listener.inherited(fd: fd)
            self.dispatcher = try Dispatcher(listenFd: listener.fd, wakeFd: pipeEnds[0])
            self.listener = listener
        } catch {
            Glibc.close(pipeEnds[0])
            Glibc.close(pipeEnds[1])
            throw error
        }
        self.listen = .inherited
        self.workers = workers
        self.maxBodyBytes = maxBodyBytes
        self.wakeRead = pipeEnds[0]
        self.wakeWrite = pipeEnds[1]
    }

    deinit {
        listener.close()
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    /// Serves until `stop()`: starts `workers` threads, each calling `makeHandler(index)` on itself
    /// once and then answering one request at a time. Returns when every worker has finished.
    /// Throws when a worker could not start or accepting failed for good (the others are stopped).
    /// A server runs once; the listening socket it opened is closed (and its unix socket file
    /// removed) before `run` returns.
    public func run(makeHandler: @escaping @Sendable (Int) -> any Handler) throws(FastCGIError) {
        let started = phase.withLock { phase in
            guard phase == .ready else { return false }
            phase = .running
            return true
        }
        guard started else { throw FastCGIError(.alreadyRun, "a Server runs once") }
        defer {
            listener.close()
            dispatcher.closeAll()
            phase.withLock { $0 = .finished }
        }
        var threads: [pthread_t] = []
        for index in 0..<workers {
            guard let thread = startThread({ self.serve(worker: index, makeHandler: makeHandler) }) else {
                fail(FastCGIError(.startFailed, errnoText("pthread_create")))
                break
            }
            threads.append(thread)
        }
        for thread in threads { pthread_join(thread, nil) }
        if let error = failure.withLock({ $0 }) { throw error }
    }

    /// Graceful stop, safe from any thread and more than once: no new request is accepted, requests
    /// being served finish and are answered, then `run` returns. Requests the web server has queued
    /// on the socket but no worker has accepted are not served (nginx answers them 502, unless a
    /// successor inherits the socket, as with systemd socket activation).
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // The byte stays unread, so the pipe remains readable and wakes every worker's epoll_wait.
        var byte: UInt8 = 1
        _ = Glibc.write(wakeWrite, &byte, 1)
    }

    /// Makes SIGTERM and SIGINT call `stop()`: blocks both signals in the calling thread (and so in
    /// every thread it starts afterwards, including `run`'s workers) and starts a thread that waits
    /// for them with sigwait. Call it from the main thread before any other thread is started, or a
    /// thread that does not block them may receive the signal and die of it. Later signals are
    /// ignored while the server drains; SIGKILL still ends the process.
    public func stopOnTerminationSignals() throws(FastCGIError) {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        let blocked = pthread_sigmask(SIG_BLOCK, &signals, nil)
        guard blocked == 0 else { throw FastCGIError(.startFailed, errnoText("pthread_sigmask", blocked)) }
        let thread = startThread { [self] in
            var waitFor = sigset_t()
            sigemptyset(&waitFor)
            sigaddset(&waitFor, SIGTERM)
            sigaddset(&waitFor, SIGINT)
            while true {
                var received: Int32 = 0
                if sigwait(&waitFor, &received) == 0 { self.stop() }
            }
        }
        guard let thread else { throw FastCGIError(.startFailed, errnoText("pthread_create")) }
        pthread_detach(thread)
        signalThread.withLock { $0 = thread }
    }

    private func fail(_ error: FastCGIError) {
        failure.withLock { if $0 == nil { $0 = error } }
        stop()
    }

    /// One worker: take the next ready thing from the dispatcher (a connection to accept, a request on a
    /// connection, or the stop), let libfcgi parse the request, answer it, give a kept connection back.
    private func serve(worker index: Int, makeHandler: @Sendable (Int) -> any Handler) {
        let handler = makeHandler(index)
        let slot = RequestSlot()
        serving: while !stopping.load(ordering: .acquiring) {
            switch dispatcher.next() {
            case .stop:
                break serving
            case .failed(let code):
                fail(FastCGIError(.acceptFailed, errnoText("epoll_wait", code)))
                return
            case .listener:
                switch dispatcher.acceptConnection() {
                case .ready(let fd):
                    answer(on: fd, watched: false, slot: slot, handler: handler)
                case .done:
                    continue
                case .exhausted:
                    usleep(10_000)  // out of descriptors or memory: do not spin on the still-ready listener
                    dispatcher.rearmListener()
                case .failed(let code):
                    fail(FastCGIError(.acceptFailed, errnoText("accept", code)))
                    return
                }
            case .connection(let fd):
                answer(on: fd, watched: true, slot: slot, handler: handler)
            }
        }
        // Stopping: requests already waiting on open connections are answered (each connection is closed
        // after its answer); connections still idle are closed when `run` returns.
        while case let waiting = dispatcher.waitingConnections(), !waiting.isEmpty {
            for fd in waiting { answer(on: fd, watched: true, slot: slot, handler: handler) }
        }
    }

    /// Serves the request arriving on `fd` (owned by this worker), then parks the connection if it is kept.
    private func answer(on fd: Int32, watched: Bool, slot: RequestSlot, handler: any Handler) {
        // false: the web server closed the connection, or sent no valid request (libfcgi closed it).
        guard slot.begin(on: fd) else {
            dispatcher.closed(fd)
            return
        }
        let request = slot.read(maxBodyBytes: maxBodyBytes)
        // A request whose input broke off (the peer vanished, or stalled past ioTimeout) is not handled:
        // its body may be cut short. libfcgi closes the connection in finish.
        if !slot.inputFailed { slot.write(handler.handle(request)) }
        if slot.finish(drainingInput: !request.bodyTooLarge) {
            if stopping.load(ordering: .acquiring) {
                dispatcher.close(fd)  // answered; nginx must not send another request on it
            } else {
                dispatcher.park(fd, watched: watched)
            }
        } else {
            dispatcher.closed(fd)
        }
    }
}

/// FCGX_Init, once per process. libfcgi installs SIGTERM and SIGUSR1 handlers that set a flag making
/// every later read fail; those are undone so SIGTERM keeps its default meaning (or
/// `stopOnTerminationSignals`). Its SIGPIPE handler stays: a vanished peer is a write error, not death.
private let fastCGILibraryStatus: Int32 = {
    var term = sigaction()
    var usr1 = sigaction()
    sigaction(SIGTERM, nil, &term)
    sigaction(SIGUSR1, nil, &usr1)
    let status = FCGX_Init()
    sigaction(SIGTERM, &term, nil)
    sigaction(SIGUSR1, &usr1, nil)
    return status
}()

/// The self-pipe `stop()` writes to; both ends non-blocking and close-on-exec.
private func makeWakePipe() throws(FastCGIError) -> [Int32] {
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { throw FastCGIError(.startFailed, errnoText("pipe")) }
    for end in ends {
        _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
    }
    return ends
}

/// A closure to run on a new thread.
private final class ThreadStart: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Starts a joinable pthread (blocking libfcgi and handler calls never run on Swift's cooperative pool).
func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t? {
    let context = Unmanaged.passRetained(ThreadStart(body)).toOpaque()
    var thread = pthread_t()
    let created = pthread_create(&thread, nil, { raw in
        guard let raw else { return nil }
        Unmanaged<ThreadStart>.fromOpaque(raw).takeRetainedValue().body()
        return nil
    }, context)
    guard created == 0 else {
        Unmanaged<ThreadStart>.fromOpaque(context).release()
        errno = created
        return nil
    }
    return thread
}

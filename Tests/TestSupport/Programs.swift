// Running programs from tests: posix_spawn and waitpid with close-on-exec pipes, shared by every test target.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a program printed and how it exited.
public struct ProgramResult: Sendable {
    public let status: Int32
    public let stdout: [UInt8]
    public let stderr: [UInt8]
    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    public var stderrText: String { String(decoding: stderr, as: UTF8.self) }
}

public struct ProgramError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Runs a program to completion and returns what it printed. posix_spawn and waitpid, with close-on-exec
/// pipes: Foundation's Process.waitUntilExit can hang on Linux, and a pipe inherited by another test's
/// daemon (nginx, PostgreSQL) would never reach end-of-file.
/// `environment` is the child's whole environment (callers merge in `ProcessInfo`'s when they want it).
@discardableResult
public func runProgram(_ executable: String, _ arguments: [String], environment: [String: String],
                       stdin: [UInt8] = []) throws -> ProgramResult {
    var input: [Int32] = [0, 0], output: [Int32] = [0, 0], errors: [Int32] = [0, 0]
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    // Under the lock, no other spawn of this run can inherit the pipes before they are close-on-exec.
    let pid = try spawnLock.withLock {
        guard closeOnExecPipe(&input), closeOnExecPipe(&output), closeOnExecPipe(&errors) else {
            throw ProgramError("pipe failed")
        }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        return try spawnLocked(executable, arguments, environment: environment, actions: &actions)
    }
    close(input[0]); close(output[1]); close(errors[1])

    let stderrData = ResultBox<[UInt8]>()
    let drained = DispatchSemaphore(value: 0)
    let errorsFD = errors[0], inputFD = input[1]
    let stdinBytes = stdin
    DispatchQueue.global().async {
        var offset = 0
        while offset < stdinBytes.count {
            let n = stdinBytes.withUnsafeBytes { write(inputFD, $0.baseAddress! + offset, $0.count - offset) }
            if n <= 0 { break }
            offset += n
        }
        close(inputFD)
        stderrData.value = readToEnd(errorsFD)
        drained.signal()
    }
    let stdoutBytes = readToEnd(output[0])
    drained.wait()
    close(output[0]); close(errors[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    return ProgramResult(status: (status >> 8) & 0xff, stdout: stdoutBytes, stderr: stderrData.value ?? [])
}

private let spawnLock = NSLock()

/// A program that exits before reading all its stdin (a server answering 413 without reading the body) must
/// give the writer EPIPE, not kill the whole test process with SIGPIPE.
private let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

/// Starts a program with exactly `environment` and the given file actions; returns its pid.
public func spawnProgram(_ executable: String, _ arguments: [String], environment: [String: String],
           actions: inout posix_spawn_file_actions_t) throws -> pid_t {
    try spawnLock.withLock { try spawnLocked(executable, arguments, environment: environment, actions: &actions) }
}

private func spawnLocked(_ executable: String, _ arguments: [String], environment: [String: String],
                         actions: inout posix_spawn_file_actions_t) throws -> pid_t {
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
    _ = ignoreBrokenPipes
    // The child gets SIGPIPE's default back (this process ignores it), and an empty signal mask: a thread of
    // the test runtime blocks nearly every signal, and a daemon that never sets its own mask (PgBouncer) would
    // inherit that and ignore the SIGTERM that should stop it.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var defaults = sigset_t()
    sigemptyset(&defaults)
    sigaddset(&defaults, SIGPIPE)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    var unblocked = sigset_t()
    sigemptyset(&unblocked)
    posix_spawnattr_setsigmask(&attributes, &unblocked)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
    var pid: pid_t = 0
    let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    guard result == 0 else { throw ProgramError("cannot start \(executable): error \(result)") }
    return pid
}

/// pipe(2) with both ends close-on-exec (Glibc's module does not export pipe2).
private func closeOnExecPipe(_ fds: inout [Int32]) -> Bool {
    guard pipe(&fds) == 0 else { return false }
    return fcntl(fds[0], F_SETFD, FD_CLOEXEC) == 0 && fcntl(fds[1], F_SETFD, FD_CLOEXEC) == 0
}

private func readToEnd(_ fd: Int32) -> [UInt8] {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return bytes }
        bytes += buffer[0..<n]
    }
}

private final class ResultBox<T>: @unchecked Sendable {
    // SAFETY: written once by one thread before the semaphore is signalled, read after the wait.
    var value: T?
}

/// Polls `condition` every `every` seconds until it holds or `seconds` pass; returns whether it held (asked once
/// more at the deadline). For waits on an event with a deadline, never for ordering by time.
public func waitUntil(seconds: Double, every: Double = 0.02, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(useconds_t(every * 1_000_000))
    }
    return try condition()
}

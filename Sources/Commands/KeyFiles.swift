// The files of a development key set, written without following a link or overwriting what is there.
import Glibc
import Signing

/// Where `tokensignin dev keygen` writes: a folder only its owner may write, and files created anew (or, with
/// `--force`, written beside and renamed over the old ones), so a link planted where a file goes is never written
/// through and the private key is never readable by others, not even for a moment.
enum KeyFiles {
    /// The files of a key set, in the order they are written: the private key, its JWKS, its kid.
    static let names = ["dev-signing-key.pem", "dev-jwks.json", "kid"]

    /// Creates `folder` (mode 0700) when absent; refuses one that is not a folder (a link included), or that
    /// another user owns or group or others may write (they could swap the files).
    static func prepare(_ folder: String) throws(CommandError) {
        var info = stat()
        if lstat(folder, &info) != 0 {
            guard errno == ENOENT else { throw failure("cannot inspect \(folder): \(systemError())") }
            guard mkdir(folder, 0o700) == 0 else { throw failure("cannot create \(folder): \(systemError())") }
            return
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw failure("\(folder) is not a folder (a link is not followed)") }
        guard info.st_uid == geteuid() || info.st_uid == 0 else { throw failure("\(folder) belongs to another user") }
        guard info.st_mode & 0o022 == 0 else {
            throw failure("\(folder) is writable by other users (mode \(String(info.st_mode & 0o777, radix: 8))): chmod go-w it")
        }
    }

    /// Whether anything (a file, a link, even a dangling one) is at `path`.
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Writes `bytes` to `path` with exactly `mode` from its first byte. A new file is created exclusively and never
    /// through a link; `replacing`, it is written to a fresh file beside `path` and renamed over it (a link at
    /// `path` is replaced, its target untouched).
    static func write(_ bytes: [UInt8], to path: String, mode: mode_t, replacing: Bool) throws(CommandError) {
        let target = replacing ? path + ".new-\(SecureRandom.bytes(6).map { String($0, radix: 16) }.joined())" : path
        let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else {
            throw failure(errno == EEXIST ? "\(path) exists: pass --force to replace the key set" : "cannot create \(target): \(systemError())")
        }
        var offset = 0
        var written = true
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { written = false; break }
            offset += n
        }
        // The umask may have taken bits away; the mode is exact whatever it is.
        written = written && fchmod(fd, mode) == 0 && fsync(fd) == 0
        close(fd)
        guard written, !replacing || rename(target, path) == 0 else {
            let problem = systemError()
            unlink(target)
            throw failure("cannot write \(path): \(problem)")
        }
    }

    private static func failure(_ message: String) -> CommandError { CommandError(.usage, message) }

    private static func systemError() -> String { String(cString: strerror(errno)) }
}

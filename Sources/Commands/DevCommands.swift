// `tokensignin dev`: DEVELOPMENT ONLY key generation and token minting for demos, tests and benchmarks.
import Glibc
import Sessions
import Signing

struct DevCommands {
    private let io: CommandIO

    init(_ io: CommandIO) { self.io = io }

    func run(_ arguments: [String]) -> Int32 {
        do throws(CommandError) {
            let rest = arguments.dropFirst()
            switch arguments.first {
            case "keygen": return try keygen(rest)
            case "token": return try token(rest)
            case "sql": return try sql(rest)
            default: throw CommandError(.usage, "dev needs keygen, token or sql")
            }
        } catch {
            io.err("tokensignin dev: \(error.detail)\n\(Commands.usage)")
            return ExitCode.usage
        }
    }

    /// `dev keygen --out DIR [--kind rsa|p256] [--force]`: a development key set in DIR, which may not be writable by
    /// others; existing files are kept unless `--force` (exit 1 either way when it cannot write them safely).
    private func keygen(_ arguments: ArraySlice<String>) throws(CommandError) -> Int32 {
        let options = try Arguments(arguments, options: ["--out": .value, "--kind": .value, "--force": .flag])
        guard options.positionals.isEmpty else { throw CommandError(.usage, "unexpected argument") }
        guard let folder = options.value("--out") else { throw CommandError(.usage, "--out DIR is required") }
        let kind: DevelopmentKey.Kind
        switch options.value("--kind") ?? "rsa" {
        case "rsa": kind = .rsa2048
        case "p256": kind = .p256
        default: throw CommandError(.usage, "--kind is rsa or p256")
        }
        let force = options.has("--force")
        do throws(CommandError) {
            try KeyFiles.prepare(folder)
            if !force, let present = KeyFiles.names.first(where: { KeyFiles.exists(folder + "/" + $0) }) {
                throw CommandError(.usage, "\(folder)/\(present) exists: pass --force to replace the key set")
            }
            let key: DevelopmentKey
            do throws(SigningError) { key = try DevelopmentKey.generate(kind) } catch {
                throw CommandError(.usage, error.code.name)
            }
            for (name, bytes, mode) in [(KeyFiles.names[0], Array(key.pem.utf8), mode_t(0o600)),
                                        (KeyFiles.names[1], Array((key.jwks + "\n").utf8), 0o644),
                                        (KeyFiles.names[2], Array((key.kid + "\n").utf8), 0o644)] {
                try KeyFiles.write(bytes, to: folder + "/" + name, mode: mode, replacing: force)
            }
            io.out(key.kid)
            return ExitCode.ok
        } catch {
            io.err("tokensignin dev keygen: \(error.detail)")
            return ExitCode.failed
        }
    }

    private func token(_ arguments: ArraySlice<String>) throws(CommandError) -> Int32 {
        let options = try Arguments(arguments, options: Dictionary(uniqueKeysWithValues: [
            "--key", "--kid", "--aud", "--azp", "--sub", "--email", "--email-verified", "--name", "--hd", "--iat", "--ttl", "--count",
        ].map { ($0, .value) }))
        guard options.positionals.isEmpty else { throw CommandError(.usage, "unexpected argument") }
        guard let keyPath = options.value("--key"), let kid = options.value("--kid"),
              let aud = options.value("--aud"), let sub = options.value("--sub") else {
            throw CommandError(.usage, "--key, --kid, --aud and --sub are required")
        }
        let iat = try options.integer("--iat") ?? io.now()
        let ttl = try options.integer("--ttl") ?? 3600
        let count = try options.integer("--count")
        if let count, count < 1 { throw CommandError(.usage, "--count must be at least 1") }
        guard let pem = io.readFile(keyPath, 1 << 16) else {
            io.err("tokensignin dev token: cannot read \(keyPath)")
            return ExitCode.failed
        }
        let key: DevelopmentKey
        do throws(SigningError) { key = try DevelopmentKey(pem: String(decoding: pem, as: UTF8.self)) } catch {
            io.err("tokensignin dev token: \(error.code.name)")
            return ExitCode.failed
        }
        var claims: [String: ClaimValue] = [
            // The authorized party is the audience, as in a web client's token, unless given.
            "iss": "https://accounts.google.com", "aud": .string(aud), "azp": .string(options.value("--azp") ?? aud),
            "iat": .integer(iat), "exp": .integer(iat + ttl),
        ]
        if let email = options.value("--email") {
            claims["email"] = .string(email)
            switch options.value("--email-verified") ?? "true" {
            case "true": claims["email_verified"] = true
            case "false": claims["email_verified"] = false
            default: throw CommandError(.usage, "--email-verified is true or false")
            }
        }
        if let name = options.value("--name") { claims["name"] = .string(name) }
        if let hd = options.value("--hd") { claims["hd"] = .string(hd) }
        // With --count, users are distinct: sub-1 ... sub-N.
        let subjects = count.map { n in (1...n).map { "\(sub)-\($0)" } } ?? [sub]
        for subject in subjects {
            claims["sub"] = .string(subject)
            io.out(key.sign(claims: claims, kid: kid))
        }
        return ExitCode.ok
    }

    /// `dev sql NAME [--parameters]`: prints one of the responder's prepared statements, so benchmarks run the very
    /// same SQL; with `--parameters`, what each `$n` of it binds (`$1 googleSub`), one per line.
    private func sql(_ arguments: ArraySlice<String>) throws(CommandError) -> Int32 {
        let options = try Arguments(arguments, options: ["--parameters": .flag])
        guard options.positionals.count == 1, let entry = StatementCatalog.entry(named: options.positionals[0]) else {
            throw CommandError(.usage, "dev sql needs one of: \(StatementCatalog.names.joined(separator: ", "))")
        }
        if options.has("--parameters") {
            for (index, name) in entry.parameters.enumerated() { io.out("$\(index + 1) \(name)") }
        } else {
            io.out(entry.statement.sql)
        }
        return ExitCode.ok
    }
}

// `tokensignin dev`: DEVELOPMENT ONLY key generation and token minting for demos, tests and benchmarks.
#if canImport(Glibc)
import Glibc
#endif
import SignIn
import Signing

func devCommand(_ args: ArraySlice<String>) -> Int32 {
    do throws(UsageError) {
        switch args.first {
        case "keygen": return try devKeygen(args.dropFirst())
        case "token": return try devToken(args.dropFirst())
        case "sql": return try devSQL(args.dropFirst())
        default: throw UsageError(message: "dev needs keygen, token or sql")
        }
    } catch {
        printError("tokensignin dev: \(error.message)\n\(usage)")
        return ExitCode.usage
    }
}

private func devKeygen(_ args: ArraySlice<String>) throws(UsageError) -> Int32 {
    let options = try ParsedArguments(args, flags: ["--out", "--kind"])
    guard options.positionals.isEmpty else { throw UsageError(message: "unexpected argument") }
    guard let dir = try options.single("--out") else { throw UsageError(message: "--out DIR is required") }
    let kind: DevelopmentKey.Kind
    switch try options.single("--kind") ?? "rsa" {
    case "rsa": kind = .rsa2048
    case "p256": kind = .p256
    default: throw UsageError(message: "--kind is rsa or p256")
    }
    if mkdir(dir, 0o755) != 0 && errno != EEXIST {
        printError("tokensignin dev keygen: cannot create \(dir)")
        return ExitCode.invalid
    }
    let key: DevelopmentKey
    do throws(SigningError) { key = try DevelopmentKey.generate(kind) } catch {
        printError("tokensignin dev keygen: \(error.code.name)")
        return ExitCode.invalid
    }
    guard writeFile(dir + "/dev-signing-key.pem", Array(key.pem.utf8), mode: 0o600),
          writeFile(dir + "/dev-jwks.json", Array((key.jwks + "\n").utf8), mode: 0o644),
          writeFile(dir + "/kid", Array((key.kid + "\n").utf8), mode: 0o644) else {
        printError("tokensignin dev keygen: cannot write into \(dir)")
        return ExitCode.invalid
    }
    print(key.kid)
    return ExitCode.ok
}

private func devToken(_ args: ArraySlice<String>) throws(UsageError) -> Int32 {
    let options = try ParsedArguments(args, flags: ["--key", "--kid", "--aud", "--sub", "--email", "--email-verified", "--name", "--hd",
                                                    "--iat", "--ttl", "--count"])
    guard options.positionals.isEmpty else { throw UsageError(message: "unexpected argument") }
    guard let keyPath = try options.single("--key"), let kid = try options.single("--kid"),
          let aud = try options.single("--aud"), let sub = try options.single("--sub") else {
        throw UsageError(message: "--key, --kid, --aud and --sub are required")
    }
    let iat = try options.integer("--iat") ?? currentUnixTime()
    let ttl = try options.integer("--ttl") ?? 3600
    let count = try options.integer("--count")
    if let count, count < 1 { throw UsageError(message: "--count must be at least 1") }
    guard let pem = readFile(keyPath, limit: 1 << 16) else {
        printError("tokensignin dev token: cannot read \(keyPath)")
        return ExitCode.invalid
    }
    let key: DevelopmentKey
    do throws(SigningError) { key = try DevelopmentKey(pem: String(decoding: pem, as: UTF8.self)) } catch {
        printError("tokensignin dev token: \(error.code.name)")
        return ExitCode.invalid
    }
    var claims: [String: ClaimValue] = [
        "iss": "https://accounts.google.com", "aud": .string(aud), "azp": .string(aud),
        "iat": .integer(iat), "exp": .integer(iat + ttl),
    ]
    if let email = try options.single("--email") {
        claims["email"] = .string(email)
        switch try options.single("--email-verified") ?? "true" {
        case "true": claims["email_verified"] = true
        case "false": claims["email_verified"] = false
        default: throw UsageError(message: "--email-verified is true or false")
        }
    }
    if let name = try options.single("--name") { claims["name"] = .string(name) }
    if let hd = try options.single("--hd") { claims["hd"] = .string(hd) }
    // With --count, users are distinct: sub-1 ... sub-N.
    let subjects = count.map { n in (1...n).map { "\(sub)-\($0)" } } ?? [sub]
    for subject in subjects {
        claims["sub"] = .string(subject)
        print(key.sign(claims: claims, kid: kid))
    }
    return ExitCode.ok
}

/// `dev sql NAME`: prints one of the responder's prepared statements, so benchmarks run the very same SQL.
private func devSQL(_ args: ArraySlice<String>) throws(UsageError) -> Int32 {
    guard args.count == 1, let name = args.first, let sql = StatementCatalog.sql(named: name) else {
        throw UsageError(message: "dev sql needs one of: \(StatementCatalog.names.joined(separator: ", "))")
    }
    print(sql)
    return ExitCode.ok
}

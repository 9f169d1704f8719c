// `tokensignin verify`: checks one ID token offline; exit 0 claims on stdout, 1 invalid, 2 usage, 3 no keys.
import GoogleKeys
import IDToken

func verifyCommand(_ args: ArraySlice<String>) -> Int32 {
    let options: ParsedArguments
    let policy: Policy
    let now: Int64
    let tokenArgument: String
    let jwksFile: String?
    let jwksURL: String?
    do throws(UsageError) {
        options = try ParsedArguments(args, flags: ["--client-id", "--jwks", "--jwks-url", "--now", "--clock-skew", "--hosted-domain"])
        guard options.positionals.count == 1 else { throw UsageError(message: "exactly one TOKEN (or -) is required") }
        tokenArgument = options.positionals[0]
        var clientIDs = options.values["--client-id"] ?? []
        if clientIDs.isEmpty, let env = environment("TOKENSIGNIN_CLIENT_IDS") {
            clientIDs = env.split(separator: ",").map { trimmed($0) }.filter { !$0.isEmpty }
        }
        guard !clientIDs.isEmpty else { throw UsageError(message: "no client ID: pass --client-id or set TOKENSIGNIN_CLIENT_IDS") }
        var domains = options.values["--hosted-domain"] ?? []
        if domains.isEmpty, let env = environment("TOKENSIGNIN_HOSTED_DOMAINS") {
            domains = env.split(separator: ",").map { trimmed($0) }.filter { !$0.isEmpty }
        }
        // As `serve` does: domains are configured case-insensitively; Google sends `hd` in lower case.
        domains = domains.map { $0.lowercased() }
        var skew: Int64 = 60
        if let s = try options.integer("--clock-skew") {
            skew = s
        } else if let env = environment("TOKENSIGNIN_CLOCK_SKEW") {
            guard let s = Int64(env) else { throw UsageError(message: "TOKENSIGNIN_CLOCK_SKEW must be an integer") }
            skew = s
        }
        guard skew >= 0 else { throw UsageError(message: "clock skew must not be negative") }
        policy = Policy(clientIDs: clientIDs, hostedDomains: domains, clockSkew: skew)
        now = try options.integer("--now") ?? currentUnixTime()
        jwksFile = try options.single("--jwks")
        jwksURL = try options.single("--jwks-url")
        if jwksFile != nil && jwksURL != nil { throw UsageError(message: "--jwks and --jwks-url are exclusive") }
    } catch {
        printError("tokensignin verify: \(error.message)\n\(usage)")
        return ExitCode.usage
    }

    let token: String
    if tokenArgument == "-" {
        guard let bytes = readAll(fd: 0, limit: 1 << 20) else {
            printError("tokensignin verify: cannot read the token from stdin")
            return ExitCode.usage
        }
        token = trimmed(String(decoding: bytes, as: UTF8.self))
    } else {
        token = tokenArgument
    }

    let keys: KeySet
    do throws(IDTokenError) {
        if let file = jwksFile {
            keys = try loadKeySet(file: file)
        } else if let url = jwksURL {
            keys = try fetchKeySet(url: url)
        } else if let file = environment("TOKENSIGNIN_JWKS_FILE") {
            keys = try loadKeySet(file: file)
        } else {
            keys = try fetchKeySet(url: environment("TOKENSIGNIN_JWKS_URL") ?? KeySource.googleURL)
        }
    } catch {
        printError("keys unavailable: \(error.code.name)\(error.detail.isEmpty ? "" : " (\(error.detail))")")
        return ExitCode.keysUnavailable
    }

    switch Verifier(policy: policy).verify(token, keys: keys, now: now) {
    case .success(let verified):
        print(verified.claimsJSON)
        return ExitCode.ok
    case .failure(let error):
        printError("invalid token: \(error.code.name)")
        return ExitCode.invalid
    }
}

/// Reads and parses a local JWKS file.
func loadKeySet(file: String) throws(IDTokenError) -> KeySet {
    guard let bytes = readFile(file, limit: KeySet.maxDocumentBytes) else {
        throw IDTokenError(.keysUnavailable, "cannot read \(file)")
    }
    return try KeySet(jwks: bytes)
}

/// Fetches a JWKS once (no cache: the command verifies one token), within the key cache's size and time limits.
func fetchKeySet(url: String) throws(IDTokenError) -> KeySet {
    let source = KeySource.url(url)
    if let problem = source.configurationProblem { throw IDTokenError(.keysUnavailable, problem) }
    return try source.loadKeySet()
}

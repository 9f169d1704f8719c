// `tokensignin verify`: checks one ID token offline; exit 0 claims on stdout, 1 invalid, 2 usage, 3 no keys.
import GoogleKeys
import IDToken
import SignIn

extension Commands {
    static func verify(_ arguments: [String], _ io: CommandIO) -> Int32 {
        let configuration: Configuration
        let now: Int64
        let tokenArgument: String
        do throws(CommandError) {
            let options = try Arguments(arguments, options: ["--client-id": .values, "--jwks": .value, "--jwks-url": .value,
                                                             "--now": .value, "--clock-skew": .value, "--hosted-domain": .values])
            guard options.positionals.count == 1 else { throw CommandError(.usage, "exactly one TOKEN (or -) is required") }
            tokenArgument = options.positionals[0]
            if options.has("--jwks"), options.has("--jwks-url") {
                throw CommandError(.usage, "--jwks and --jwks-url are exclusive")
            }
            // The flags are the settings `serve` reads, so they are validated by the same parser.
            var environment = io.environment
            func set(_ setting: Setting, _ value: String?) {
                if let value { environment[setting.variable] = value }
            }
            let clientIDs = options.all("--client-id"), domains = options.all("--hosted-domain")
            set(.clientIDs, clientIDs.isEmpty ? nil : clientIDs.joined(separator: ","))
            set(.hostedDomains, domains.isEmpty ? nil : domains.joined(separator: ","))
            set(.clockSkew, options.value("--clock-skew"))
            if let file = options.value("--jwks") {
                set(.jwksFile, file)
            } else if let url = options.value("--jwks-url") {
                set(.jwksURL, url)
                environment[Setting.jwksFile.variable] = nil
            }
            do {
                configuration = try Configuration(environment: environment, processorCount: io.processorCount)
                // A key file named on the command line is the operator's own choice for this one check; keys from the
                // settings (TOKENSIGNIN_JWKS_FILE, a JWKS URL) are held to the service's rule.
                if !options.has("--jwks") { try configuration.requireTrustedKeys() }
                // Any key file, though, must be one only its owner can change.
                try configuration.requireUnwritableKeyFile(fileMode: io.fileMode,
                                                           named: options.has("--jwks") ? "--jwks" : Setting.jwksFile.variable)
            } catch {
                throw CommandError(.usage, error.detail)
            }
            now = try options.integer("--now") ?? io.now()
        } catch {
            io.err("tokensignin verify: \(error.detail)\n\(usage)")
            return ExitCode.usage
        }

        let token: String
        if tokenArgument == "-" {
            guard let bytes = io.readStandardInput(1 << 20) else {
                io.err("tokensignin verify: cannot read the token from stdin")
                return ExitCode.usage
            }
            token = String(decoding: bytes, as: UTF8.self).trimmingASCIIWhitespace()
        } else {
            token = tokenArgument
        }

        let keys: KeySet
        do throws(IDTokenError) {
            if let file = configuration.jwksFile {
                guard let bytes = io.readFile(file, KeySet.maxDocumentBytes) else {
                    throw IDTokenError(.keysUnavailable, "cannot read \(file)")
                }
                keys = try KeySet(jwks: bytes)
            } else {
                // One fetch, as long as it takes within its own limits (not the service's short wait for keys).
                keys = try KeySource.url(configuration.jwksURL).loadKeySet()
            }
        } catch {
            io.err("keys unavailable: \(error.code.name)\(error.detail.isEmpty ? "" : " (\(error.detail))")")
            return ExitCode.unavailable
        }

        switch Verifier(policy: configuration.policy).verify(token, keys: keys, now: now) {
        case .success(let verified):
            io.out(verified.claimsJSON)
            return ExitCode.ok
        case .failure(let error):
            io.err("invalid token: \(error.code.name)")
            return ExitCode.failed
        }
    }
}

// tokensignin command line: one function per subcommand, each in its own file; exit codes are a documented contract.
#if canImport(Glibc)
import Glibc
#endif

let usage = """
    usage: tokensignin serve [--help | --FLAG VALUE ...]   (settings: TOKENSIGNIN_* variables, see --help)
           tokensignin migrate [--sql-dir DIR]
           tokensignin sessions list --user SUB
           tokensignin sessions revoke --user SUB | --session ID
           tokensignin prune [--revoked-retention DURATION] [--audit-retention DURATION] [--batch N]
           tokensignin verify [--client-id ID]... [--jwks FILE | --jwks-url URL] [--now UNIX_SECONDS]
                              [--clock-skew SECONDS] [--hosted-domain DOMAIN]... TOKEN|-
           tokensignin dev keygen --out DIR [--kind rsa|p256]
           tokensignin dev token --key PEM --kid KID --aud CLIENT_ID --sub SUB [--email E [--email-verified false]] [--name N] [--hd D]
                                 [--iat UNIX] [--ttl SECONDS] [--count N]
           tokensignin dev sql NAME
    """

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
switch arguments.first {
case "serve": status = serveCommand(arguments.dropFirst())
case "migrate": status = migrateCommand(arguments.dropFirst())
case "sessions": status = sessionsCommand(arguments.dropFirst())
case "prune": status = pruneCommand(arguments.dropFirst())
case "verify": status = verifyCommand(arguments.dropFirst())
case "dev": status = devCommand(arguments.dropFirst())
case "-h", "--help", "help": print(usage); status = 0
default:
    printError(usage)
    status = 2
}
exit(status)

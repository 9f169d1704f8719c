// tokensignin command line: one function per subcommand, each in its own file; exit codes are a documented contract.
#if canImport(Glibc)
import Glibc
#endif

let usage = """
    usage: tokensignin verify [--client-id ID]... [--jwks FILE | --jwks-url URL] [--now UNIX_SECONDS]
                              [--clock-skew SECONDS] [--hosted-domain DOMAIN]... TOKEN|-
           tokensignin dev keygen --out DIR [--kind rsa|p256]
           tokensignin dev token --key PEM --kid KID --aud CLIENT_ID --sub SUB [--email E] [--name N] [--hd D]
                                 [--iat UNIX] [--ttl SECONDS] [--count N]
    """

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
switch arguments.first {
case "verify": status = verifyCommand(arguments.dropFirst())
case "dev": status = devCommand(arguments.dropFirst())
case "-h", "--help", "help": print(usage); status = 0
default:
    printError(usage)
    status = 2
}
exit(status)

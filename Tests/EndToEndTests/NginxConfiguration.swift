// nginx's configuration as nginx itself read it (`nginx -T`), with its includes put in place, and the checks the
// identity headers and the session check rest on: what each location passes to its upstream, after nginx's
// inheritance rules.
import Foundation
import TestSupport

/// One directive: its name, its arguments (quotes removed), and its block when it has one.
struct NginxDirective {
    var name: String
    var arguments: [String]
    var block: [NginxDirective]?

    var firstArgument: String { arguments.first ?? "" }
    func all(_ name: String) -> [NginxDirective] { (block ?? []).filter { $0.name == name } }
    func has(_ name: String) -> Bool { (block ?? []).contains { $0.name == name } }
}

/// The configuration `nginx -T` dumped: every file it read, and the main file's directives with every `include`
/// replaced by what it includes.
struct NginxConfiguration {
    let files: [String: String]
    let main: [NginxDirective]

    /// Runs `nginx -T` (the test and the dump) on a configuration file; `prefix` is nginx's `-p`.
    init(nginxT configuration: String, prefix: String) throws {
        let result = try runProgram("/usr/sbin/nginx", ["-T", "-q", "-p", prefix, "-c", configuration, "-e", prefix + "/error.log"],
                                    environment: ProcessInfo.processInfo.environment)
        guard result.status == 0 else { throw StackError("nginx -T failed: \(result.stderrText)") }
        try self.init(dump: result.stdoutText, main: configuration)
    }

    /// From the text of `nginx -T`: each file follows a line `# configuration file PATH:`.
    init(dump: String, main: String) throws {
        var files: [String: String] = [:]
        var current: String?
        var text = ""
        for line in dump.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# configuration file "), line.hasSuffix(":") {
                if let current { files[current] = text }
                current = String(line.dropFirst("# configuration file ".count).dropLast())
                text = ""
            } else {
                text += line + "\n"
            }
        }
        if let current { files[current] = text }
        self.files = files
        guard let mainText = files[main] else { throw StackError("nginx -T did not dump \(main): \(files.keys.sorted())") }
        self.main = try Self.resolve(try Self.parse(mainText), files: files, depth: 0)
    }

    /// Every `include` replaced by the directives of the files it names (a pattern by every file it matches).
    private static func resolve(_ directives: [NginxDirective], files: [String: String], depth: Int) throws -> [NginxDirective] {
        guard depth < 16 else { throw StackError("includes nested too deep") }
        var resolved: [NginxDirective] = []
        for var directive in directives {
            if directive.name == "include" {
                let pattern = directive.firstArgument
                let matching = files.keys.filter { fnmatch(pattern, $0, 0) == 0 }.sorted()
                guard !matching.isEmpty else { throw StackError("nginx -T dumped nothing for include \(pattern)") }
                for file in matching { resolved += try resolve(try parse(files[file]!), files: files, depth: depth + 1) }
                continue
            }
            if let block = directive.block { directive.block = try resolve(block, files: files, depth: depth) }
            resolved.append(directive)
        }
        return resolved
    }

    /// nginx's syntax: words and quoted strings, `;` ends a directive, `{ }` a block, `#` a comment.
    static func parse(_ text: String) throws -> [NginxDirective] {
        var stack: [[NginxDirective]] = [[]]
        var names: [(String, [String])] = []
        var words: [String] = []
        var word = ""
        var inWord = false
        var characters = Array(text.unicodeScalars)[...]
        func endWord() {
            if inWord { words.append(word) }
            word = ""
            inWord = false
        }
        while let c = characters.popFirst() {
            switch c {
            case "#" where !inWord:
                while let next = characters.first, next != "\n" { characters.removeFirst() }
            case "\"", "'":
                guard !inWord else { word.unicodeScalars.append(c); continue }
                inWord = true
                while let next = characters.popFirst(), next != c {
                    if next == "\\", let escaped = characters.popFirst() {
                        if escaped != c && escaped != "\\" { word.unicodeScalars.append(next) }
                        word.unicodeScalars.append(escaped)
                    } else {
                        word.unicodeScalars.append(next)
                    }
                }
                endWord()
            case " ", "\t", "\n", "\r":
                endWord()
            case ";":
                endWord()
                guard let name = words.first else { throw StackError("an empty directive") }
                stack[stack.count - 1].append(NginxDirective(name: name, arguments: Array(words.dropFirst()), block: nil))
                words = []
            case "{":
                endWord()
                guard let name = words.first else { throw StackError("a block without a name") }
                names.append((name, Array(words.dropFirst())))
                stack.append([])
                words = []
            case "}":
                endWord()
                guard words.isEmpty, let (name, arguments) = names.popLast(), let block = stack.popLast() else {
                    throw StackError("unbalanced }")
                }
                stack[stack.count - 1].append(NginxDirective(name: name, arguments: arguments, block: block))
            default:
                inWord = true
                word.unicodeScalars.append(c)
            }
        }
        endWord()
        guard stack.count == 1, words.isEmpty else { throw StackError("unterminated block or directive") }
        return stack[0]
    }

    var http: NginxDirective? { main.first { $0.name == "http" } }
    var servers: [NginxDirective] { http?.all("server") ?? [] }
}

/// An upstream kind: the directive that passes a request on, and the one that sets what the application receives.
enum UpstreamKind: String, CaseIterable, CustomStringConvertible {
    case proxy, fastcgi, uwsgi, grpc

    var pass: String { rawValue + "_pass" }
    var setter: String {
        switch self {
        case .proxy: "proxy_set_header"
        case .fastcgi: "fastcgi_param"
        case .uwsgi: "uwsgi_param"
        case .grpc: "grpc_set_header"
        }
    }
    /// The name under which `header` reaches the application: a header, or a CGI-style `HTTP_` parameter.
    func name(of header: String) -> String {
        switch self {
        case .proxy, .grpc: header.lowercased()
        case .fastcgi, .uwsgi: "HTTP_" + header.uppercased().replacingOccurrences(of: "-", with: "_")
        }
    }
    var description: String { rawValue }
}

/// The identity headers and the variable tokensignin-auth.conf sets for each.
let identityHeaders: [(header: String, variable: String)] = [
    ("X-User-Id", "$tokensignin_user_id"), ("X-User-Sub", "$tokensignin_user_sub"),
    ("X-User-Email", "$tokensignin_user_email"), ("X-User-Email-Verified", "$tokensignin_user_email_verified"),
]

/// A location that passes requests to an upstream, and what it passes (its own setter lines or the ones it inherits).
struct ForwardingLocation {
    var server: String
    var location: String
    var kind: UpstreamKind
    var target: String
    var ownsSetters: Bool
    var setters: [NginxDirective]

    /// What is wrong with the identity headers this location passes on (empty: each of the four is set from its
    /// variable, so a client's own never gets through).
    var identityProblems: [String] {
        identityHeaders.compactMap { header, variable in
            let name = kind.name(of: header)
            let values = setters.filter { $0.firstArgument.lowercased() == name.lowercased() }.map { $0.arguments.dropFirst().first ?? "" }
            guard values == [variable] else {
                return "\(server) location \(location) (\(kind.pass) \(target)\(ownsSetters ? ", with its own \(kind.setter)" : "")): "
                    + "\(header) is \(values.isEmpty ? "not set, so a client's own reaches the application" : "set to \(values)")"
            }
            return nil
        }
    }
}

extension NginxConfiguration {
    /// Every location (nested ones too) that passes requests to an upstream other than `excluding`, with the
    /// setter lines in force there: a block with any setter line of its own inherits none from outside it.
    func forwardingLocations(excluding responder: String = "tokensignin_fcgi") -> [ForwardingLocation] {
        var found: [ForwardingLocation] = []
        func inherited(_ block: [NginxDirective], _ outer: [UpstreamKind: [NginxDirective]]) -> [UpstreamKind: [NginxDirective]] {
            var setters = outer
            for kind in UpstreamKind.allCases {
                let own = block.filter { $0.name == kind.setter }
                if !own.isEmpty { setters[kind] = own }
            }
            return setters
        }
        func visit(_ location: NginxDirective, server: String, outer: [UpstreamKind: [NginxDirective]]) {
            let block = location.block ?? []
            let setters = inherited(block, outer)
            for kind in UpstreamKind.allCases {
                guard let pass = block.first(where: { $0.name == kind.pass }), pass.firstArgument != responder else { continue }
                found.append(ForwardingLocation(server: server, location: location.arguments.joined(separator: " "), kind: kind,
                                                target: pass.firstArgument, ownsSetters: block.contains { $0.name == kind.setter },
                                                setters: setters[kind] ?? []))
            }
            for nested in block where nested.name == "location" { visit(nested, server: server, outer: setters) }
        }
        let httpSetters = inherited(http?.block ?? [], [:])
        for server in servers {
            let name = server.all("listen").map(\.firstArgument).joined(separator: ",")
            let serverSetters = inherited(server.block ?? [], httpSetters)
            for location in server.all("location") { visit(location, server: "server \(name)", outer: serverSetters) }
        }
        return found
    }

    /// Every `auth_request` whose target is not an `internal` location of the same server (a client could
    /// then reach the check directly, past the limits of the public one).
    var authRequestProblems: [String] {
        var problems: [String] = []
        for server in servers {
            let locations = server.all("location")
            func visit(_ location: NginxDirective) {
                for request in location.all("auth_request") where request.firstArgument != "off" {
                    let target = locations.first { $0.arguments == ["=", request.firstArgument] }
                    if target?.has("internal") != true {
                        problems.append("location \(location.arguments.joined(separator: " ")): auth_request \(request.firstArgument) "
                                        + (target == nil ? "has no exact location" : "is not internal"))
                    }
                }
                location.all("location").forEach(visit)
            }
            locations.forEach(visit)
        }
        return problems
    }
}

// nginx's configuration as nginx itself read it (`nginx -T`), with its includes put in place.
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

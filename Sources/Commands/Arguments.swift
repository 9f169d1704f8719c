// The one argument parser of every command: options as `--name value` or `--name=value`, switches, positionals.

/// A command line after the command's name, read against the options the command declares.
struct Arguments {
    /// What an option takes.
    enum Kind {
        /// One value; given twice is an error.
        case value
        /// A value each time it is given (`--client-id A --client-id B`).
        case values
        /// No value (`--status`); given twice is an error.
        case flag
    }

    private var values: [String: [String]] = [:]
    /// The options in the order given, each once (a repeatable one once per value), for callers that care.
    private(set) var given: [String] = []
    private(set) var positionals: [String] = []

    /// Reads `arguments`; an option not in `options`, a missing value, a value given to a switch, or a single-valued
    /// option given twice is a usage error naming it.
    init(_ arguments: some Collection<String>, options: [String: Kind]) throws(CommandError) {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            guard argument.hasPrefix("--") else {
                positionals.append(argument)
                continue
            }
            var name = argument
            var inline: String?
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            guard let kind = options[name] else { throw CommandError(.usage, "unknown option '\(name)'") }
            let value: String
            switch kind {
            case .flag:
                guard inline == nil else { throw CommandError(.usage, "\(name) takes no value") }
                value = ""
            case .value, .values:
                if let inline {
                    value = inline
                } else {
                    guard let next = rest.popFirst() else { throw CommandError(.usage, "\(name) needs a value") }
                    value = next
                }
            }
            if kind != .values, values[name] != nil { throw CommandError(.usage, "\(name) is given more than once") }
            values[name, default: []].append(value)
            given.append(name)
        }
    }

    /// The value of a single-valued option, nil when not given.
    func value(_ name: String) -> String? { values[name]?.first }

    /// Every value of a repeatable option, in order.
    func all(_ name: String) -> [String] { values[name] ?? [] }

    /// Whether a switch (or any option) was given.
    func has(_ name: String) -> Bool { values[name] != nil }

    /// The value of `name` as a whole number, nil when not given.
    func integer(_ name: String) throws(CommandError) -> Int64? {
        guard let text = value(name) else { return nil }
        guard let number = Int64(text) else { throw CommandError(.usage, "\(name) needs an integer") }
        return number
    }
}

// Typed statements: SQL written with the key paths of an arguments struct where its parameters go, numbered `$n`
// once, when the statement is built, and bound from a value of that struct at each execution.
//
//     struct SignInArguments { var googleSub: String; var email: String?; var lifetime: SQLInterval }
//     static let signIn = TypedStatement<SignInArguments>(name: "sign_in", """
//         INSERT INTO signin.users (google_sub, email) VALUES (\(\.googleSub), \(\.email)) ...
//         now() + \(\.lifetime)::interval ... WHERE google_sub = \(\.googleSub)
//         """)
//     // sql: "... VALUES ($1, $2) ... now() + $3::interval ... WHERE google_sub = $1"
//     let rows = try connection.execute(Self.signIn, SignInArguments(googleSub: sub, email: nil, lifetime: lifetime))
//
// Each distinct key path is one `$n`, numbered in order of first use; the same key path again is the same `$n`. A
// key path's value is any `SQLParameter` (an Optional of one binds nil as NULL). Literal text is SQL as written:
// it may not hold a `$n` of its own (the numbers are the template's). A template may take another of the same
// arguments (a shared fragment), whose key paths join the numbering. A statement without parameters is a
// `TypedStatement<Void>` run by `execute(_:)`.

/// A named statement whose parameters are read from the key paths of an `Arguments` value: built once (a
/// `static let`), so an execution neither builds SQL text nor collects its values into an array.
public struct TypedStatement<Arguments>: Sendable {
    /// The name and the SQL with `$1`, `$2`, ... as PostgreSQL and the positional API see them (for catalogs,
    /// docs and logs).
    public let statement: Statement
    /// One per `$n`, in order.
    let bindings: [SQLTemplate<Arguments>.Binding]

    /// The server-side name of the prepared statement; unique per SQL text within the application.
    public var name: String { statement.name }
    /// The SQL, each interpolated key path replaced by its `$n`.
    public var sql: String { statement.sql }
    /// How many `$n` the statement has: the distinct key paths it was written with.
    public var parameterCount: Int { bindings.count }
    /// The name of each `$n`'s property, in order (`googleSub` for `\SignInArguments.googleSub`): what the docs and
    /// the benchmarks' pgbench scripts bind by name.
    public var parameterNames: [String] {
        bindings.map { binding in
            let path = String(describing: binding.keyPath)
            return path.firstIndex(of: ".").map { String(path[path.index(after: $0)...]) } ?? path
        }
    }

    public init(name: String, _ template: SQLTemplate<Arguments>) {
        var sql = ""
        for piece in template.pieces {
            switch piece {
            case .text(let text): sql += text
            case .parameter(let index): sql += "$\(index + 1)"
            }
        }
        statement = Statement(name: name, sql: sql)
        bindings = template.bindings
    }

    /// The parameters' texts from `arguments`, checked as positional ones are (`ParameterTexts`).
    func texts(_ arguments: Arguments) throws(StoreError) -> ParameterTexts {
        var texts = try ParameterTexts(checkedCount: bindings.count)
        try withUnsafePointer(to: arguments) { (arguments) throws(StoreError) in
            for binding in bindings { try binding.write(arguments, &texts) }
        }
        return texts
    }
}

/// SQL text with interpolated key paths of `Arguments` (`\(\.googleSub)`) where parameters go, and with other
/// templates of the same arguments (shared fragments). Made from a string literal; turned into its statement by
/// `TypedStatement.init(name:_:)`.
public struct SQLTemplate<Arguments>: ExpressibleByStringInterpolation, Sendable {
    enum Piece: Sendable {
        case text(String)
        /// The parameter `bindings[index]`: `$(index + 1)` in the statement.
        case parameter(Int)
    }

    /// One parameter: the key path it is read from, and how its text is written at each execution.
    struct Binding: Sendable {
        /// Its identity: the same key path again is the same `$n`.
        let keyPath: AnyKeyPath & Sendable
        let write: @Sendable (UnsafePointer<Arguments>, inout ParameterTexts) throws(StoreError) -> Void
    }

    var pieces: [Piece] = []
    var bindings: [Binding] = []

    public init(stringLiteral text: String) {
        append(text)
    }

    public init(stringInterpolation: StringInterpolation) {
        self = stringInterpolation.template
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var template = SQLTemplate()

        public init(literalCapacity: Int, interpolationCount: Int) {
            template.pieces.reserveCapacity(2 * interpolationCount + 1)
        }

        public mutating func appendLiteral(_ text: String) {
            template.append(text)
        }

        /// A parameter, read from `keyPath` at each execution.
        public mutating func appendInterpolation<Value: SQLParameter>(_ keyPath: KeyPath<Arguments, Value> & Sendable) {
            template.pieces.append(.parameter(template.number(of: SQLTemplate.binding(keyPath))))
        }

        /// A fragment of the same arguments: its text, its key paths numbered with this template's.
        public mutating func appendInterpolation(_ fragment: SQLTemplate<Arguments>) {
            for piece in fragment.pieces {
                switch piece {
                case .text(let text): template.append(text)
                case .parameter(let index): template.pieces.append(.parameter(template.number(of: fragment.bindings[index])))
                }
            }
        }
    }

    private init() {}

    private mutating func append(_ text: String) {
        precondition(!Self.holdsNumberedParameter(text),
                     "a typed statement numbers its own parameters: interpolate a key path instead of a $n in \(text)")
        if case .text(let before) = pieces.last {
            pieces[pieces.count - 1] = .text(before + text)
        } else {
            pieces.append(.text(text))
        }
    }

    /// The index of `binding`'s key path among the parameters, added when it is new.
    private mutating func number(of binding: Binding) -> Int {
        if let index = bindings.firstIndex(where: { $0.keyPath == binding.keyPath }) { return index }
        bindings.append(binding)
        return bindings.count - 1
    }

    /// Whether `text` holds a `$` followed by a digit: a positional parameter (outside a quoted string, SQL has
    /// no other use for it).
    private static func holdsNumberedParameter(_ text: String) -> Bool {
        var afterDollar = false
        for byte in text.utf8 {
            if afterDollar && byte.isASCIIDigit { return true }
            afterDollar = byte == UInt8(ascii: "$")
        }
        return false
    }

    /// Reads a stored property (the usual case: `MemoryLayout.offset(of:)` knows where it lies) in place, as a
    /// field is read; any other key path (a computed property, one through a class) through the key path itself,
    /// which costs some hundred instructions more per parameter.
    private static func binding<Value: SQLParameter>(_ keyPath: KeyPath<Arguments, Value> & Sendable) -> Binding {
        guard let offset = MemoryLayout<Arguments>.offset(of: keyPath) else {
            return Binding(keyPath: keyPath) { (arguments, texts) throws(StoreError) in
                try texts.append(arguments.pointee[keyPath: keyPath])
            }
        }
        return Binding(keyPath: keyPath) { (arguments, texts) throws(StoreError) in
            // SAFETY: `offset` is where `keyPath`'s stored property lies inside an `Arguments` (what `offset(of:)`
            // promises), and `arguments` points at an initialized `Arguments` for the whole call; memory bound to a
            // struct is bound to its stored properties' types, so the property is read as its own type.
            try texts.append((UnsafeRawPointer(arguments) + offset).assumingMemoryBound(to: Value.self).pointee)
        }
    }
}

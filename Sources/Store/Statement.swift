// Statements: SQL with `$n` parameters, under the name each connection prepares it by.

/// A named statement, prepared on each connection the first time it runs there (run unnamed instead behind a
/// transaction pooler: see `Pooler`). Its parameters are a list lined up with `$1`, `$2`, ...; a `TypedStatement`
/// names them by the key paths of an arguments struct instead.
public struct Statement: Hashable, Sendable {
    /// The server-side name of the prepared statement; unique per SQL text within the application.
    public let name: String
    /// The SQL with `$1`, `$2`, ... parameters. Never build it from values.
    public let sql: String

    public init(name: String, sql: String) {
        self.name = name
        self.sql = sql
    }
}

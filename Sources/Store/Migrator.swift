// Migrator: applies the numbered SQL files in sql/ in order, each once, recording name and checksum.
import CLibPQ

/// One migration: a file name such as `001_users.sql` and its text.
public struct Migration: Sendable, Equatable {
    public let name: String
    public let sql: String

    /// Migration files are `NNN_words.sql` (three or more digits, lower-case words); anything else in the
    /// folder (queries.sql, README) is not a migration.
    public static func isMigrationFileName(_ name: String) -> Bool {
        guard name.hasSuffix(".sql") else { return false }
        let stem = name.utf8.dropLast(4)
        let digits = stem.prefix(while: \.isASCIIDigit)
        let rest = stem.dropFirst(digits.count)
        guard digits.count >= 3, rest.first == UInt8(ascii: "_"), rest.count > 1 else { return false }
        return rest.dropFirst().allSatisfy {
            ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || $0.isASCIIDigit || $0 == UInt8(ascii: "_")
        }
    }

    /// The numeric prefix that orders migrations (0 when it is beyond `Int`; named migrations always have one).
    var number: Int { Int(asciiDigits: name.utf8.prefix(while: \.isASCIIDigit)) ?? 0 }
}

/// Applies migrations forward only. Safe to run again (applies nothing new) and from several processes at
/// once (they queue on an advisory lock). Refuses when an applied file has changed since it was applied.
public struct Migrator: Sendable {
    /// The migrations in the order they apply.
    public let migrations: [Migration]

    /// Key of the transaction-level advisory lock that serialises migrators (ASCII "tsmigrat").
    public static let advisoryLockKey: Int64 = 0x7473_6D69_6772_6174

    /// Takes migrations from memory (tests, or SQL bundled into a binary).
    public init(migrations: [Migration]) throws(StoreError) {
        var seen: [Int: String] = [:]
        for migration in migrations {
            guard Migration.isMigrationFileName(migration.name) else {
                throw StoreError(.badMigration, "\(migration.name): not named NNN_name.sql")
            }
            if let other = seen[migration.number] {
                throw StoreError(.badMigration, "\(migration.name) and \(other) share the number \(migration.number)")
            }
            seen[migration.number] = migration.name
            if migration.sql.utf8.contains(0) { throw StoreError(.badMigration, "\(migration.name): contains NUL") }
        }
        self.migrations = migrations.sorted { $0.number < $1.number }
    }

    /// Reads every `NNN_name.sql` file in `directory` (other files are ignored).
    public init(directory: String) throws(StoreError) {
        var migrations: [Migration] = []
        for name in try Migrator.fileNames(in: directory) where Migration.isMigrationFileName(name) {
            let bytes = try Migrator.readFile(directory + "/" + name)
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw StoreError(.badMigration, "\(name): not valid UTF-8")
            }
            migrations.append(Migration(name: name, sql: text))
        }
        try self.init(migrations: migrations)
    }

    /// Creates the bookkeeping table if needed, checks every applied file's checksum, and applies the missing
    /// ones in order, each in its own transaction together with its `signin.schema_migrations` row.
    /// Returns the names applied by this call (empty when the database was up to date).
    @discardableResult
    public func migrate(on connection: Connection) throws(StoreError) -> [String] {
        let applied = try connection.transaction { (c) throws(StoreError) -> [String: String] in
            try Migrator.lock(c)
            // Only the first run creates it: later runs need no privilege on the schema beyond the files' own.
            if try c.query("SELECT to_regclass('signin.schema_migrations') IS NULL")[0, 0] == "t" {
                try c.run(script: Migrator.bootstrap)
            }
            return try Migrator.appliedChecksums(c)
        }
        let checksums = try checksums(on: connection)
        try verify(applied, checksums)

        var done: [String] = []
        for migration in migrations where applied[migration.name] == nil {
            let checksum = checksums[migration.name]!
            let ran = try connection.transaction { (c) throws(StoreError) -> Bool in
                try Migrator.lock(c)
                // Another migrator may have applied it while this one waited for the lock.
                let now = try Migrator.appliedChecksums(c)
                if now[migration.name] != nil {
                    try verify(now, checksums)
                    return false
                }
                do throws(StoreError) {
                    // A migration may rewrite a big table: no per-statement limit inside its transaction.
                    try c.run(script: "SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0")
                    try c.run(script: migration.sql)
                } catch {
                    throw StoreError(error.code == .connectionLost ? error.code : .badMigration,
                                     sqlState: error.sqlState, constraint: error.constraint,
                                     "\(migration.name): \(error.detail)")
                }
                guard c.isInTransaction else {
                    throw StoreError(.badMigration, "\(migration.name): the file ended the transaction (remove BEGIN/COMMIT)")
                }
                try c.query("INSERT INTO signin.schema_migrations (name, checksum) VALUES ($1, $2)",
                            [migration.name, checksum])
                return true
            }
            if ran { done.append(migration.name) }
        }
        return done
    }

    /// Names of the migrations not yet recorded in the database (without applying anything).
    public func pending(on connection: Connection) throws(StoreError) -> [String] {
        try status(on: connection).pending
    }

    /// How the files and the database compare, without changing anything (`tokensignin migrate --status`).
    public struct Status: Sendable, Equatable {
        /// Files recorded as applied, unchanged since, in order.
        public var applied: [String]
        /// Files not applied yet, in the order `migrate` would apply them.
        public var pending: [String]
        /// Files recorded as applied whose text has changed since: `migrate` refuses to run.
        public var changed: [String]
        /// Names recorded in the database with no file here (a newer release's); left alone.
        public var unknown: [String]
    }

    public func status(on connection: Connection) throws(StoreError) -> Status {
        let exists = try connection.query("SELECT to_regclass('signin.schema_migrations') IS NOT NULL")
        guard exists[0, 0] == "t" else { return Status(applied: [], pending: migrations.map(\.name), changed: [], unknown: []) }
        let recorded = try Migrator.appliedChecksums(connection)
        let checksums = try checksums(on: connection)
        var status = Status(applied: [], pending: [], changed: [], unknown: [])
        for migration in migrations {
            switch recorded[migration.name] {
            case nil: status.pending.append(migration.name)
            case checksums[migration.name]: status.applied.append(migration.name)
            default: status.changed.append(migration.name)
            }
        }
        let names = Set(migrations.map(\.name))
        status.unknown = recorded.keys.filter { !names.contains($0) }.sorted()
        return status
    }

    /// Hex SHA-256 of the UTF-8 bytes of `text`, computed by the server (PostgreSQL 11+), so Store needs
    /// no crypto library. Equal to `sha256sum` of the file.
    public static func checksum(of text: String, on connection: Connection) throws(StoreError) -> String {
        let rows = try connection.query("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", [text])
        return rows[0, 0] ?? ""
    }

    // MARK: - Steps

    /// The bookkeeping table; created by the Migrator itself because it must exist before 001 is recorded.
    static let bootstrap = """
        CREATE SCHEMA IF NOT EXISTS signin;
        CREATE TABLE IF NOT EXISTS signin.schema_migrations (
            name       text        PRIMARY KEY,
            checksum   text        NOT NULL CHECK (checksum ~ '^[0-9a-f]{64}$'),
            applied_at timestamptz NOT NULL DEFAULT now()
        );
        COMMENT ON TABLE signin.schema_migrations IS 'Migration files of sql/ applied to this database (by tokensignin migrate). Never edit an applied file: add a new one.';
        COMMENT ON COLUMN signin.schema_migrations.name IS 'File name, e.g. 001_users.sql.';
        COMMENT ON COLUMN signin.schema_migrations.checksum IS 'Hex SHA-256 of the file as applied (sha256sum); a later mismatch stops migrate.';
        COMMENT ON COLUMN signin.schema_migrations.applied_at IS 'When the file was applied (commit of its transaction).';
        """

    private static func lock(_ connection: Connection) throws(StoreError) {
        try connection.query("SELECT pg_advisory_xact_lock($1::bigint)", [String(advisoryLockKey)])
    }

    private static func appliedChecksums(_ connection: Connection) throws(StoreError) -> [String: String] {
        let rows = try connection.query("SELECT name, checksum FROM signin.schema_migrations")
        var applied: [String: String] = [:]
        for row in 0..<rows.count { applied[rows[row, 0] ?? ""] = rows[row, 1] ?? "" }
        return applied
    }

    private func checksums(on connection: Connection) throws(StoreError) -> [String: String] {
        var sums: [String: String] = [:]
        for migration in migrations { sums[migration.name] = try Migrator.checksum(of: migration.sql, on: connection) }
        return sums
    }

    /// Applied files must be unchanged. Applied names with no file (a newer release's) are left alone.
    private func verify(_ applied: [String: String], _ checksums: [String: String]) throws(StoreError) {
        for migration in migrations {
            if let recorded = applied[migration.name], recorded != checksums[migration.name] {
                throw StoreError(.checksumMismatch, "\(migration.name) was changed after it was applied")
            }
        }
    }

    // MARK: - Files (libc through CLibPQ's shim; Store imports no Foundation)

    static func fileNames(in directory: String) throws(StoreError) -> [String] {
        guard let dir = opendir(directory) else { throw StoreError(.noMigrationFolder, "cannot open folder \(directory)") }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = String(cString: CLibPQ_direntName(entry))
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    static func readFile(_ path: String) throws(StoreError) -> [UInt8] {
        guard let file = fopen(path, "rb") else { throw StoreError(.badMigration, "cannot open \(path)") }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            bytes.append(contentsOf: chunk[0..<n])
            if n < chunk.count {
                if ferror(file) != 0 { throw StoreError(.badMigration, "cannot read \(path)") }
                return bytes
            }
        }
    }
}

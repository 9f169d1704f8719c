// Migrator: applies files in order, once, refuses edited ones, rolls back broken ones, tolerates races.
import Foundation
import TestSupport
@testable import Store
import Testing

@Suite struct MigratorTests {
    /// A temporary folder of migration files.
    final class Folder {
        let path = NSTemporaryDirectory() + "tokensignin-migrations-\(randomHex(4))"
        init(_ files: [String: String]) throws {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            for (name, text) in files { try write(name, text) }
        }
        func write(_ name: String, _ text: String) throws {
            try text.write(toFile: path + "/" + name, atomically: true, encoding: .utf8)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    static let first = "CREATE SCHEMA IF NOT EXISTS signin; CREATE TABLE signin.a (n int);"
    static let second = "INSERT INTO signin.a VALUES (1);\n-- a comment\nINSERT INTO signin.a VALUES (2);"

    @Test func appliesFilesInNumericOrderAndRecordsNameAndChecksum() throws {
        let folder = try Folder([
            "002_fill.sql": Self.second, "001_create.sql": Self.first,
            "queries.sql": "not a migration", "README": "ignored",
        ])
        let db = try TestDatabase("migrate")
        let connection = try db.connect()
        let migrator = try Migrator(directory: folder.path)
        #expect(migrator.migrations.map(\.name) == ["001_create.sql", "002_fill.sql"])
        #expect(try migrator.pending(on: connection) == ["001_create.sql", "002_fill.sql"])
        #expect(try migrator.migrate(on: connection) == ["001_create.sql", "002_fill.sql"])
        #expect(try connection.query("SELECT count(*) FROM signin.a")[0, 0] == "2")
        let rows = try connection.query("SELECT name, checksum, applied_at IS NOT NULL FROM signin.schema_migrations ORDER BY name")
        #expect(rows.count == 2)
        #expect(rows[0, 1] == (try Migrator.checksum(of: Self.first, on: connection)))
        #expect(rows[1, 2] == "t")
        #expect(try migrator.pending(on: connection) == [])
    }

    @Test func secondRunAppliesNothing() throws {
        let folder = try Folder(["001_create.sql": Self.first, "002_fill.sql": Self.second])
        let db = try TestDatabase("idempotent")
        let connection = try db.connect()
        #expect(try Migrator(directory: folder.path).migrate(on: connection).count == 2)
        #expect(try Migrator(directory: folder.path).migrate(on: connection) == [])
        #expect(try connection.query("SELECT count(*) FROM signin.a")[0, 0] == "2")  // not inserted twice
    }

    @Test func newFileAddedLaterIsAppliedAlone() throws {
        let folder = try Folder(["001_create.sql": Self.first])
        let db = try TestDatabase("later")
        let connection = try db.connect()
        try Migrator(directory: folder.path).migrate(on: connection)
        try folder.write("002_fill.sql", Self.second)
        #expect(try Migrator(directory: folder.path).migrate(on: connection) == ["002_fill.sql"])
    }

    @Test func editedAppliedFileIsRefusedWithChecksumMismatchNamingIt() throws {
        let folder = try Folder(["001_create.sql": Self.first])
        let db = try TestDatabase("edited")
        let connection = try db.connect()
        try Migrator(directory: folder.path).migrate(on: connection)
        try folder.write("001_create.sql", Self.first + "\n-- edited\n")
        try folder.write("002_fill.sql", Self.second)
        do {
            try Migrator(directory: folder.path).migrate(on: connection)
            Issue.record("expected checksum_mismatch")
        } catch {
            #expect(error.code == .checksumMismatch)
            #expect(error.detail.contains("001_create.sql"))
        }
        // Nothing after the mismatch was applied.
        #expect(try connection.query("SELECT count(*) FROM signin.a")[0, 0] == "0")
    }

    @Test func brokenFileRollsBackAndIsNotRecorded() throws {
        let folder = try Folder([
            "001_create.sql": Self.first,
            "002_broken.sql": "CREATE TABLE signin.half (n int);\nINSERT INTO signin.a VALUES (1);\nSELEC broken;",
            "003_after.sql": "CREATE TABLE signin.after (n int);",
        ])
        let db = try TestDatabase("broken")
        let connection = try db.connect()
        do {
            try Migrator(directory: folder.path).migrate(on: connection)
            Issue.record("expected bad_migration")
        } catch {
            #expect(error.code == .badMigration)
            #expect(error.sqlState == "42601")
            #expect(error.detail.hasPrefix("002_broken.sql"))
        }
        let recorded = try connection.query("SELECT name FROM signin.schema_migrations ORDER BY name")
        #expect(recorded.count == 1)
        #expect(recorded[0, 0] == "001_create.sql")
        #expect(try connection.query("SELECT to_regclass('signin.half') IS NULL")[0, 0] == "t")
        #expect(try connection.query("SELECT to_regclass('signin.after') IS NULL")[0, 0] == "t")
        #expect(try connection.query("SELECT count(*) FROM signin.a")[0, 0] == "0")
        #expect(!connection.isInTransaction)
    }

    @Test func fileThatCommitsItselfIsRefused() throws {
        let folder = try Folder(["001_create.sql": "COMMIT; CREATE SCHEMA IF NOT EXISTS signin;"])
        let db = try TestDatabase("commit")
        #expect(throws: StoreError(.badMigration)) { try Migrator(directory: folder.path).migrate(on: try db.connect()) }
    }

    @Test(arguments: [
        (["001_a.sql", "001_b.sql"], "duplicate number"),
        (["1_short.sql"], "fewer than three digits"),
        (["001_Upper.sql"], "upper case"),
        (["001_.sql"], "no words"),
    ])
    func misnamedOrDuplicateFilesAreRefused(_ names: [String], _ why: String) {
        let migrations = names.map { Migration(name: $0, sql: "SELECT 1;") }
        #expect(throws: StoreError(.badMigration), "\(why)") { try Migrator(migrations: migrations) }
    }

    @Test func nonMigrationFileNamesAreIgnoredInAFolder() {
        #expect(Migration.isMigrationFileName("010_sign_ins.sql"))
        #expect(!Migration.isMigrationFileName("queries.sql"))
        #expect(!Migration.isMigrationFileName("001_users.sql.orig"))
        #expect(!Migration.isMigrationFileName("001_users.SQL"))
    }

    @Test func missingFolderIsItsOwnError() {
        #expect(throws: StoreError(.noMigrationFolder)) { try Migrator(directory: "/nonexistent/sql") }
    }

    @Test func fileThatIsNotUTF8IsRefused() throws {
        let folder = try Folder([:])
        try Data([0x53, 0x45, 0xff, 0x3b]).write(to: URL(fileURLWithPath: folder.path + "/001_bad.sql"))
        #expect(throws: StoreError(.badMigration)) { try Migrator(directory: folder.path) }
    }

    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    ])
    func checksumIsSHA256OfTheText(_ text: String, _ hex: String) throws {
        let connection = try Connection(conninfo: "")
        #expect(try Migrator.checksum(of: text, on: connection) == hex)
    }

    @Test func checksumOfAShippedFileEqualsSha256sum() throws {
        let connection = try Connection(conninfo: "")
        let path = repositoryRoot + "/sql/001_users.sql"
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let text = String(decoding: bytes, as: UTF8.self) + "ünïcødé ✓"
        #expect(try Migrator.checksum(of: text, on: connection) == (try sha256sum(Array(text.utf8))))
    }

    @Test func concurrentMigratorsApplyEachFileOnce() throws {
        let db = try TestDatabase("race")
        let migrator = try Migrator(directory: repositoryRoot + "/sql")
        let conninfo = db.conninfo
        let results = ResultBox()
        let group = DispatchGroup()
        for _ in 0..<4 {
            group.enter()
            Thread {
                defer { group.leave() }
                do throws(StoreError) {
                    let connection = try Connection(conninfo: conninfo)
                    results.append(.success(try migrator.migrate(on: connection)))
                } catch {
                    results.append(.failure(error))
                }
            }.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        let applied = results.all.compactMap { try? $0.get() }
        #expect(applied.count == 4)
        #expect(applied.flatMap { $0 }.sorted() == migrator.migrations.map(\.name))
    }

    @Test func theShippedMigrationsApplyAndCommentEveryTableAndColumn() throws {
        let db = try TestDatabase("shipped")
        let connection = try db.connect()
        let names = try Migrator(directory: repositoryRoot + "/sql").migrate(on: connection)
        #expect(names.first == "001_users.sql")
        let uncommented = try connection.query("""
            SELECT c.relname || coalesce('.' || a.attname, '')
              FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'signin'
              LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                                       AND c.relkind = 'r'
             WHERE c.relkind IN ('r', 'v')
               AND col_description(c.oid, coalesce(a.attnum, 0)) IS NULL
               AND (a.attnum IS NOT NULL OR obj_description(c.oid, 'pg_class') IS NULL)
            """)
        #expect(uncommented.count == 0, "\((0..<uncommented.count).map { uncommented[$0, 0] ?? "" })")
        let types = try connection.query("""
            SELECT count(*) FROM information_schema.columns
             WHERE table_schema = 'signin' AND data_type = 'timestamp without time zone'
            """)
        #expect(types[0, 0] == "0")
    }
}

/// Results gathered from several threads.
final class ResultBox: @unchecked Sendable {
    // SAFETY: every access to `results` holds `lock`.
    private let lock = NSLock()
    private var results: [Result<[String], StoreError>] = []
    func append(_ result: Result<[String], StoreError>) { lock.withLock { results.append(result) } }
    var all: [Result<[String], StoreError>] { lock.withLock { results } }
}

/// sha256sum of bytes, for cross-checking the server's checksum against an independent tool.
func sha256sum(_ bytes: [UInt8]) throws -> String {
    let path = NSTemporaryDirectory() + "tokensignin-sum-\(randomHex(4))"
    defer { try? FileManager.default.removeItem(atPath: path) ; try? FileManager.default.removeItem(atPath: path + ".out") }
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    #expect(spawnAndWait(["/bin/sh", "-c", "sha256sum < '\(path)' > '\(path).out'"]) == 0)
    let output = try String(contentsOfFile: path + ".out", encoding: .utf8)
    return output.split(separator: " ").first.map(String.init) ?? ""
}

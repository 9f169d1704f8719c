// The database as the commands reach it: a URL checked without connecting, a first round trip, the schema's
// migrations applied.
import Store

/// What the commands ask of the database outside the session stores.
package enum Database {
    /// Checks that libpq can parse `conninfo` (a URL or `key=value` pairs) without connecting; libpq's message when not.
    package static func validate(conninfo: String) throws(StoreError) {
        try Connection.validate(conninfo: conninfo)
    }

    /// One round trip on a connection of its own (the responder's start-up check: libpq's words say what is wrong).
    package static func probe(conninfo: String, pooler: Pooler) throws(StoreError) {
        _ = try Connection(conninfo: conninfo, pooler: pooler).query("SELECT 1", [])
    }
}

/// The numbered migrations of a folder (`sql/`), and what `tokensignin migrate` does with them.
package struct SchemaMigrations {
    package typealias Status = Migrator.Status
    private let migrator: Migrator

    package init(directory: String) throws(StoreError) {
        migrator = try Migrator(directory: directory)
    }

    package var isEmpty: Bool { migrator.migrations.isEmpty }

    /// Applied, pending, changed and unknown files.
    package func status(conninfo: String, pooler: Pooler, role: String?) throws(StoreError) -> Status {
        try migrator.status(on: connect(conninfo, pooler, role))
    }

    /// Applies what is pending, each file in its own transaction; the names applied.
    package func apply(conninfo: String, pooler: Pooler, role: String?) throws(StoreError) -> [String] {
        try migrator.migrate(on: connect(conninfo, pooler, role))
    }

    /// A connection that runs as `role` when one is given, so what the migrations create belongs to the schema's owner
    /// whoever logs in (a DBA, or the postgres account over peer authentication).
    private func connect(_ conninfo: String, _ pooler: Pooler, _ role: String?) throws(StoreError) -> Connection {
        let connection = try Connection(conninfo: conninfo, pooler: pooler)
        if let role {
            // A parameter, not an identifier in the text: set_config is SET ROLE without interpolation.
            try connection.query("SELECT set_config('role', $1, false)", [role])
        }
        return connection
    }
}

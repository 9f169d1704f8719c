// StoreError: the codes' names as logs and metrics carry them, and which failures are retryable, outages, or lose
// the connection, for every code and the server states that matter.
@testable import Store
import Testing

@Suite struct StoreErrorTests {
    @Test(arguments: [
        (StoreError.Code.connectionFailed, "connection_failed"), (.connectionLost, "connection_lost"),
        (.queryFailed, "query_failed"), (.uniqueViolation, "unique_violation"),
        (.constraintViolation, "constraint_violation"), (.serializationFailure, "serialization_failure"),
        (.timedOut, "timed_out"), (.permissionDenied, "permission_denied"), (.unexpectedResult, "unexpected_result"),
        (.invalidParameter, "invalid_parameter"), (.badMigration, "bad_migration"),
        (.noMigrationFolder, "no_migration_folder"), (.checksumMismatch, "checksum_mismatch"),
    ] as [(StoreError.Code, String)])
    func everyCodeKeepsItsName(_ code: StoreError.Code, _ name: String) {
        #expect(code.name == name && "\(code)" == name)
        #expect(StoreError.Code(rawValue: name) == code)
        // An error prints as its code alone, and equals any other error of that code.
        let error = StoreError(code, sqlState: "XX000", constraint: "c", "a detail for logs")
        #expect(error.description == name && "\(error)" == name)
        #expect(error == StoreError(code) && error.hashValue == StoreError(code).hashValue)
    }

    @Test func thereAreThirteenCodes() {
        #expect(StoreError.Code.allCases.count == 13)
    }

    /// The server states that decide retryability, nil (none sent) among them.
    static let states: [String?] = [
        nil, "", "08006", "08003", "08P01", "53300", "53100", "57P01", "57P02", "57P03", "57P04", "40001", "40P01",
        "57014", "55P03", "55000", "25006", "25P02", "23505", "23514", "42501", "42601", "42P01", "26000", "XX000",
    ]
    static let retryableStates: Set<String> = [
        "08006", "08003", "08P01", "53300", "53100", "57P01", "57P02", "57P03", "40001", "40P01", "57014", "55P03", "25006",
    ]
    static let retryableWhateverTheState: Set<StoreError.Code> = [.connectionFailed, .connectionLost, .serializationFailure, .timedOut]

    /// Four codes are retryable whatever the state; any other only when the server's state says the condition passes.
    /// An outage is a retryable failure other than a statement's own: a serialization failure, a lock not granted.
    @Test(arguments: StoreError.Code.allCases)
    func retryableAndOutageFollowTheCodeThenTheServerState(_ code: StoreError.Code) {
        for state in Self.states {
            let error = StoreError(code, sqlState: state)
            let retryable = Self.retryableWhateverTheState.contains(code) || state.map(Self.retryableStates.contains) == true
            #expect(error.isRetryable == retryable, "\(code) \(state ?? "nil")")
            #expect(error.isOutage == (retryable && code != .serializationFailure && state != "55P03"), "\(code) \(state ?? "nil")")
        }
    }

    @Test(arguments: [
        (nil, .queryFailed), ("08006", .connectionLost), ("08P01", .connectionLost), ("57P01", .connectionLost),
        ("57P02", .connectionLost), ("57P03", .connectionLost), ("25006", .connectionLost), ("23505", .uniqueViolation),
        ("23514", .constraintViolation), ("23503", .constraintViolation), ("23502", .constraintViolation),
        ("40001", .serializationFailure), ("40P01", .serializationFailure), ("57014", .timedOut), ("55P03", .timedOut),
        ("42501", .permissionDenied), ("42P01", .queryFailed), ("42601", .queryFailed), ("53300", .queryFailed),
        ("57P04", .queryFailed), ("XX000", .queryFailed), ("", .queryFailed),
    ] as [(String?, StoreError.Code)])
    func serverStatesMapToTheirCodes(_ state: String?, _ code: StoreError.Code) {
        #expect(StoreError.code(forSQLState: state) == code)
        if let state { #expect(StoreError.losesConnection(sqlState: state) == (code == .connectionLost)) }
    }
}

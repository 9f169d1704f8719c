// STUB: a set of Google's public signing keys, by kid. The IDToken helper replaces this implementation.

public struct KeySet: Sendable {
    public let keyIDs: [String]

    /// Parses a JWKS document (`{"keys": [...]}`).
    public init(jwks: [UInt8]) throws(IDTokenError) {
        throw IDTokenError(.invalidKeySet, "stub")
    }

    public func contains(kid: String) -> Bool { keyIDs.contains(kid) }
}

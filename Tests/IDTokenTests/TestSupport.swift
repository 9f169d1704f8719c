// Shared fixtures for IDToken tests: the published vectors, generated development keys, token builders.
import Foundation
import IDToken
import Signing
import Testing

/// The published vectors in `Vectors/` beside this file (sources and licences in Vectors/README.md). A missing
/// or malformed file is a thrown error naming it, so the tests that need it fail with that message.
enum TestData {
    /// The repository root: three levels above this file (`Tests/IDTokenTests/TestSupport.swift`).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Vectors")

    struct VectorError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func bytes(_ path: String) throws -> [UInt8] {
        let url = folder.appendingPathComponent(path)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw VectorError("test vector \(path) is missing: expected at \(url.path) (see Tests/IDTokenTests/Vectors/README.md)")
        }
        return [UInt8](data)
    }

    static func json(_ path: String) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(bytes(path)))
        guard let dictionary = object as? [String: Any] else { throw VectorError("test vector \(path) is not a JSON object") }
        return dictionary
    }

    /// `dictionary[key]` as a `T`, or an error naming the member (vector files are data from elsewhere).
    static func member<T>(_ dictionary: [String: Any], _ key: String, as type: T.Type = T.self) throws -> T {
        guard let value = dictionary[key] as? T else { throw VectorError("vector member \(key) missing or not a \(T.self)") }
        return value
    }

    /// Compact JSON with sorted keys of a value decoded by JSONSerialization.
    static func jsonText(_ value: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
    }
}

/// Keys generated once per test process (RSA generation is slow).
enum Keys {
    static let rsa = try! DevelopmentKey.generate(.rsa2048)
    static let rsa2 = try! DevelopmentKey.generate(.rsa2048)
    static let ec = try! DevelopmentKey.generate(.p256)
    /// A key set with `rsa` and `ec`.
    static let set = try! KeySet(jwks: Array("{\"keys\":[\(rsa.publicJWK),\(ec.publicJWK)]}".utf8))
}

enum Fixture {
    static let clientID = "123456789012-clienta.apps.googleusercontent.com"
    static let otherClientID = "123456789012-clientb.apps.googleusercontent.com"
    static let now: Int64 = 1_700_000_000
    static let policy = Policy(clientIDs: [clientID, otherClientID])

    /// Claims of a token valid at `now` for `clientID`.
    static var claims: [String: ClaimValue] {
        [
            "iss": "https://accounts.google.com", "aud": .string(clientID), "azp": .string(clientID),
            "sub": "110169484474386276334", "email": "user@example.com", "email_verified": true,
            "name": "Test User", "iat": .integer(now - 100), "exp": .integer(now + 3500),
        ]
    }

    static func claims(_ changes: [String: ClaimValue], removing: [String] = []) -> [String: ClaimValue] {
        var c = claims
        for (k, v) in changes { c[k] = v }
        for k in removing { c[k] = nil }
        return c
    }

    static func verify(_ token: String, policy: Policy = policy, keys: KeySet = Keys.set, now: Int64 = now)
        -> Result<VerifiedToken, IDTokenError> {
        Verifier(policy: policy).verify(token, keys: keys, now: now)
    }

    static func code(_ result: Result<VerifiedToken, IDTokenError>) -> String {
        switch result {
        case .success: "ok"
        case .failure(let e): e.code.name
        }
    }

    static func code(_ result: Result<VerifiedJWS, IDTokenError>) -> String {
        switch result {
        case .success: "ok"
        case .failure(let e): e.code.name
        }
    }
}

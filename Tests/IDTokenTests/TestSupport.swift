// Shared fixtures for IDToken tests: test-data location, generated development keys, token builders.
import Foundation
import IDToken
import Testing

enum TestData {
    /// The package root: the nearest ancestor of this file holding Package.swift.
    static let packageRoot: URL = {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while dir.path != "/" {
            if FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) { return dir }
            dir.deleteLastPathComponent()
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// `<repo>/../shared/testdata`, else `/work/shared/testdata`.
    static let root: URL = {
        let beside = packageRoot.deletingLastPathComponent().appendingPathComponent("shared/testdata")
        if FileManager.default.fileExists(atPath: beside.path) { return beside }
        return URL(fileURLWithPath: "/work/shared/testdata")
    }()

    static func bytes(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: root.appendingPathComponent(path)))
    }

    static func json(_ path: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: root.appendingPathComponent(path))) as! [String: Any]
    }

    static func jsonText(_ value: Any) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
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
    static let clientID = "client-a.apps.googleusercontent.com"
    static let otherClientID = "client-b.apps.googleusercontent.com"
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

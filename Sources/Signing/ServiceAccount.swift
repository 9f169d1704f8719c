// A Google service account's JSON key, and the self-signed JWT that authorises calls to Google's APIs with it.
import FoundationEssentials
import IDToken

/// The parts of a service-account key file (`"type": "service_account"`) a self-signed JWT needs. The private
/// key stays inside its `SigningKey`; nothing here prints it.
public struct ServiceAccount: Sendable {
    /// The account's email: the JWT's issuer and subject.
    public let clientEmail: String
    /// The key's id: the JWT header's `kid`.
    public let privateKeyID: String
    public let key: SigningKey

    /// Key files Google hands out are about 2.3 KB.
    public static let maxFileBytes = 64 * 1024

    private struct File: Decodable {
        var type: String?
        var client_email: String?
        var private_key_id: String?
        var private_key: String?
    }

    /// Parses a key file's bytes. Throws `.badServiceAccount` naming the member that is missing or wrong, or
    /// `.badPrivateKey` for the key itself; never echoes the file.
    public init(json: [UInt8]) throws(SigningError) {
        guard json.count <= Self.maxFileBytes else { throw SigningError(.badServiceAccount, "key file over \(Self.maxFileBytes) bytes") }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: Data(json))
        } catch {
            throw SigningError(.badServiceAccount, "not a JSON object with string members")
        }
        guard file.type == nil || file.type == "service_account" else {
            throw SigningError(.badServiceAccount, "type is not service_account")
        }
        guard let email = file.client_email, !email.isEmpty, email.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw SigningError(.badServiceAccount, "client_email is missing")
        }
        guard let keyID = file.private_key_id, !keyID.isEmpty, keyID.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != 0x22 && $0 != 0x5c }) else {
            throw SigningError(.badServiceAccount, "private_key_id is missing")
        }
        guard let pem = file.private_key else { throw SigningError(.badServiceAccount, "private_key is missing") }
        let key = try SigningKey(pem: pem)
        guard key.algorithm == .rs256 else { throw SigningError(.badServiceAccount, "private_key is not an RSA key") }
        self.clientEmail = email
        self.privateKeyID = keyID
        self.key = key
    }

    /// The longest lifetime Google accepts for a self-signed JWT.
    public static let maxLifetime: Int64 = 3600

    /// A self-signed JWT for `audience` (an API's service name): RS256, `kid` the key's id, `iss` = `sub` = the
    /// account's email, issued `now`, expiring `lifetime` seconds later (at most an hour).
    public func assertion(audience: String, now: Int64, lifetime: Int64 = ServiceAccount.maxLifetime) -> String {
        let header = #"{"alg":"RS256","kid":"\#(privateKeyID)","typ":"JWT"}"#
        let claims = ClaimValue.object([
            "iss": .string(clientEmail), "sub": .string(clientEmail), "aud": .string(audience),
            "iat": .integer(now), "exp": .integer(now + min(max(lifetime, 1), Self.maxLifetime)),
        ])
        return key.sign(header: Array(header.utf8), payload: Array(claims.jsonString.utf8))
    }
}

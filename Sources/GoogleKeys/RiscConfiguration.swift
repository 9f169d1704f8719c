// Google's RISC configuration (`/.well-known/risc-configuration`): where it is read from, and what it says.
import FoundationEssentials

/// Where the receiver reads Google's RISC configuration (`TOKENSIGNIN_RISC_CONFIGURATION_URL`).
public enum RiscConfigurationSource: Sendable, Hashable, CustomStringConvertible {
    /// An `https://` URL, or `http://` to a loopback host (tests).
    case url(String)
    /// Not read: `/risc` verifies with the ID tokens' keys and nothing is compared.
    case off

    /// Google's discovery document for Cross-Account Protection.
    public static let googleURL = "https://accounts.google.com/.well-known/risc-configuration"
    public static let google = RiscConfigurationSource.url(googleURL)

    /// Whether this is Google's own document.
    public var isGoogle: Bool { self == .google }

    public var description: String {
        switch self {
        case .url(let url): url
        case .off: "off"
        }
    }
}

/// The members of the RISC configuration the receiver compares with what it uses.
public struct RiscConfiguration: Sendable, Hashable {
    public var issuer: String
    public var jwksURI: String

    /// Larger documents are refused (Google's is under 2 KB).
    static let maxBytes = 64 * 1024
    /// The longest `issuer` and `jwks_uri` read.
    static let maxValueBytes = 2048

    /// The document's `issuer` and `jwks_uri`; nil with the reason when it is not a JSON object with both as strings
    /// of printable ASCII (at most 2048 bytes each: they are logged and compared, and the URI may be fetched).
    static func parse(_ body: [UInt8]) -> Result<RiscConfiguration, KeyFetchFailure> {
        struct Document: Decodable {
            var issuer: String?
            var jwks_uri: String?
        }
        guard let document = try? JSONDecoder().decode(Document.self, from: Data(body)) else {
            return .failure(.invalidDocument("not a JSON object with string issuer and jwks_uri"))
        }
        func usable(_ value: String?) -> String? {
            guard let value, !value.isEmpty, value.utf8.count <= maxValueBytes,
                  value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
            return value
        }
        guard let issuer = usable(document.issuer) else { return .failure(.invalidDocument("no usable issuer")) }
        guard let jwksURI = usable(document.jwks_uri) else { return .failure(.invalidDocument("no usable jwks_uri")) }
        return .success(RiscConfiguration(issuer: issuer, jwksURI: jwksURI))
    }

    /// Fetches and parses the document at `url`: status 200 only, bounded in size and time, no redirects.
    static func fetch(_ url: String, limits: FetchLimits) -> Result<RiscConfiguration, KeyFetchFailure> {
        do throws(KeyFetchFailure) {
            let response = try KeyFetch.get(url, limits: limits, userAgent: "tokensignin-risc")
            guard response.status == 200 else { return .failure(.status(response.status)) }
            return parse(response.body)
        } catch {
            return .failure(error)
        }
    }
}

// Where Google's signing keys come from (Google's URL, another https URL, or a file), and a one-shot load for tools.
import IDToken

/// Where the signing keys come from.
public enum KeySource: Sendable, Hashable {
    /// A local JWKS file, read at the first use and again (cooldown permitting) on an unknown kid. Never HTTP.
    case file(String)
    /// A JWKS URL: `https://`, or `http://` to a loopback host only (tests, a local sidecar).
    case url(String)

    /// Google's JWKS endpoint: the keys of ID tokens and of Cross-Account Protection security event tokens.
    /// The one place this URL is written (configuration defaults and `tokensignin verify` use it).
    public static let googleURL = "https://www.googleapis.com/oauth2/v3/certs"
    public static let google = KeySource.url(googleURL)

    /// `google`, `url` (another URL) or `file`, as `/readyz` and `tokensignin_key_source{kind=...}` name it.
    public var kind: String {
        switch self {
        case .file: "file"
        case .url(let url): url == Self.googleURL ? "google" : "url"
        }
    }

    /// The file's path or the URL.
    public var location: String {
        switch self {
        case .file(let path): path
        case .url(let url): url
        }
    }

    /// A message for the operator when this source can never work (a non-https URL), nil when it may.
    public var configurationProblem: String? {
        switch self {
        case .file(let path): path.isEmpty ? "empty JWKS file path" : nil
        case .url(let url): Self.urlProblem(url)
        }
    }

    /// nil when `url` may be fetched: `https://` to any host, `http://` only to a loopback host (tests, a local
    /// sidecar), never with user information; otherwise why not. libcurl's own URL parser decides, so the check
    /// and the fetch cannot read a URL differently.
    public static func urlProblem(_ url: String) -> String? {
        KeyFetch.urlProblem(url)
    }

    /// Loads and parses the key set once, on the calling thread, under the settings' size and time limits, with
    /// no cache: for one-shot tools such as `tokensignin verify`. Any failure is `keys_unavailable` (with a detail).
    public func loadKeySet(settings: KeyCache.Settings = KeyCache.Settings()) throws(IDTokenError) -> KeySet {
        do throws(KeyFetchFailure) {
            return try KeyFetch.keySet(from: KeyFetch.document(from: self, limits: FetchLimits(settings))).keys
        } catch {
            throw IDTokenError(.keysUnavailable, error.description)
        }
    }
}

// SHA-256 through OpenSSL's EVP one-shot API, for the application (which may not import C).
import COpenSSL

public enum Digest {
    /// SHA-256 of `bytes` (32 bytes).
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, SHA256Algorithm.md, nil)
            }
        }
        // A failing SHA-256 means libcrypto itself is broken; there is no safe way to continue.
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return out
    }
}

/// The SHA-256 EVP_MD, fetched once (OpenSSL 3 implicit fetches per call are costly).
enum SHA256Algorithm {
    // SAFETY: an EVP_MD fetched once and never freed is immutable and shareable between threads.
    nonisolated(unsafe) static let md: OpaquePointer = {
        guard let md = EVP_MD_fetch(nil, "SHA256", nil) else { fatalError("EVP_MD_fetch(SHA256) failed") }
        return md
    }()
}

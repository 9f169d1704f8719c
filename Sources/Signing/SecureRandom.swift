// Cryptographically secure random bytes from OpenSSL's CSPRNG, for session tokens and CSRF values.
import COpenSSL

public enum SecureRandom {
    /// `count` random bytes. Traps if the CSPRNG fails: handing out predictable tokens would be worse.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0)
        var out = [UInt8](repeating: 0, count: count)
        if count == 0 { return out }
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        precondition(ok == 1, "RAND_bytes failed")
        return out
    }
}

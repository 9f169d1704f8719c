// Verification contexts of one public key: an owned EVP_PKEY_CTX/EVP_MD_CTX pair, and a lock-free pool reusing them.
import COpenSSL
import Synchronization

/// An EVP_PKEY_CTX set up to verify with one key (PKCS#1 v1.5 or ECDSA, SHA-256) and an EVP_MD_CTX for hashing
/// the signed input. It owns both and frees them exactly once, when it goes away: it cannot be copied.
struct VerifyContext: ~Copyable {
    private let ctx: OpaquePointer
    private let md: OpaquePointer

    init?(pkey: OpaquePointer, algorithm: SignatureAlgorithm) {
        guard let md = EVP_MD_CTX_new() else { return nil }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
            EVP_MD_CTX_free(md)
            return nil
        }
        var ok = EVP_PKEY_verify_init(ctx) == 1
        if ok && algorithm == .rs256 { ok = EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 }
        if ok { ok = EVP_PKEY_CTX_set_signature_md(ctx, SHA256Algorithm.md) == 1 }
        guard ok else {
            ERR_clear_error()
            EVP_PKEY_CTX_free(ctx)
            EVP_MD_CTX_free(md)
            return nil
        }
        self.ctx = ctx
        self.md = md
    }

    deinit {
        EVP_PKEY_CTX_free(ctx)
        EVP_MD_CTX_free(md)
    }

    /// True when `signature` verifies over SHA-256(`message`).
    func verify(signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> Bool {
        let ctx = self.ctx, md = self.md
        // SHA-256 into a stack buffer with this context's own EVP_MD_CTX (re-initialising it with the pre-fetched
        // digest is a cheap reset; the one-shot SHA256() fetches the digest on every call).
        let result = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(EVP_MAX_MD_SIZE)) { d -> Int32 in
            var length: UInt32 = 0
            guard EVP_DigestInit_ex2(md, SHA256Algorithm.md, nil) == 1,
                  EVP_DigestUpdate(md, message.baseAddress, message.count) == 1,
                  EVP_DigestFinal_ex(md, d.baseAddress, &length) == 1, length == 32 else { return -1 }
            return EVP_PKEY_verify(ctx, signature.baseAddress?.assumingMemoryBound(to: UInt8.self), signature.count,
                                   d.baseAddress, Int(length))
        }
        if result != 1 { ERR_clear_error() }
        return result == 1
    }
}

/// Verify contexts of one key, made once and reused without a lock: in OpenSSL 3.0 building an EVP_PKEY_CTX
/// per call costs about as much as the RSA-2048 verify itself. Each slot's state is an atomic; the thread whose
/// compare-and-swap moves a slot to `busy` owns its context until it stores `ready` again.
// SAFETY: a slot's context memory is read or written only by the thread that moved the slot to `busy`
// (acquiring) and is published to the next owner by a releasing store of `ready`. The key pointer is the
// owning PublicKey's, which keeps this pool (and so outlives it).
final class VerifyContextPool: @unchecked Sendable {
    /// More than the worker threads that verify at once; beyond it, a context is made and freed per call.
    static let slotCount = 32
    private static let empty = 0, busy = 1, ready = 2

    private let states: UnsafeMutablePointer<Atomic<Int>>
    private let contexts: UnsafeMutablePointer<VerifyContext>
    private let pkey: OpaquePointer
    private let algorithm: SignatureAlgorithm

    init(pkey: OpaquePointer, algorithm: SignatureAlgorithm) {
        self.pkey = pkey
        self.algorithm = algorithm
        states = .allocate(capacity: Self.slotCount)
        for i in 0..<Self.slotCount { (states + i).initialize(to: Atomic(Self.empty)) }
        contexts = .allocate(capacity: Self.slotCount)
    }

    deinit {
        for i in 0..<Self.slotCount where states[i].load(ordering: .acquiring) == Self.ready {
            (contexts + i).deinitialize(count: 1)
        }
        states.deinitialize(count: Self.slotCount)
        states.deallocate()
        contexts.deallocate()
    }

    /// `body` with a context of this key to itself; false when no context can be made (out of memory).
    func withContext(_ body: (borrowing VerifyContext) -> Bool) -> Bool {
        for i in 0..<Self.slotCount where states[i].load(ordering: .relaxed) == Self.ready {
            guard states[i].compareExchange(expected: Self.ready, desired: Self.busy, ordering: .acquiring).exchanged else { continue }
            let result = body(contexts[i])
            states[i].store(Self.ready, ordering: .releasing)
            return result
        }
        // None ready (the first calls, or every context in use): make one, and keep it if a slot is free.
        guard let context = VerifyContext(pkey: pkey, algorithm: algorithm) else { return false }
        let result = body(context)
        guard let slot = claimEmptySlot() else { return result }  // the one-off context is freed here
        (contexts + slot).initialize(to: context)
        states[slot].store(Self.ready, ordering: .releasing)
        return result
    }

    private func claimEmptySlot() -> Int? {
        for i in 0..<Self.slotCount where states[i].load(ordering: .relaxed) == Self.empty {
            if states[i].compareExchange(expected: Self.empty, desired: Self.busy, ordering: .acquiring).exchanged { return i }
        }
        return nil
    }
}

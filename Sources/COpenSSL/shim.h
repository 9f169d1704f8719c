// OpenSSL 3 libcrypto for tokensignin: EVP and OSSL_PARAM only; deprecated 1.x calls fail to compile.
#ifndef TOKENSIGNIN_COPENSSL_SHIM_H
#define TOKENSIGNIN_COPENSSL_SHIM_H
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>

// OPENSSL_free is a macro (it passes __FILE__/__LINE__), so Swift cannot call it directly.
static inline void COpenSSL_free(void *p) { OPENSSL_free(p); }

// EVP_PKEY_PUBLIC_KEY / EVP_PKEY_KEYPAIR are composite macros Swift does not import.
static inline int COpenSSL_selection_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }
static inline int COpenSSL_selection_keypair(void) { return EVP_PKEY_KEYPAIR; }

#endif

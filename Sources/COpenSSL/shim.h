// OpenSSL 3 libcrypto for tokensignin: EVP and OSSL_PARAM only; deprecated 1.x calls fail to compile.
#ifndef TOKENSIGNIN_COPENSSL_SHIM_H
#define TOKENSIGNIN_COPENSSL_SHIM_H
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

// OPENSSL_free is a macro (it passes __FILE__/__LINE__), so Swift cannot call it directly.
static inline void COpenSSL_free(void *p) { OPENSSL_free(p); }

#endif

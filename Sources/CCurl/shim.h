// libcurl (OpenSSL flavour) for fetching Google's key set over HTTPS.
#ifndef TOKENSIGNIN_CCURL_SHIM_H
#define TOKENSIGNIN_CCURL_SHIM_H
#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed helper per kind.
static inline CURLcode CCurl_setopt_long(CURL *c, CURLoption o, long v) { return curl_easy_setopt(c, o, v); }
static inline CURLcode CCurl_setopt_string(CURL *c, CURLoption o, const char *v) { return curl_easy_setopt(c, o, v); }
static inline CURLcode CCurl_setopt_pointer(CURL *c, CURLoption o, void *v) { return curl_easy_setopt(c, o, v); }
static inline CURLcode CCurl_setopt_write(CURL *c, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode CCurl_setopt_header(CURL *c, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, f); }
static inline CURLcode CCurl_getinfo_long(CURL *c, CURLINFO i, long *v) { return curl_easy_getinfo(c, i, v); }

#endif

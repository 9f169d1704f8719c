// libfcgi's thread-safe request API (fcgiapp.h) for tokensignin's FastCGI module, and epoll (which the
// toolchain's Glibc module leaves out) for its dispatcher.
#ifndef TOKENSIGNIN_CFASTCGI_SHIM_H
#define TOKENSIGNIN_CFASTCGI_SHIM_H
#include <fcgiapp.h>
#include <sys/epoll.h>

#endif

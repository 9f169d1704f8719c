// libfcgi's thread-safe request API (fcgiapp.h) for tokensignin's FastCGI module.
#ifndef TOKENSIGNIN_CFASTCGI_SHIM_H
#define TOKENSIGNIN_CFASTCGI_SHIM_H
#include <fcgiapp.h>

#endif

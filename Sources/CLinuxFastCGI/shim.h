// The C the FastCGI module needs and Swift's Glibc module does not give it: Linux's epoll, eventfd and accept4
// calls, and FastCGI's protocol definitions (fastcgi.h from libfcgi-dev: record types, roles, status codes; no
// library is linked).
#ifndef TOKENSIGNIN_CLINUXFASTCGI_SHIM_H
#define TOKENSIGNIN_CLINUXFASTCGI_SHIM_H
#include <fastcgi.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

// accept4 is declared only under _GNU_SOURCE, which the Glibc module is built without: accepting
// non-blocking and close-on-exec in one call saves two fcntl calls per connection.
extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);
static inline int clinuxfastcgi_accept_nonblocking(int listener) {
    return accept4(listener, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

#endif

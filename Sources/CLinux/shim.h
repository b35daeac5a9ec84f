#ifndef HERALD_CLINUX_SHIM_H
#define HERALD_CLINUX_SHIM_H
/* Linux system calls Glibc's Swift module does not export: epoll, eventfd, accept4.
   _GNU_SOURCE is deliberately not defined: it changes struct definitions (fd_set) that other
   modules see without it, which clang's modules refuse. accept4 is declared by hand instead. */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

static inline int herald_accept_nonblocking(int fd) {
    return accept4(fd, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
#endif

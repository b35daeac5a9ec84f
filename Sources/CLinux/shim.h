#ifndef HERALD_CLINUX_SHIM_H
#define HERALD_CLINUX_SHIM_H
/* Linux system calls Glibc's Swift module does not export: epoll, eventfd, accept4. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

static inline int herald_accept_nonblocking(int fd) {
    return accept4(fd, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
#endif

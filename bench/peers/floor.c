/*
 * The floor: the least a client can spend on a streamed response. It sends the same
 * request as the other clients, one connection per stream (`Connection: close`), and reads
 * every byte to the end in one epoll loop with no parsing at all. What it costs per chunk is
 * the kernel's share (TCP receive, epoll, wake-ups) that every client pays; the benchmark
 * reports the others against it.
 *
 *   floor HOST PORT REQUEST_FILE CONCURRENCY TOTAL
 *
 * REQUEST_FILE holds the whole HTTP request (head and body) to send on each connection.
 * Prints one JSON line: requests, failures, bytes read, and the process's own peak RSS.
 * Built by bench/run.sh with the system C compiler.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

struct conn {
    int fd;
    size_t sent; /* bytes of the request written so far */
};

static char *request;
static size_t request_len;
static struct sockaddr_in server;
static long started, finished, failures;
static unsigned long long bytes_read;

static void die(const char *what) {
    perror(what);
    exit(2);
}

/* Open one connection and register it; the request goes out once it is writable. */
static void start(int ep, struct conn *c) {
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&server, sizeof server) < 0 && errno != EINPROGRESS)
        die("connect");
    c->sent = 0;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        die("epoll_ctl");
    started++;
}

static void finish(int ep, struct conn *c, int failed, long total) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    finished++;
    failures += failed;
    if (started < total)
        start(ep, c);
    else
        c->fd = -1;
}

static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: floor HOST PORT REQUEST_FILE CONCURRENCY TOTAL\n");
        return 2;
    }
    server.sin_family = AF_INET;
    server.sin_port = htons((unsigned short)atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &server.sin_addr) != 1)
        die("inet_pton");
    FILE *f = fopen(argv[3], "rb");
    if (!f)
        die(argv[3]);
    fseek(f, 0, SEEK_END);
    request_len = (size_t)ftell(f);
    rewind(f);
    request = malloc(request_len);
    if (!request || fread(request, 1, request_len, f) != request_len)
        die("read request");
    fclose(f);
    long concurrency = atol(argv[4]), total = atol(argv[5]);
    if (concurrency < 1 || total < 1)
        return 2;

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    struct conn *conns = calloc((size_t)concurrency, sizeof *conns);
    for (long i = 0; i < concurrency && i < total; i++)
        start(ep, &conns[i]);

    static char buf[65536];
    struct epoll_event events[256];
    while (finished < total) {
        int n = epoll_wait(ep, events, 256, -1);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c->fd < 0)
                continue;
            if (c->sent < request_len && (events[i].events & EPOLLOUT)) {
                ssize_t w = write(c->fd, request + c->sent, request_len - c->sent);
                if (w < 0 && errno != EAGAIN) {
                    finish(ep, c, 1, total);
                    continue;
                }
                if (w > 0)
                    c->sent += (size_t)w;
                if (c->sent == request_len) {
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                /* Level-triggered: one read per wake-up; whatever is left wakes us again. */
                ssize_t r = read(c->fd, buf, sizeof buf);
                if (r > 0)
                    bytes_read += (unsigned long long)r;
                else if (r == 0 || errno != EAGAIN)
                    finish(ep, c, r < 0, total);
            }
        }
    }
    printf("{\"requests\": %ld, \"failures\": %ld, \"bytes\": %llu, \"peak_rss_kib\": %ld}\n", finished,
           failures, bytes_read, peak_rss_kib());
    return 0;
}

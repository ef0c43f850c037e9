/* raw_floor: the least any client can spend per read. The first row of the read-cost table.
 *
 *   raw_floor URL BODY_FILE STREAMS CHUNKS
 *
 * STREAMS non-blocking sockets, one epoll set, the POST written by hand (HTTP/1.1, Content-Length),
 * one recv of up to 64 KiB per readiness, and the same counting of event ends and send stamps as
 * curl_floor (events.h) over the raw bytes: no header parsing and no dechunking (the chunk framing
 * uses "\r\n", so "\n\n" is found only inside the events). A stream ends at the terminal chunk
 * "0\r\n\r\n". Only plain http://HOST:PORT/PATH with a numeric IPv4 host. Same JSON line as
 * curl_floor. Written for fastsse's benchmarks. */
#include "events.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define TAIL 7 /* "\r\n0\r\n\r\n": the previous chunk's end and the terminal chunk */

typedef struct {
    stream_t s;
    int fd;
    size_t sent;
    char tail[TAIL];
    size_t ntail;
} conn_t;

static int ends_body(conn_t *c, const char *p, size_t n) {
    /* Keep the last TAIL bytes seen, across reads, and compare them with the terminal chunk. */
    if (n >= TAIL) {
        memcpy(c->tail, p + n - TAIL, TAIL);
        c->ntail = TAIL;
    } else {
        size_t keep = c->ntail + n > TAIL ? TAIL - n : c->ntail;
        memmove(c->tail, c->tail + c->ntail - keep, keep);
        memcpy(c->tail + keep, p, n);
        c->ntail = keep + n;
    }
    return c->ntail == TAIL && memcmp(c->tail, "\r\n0\r\n\r\n", TAIL) == 0;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s URL BODY_FILE STREAMS CHUNKS\n", argv[0]);
        return 2;
    }
    char host[64];
    int port;
    char path[512];
    if (sscanf(argv[1], "http://%63[0-9.]:%d%511s", host, &port, path) != 3) {
        fprintf(stderr, "raw_floor: only http://IPV4:PORT/PATH, not %s\n", argv[1]);
        return 2;
    }
    pin_from_env();
    size_t body_len;
    char *body = read_file(argv[2], &body_len);
    long n = atol(argv[3]);
    totals_t totals = {0};
    totals.chunks = atol(argv[4]);
    totals.lags = alloc_lags(n, totals.chunks, &totals.cap);
    char *request = malloc(body_len + 1024);
    int head = snprintf(request, 1024,
                        "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                        "Authorization: Bearer x\r\nAccept: text/event-stream\r\nContent-Length: %zu\r\n\r\n",
                        path, host, port, body_len);
    memcpy(request + head, body, body_len);
    size_t request_len = (size_t)head + body_len;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &addr.sin_addr);

    conn_t *conns = calloc((size_t)n, sizeof *conns);
    static char buf[65536];
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    double cpu0 = cpu_seconds();
    int64_t wall0 = now_ns();
    for (long i = 0; i < n; i++) {
        conn_t *c = &conns[i];
        c->s.at_start = 1;
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0 && errno != EINPROGRESS) {
            perror("connect");
            c->s.failed = c->s.done = 1;
            continue;
        }
        struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
        epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev);
    }
    long open = n;
    struct epoll_event ready[256];
    while (open > 0) {
        int k = epoll_wait(epfd, ready, 256, 10000);
        if (k == 0) {
            fprintf(stderr, "raw_floor: no event for 10 s, %ld streams open\n", open);
            break;
        }
        for (int i = 0; i < k; i++) {
            conn_t *c = ready[i].data.ptr;
            if (ready[i].events & EPOLLOUT) {
                ssize_t w = send(c->fd, request + c->sent, request_len - c->sent, MSG_NOSIGNAL);
                if (w > 0) c->sent += (size_t)w;
                if (c->sent == request_len) {
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
                }
                continue;
            }
            ssize_t r = recv(c->fd, buf, sizeof buf, 0);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r > 0) on_bytes(&totals, &c->s, buf, (size_t)r);
            if (r <= 0 || ends_body(c, buf, (size_t)r)) {
                c->s.done = 1;
                c->s.failed = r <= 0;
                epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                open--;
            }
        }
    }
    double cpu = cpu_seconds() - cpu0;
    double wall = (now_ns() - wall0) / 1e9;
    long events = 0, failed = 0;
    for (long i = 0; i < n; i++) {
        events += conns[i].s.events;
        failed += conns[i].s.failed || !conns[i].s.done;
    }
    report(&totals, events, failed, cpu, wall, "none");
    return 0;
}

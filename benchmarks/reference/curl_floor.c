/* curl_floor: what libcurl itself costs per read, from C. The second row of the read-cost table.
 *
 *   curl_floor URL BODY_FILE STREAMS CHUNKS
 *
 * STREAMS concurrent POSTs of BODY_FILE to URL on one multi handle driven as fastsse's engine
 * drives it (curl_multi_socket_action, socket and timer callbacks, one epoll set), with the
 * request options the engine sets (POST, JSON and bearer headers, identity encoding, NOSIGNAL),
 * and a C write callback that only counts event ends and takes the send stamp of each content
 * event (events.h). Prints one JSON line: events, failed streams, process CPU and wall seconds from
 * the first handle created to the last stream done, lag p50/p99 over content events, and the
 * libcurl version string (to show which copy was loaded). Written for fastsse's benchmarks. */
#include "events.h"

#include <curl/curl.h>
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

static int epfd;
static long timeout_ms = -1;
static totals_t totals;

static size_t on_write(char *p, size_t size, size_t n, void *userp) {
    on_bytes(&totals, (stream_t *)userp, p, size * n);
    return size * n;
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
    (void)easy;
    (void)userp;
    struct epoll_event ev = {0};
    ev.data.fd = fd;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
        return 0;
    }
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    if (epoll_ctl(epfd, socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST)
        epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
    /* Any non-NULL pointer marks the socket as known to epoll. */
    if (!socketp) curl_multi_assign((CURLM *)userp, fd, &epfd);
    return 0;
}

static int on_timer(CURLM *multi, long ms, void *userp) {
    (void)multi;
    (void)userp;
    timeout_ms = ms;
    return 0;
}

static void reap(CURLM *multi) {
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        stream_t *s;
        long status = 0;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
        s->done = 1;
        s->failed = msg->data.result != CURLE_OK || status != 200;
        if (s->failed) fprintf(stderr, "stream failed: %s (status %ld)\n", curl_easy_strerror(msg->data.result), status);
        curl_multi_remove_handle(multi, msg->easy_handle);
        curl_easy_cleanup(msg->easy_handle);
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s URL BODY_FILE STREAMS CHUNKS\n", argv[0]);
        return 2;
    }
    pin_from_env();
    size_t body_len;
    char *body = read_file(argv[2], &body_len);
    long n = atol(argv[3]);
    totals.chunks = atol(argv[4]);
    totals.lags = alloc_lags(n, totals.chunks, &totals.cap);
    stream_t *streams = calloc((size_t)n, sizeof *streams);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    epfd = epoll_create1(EPOLL_CLOEXEC);

    double cpu0 = cpu_seconds();
    int64_t wall0 = now_ns();
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, multi);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, n);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, n);
    struct curl_slist *headers = NULL;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Authorization: Bearer x");
    headers = curl_slist_append(headers, "Accept: text/event-stream");
    for (long i = 0; i < n; i++) {
        CURL *easy = curl_easy_init();
        streams[i].at_start = 1;
        curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
        curl_easy_setopt(easy, CURLOPT_POST, 1L);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)body_len);
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "identity");
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &streams[i]);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, &streams[i]);
        curl_multi_add_handle(multi, easy);
    }
    int running = 1;
    struct epoll_event ready[256];
    while (running) {
        int k = epoll_wait(epfd, ready, 256, (int)(timeout_ms < 0 ? 1000 : timeout_ms));
        if (k < 0 && errno != EINTR) {
            perror("epoll_wait");
            return 2;
        }
        if (k <= 0) {
            curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
        } else {
            for (int i = 0; i < k; i++) {
                int flags = (ready[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                            (ready[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                            (ready[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
                curl_multi_socket_action(multi, ready[i].data.fd, flags, &running);
            }
        }
        reap(multi);
    }
    double cpu = cpu_seconds() - cpu0;
    double wall = (now_ns() - wall0) / 1e9;
    long events = 0, failed = 0;
    for (long i = 0; i < n; i++) {
        events += streams[i].events;
        failed += streams[i].failed || !streams[i].done;
    }
    report(&totals, events, failed, cpu, wall, curl_version());
    curl_multi_cleanup(multi);
    curl_slist_free_all(headers);
    return 0;
}

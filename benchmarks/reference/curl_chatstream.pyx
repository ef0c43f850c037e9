# cython: language_level=3, boundscheck=False, wraparound=False
"""curl_chatstream: the compiled driver's shape, measured before it is built (the read-cost table's
third row). Compiled by the benchmark itself (``_reference.build_module``), never by setup.py.

``run(url, body, streams, chunks, timing) -> dict``: ``streams`` concurrent POSTs on one libcurl
multi handle (the libcurl pycurl brought) driven from C as ``curl_floor.c`` drives it
(``curl_multi_socket_action``, C socket and timer callbacks, one epoll set, the wait in C), each
read handed by the C write callback to a real ``fastsse.ChatStream`` (``timing=True``, no
``on_chunk``, or with one that takes each chunk's stamp) through the stream's C entry point
(``Feed._write`` in ``sse/_decoder_c.pxd``: a pointer and a length, no bytes object, no call), then
``result()`` per stream as the engine returns it. It counts event ends and takes the send stamps as the C
clients do (``events.h``), for the lag and the chunk count. Written for fastsse's benchmarks.
"""

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t
from libc.stdlib cimport calloc, free

from time import monotonic_ns

import fastsse

from fastsse.sse._decoder_c cimport Feed


cdef extern from "events.h" nogil:
    ctypedef struct stream_t:
        long events
        int at_start
        int done
        int failed
    ctypedef struct totals_t:
        long chunks
        int64_t *lags
        long nlags, cap
    int64_t now_ns()
    double cpu_seconds()
    void on_bytes(totals_t *t, stream_t *s, const char *p, size_t n)
    int64_t *alloc_lags(long streams, long chunks, long *cap)
    double pct_ms(totals_t *t, double q)
    int cmp_i64(const void *a, const void *b)

cdef extern from "stdlib.h" nogil:
    void qsort(void *base, size_t nmemb, size_t size, int (*compar)(const void *, const void *))

from epoll cimport (
    EPOLL_CLOEXEC,
    EPOLL_CTL_ADD,
    EPOLL_CTL_DEL,
    EPOLL_CTL_MOD,
    EPOLLERR,
    EPOLLHUP,
    EPOLLIN,
    EPOLLOUT,
    epoll_create1,
    epoll_ctl,
    epoll_event,
    epoll_wait,
)

cdef extern from "unistd.h" nogil:
    int close(int fd)

cdef extern from "curl/curl.h" nogil:
    ctypedef void CURL
    ctypedef void CURLM
    ctypedef int curl_socket_t
    ctypedef int CURLcode
    ctypedef int CURLMcode
    ctypedef int CURLoption
    ctypedef int CURLMoption
    ctypedef int CURLINFO
    cdef struct curl_slist:
        pass
    ctypedef union CURLMsg_data:
        CURLcode result
    ctypedef struct CURLMsg:
        int msg
        CURL *easy_handle
        CURLMsg_data data
    enum:
        CURL_GLOBAL_DEFAULT, CURLMSG_DONE, CURLE_OK
        CURL_POLL_IN, CURL_POLL_OUT, CURL_POLL_REMOVE
        CURL_CSELECT_IN, CURL_CSELECT_OUT, CURL_CSELECT_ERR, CURL_SOCKET_TIMEOUT
        CURLOPT_URL, CURLOPT_POST, CURLOPT_POSTFIELDS, CURLOPT_POSTFIELDSIZE, CURLOPT_HTTPHEADER
        CURLOPT_ACCEPT_ENCODING, CURLOPT_NOSIGNAL, CURLOPT_WRITEFUNCTION, CURLOPT_WRITEDATA, CURLOPT_PRIVATE
        CURLMOPT_SOCKETFUNCTION, CURLMOPT_SOCKETDATA, CURLMOPT_TIMERFUNCTION
        CURLMOPT_MAX_TOTAL_CONNECTIONS, CURLMOPT_MAXCONNECTS
        CURLINFO_PRIVATE, CURLINFO_RESPONSE_CODE
    CURLcode curl_global_init(long flags)
    CURL *curl_easy_init()
    CURLcode curl_easy_setopt(CURL *h, CURLoption opt, ...)
    CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
    void curl_easy_cleanup(CURL *h)
    CURLM *curl_multi_init()
    CURLMcode curl_multi_setopt(CURLM *m, CURLMoption opt, ...)
    CURLMcode curl_multi_add_handle(CURLM *m, CURL *h)
    CURLMcode curl_multi_remove_handle(CURLM *m, CURL *h)
    CURLMcode curl_multi_socket_action(CURLM *m, curl_socket_t s, int ev_bitmask, int *running)
    CURLMcode curl_multi_assign(CURLM *m, curl_socket_t s, void *sockp)
    CURLMsg *curl_multi_info_read(CURLM *m, int *msgs_in_queue)
    CURLMcode curl_multi_cleanup(CURLM *m)
    curl_slist *curl_slist_append(curl_slist *l, const char *s)
    void curl_slist_free_all(curl_slist *l)
    const char *curl_version()


ctypedef struct job_t:
    stream_t s
    PyObject *stream  # the ChatStream (a reference held by the ``streams`` list)
    int raised


cdef int epfd = -1
cdef long timeout_ms = -1
cdef totals_t totals


cdef size_t on_write(char *p, size_t size, size_t n, void *userp) noexcept with gil:
    cdef job_t *job = <job_t *>userp
    on_bytes(&totals, &job.s, p, size * n)
    try:
        (<Feed>job.stream)._write(p, <Py_ssize_t>(size * n))  # the stream's C entry point
    except BaseException:
        job.raised = 1
        return 0  # a write error: libcurl ends the transfer
    return size * n


cdef int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) noexcept nogil:
    cdef epoll_event ev
    ev.data.fd = fd
    if what == CURL_POLL_REMOVE:
        epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL)
        return 0
    ev.events = (EPOLLIN if what & CURL_POLL_IN else 0) | (EPOLLOUT if what & CURL_POLL_OUT else 0)
    if socketp == NULL:
        epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
        curl_multi_assign(<CURLM *>userp, fd, &epfd)
    else:
        epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev)
    return 0


cdef int on_timer(CURLM *multi, long ms, void *userp) noexcept nogil:
    global timeout_ms
    timeout_ms = ms
    return 0


def run(str url, bytes body, long n, long chunks, bint on_chunk=False):
    """run(url, body, streams, chunks, on_chunk=False) -> dict: the figures, in the C clients' JSON
    keys. With ``on_chunk`` every stream gets a Python ``on_chunk`` that takes each content chunk's
    lag where user code gets it (as the engine's ``+on_chunk`` rows do), and the lags are those."""
    global epfd, timeout_ms
    cdef job_t *jobs = <job_t *>calloc(n, sizeof(job_t))
    cdef bytes url_b = url.encode()
    cdef CURLM *multi
    cdef CURL *easy
    cdef curl_slist *headers = NULL
    cdef epoll_event ready[256]
    cdef int running = 1, k, i, flags, left
    cdef long status
    cdef CURLMsg *msg
    cdef job_t *job
    cdef long j
    cdef double cpu0, cpu
    cdef int64_t wall0
    lags = []

    def take_stamp(chunk):
        now = monotonic_ns()
        choices = chunk["choices"]
        if choices and choices[0]["delta"].get("content"):
            lags.append(now - chunk["fastsse_sent_ns"])

    streams = [fastsse.ChatStream(take_stamp if on_chunk else None, timing=True) for _ in range(n)]
    totals.chunks = chunks
    totals.nlags = 0
    totals.lags = alloc_lags(n, chunks, &totals.cap)
    curl_global_init(CURL_GLOBAL_DEFAULT)
    epfd = epoll_create1(EPOLL_CLOEXEC)
    timeout_ms = -1

    cpu0 = cpu_seconds()
    wall0 = now_ns()
    multi = curl_multi_init()
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket)
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, multi)
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer)
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, n)
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, n)
    headers = curl_slist_append(headers, b"Content-Type: application/json")
    headers = curl_slist_append(headers, b"Authorization: Bearer x")
    headers = curl_slist_append(headers, b"Accept: text/event-stream")
    for j in range(n):
        easy = curl_easy_init()
        jobs[j].s.at_start = 1
        jobs[j].stream = <PyObject *>streams[j]
        curl_easy_setopt(easy, CURLOPT_URL, <const char *>url_b)
        curl_easy_setopt(easy, CURLOPT_POST, <long>1)
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, <const char *>body)
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, <long>len(body))
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers)
        curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, b"identity")
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, <long>1)
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write)
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &jobs[j])
        curl_easy_setopt(easy, CURLOPT_PRIVATE, &jobs[j])
        curl_multi_add_handle(multi, easy)
    results = []
    while running:
        k = epoll_wait(epfd, ready, 256, <int>(1000 if timeout_ms < 0 else timeout_ms))
        if k <= 0:
            curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
        else:
            for i in range(k):
                flags = ((CURL_CSELECT_IN if ready[i].events & EPOLLIN else 0)
                         | (CURL_CSELECT_OUT if ready[i].events & EPOLLOUT else 0)
                         | (CURL_CSELECT_ERR if ready[i].events & (EPOLLERR | EPOLLHUP) else 0))
                curl_multi_socket_action(multi, ready[i].data.fd, flags, &running)
        while True:
            msg = curl_multi_info_read(multi, &left)
            if msg == NULL:
                break
            if msg.msg != CURLMSG_DONE:
                continue
            curl_easy_getinfo(msg.easy_handle, CURLINFO_PRIVATE, <char **>&job)
            status = 0
            curl_easy_getinfo(msg.easy_handle, CURLINFO_RESPONSE_CODE, &status)
            job.s.done = 1
            job.s.failed = msg.data.result != CURLE_OK or status != 200 or job.raised
            curl_multi_remove_handle(multi, msg.easy_handle)
            curl_easy_cleanup(msg.easy_handle)
            # What the engine hands back per stream: the folded answer and its timing record.
            stream = streams[job - jobs]
            stream.close()
            results.append((stream.result(), stream.timing()))
    cpu = cpu_seconds() - cpu0
    wall = (now_ns() - wall0) / 1e9
    events = failed = 0
    for j in range(n):
        events += jobs[j].s.events
        failed += jobs[j].s.failed or not jobs[j].s.done
    incomplete = sum(1 for answer, _ in results if not answer["choices"][0]["message"]["content"])
    qsort(totals.lags, totals.nlags, sizeof(int64_t), cmp_i64)
    figures = {
        "events": events,
        "failed": failed + incomplete,
        "cpu_s": cpu,
        "wall_s": wall,
        "lag_samples": len(lags) if on_chunk else totals.nlags,
        "lag_p50_ms": _pct_ms(lags, 0.5) if on_chunk else pct_ms(&totals, 0.5),
        "lag_p99_ms": _pct_ms(lags, 0.99) if on_chunk else pct_ms(&totals, 0.99),
        "library": curl_version().decode(),
    }
    curl_multi_cleanup(multi)
    curl_slist_free_all(headers)
    close(epfd)
    free(totals.lags)
    free(jobs)
    return figures


def _pct_ms(list lags, double q):
    if not lags:
        return -1.0
    lags.sort()
    return lags[min(len(lags) - 1, <Py_ssize_t>(q * len(lags)))] / 1e6

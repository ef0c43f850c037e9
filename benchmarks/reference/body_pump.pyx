# cython: language_level=3, boundscheck=False, wraparound=False
"""A prototype of the next data plane's body phase, for ``_gateway_peers.py loop-c`` (not product
code). Once an answer's head is out, the answer's upstream socket and its caller's socket are
handed (``dup``) to a ``Pump``: one epoll set of its own, readable to the event loop as one file
descriptor (``loop.add_reader(pump.fileno(), pump.drain)``), so one Python call per loop wake-up
serves every stream that is ready. Per upstream readiness, in C: one ``recv`` into a static
buffer, the chunked framing taken off (RFC 9112 7.1), the compiled ``Relay``'s framed pass
(``relay_write_framed``: one bytes object in, one out) and one ``send`` to the caller. A caller
socket that takes less stops the upstream's reading until it drained (EPOLLOUT). At the last chunk
the relay's tail and the chunked end go out and ``on_end(True)`` hands both connections back to
Python; a cut upstream or a gone caller ends with ``on_end(False)``."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.errno cimport EAGAIN, EINTR, errno
from libc.string cimport memcpy
from posix.unistd cimport close, dup

from fastsse.relay._relay_c cimport relay_write_framed


from epoll cimport EPOLL_CLOEXEC, EPOLL_CTL_ADD, EPOLL_CTL_DEL, EPOLLIN, EPOLLOUT, epoll_create1, epoll_ctl, epoll_event, epoll_wait


cdef extern from "<sys/socket.h>" nogil:
    ssize_t recv(int fd, void* buf, size_t n, int flags)
    ssize_t send(int fd, const void* buf, size_t n, int flags)
    enum:
        MSG_NOSIGNAL


cdef enum:
    BUF = 65536
    EVENTS = 256

cdef char _in[BUF]
cdef char _payload[BUF]

cdef enum:  # the chunked body's states
    SIZE = 0      # in a chunk-size line
    DATA = 1      # in a chunk's data
    DATA_END = 2  # the CRLF after a chunk's data
    TRAILER = 3   # after the last chunk: trailer lines, up to an empty one
    DONE = 4


cdef int _hex(char c) noexcept:
    if c >= 48 and c <= 57:
        return c - 48
    if c >= 97 and c <= 102:
        return c - 87
    if c >= 65 and c <= 70:
        return c - 55
    return -1


cdef bytes _frame(bytes data):
    if not data:
        return b""
    return b"%x\r\n" % len(data) + data + b"\r\n"


cdef class Body:
    cdef int up, down
    cdef object relay, on_end
    cdef Pump pump
    cdef int state
    cdef size_t left, size
    cdef bint ext
    cdef int line
    cdef bytes pending
    cdef bint finished

    cdef int take(self, const char* p, Py_ssize_t n) except -1:
        # de-chunk p[:n] into _payload, relay it, send it
        cdef Py_ssize_t i = 0, m = 0, k
        cdef char c
        cdef int v
        while i < n and self.state != DONE:
            if self.state == DATA:
                k = n - i
                if <size_t>k > self.left:
                    k = self.left
                memcpy(_payload + m, p + i, k)
                m += k
                i += k
                self.left -= k
                if self.left == 0:
                    self.state = DATA_END
                continue
            c = p[i]
            i += 1
            if self.state == SIZE:
                if c == 10:  # LF: the size line ended
                    if self.size == 0:
                        self.state, self.line = TRAILER, 0
                    else:
                        self.state, self.left = DATA, self.size
                    self.size, self.ext = 0, False
                elif not self.ext:
                    v = _hex(c)
                    if v >= 0:
                        self.size = self.size * 16 + v
                    elif c == 59:  # ";": an extension, up to the line's end
                        self.ext = True
            elif self.state == DATA_END:
                if c == 10:
                    self.state = SIZE
            elif self.state == TRAILER:
                if c == 10:
                    if self.line == 0:
                        self.state = DONE
                    self.line = 0
                elif c != 13:
                    self.line += 1
        out = b""
        if m:
            out = relay_write_framed(self.relay, PyBytes_FromStringAndSize(_payload, m))
        if self.state == DONE:
            out = out + _frame(self.relay.close()) + b"0\r\n\r\n"
        if out:
            self.send(out)
        if self.state == DONE and self.pending is None and not self.finished:
            self.finish(True)
        return 0

    cdef int send(self, bytes data) except -1:
        cdef ssize_t w
        cdef epoll_event ev
        if self.pending is not None:
            self.pending += data
            return 0
        w = send(self.down, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), MSG_NOSIGNAL)
        if w == PyBytes_GET_SIZE(data):
            return 0
        if w < 0 and errno != EAGAIN and errno != EINTR:
            self.finish(False)  # the caller is gone
            return 0
        self.pending = data[w if w > 0 else 0 :]
        # the caller's socket is full: stop reading the upstream until it drained
        epoll_ctl(self.pump.epfd, EPOLL_CTL_DEL, self.up, NULL)
        ev.events = EPOLLOUT
        ev.data.ptr = <void*>self
        epoll_ctl(self.pump.epfd, EPOLL_CTL_ADD, self.down, &ev)
        return 0

    cdef int writable(self) except -1:
        cdef ssize_t w
        cdef epoll_event ev
        data = self.pending
        w = send(self.down, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), MSG_NOSIGNAL)
        if w < 0:
            if errno != EAGAIN and errno != EINTR:
                self.finish(False)
            return 0
        if w < PyBytes_GET_SIZE(data):
            self.pending = data[w:]
            return 0
        self.pending = None
        epoll_ctl(self.pump.epfd, EPOLL_CTL_DEL, self.down, NULL)
        if self.state == DONE:
            self.finish(True)
            return 0
        ev.events = EPOLLIN
        ev.data.ptr = <void*>self
        epoll_ctl(self.pump.epfd, EPOLL_CTL_ADD, self.up, &ev)
        return 0

    cdef int readable(self) except -1:
        cdef ssize_t n = recv(self.up, _in, BUF, 0)
        if n > 0:
            self.take(_in, n)
        elif n == 0 or (errno != EAGAIN and errno != EINTR):
            self.finish(False)  # the upstream cut its answer
        return 0

    cdef int finish(self, bint whole) except -1:
        if self.finished:
            return 0
        self.finished = True
        epoll_ctl(self.pump.epfd, EPOLL_CTL_DEL, self.up, NULL)
        epoll_ctl(self.pump.epfd, EPOLL_CTL_DEL, self.down, NULL)
        close(self.up)
        close(self.down)
        self.pump.bodies.pop(self.up, None)
        on_end, self.on_end = self.on_end, None
        if on_end is not None:
            on_end(whole)
        return 0

    def cancel(self):
        """The caller went away: drop the body without telling ``on_end``."""
        self.on_end = None
        self.finish(False)


cdef class Pump:
    cdef int epfd
    cdef dict bodies

    def __cinit__(self):
        self.epfd = epoll_create1(EPOLL_CLOEXEC)
        if self.epfd < 0:
            raise OSError(errno, "epoll_create1")
        self.bodies = {}

    def __dealloc__(self):
        if self.epfd >= 0:
            close(self.epfd)

    def fileno(self):
        return self.epfd

    def add(self, int up, int down, relay, bytes first, on_end):
        """Relay the body read from ``up`` to ``down`` (both duplicated; the callers' transports
        must not read ``up`` nor hold unsent bytes for ``down``); ``first``: the body's bytes
        already read. Returns the ``Body`` (``cancel()``)."""
        cdef epoll_event ev
        cdef Py_ssize_t i = 0, n = len(first), k
        body = Body()
        body.pump = self
        body.up, body.down = dup(up), dup(down)
        body.relay, body.on_end = relay, on_end
        self.bodies[body.up] = body
        ev.events = EPOLLIN
        ev.data.ptr = <void*>body
        epoll_ctl(self.epfd, EPOLL_CTL_ADD, body.up, &ev)
        while i < n and not body.finished:
            k = min(n - i, BUF)
            body.take(PyBytes_AS_STRING(first) + i, k)
            i += k
        return body

    def drain(self):
        """What is ready, each stream once: the event loop's reader callback of ``fileno()``."""
        cdef epoll_event events[EVENTS]
        cdef int n = epoll_wait(self.epfd, events, EVENTS, 0)
        cdef int i
        cdef Body body
        ready = [<Body>events[i].data.ptr for i in range(n)]  # a finish may free a body: hold them
        for i in range(n):
            body = ready[i]
            if body.finished:
                continue
            if events[i].events & EPOLLOUT:
                body.writable()
            else:
                body.readable()

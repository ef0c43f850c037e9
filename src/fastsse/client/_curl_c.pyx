# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""The compiled driver: the libcurl pycurl already loaded, driven from C behind the few pycurl
names the engine uses (``Curl``, ``CurlMulti`` and their methods), so ``engine.py`` runs on
either driver unchanged.

What it changes is the cost per read: libcurl's write callback is a C function, and once a
transfer's answer is an event stream read by a compiled stream (``Response.write`` decides, then
calls ``Curl.direct``), each read goes from libcurl to the stream's C entry point with no Python
frame: ``stream_feed`` (``ChatStream``) and ``fold_feed`` (``ResponsesStream``, ``MessagesStream``)
with no bytes object and no call, ``bytes_feed`` (the byte formats' ``BytesStream``) with one bytes
object for its writer; ``CurlMulti.drain`` hands
every ready socket of an epoll set to ``curl_multi_socket_action`` in one call. Every other
callback (headers, an ``events`` stream, socket and timer callbacks) calls the Python function set
with ``setopt``, as pycurl does.

No libcurl headers or library at build time: the functions are taken with ``dlsym`` from the
libcurl file pycurl's extension mapped (one libcurl, one TLS library, one ``curl_global_init``
in the process), and the option numbers are pycurl's own (libcurl's ABI: a number never
changes). ``load()`` says why not, where it cannot be done.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t
from libc.errno cimport EINTR, errno
from libc.string cimport strlen

from ..chat._fold_c cimport stream_feed
from ..fold._stream_c cimport fold_feed
from ._streams_c cimport bytes_feed

import os

from ..chat._fold_c import ChatStream
from ..fold._stream_c import FoldStream
from ._streams_c import BytesStream


cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1

cdef extern from "<dlfcn.h>" nogil:
    void* dlopen(const char* path, int flags)
    void* dlsym(void* handle, const char* name)
    char* dlerror()
    enum:
        RTLD_NOW
        RTLD_LOCAL
        RTLD_NOLOAD

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clock, timespec* ts)
    enum:
        CLOCK_MONOTONIC

cdef extern from "<sys/epoll.h>" nogil:
    ctypedef union epoll_data_t:
        int fd
    cdef struct epoll_event:
        unsigned int events
        epoll_data_t data
    int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout)
    int epoll_ctl(int epfd, int op, int fd, epoll_event* event)
    enum:
        EPOLL_CTL_ADD
        EPOLL_CTL_MOD
        EPOLL_CTL_DEL
        EPOLLIN
        EPOLLOUT
        EPOLLERR
        EPOLLHUP
        EPOLLRDHUP


ctypedef void CURL
ctypedef void CURLM
ctypedef void curl_slist

ctypedef struct CURLMsg:
    int msg
    CURL* easy_handle
    int result  # the union's CURLcode (the first member of a union of a pointer and an int)

ctypedef size_t (*write_cb)(char* ptr, size_t size, size_t n, void* userdata) noexcept
ctypedef int (*socket_cb)(CURL* easy, int fd, int what, void* userp, void* socketp) noexcept
ctypedef int (*timer_cb)(CURLM* multi, long timeout_ms, void* userp) noexcept

ctypedef CURL* (*easy_init_t)() noexcept nogil
ctypedef void (*easy_cleanup_t)(CURL*) noexcept nogil
ctypedef void (*easy_reset_t)(CURL*) noexcept nogil
ctypedef int (*easy_setopt_t)(CURL*, int, ...) noexcept nogil
ctypedef int (*easy_getinfo_t)(CURL*, int, ...) noexcept nogil
ctypedef int (*easy_pause_t)(CURL*, int) noexcept
ctypedef const char* (*easy_strerror_t)(int) noexcept nogil
ctypedef CURLM* (*multi_init_t)() noexcept nogil
ctypedef int (*multi_cleanup_t)(CURLM*) noexcept nogil
ctypedef int (*multi_setopt_t)(CURLM*, int, ...) noexcept nogil
ctypedef int (*multi_handle_t)(CURLM*, CURL*) noexcept
ctypedef int (*multi_socket_action_t)(CURLM*, int, int, int*) noexcept
ctypedef CURLMsg* (*multi_info_read_t)(CURLM*, int*) noexcept nogil
ctypedef const char* (*multi_strerror_t)(int) noexcept nogil
ctypedef curl_slist* (*slist_append_t)(curl_slist*, const char*) noexcept nogil
ctypedef void (*slist_free_t)(curl_slist*) noexcept nogil

cdef struct Api:
    easy_init_t easy_init
    easy_cleanup_t easy_cleanup
    easy_reset_t easy_reset
    easy_setopt_t easy_setopt
    easy_getinfo_t easy_getinfo
    easy_pause_t easy_pause
    easy_strerror_t easy_strerror
    multi_init_t multi_init
    multi_cleanup_t multi_cleanup
    multi_setopt_t multi_setopt
    multi_handle_t multi_add_handle
    multi_handle_t multi_remove_handle
    multi_socket_action_t multi_socket_action
    multi_info_read_t multi_info_read
    multi_strerror_t multi_strerror
    slist_append_t slist_append
    slist_free_t slist_free

cdef Api api
cdef bint loaded = False

# libcurl's option and info numbers (curl/curl.h), the ones the driver sets or reads itself
cdef enum:
    OPT_WRITEDATA = 10001
    OPT_ERRORBUFFER = 10010
    OPT_POSTFIELDS = 10015
    OPT_HTTPHEADER = 10023
    OPT_HEADERDATA = 10029
    OPT_CAINFO = 10065
    OPT_SHARE = 10100
    OPT_PRIVATE = 10103
    OPT_WRITEFUNCTION = 20011
    OPT_HEADERFUNCTION = 20079
    MOPT_SOCKETDATA = 10002
    MOPT_TIMERDATA = 10005
    MOPT_SOCKETFUNCTION = 20001
    MOPT_TIMERFUNCTION = 20004
    INFO_PRIVATE = 0x100015
    INFO_LONG = 0x200000
    INFO_SOCKET = 0x500000
    INFO_OFF_T = 0x600000
    INFO_TYPEMASK = 0xf00000
    CURLMSG_DONE = 1
    CURL_ERROR_SIZE = 256
    CURL_POLL_IN = 1
    CURL_POLL_OUT = 2
    CURL_POLL_REMOVE = 4
    CURL_CSELECT_IN = 1
    CURL_CSELECT_OUT = 2

cdef object _error = None  # pycurl.error: what the engine and its callers already catch
# The CA bundle a new handle trusts: as pycurl's wheels do, the first of the usual system files
# that exists (libcurl's compiled-in default may name another distribution's path).
cdef bytes _ca_default = None
CA_CANDIDATES = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/usr/share/ssl/certs/ca-bundle.crt",
    "/usr/local/share/certs/ca-root-nss.crt",
    "/etc/ssl/cert.pem",
)


def load(str path=None):
    """``load(path=None) -> str``: take libcurl's functions from ``path``, else from the libcurl
    file pycurl's extension mapped (read from ``/proc/self/maps``), or ``$FASTSSE_LIBCURL``.
    Returns the file used; raises OSError saying why it cannot."""
    global loaded, _error
    try:
        import pycurl
    except ImportError:
        raise OSError("pycurl is not installed: the driver uses the libcurl it brings") from None

    _error = pycurl.error
    if path is None:
        path = os.environ.get("FASTSSE_LIBCURL") or _mapped_libcurl()
    if path is None:
        raise OSError("no libcurl file is mapped by pycurl's extension (a static pycurl, or no /proc)")
    cdef bytes raw = os.fsencode(path)
    cdef void* lib = dlopen(raw, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)
    if lib == NULL:
        lib = dlopen(raw, RTLD_NOW | RTLD_LOCAL)
    if lib == NULL:
        raise OSError(f"cannot load {path}: {(<bytes>dlerror()).decode(errors='replace')}")
    api.easy_init = <easy_init_t>_sym(lib, b"curl_easy_init")
    api.easy_cleanup = <easy_cleanup_t>_sym(lib, b"curl_easy_cleanup")
    api.easy_reset = <easy_reset_t>_sym(lib, b"curl_easy_reset")
    api.easy_setopt = <easy_setopt_t>_sym(lib, b"curl_easy_setopt")
    api.easy_getinfo = <easy_getinfo_t>_sym(lib, b"curl_easy_getinfo")
    api.easy_pause = <easy_pause_t>_sym(lib, b"curl_easy_pause")
    api.easy_strerror = <easy_strerror_t>_sym(lib, b"curl_easy_strerror")
    api.multi_init = <multi_init_t>_sym(lib, b"curl_multi_init")
    api.multi_cleanup = <multi_cleanup_t>_sym(lib, b"curl_multi_cleanup")
    api.multi_setopt = <multi_setopt_t>_sym(lib, b"curl_multi_setopt")
    api.multi_add_handle = <multi_handle_t>_sym(lib, b"curl_multi_add_handle")
    api.multi_remove_handle = <multi_handle_t>_sym(lib, b"curl_multi_remove_handle")
    api.multi_socket_action = <multi_socket_action_t>_sym(lib, b"curl_multi_socket_action")
    api.multi_info_read = <multi_info_read_t>_sym(lib, b"curl_multi_info_read")
    api.multi_strerror = <multi_strerror_t>_sym(lib, b"curl_multi_strerror")
    api.slist_append = <slist_append_t>_sym(lib, b"curl_slist_append")
    api.slist_free = <slist_free_t>_sym(lib, b"curl_slist_free_all")
    global _ca_default
    _ca_default = next((os.fsencode(f) for f in CA_CANDIDATES if os.path.isfile(f)), None)
    loaded = True
    return path


cdef void* _sym(void* lib, const char* name) except NULL:
    cdef void* f = dlsym(lib, name)
    if f == NULL:
        raise OSError(f"libcurl has no {name.decode()}")
    return f


def _mapped_libcurl():
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").partition("/")[2]
                name = os.path.basename(path)
                if name.startswith("libcurl") and ".so" in name:
                    return "/" + path
    except OSError:
        return None
    return None


cdef int _require_loaded() except -1:
    if not loaded:
        raise RuntimeError("the compiled driver is not loaded (fastsse.client._curl_c.load())")
    return 0


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef object _raise(int code, Curl easy=None):
    text = easy._message(code) if easy is not None else api.easy_strerror(code).decode(errors="replace")
    raise _error(code, text)


# The C entry point a directly fed stream takes (``Curl.direct``)
cdef enum:
    FEED_CHAT = 0
    FEED_FOLD
    FEED_BYTES


cdef class Curl:
    """An easy handle: the subset of ``pycurl.Curl`` the engine uses (``setopt``, ``unsetopt``,
    ``getinfo``, ``pause``, ``reset``, ``close``), plus ``direct``."""

    cdef CURL* handle
    cdef char errbuf[CURL_ERROR_SIZE]
    cdef curl_slist* headers
    cdef object postfields  # the body bytes: libcurl reads them during the transfer, uncopied
    cdef object on_write
    cdef object on_header
    cdef object feed  # the compiled stream reads go to directly (``direct``), or None
    cdef int feed_kind  # which C entry point takes them: FEED_CHAT, FEED_FOLD or FEED_BYTES
    cdef object sink  # the Response that takes the feed's outcome
    cdef public object multi
    cdef public double last_read  # time.monotonic() of the last read fed directly (``direct``)
    cdef object __weakref__

    def __cinit__(self):
        _require_loaded()
        self.handle = api.easy_init()
        if self.handle == NULL:
            raise MemoryError("curl_easy_init failed")
        self._own()

    cdef int _own(self) except -1:
        # what the driver keeps set on its handle: itself as the callbacks' data, its error buffer
        self.errbuf[0] = 0
        api.easy_setopt(self.handle, OPT_ERRORBUFFER, self.errbuf)
        api.easy_setopt(self.handle, OPT_PRIVATE, <void*>self)
        api.easy_setopt(self.handle, OPT_WRITEFUNCTION, <write_cb>_on_write)
        api.easy_setopt(self.handle, OPT_WRITEDATA, <void*>self)
        api.easy_setopt(self.handle, OPT_HEADERFUNCTION, <write_cb>_on_header)
        api.easy_setopt(self.handle, OPT_HEADERDATA, <void*>self)
        if _ca_default is not None:
            api.easy_setopt(self.handle, OPT_CAINFO, <const char*>_ca_default)
        return 0

    def __dealloc__(self):
        self._free()

    cdef void _free(self) noexcept:
        if self.handle != NULL:
            api.easy_cleanup(self.handle)
            self.handle = NULL
        if self.headers != NULL:
            api.slist_free(self.headers)
            self.headers = NULL

    cdef str _message(self, int code):
        if self.errbuf[0]:
            return (<bytes>self.errbuf).decode(errors="replace")
        return (<bytes>api.easy_strerror(code)).decode(errors="replace")

    cdef int _check(self) except -1:
        if self.handle == NULL:
            raise _error(0, "cannot invoke setopt() - no curl handle")
        return 0

    def setopt(self, int option, value):
        """Set one libcurl option (pycurl's numbers): an int, a str or bytes, a list of header
        lines (HTTPHEADER), or a callable (WRITEFUNCTION, HEADERFUNCTION)."""
        cdef int rc
        cdef curl_slist* lines = NULL
        cdef bytes raw
        self._check()
        if option == OPT_WRITEFUNCTION:
            self.on_write = value
            self.feed = self.sink = None  # a new consumer: reads go to it until it asks for direct()
            return
        if option == OPT_HEADERFUNCTION:
            self.on_header = value
            return
        if option == OPT_HTTPHEADER:
            for line in value:
                raw = line.encode() if isinstance(line, str) else bytes(line)
                lines = api.slist_append(lines, raw)
                if lines == NULL:
                    raise MemoryError("curl_slist_append failed")
            rc = api.easy_setopt(self.handle, option, lines)
            if self.headers != NULL:
                api.slist_free(self.headers)
            self.headers = lines
        elif option == OPT_SHARE or 20000 <= option < 30000:
            raise TypeError(f"option {option} is not supported by the compiled driver")
        elif option == OPT_POSTFIELDS:
            raw = value.encode() if isinstance(value, str) else bytes(value)
            rc = api.easy_setopt(self.handle, option, <const char*>raw)
            self.postfields = raw
        elif option < 10000:
            rc = api.easy_setopt(self.handle, option, <long>value)
        elif option < 20000:
            raw = value.encode() if isinstance(value, str) else bytes(value)
            rc = api.easy_setopt(self.handle, option, <const char*>raw)  # libcurl copies strings
        else:
            rc = api.easy_setopt(self.handle, option, <int64_t>value)
        if rc:
            _raise(rc, self)

    def unsetopt(self, int option):
        """Back to libcurl's default for a string or list option."""
        cdef int rc
        self._check()
        if option == OPT_HTTPHEADER:
            rc = api.easy_setopt(self.handle, option, <void*>NULL)
            if self.headers != NULL:
                api.slist_free(self.headers)
                self.headers = NULL
        elif option == OPT_CAINFO and _ca_default is not None:
            rc = api.easy_setopt(self.handle, option, <const char*>_ca_default)
        elif 10000 <= option < 20000:
            rc = api.easy_setopt(self.handle, option, <void*>NULL)
        else:
            raise TypeError(f"unsetopt({option}) is not supported by the compiled driver")
        if rc:
            _raise(rc, self)

    def getinfo(self, int info):
        """One of libcurl's long, socket or off_t infos."""
        cdef long value_long = 0
        cdef int value_socket = -1
        cdef int64_t value_off = 0
        cdef int rc
        cdef int kind = info & INFO_TYPEMASK
        self._check()
        if kind == INFO_LONG:
            rc = api.easy_getinfo(self.handle, info, &value_long)
            result = value_long
        elif kind == INFO_SOCKET:
            rc = api.easy_getinfo(self.handle, info, &value_socket)
            result = value_socket
        elif kind == INFO_OFF_T:
            rc = api.easy_getinfo(self.handle, info, &value_off)
            result = value_off
        else:
            raise TypeError(f"getinfo({info}) is not supported by the compiled driver")
        if rc:
            _raise(rc, self)
        return result

    def pause(self, int bitmask):
        """``curl_easy_pause``: may deliver held bytes to the write callback before it returns."""
        self._check()
        cdef int rc = api.easy_pause(self.handle, bitmask)
        if rc:
            _raise(rc, self)

    def reset(self):
        """Every option back to libcurl's defaults (the driver's own set again)."""
        self._check()
        api.easy_reset(self.handle)
        if self.headers != NULL:
            api.slist_free(self.headers)
            self.headers = NULL
        self.postfields = self.on_write = self.on_header = self.feed = self.sink = None
        self._own()

    def close(self):
        """Free the handle (it must not be in a multi handle)."""
        self._free()
        self.postfields = self.on_write = self.on_header = self.feed = self.sink = None

    def direct(self, stream, sink=None):
        """Hand each read to ``stream`` (a compiled ``ChatStream``, ``ResponsesStream``,
        ``MessagesStream`` or byte-out ``BytesStream``) from C, its time kept in ``last_read``,
        setting ``sink.stopped`` / ``sink.exc`` as ``Response.write`` would; ``direct(None)`` goes
        back to the write callback. False if ``stream`` cannot be fed directly (another stream
        class)."""
        if stream is None:
            self.feed = self.sink = None
            return True
        # the class is looked at here, once per transfer: each read then takes its entry point
        if type(stream) is ChatStream:
            self.feed_kind = FEED_CHAT
        elif isinstance(stream, FoldStream):
            self.feed_kind = FEED_FOLD
        elif isinstance(stream, BytesStream):
            self.feed_kind = FEED_BYTES
        else:
            return False
        self.feed, self.sink = stream, sink
        return True


cdef inline int _feed(Curl easy, object stream, const char* p, Py_ssize_t n) except -1:
    if easy.feed_kind == FEED_CHAT:
        return stream_feed(stream, p, n)
    if easy.feed_kind == FEED_FOLD:
        return fold_feed(stream, p, n)
    return bytes_feed(stream, p, n)


cdef size_t _on_write(char* ptr, size_t size, size_t n, void* data) noexcept:
    cdef Curl easy = <Curl>data
    cdef size_t total = size * n
    cdef object sink = easy.sink
    cdef object feed = easy.feed  # held: a hold taken inside the feed clears easy.feed
    if feed is not None:
        easy.last_read = _now()  # the engine's idle check reads it beside Response.last_activity
        try:
            if _feed(easy, feed, ptr, <Py_ssize_t>total):
                return total
            sink.stopped = True
            return 0
        except BaseException as exc:  # re-raised by Response.finish once curl has stopped
            try:
                sink.exc = exc
                sink.stopped = True
            except BaseException:
                pass
            return 0
    return _call(easy.on_write, ptr, total)


cdef size_t _on_header(char* ptr, size_t size, size_t n, void* data) noexcept:
    return _call((<Curl>data).on_header, ptr, size * n)


cdef size_t _call(object callback, char* ptr, size_t total) noexcept:
    # pycurl's rule: None takes every byte, an int is what the callback returns to libcurl
    if callback is None:
        return total
    try:
        answer = callback(PyBytes_FromStringAndSize(ptr, <Py_ssize_t>total))
        if answer is None:
            return total
        return <size_t>answer
    except BaseException:
        import traceback

        traceback.print_exc()  # as pycurl does: the callback's own error handling comes first
        return 0


cdef class CurlMulti:
    """A multi handle: the subset of ``pycurl.CurlMulti`` the engine uses (``setopt``,
    ``add_handle``, ``remove_handle``, ``socket_action``, ``info_read``, ``close``), plus
    ``drain``."""

    cdef CURLM* handle
    cdef object on_socket
    cdef object on_timer
    cdef int epfd  # ``watch``: the epoll set curl's sockets go into from C, or -1
    cdef dict handles  # id -> Curl: the handles added (libcurl holds their pointers)
    cdef object __weakref__

    def __cinit__(self):
        _require_loaded()
        self.handle = api.multi_init()
        if self.handle == NULL:
            raise MemoryError("curl_multi_init failed")
        self.handles = {}
        self.epfd = -1
        api.multi_setopt(self.handle, MOPT_SOCKETFUNCTION, <socket_cb>_on_socket)
        api.multi_setopt(self.handle, MOPT_SOCKETDATA, <void*>self)
        api.multi_setopt(self.handle, MOPT_TIMERFUNCTION, <timer_cb>_on_timer)
        api.multi_setopt(self.handle, MOPT_TIMERDATA, <void*>self)

    def __dealloc__(self):
        if self.handle != NULL:
            api.multi_cleanup(self.handle)
            self.handle = NULL

    cdef int _check(self) except -1:
        if self.handle == NULL:
            raise _error(0, "the multi handle is closed")
        return 0

    def setopt(self, int option, value):
        """M_SOCKETFUNCTION / M_TIMERFUNCTION (callables, called as pycurl calls them) or a long."""
        cdef int rc
        self._check()
        if option == MOPT_SOCKETFUNCTION:
            self.on_socket = value
            return
        if option == MOPT_TIMERFUNCTION:
            self.on_timer = value
            return
        if option >= 10000:
            raise TypeError(f"multi option {option} is not supported by the compiled driver")
        rc = api.multi_setopt(self.handle, option, <long>value)
        if rc:
            raise _error(rc, api.multi_strerror(rc).decode(errors="replace"))

    def add_handle(self, Curl easy not None):
        """Add a transfer (a compiled-driver ``Curl``)."""
        self._check()
        easy._check()
        cdef int rc = api.multi_add_handle(self.handle, easy.handle)
        if rc:
            raise _error(rc, api.multi_strerror(rc).decode(errors="replace"))
        self.handles[id(easy)] = easy
        easy.multi = self
        easy.errbuf[0] = 0

    def remove_handle(self, Curl easy not None):
        """Take a transfer out (finished or not)."""
        self._check()
        cdef int rc = 0
        if easy.handle != NULL:
            rc = api.multi_remove_handle(self.handle, easy.handle)
        self.handles.pop(id(easy), None)
        easy.multi = None
        if rc:
            raise _error(rc, api.multi_strerror(rc).decode(errors="replace"))

    def socket_action(self, int fd, int mask):
        """``curl_multi_socket_action`` -> ``(rc, running)``."""
        cdef int running = 0
        self._check()
        cdef int rc = api.multi_socket_action(self.handle, fd, mask, &running)
        if rc:
            raise _error(rc, api.multi_strerror(rc).decode(errors="replace"))
        return rc, running

    def watch(self, int epfd):
        """Put curl's sockets into the epoll set ``epfd`` from C (no socket callback in Python),
        as ``engine.EpollSet.watch`` would; ``watch(-1)`` goes back to M_SOCKETFUNCTION."""
        self.epfd = epfd

    def drain(self, int epfd, int timeout_ms=0):
        """Wait up to ``timeout_ms`` (0: not at all) for the epoll set ``epfd``, the GIL released,
        then hand every ready socket to ``curl_multi_socket_action``: the number of transfers
        still running, or -1 when none was ready. A signal that interrupts the wait is acted on
        (Ctrl-C raises KeyboardInterrupt)."""
        cdef epoll_event ready[256]
        cdef int count, i, mask, rc
        cdef int running = -1
        cdef unsigned int ev
        self._check()
        if timeout_ms > 0:
            with nogil:
                count = epoll_wait(epfd, ready, 256, timeout_ms)
        else:
            count = epoll_wait(epfd, ready, 256, 0)
        if count < 0:
            if errno == EINTR:
                PyErr_CheckSignals()
                return -1
            raise OSError(errno, "epoll_wait failed")
        for i in range(count):
            ev = ready[i].events
            mask = ((CURL_CSELECT_IN if ev & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP) else 0)
                    | (CURL_CSELECT_OUT if ev & EPOLLOUT else 0))
            rc = api.multi_socket_action(self.handle, ready[i].data.fd, mask, &running)
            if rc:
                raise _error(rc, api.multi_strerror(rc).decode(errors="replace"))
        return running

    def info_read(self):
        """``(queued, ok, failed)`` as pycurl returns it: the handles that finished, the failed
        ones as ``(handle, code, message)``."""
        cdef int left = 0
        cdef CURLMsg* msg
        cdef void* private = NULL
        ok = []
        failed = []
        self._check()
        while True:
            msg = api.multi_info_read(self.handle, &left)
            if msg == NULL:
                break
            if msg.msg != CURLMSG_DONE:
                continue
            api.easy_getinfo(msg.easy_handle, INFO_PRIVATE, &private)
            easy = <Curl>private
            if msg.result == 0:
                ok.append(easy)
            else:
                failed.append((easy, msg.result, (<bytes>easy.errbuf).decode(errors="replace")))
        return left, ok, failed

    def close(self):
        """Free the multi handle (its transfers must have been removed)."""
        if self.handle != NULL:
            for easy in list(self.handles.values()):
                api.multi_remove_handle(self.handle, (<Curl>easy).handle)
                (<Curl>easy).multi = None
            self.handles.clear()
            api.multi_cleanup(self.handle)
            self.handle = NULL


cdef int _on_socket(CURL* easy, int fd, int what, void* userp, void* socketp) noexcept:
    cdef CurlMulti multi = <CurlMulti>userp
    cdef epoll_event ev
    if multi.epfd >= 0:
        # EpollSet.watch in C: read wakes on error and hang-up too; a number reused by a new
        # socket is modified, one closed before its removal is already gone from the set
        if what == CURL_POLL_REMOVE:
            epoll_ctl(multi.epfd, EPOLL_CTL_DEL, fd, NULL)
            return 0
        ev.data.fd = fd
        ev.events = (((EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP) if what & CURL_POLL_IN else 0)
                     | (EPOLLOUT if what & CURL_POLL_OUT else 0))
        if epoll_ctl(multi.epfd, EPOLL_CTL_MOD, fd, &ev) != 0:
            epoll_ctl(multi.epfd, EPOLL_CTL_ADD, fd, &ev)
        return 0
    if multi.on_socket is None:
        return 0
    try:
        multi.on_socket(what, fd, multi, None)
    except BaseException:
        import traceback

        traceback.print_exc()
    return 0


cdef int _on_timer(CURLM* handle, long timeout_ms, void* userp) noexcept:
    cdef CurlMulti multi = <CurlMulti>userp
    if multi.on_timer is None:
        return 0
    try:
        multi.on_timer(timeout_ms)
    except BaseException:
        import traceback

        traceback.print_exc()
    return 0

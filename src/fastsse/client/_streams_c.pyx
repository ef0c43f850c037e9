# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""The compiled byte-out stream (``BytesStream`` and ``PassThrough`` in ``client/_streams_py.py`` are
its readable twins): a writer (a ``Relay``, a translator or a ``PassThrough``) whose output goes to
``on_bytes``, with the same stamps, holds and stops. The compiled driver feeds it each read from C
(``Feed._write``): one bytes object for the writer, no Python frame but ``on_bytes``'s, and that
only when the read produced bytes. The event loop's ``ReadRoute`` already holds each read as a
bytes object and hands that one over (``Feed._write_bytes``): no copy at all.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append
from libc.string cimport memcpy

from .._native.chunked cimport frame_chunk
from .._native.clock cimport fastsse_monotonic_ns
from ..relay._relay_c cimport relay_complete, relay_write_framed
from ..sse._decoder_c cimport Feed

from time import monotonic_ns as _monotonic_ns

from .. import _backend
from .._errors import EventTooLarge
from .._formats import api_format
from .._timing import anchor_pair, build_timing


cdef class BytesStream:
    """BytesStream(writer, on_bytes, timing, *, relay=False)
--

    What the engine drives: ``writer`` (``write(data) -> bytes``, ``close(truncated=) -> bytes``,
    ``result()``) with its output going to ``on_bytes``. ``relay=True``: the writer is a ``Relay``,
    whose EventTooLarge carries the bytes before the oversized event (another writer's ``close``
    gives them). ``relay`` and ``translator`` name the writer, as ``RelayStream`` and
    ``TranslateStream`` do. ``on_complete``, when set, is called once (with no argument) after a
    ``write`` whose output made the writer ``complete`` (a ``Relay``'s) went to ``on_bytes``."""

    def __init__(self, writer, on_bytes, timing, *, relay=False):
        self.holder = None
        self.on_complete = None
        self._writer = writer
        self._send = on_bytes
        self._reads = [] if timing else None
        self._anchor = anchor_pair() if timing else None
        self._stopped = False
        self._relay = relay

    @property
    def relay(self):
        """The ``Relay`` (``verdict``, ``text()``)."""
        return self._writer

    @property
    def translator(self):
        """The translator (``verdict``, ``dropped``)."""
        return self._writer

    @cython.binding(False)
    def write(self, data, /):
        """The engine's write callback: None to go on, 0 to stop the transfer."""
        if self._reads is not None:
            PyList_Append(self._reads, _monotonic_ns())
        return self._take(data)

    cdef int _write(self, const char* p, Py_ssize_t n) except -1:
        # ``write`` from a pointer (Feed, for the compiled driver): the stamp, then one bytes object
        # for the writer; 1 to go on, 0 once stopped
        if self._reads is not None:
            PyList_Append(self._reads, _monotonic_ns())
        if self._stopped:
            return 0
        return 0 if self._take(PyBytes_FromStringAndSize(p, n)) is not None else 1

    cdef int _write_bytes(self, bytes data) except -1:
        # ``_write`` of a read that is already a bytes object (ReadRoute): the writer gets that
        # object itself, not a copy (a stopped stream's ``_take`` answers 0 without using it)
        if self._reads is not None:
            PyList_Append(self._reads, _monotonic_ns())
        return 0 if self._take(data) is not None else 1

    cdef object _take(self, object data):
        # after the stamp: the writer, then on_bytes; None to go on, 0 to stop
        cdef WireSink sink
        cdef bint framed = False
        cdef bint last
        cdef int done
        if self._stopped:
            return 0
        try:
            if self._relay and type(self._send) is WireSink:
                sink = <WireSink>self._send
                if sink.direct and not sink.gone and sink.first is None:
                    # the relay frames its output itself: one bytes object, one copy
                    out = relay_write_framed(self._writer, data)  # None: not the compiled Relay
                    framed = out is not None
            if not framed:
                out = self._writer.write(data)
        except EventTooLarge as exc:
            self._stopped = True
            if self._relay:
                self._deliver(exc.events[0] if exc.events else b"")
            else:
                self._deliver(self._writer.close(truncated=True))
            raise
        # the piece that makes the answer complete: a sink may end the body with it
        last = False
        if self.on_complete is not None:
            done = relay_complete(self._writer)  # -1: not the compiled Relay
            last = done == 1 or (done == -1 and self._writer.complete)
        if out and not self._deliver(out, framed, last):
            self._stopped = True
            return 0
        if last:
            told, self.on_complete = self.on_complete, None
            told()
        return None

    cdef bint _deliver(self, object piece, bint framed=False, bint last=False) except -1:
        # framed: ``piece`` came from relay_write_framed and ``_send`` is a WireSink; last: it
        # makes the writer's answer complete (a WireSink may end the body with it: ``ends``)
        if not piece or self._send is None:
            return True
        if framed:
            answer = (<WireSink>self._send).put_framed(piece, last)
        elif type(self._send) is WireSink:  # the caller's socket, from C: no Python frame
            answer = (<WireSink>self._send).put(piece, last)
        else:
            answer = self._send(piece)
        if answer is None:
            return True
        if callable(getattr(answer, "add_done_callback", None)):  # "hold until this is done"
            if self.holder is not None:
                self.holder.hold(answer)
            return True
        return bool(answer)

    def close(self, *, truncated=False):
        tail = self._writer.close(truncated=truncated)
        if not self._stopped:
            self._deliver(tail)

    def result(self):
        return self._writer.result()

    def timing(self):
        if self._reads is None or self._anchor is None:
            return None
        return build_timing(self._reads, [], [], [], self._anchor)


cdef Py_ssize_t _boundary(bytes data):
    # where the last whole event of ``data`` ends (after its blank line), 0 if none does
    cdef Py_ssize_t cut = data.rfind(b"\n\n") + 2
    cdef Py_ssize_t crlf = data.rfind(b"\r\n\r\n") + 4
    cdef Py_ssize_t cr = data.rfind(b"\r\r") + 2
    return max(cut if cut > 1 else 0, crlf if crlf > 3 else 0, cr if cr > 1 else 0)


@cython.final
cdef class PassThrough:
    """PassThrough(api, *, max_event_bytes=None)
--

    The compiled twin of ``PassThrough`` in ``client/_streams.py``: an ``api`` stream's bytes
    handed on unchanged, each write cut after its last whole event, the API's fold beside them."""

    cdef object _fold
    cdef bytes _tail
    cdef bytes _ready

    def __init__(self, api, *, max_event_bytes=None):
        cls = getattr(_backend.current, api_format(api).stream_name)
        self._fold = cls(None, max_event_bytes=max_event_bytes, timing=False)
        self._tail = b""
        self._ready = b""

    def write(self, data, /):
        cdef bytes raw = data if type(data) is bytes else bytes(data)
        cdef bytes held = self._tail + raw if self._tail else raw
        cdef Py_ssize_t cut = _boundary(held)
        self._ready, self._tail = held[:cut], held[cut:]
        self._fold.write(raw)  # EventTooLarge leaves the whole events before it in _ready
        out, self._ready = self._ready, b""
        return out

    def close(self, *, truncated=False):
        out, self._ready, self._tail = self._ready, b"", b""
        self._fold.close(truncated=truncated)
        return out

    def result(self):
        return self._fold.result()


# libcurl's CURL_WRITEFUNC_PAUSE, which Response.write answers a held read with
cdef long _PAUSE = 0x10000001


@cython.final
cdef class ReadRoute:
    """ReadRoute(on_write, on_pause, on_stop)
--

    Where each read of an answer's body goes when the event loop drives the transfer (the
    gateway's upstream leg; the twin of ``ReadRoute`` in ``client/_streams_py.py``): the HTTP
    parser's ``on_body``. By default to ``on_write`` (``Response.write``), whose answer it acts
    on: None goes on; ``WRITEFUNC_PAUSE`` (the consumer holds the transfer) keeps the read in
    ``held`` and calls ``on_pause()``; anything else stops. Once ``direct(stream, response)`` is
    set (``Response.write`` asks for it once the answer is an event stream), each read goes to the
    compiled stream's ``Feed._write_bytes`` from C, with no Python frame and no copy (a
    ``BytesStream``'s writer gets the very object ``on_body`` gave, as through ``on_write``), its
    time kept in ``last_read``; a stop or an exception there is set on the response as
    ``Response.write`` would. ``direct(None)`` goes back to ``on_write``. While ``held`` is a
    list, reads are added to it in order (the owner gives them back once the hold ends); after a
    stop (``on_stop()`` called once, ``stopped`` set) reads are dropped.

    A read is a socket read, not an HTTP chunk: between ``gather()`` and ``flush()`` the pieces
    the parser gives (one per chunk of a chunked body, and an upstream writes each event as its own
    chunk) are kept and then go on as one (joined), as the compiled libcurl driver hands on a read.
    So a read that carries sixteen events is relayed, folded and written to the caller once, not
    sixteen times. ``read(data)`` takes one read of the body (the connection's ``Reads`` hands it
    on): ``parse`` (the parser's ``feed_data``) between the two."""

    cdef Feed _feed
    cdef object _sink
    cdef public object on_write
    cdef public object on_pause
    cdef public object on_stop
    cdef public object held
    cdef public double last_read
    cdef public bint stopped
    cdef public object parse
    cdef bint _gathering
    cdef object _first  # the read's first piece, while gathering
    cdef list _more  # its other pieces

    def __init__(self, on_write, on_pause, on_stop, /):
        self.on_write = on_write
        self.on_pause = on_pause
        self.on_stop = on_stop
        self.held = None
        self.last_read = 0.0
        self.stopped = False
        self.parse = None
        self._gathering = False
        self._first = None
        self._more = None

    def direct(self, stream, response=None):
        """Feed ``stream`` from C (True), or go back to ``on_write`` for None; False for a stream
        that is not a compiled ``Feed``."""
        if stream is None:
            self._feed = None
            self._sink = None
            return True
        if not isinstance(stream, Feed):
            return False
        self._feed, self._sink = stream, response
        return True

    def __call__(self, data, /):
        if self.stopped:
            return None
        if self._gathering:
            if self._first is None:
                self._first = data
            elif self._more is None:
                self._more = [data]
            else:
                self._more.append(data)
            return None
        return self._route(data)

    def gather(self):
        """Keep the pieces from now on, until ``flush()``."""
        self._gathering = True

    def flush(self):
        """Stop keeping pieces and send what was kept on, as one."""
        self._flush()

    def read(self, data, /):
        """One read of the body: the parser's pieces of it go on as one."""
        return self._read(data)

    cdef object _read(self, object data):
        self._gathering = True
        try:
            self.parse(data)
        finally:
            self._flush()
        return None

    cdef object _flush(self):
        cdef object data = self._first
        self._gathering = False
        if data is None:
            return None
        self._first = None
        if self._more is not None:
            data = b"".join([data, *self._more])
            self._more = None
        if self.stopped:
            return None
        return self._route(data)

    cdef object _route(self, object data):
        if self.held is not None:
            self.held.append(data)
            return None
        cdef Feed feed = self._feed  # held: a hold taken inside the feed clears _feed
        cdef object sink
        if feed is not None and type(data) is bytes:
            self.last_read = fastsse_monotonic_ns() / 1e9
            sink = self._sink
            try:
                if feed._write_bytes(data):
                    return None
                sink.stopped = True
            except BaseException as exc:  # re-raised by Response.finish once the transfer ends
                sink.exc = exc
                sink.stopped = True
            self._stop()
            return None
        answer = self.on_write(data)
        if answer is None:
            return None
        if answer == _PAUSE:
            self.held = [data]
            self.on_pause()
            return None
        self._stop()
        return None

    cdef void _stop(self) except *:
        self.stopped = True
        self._feed = self._sink = None
        self.on_stop()


@cython.final
cdef class Reads:
    """Reads(own)
    --

    Where a connection's reads go (the twin of ``Reads`` in ``client/_streams_py.py``): ``feed``
    is the connection's ``data_received``, set once, before its transport is made, so the loop never has
    to be told of another (uvloop stops and starts reading the socket for each
    ``set_protocol``: two epoll changes). ``route(route)`` sends the next reads to
    ``route.read``, a compiled ``ReadRoute``'s from C; ``route(None)`` back to ``own`` (the
    connection's own reader: the answer's head, or bytes on an idle connection). ``close()``
    drops both, so the connection and this are not left in a cycle."""

    cdef object _own
    cdef object _read
    cdef ReadRoute _route

    def __init__(self, own, /):
        self._own = own
        self._read = None
        self._route = None

    def route(self, route, /):
        if route is None:
            self._route = None
            self._read = None
        elif type(route) is ReadRoute:
            self._route = <ReadRoute>route
            self._read = None
        else:
            self._route = None
            self._read = route.read

    def close(self):
        self._own = self._read = self._route = None

    def feed(self, data, /):
        """One read: to the route, else to ``own``. (A method, not ``__call__``: the loop calls
        a bound method with no argument tuple.)"""
        # held in locals: the read may end the answer, and the route(None) that follows would
        # otherwise free the route (or the reader) while it runs
        cdef ReadRoute route = self._route
        cdef object read
        if route is not None:
            return route._read(data)
        read = self._read if self._read is not None else self._own
        if read is not None:
            return read(data)
        return None


cdef inline int _bit_length(unsigned long long x) noexcept nogil:
    # int.bit_length(x), portably
    cdef int b = 0
    if x >= (<unsigned long long>1) << 32:
        x >>= 32
        b += 32
    if x >= (<unsigned long long>1) << 16:
        x >>= 16
        b += 16
    if x >= (<unsigned long long>1) << 8:
        x >>= 8
        b += 8
    if x >= 16:
        x >>= 4
        b += 4
    if x >= 4:
        x >>= 2
        b += 2
    if x >= 2:
        x >>= 1
        b += 1
    return b + <int>x




@cython.final
cdef class WireSink:
    """WireSink(slow)
--

    The caller's side of one streamed answer, as the transfer's ``on_chunk`` (the twin of
    ``WireSink`` in ``client/_streams.py``). Each piece (the bytes of one upstream read) is stamped
    (``first_ns``, ``last_ns``, ``gaps``: the gaps between pieces by their bit length in ns), shown
    to ``first`` until it returns true (the first content's detector, then dropped), and then:

    - while ``direct`` is set, framed as one HTTP/1.1 chunk (``<hex size>\\r\\n`` piece
      ``\\r\\n``) and handed to ``write`` (the caller's transport's ``write``) from C, counted in
      ``relayed``; if ``write`` raises, ``direct`` is cleared and ``lost()`` is called (its return:
      False, stop the transfer);
    - otherwise handed to ``slow(piece)``, whose return is the transfer's (None, a future to hold
      it, False to stop it): the owner's own path for the response's start, held pieces and a
      paused socket.

    Once ``gone`` is set a piece goes to ``slow`` unstamped. The owner (``gateway.Downstream``)
    sets ``direct`` only while nothing of its own waits to be sent, so the bytes keep their order.
    A ``BytesStream`` whose ``on_bytes`` is a ``WireSink`` calls it without a Python frame.

    ``ends``, when the owner sets it (a server whose body's end the sink may write), lets the piece
    that completes the answer (``last(piece)``; from C, a ``BytesStream`` with ``on_complete``) end
    the body: written direct, it goes with the chunked terminator (``0\\r\\n\\r\\n``) in one
    write, and ``ends()`` is called once after it, for the owner's own record of the end. Such a
    piece that goes to ``slow`` instead (the response's start) is handed over as
    ``slow(piece, True)``, so the owner may end the body with it itself."""

    def __init__(self, slow, /):
        self.slow = slow
        self.write = None
        self.lost = None
        self.first = None
        self.ends = None
        self.direct = False
        self.gone = False
        self.relayed = 0
        self.first_ns = 0
        self.last_ns = 0
        cdef int i
        for i in range(64):
            self._gaps[i] = 0

    @property
    def gaps(self):
        """The 64 gap counts as a list (``gaps[b]``: ``2**(b-1) <= gap < 2**b`` ns)."""
        return [self._gaps[i] for i in range(64)]

    def __call__(self, data, /):
        return self.put(data)

    def last(self, data, /):
        """A call with the answer's last piece: with ``ends`` set and the piece written direct,
        the body's end goes with it."""
        return self.put(data, True)

    cdef object put(self, object data, bint end=False):
        cdef Py_ssize_t n
        cdef bytes framed
        if self.gone:
            return self.slow(data)
        _stamp(self)
        if self.first is not None and self.first(data):
            self.first = None
        if not self.direct or type(data) is not bytes:
            return self.slow(data, True) if end and self.ends is not None else self.slow(data)
        n = PyBytes_GET_SIZE(data)
        if n == 0:
            return None
        framed = frame_chunk(PyBytes_AS_STRING(data), n)
        return _send(self, framed, n, end)

    cdef object put_framed(self, bytes framed, bint end=False):
        # put() of the piece that ``framed`` frames (a Relay's framed write): the same stamps, and
        # no second copy when it goes to ``write``
        cdef const char* p = PyBytes_AS_STRING(framed)
        cdef Py_ssize_t head = 0
        cdef Py_ssize_t n
        while p[head] != 13:
            head += 1
        head += 2
        n = PyBytes_GET_SIZE(framed) - head - 2
        if self.gone or self.first is not None or not self.direct:
            return self.put(PyBytes_FromStringAndSize(p + head, n), end)
        _stamp(self)
        return _send(self, framed, n, end)


cdef bytes _END = b"0\r\n\r\n"  # the chunked body's end


cdef inline object _send(WireSink sink, bytes framed, Py_ssize_t n, bint end):
    # ``framed`` (the chunk of ``n`` body bytes) to the caller's transport: a write that fails
    # ends the direct path and reports the caller lost. ``end`` (the answer's last piece): with
    # ``ends`` set, the body's end goes in the same write, and ``ends()`` is told after it
    ends = sink.ends if end else None
    try:
        sink.write(framed + _END if ends is not None else framed)
    except Exception:
        sink.direct = False
        return sink.lost() if sink.lost is not None else False
    sink.relayed += n
    if ends is not None:
        sink.ends = None
        ends()
    return None


cdef inline void _stamp(WireSink sink) noexcept:
    cdef long long now = fastsse_monotonic_ns()
    cdef long long gap
    if sink.last_ns:
        gap = now - sink.last_ns
        sink._gaps[_bit_length(<unsigned long long>gap) if gap > 0 else 0] += 1
    else:
        sink.first_ns = now
    sink.last_ns = now

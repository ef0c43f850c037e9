# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""The compiled plumbing both fused format streams share (``FoldStream`` in ``responses/_fold_py.py`` is
its readable twin): write/feed/close, the compiled driver's C entry point (``Feed._write``), the
re-entry guard, ``max_event_bytes``, ``on_chunk``, the verdict and the timing arrays. A format
supplies its aggregator, its own ``_on_event`` (skip, fold the hot event from its bytes, or parse
it and hand it to ``_deliver``: the fast path pays for no extra call) and three cdef hooks:
``_kind`` (the token kind of a parsed event), ``_stops_on_error`` and ``_verdict_now``. Not a
public class: it is only subclassed. ``FoldCounters`` is the same for the two aggregators
(``FoldCounters`` in ``fold/_stream_py.py`` is its twin): the error, the counters, the departures
and the orjson way in; each supplies ``_take`` and ``_verdict``.
"""

cimport cython
from cpython.list cimport PyList_Append

from ..sse._decoder_c cimport Decoder

from time import monotonic_ns as _monotonic_ns

import orjson

from .._errors import UsageError, too_large
from ._base import MAX_DEPARTURES, anchor_pair, format_verdict_dict, loads as _loads_slow
from .._timing import build_timing

cdef object _loads = orjson.loads
cdef object _JSONDecodeError = orjson.JSONDecodeError


cdef int check_payload(object payload) except -1:
    if not isinstance(payload, (bytes, str, bytearray, memoryview)):
        raise TypeError(f"feed_data() takes str, bytes, bytearray or memoryview, not {type(payload).__name__}")
    return 0


cdef class FoldCounters:
    """The base of ``ResponsesAggregator`` and ``MessagesAggregator``; not used on its own."""

    def __cinit__(self):
        self._departures = {}

    @property
    def error(self) -> Any:
        """The error of an ``error`` event, or None."""
        return self._error

    @property
    def _fast_folds(self) -> int:
        # Payloads the byte reader folded without orjson (for the tests that prove it ran).
        return self._fast_count

    @property
    def skipped(self) -> int:
        """Payloads skipped because they were not a JSON object."""
        return self._skipped

    @property
    def malformed(self) -> int:
        """Values of the wrong type dropped from otherwise usable events."""
        return self._malformed

    @property
    def verdict(self) -> FormatVerdict:
        """How complete the stream is so far (``complete``, ``terminal``, ``why``, ...)."""
        return self._verdict(False, False, False)

    cdef int _depart(self, str what) except -1:
        if what not in self._departures and len(self._departures) < MAX_DEPARTURES:
            self._departures[what] = None
        return 0

    cdef object _parse_take(self, object payload, object name):
        # The orjson way: parse, then fold; the event folded, or None for a skipped payload.
        cdef object event
        try:
            event = _loads(payload)
        except _JSONDecodeError:
            try:
                event = _loads_slow(payload)
            except _JSONDecodeError:
                self._skipped += 1
                return None
        if type(event) is not dict:
            self._skipped += 1
            return None
        self._take(<dict>event, name)
        return event

    cdef int _take(self, dict ev, object name) except -1:
        raise NotImplementedError

    cdef object _verdict(self, bint aborted, bint too_big, bint truncated):
        raise NotImplementedError


cdef inline int _begin(FoldStream self) except -1:
    # before a write's scan: the re-entry guard, then the stamp (as the bytes arrive, before any
    # is parsed)
    if self._writing:
        raise UsageError(f"{type(self).__name__}.write() called again from inside on_chunk")
    if self._timed:
        PyList_Append(self._reads, _monotonic_ns())
    self._writing = True
    self._overflowed = False
    return 0


cdef inline int _end(FoldStream self) except -1:
    # after it: EventTooLarge for an event past the bound; 1 to go on, 0 once the stream stopped
    if self._overflowed:
        self._too_large = True
        self._finished = True
        raise too_large(self._limit, [])
    return 0 if self._finished else 1


cdef class FoldStream(Decoder):
    """FoldStream(on_chunk=None, *, max_event_bytes=None, timing=False)
--

The base of ``ResponsesStream`` and ``MessagesStream``; not used on its own."""

    def __init__(
        self, on_chunk: OnEvent | None = None, *, max_event_bytes: int | None = None, timing: bool = False
    ) -> None:
        Decoder.__init__(self, max_event_bytes=max_event_bytes)
        self._timed = bool(timing)
        self._anchor = anchor_pair() if timing else [0, 0]
        self._reads = []
        self._token_reads = []
        self._tokens = []
        self._token_kinds = []
        self._on_chunk = on_chunk

    @cython.binding(False)
    def write(self, data: bytes | bytearray | memoryview, /) -> int | None:
        """Scan, parse and fold the next bytes: None to go on, 0 once the stream has stopped."""
        if self._finished or self._closed:
            return 0
        _begin(self)
        try:
            self._feed_object(data)
        finally:
            self._writing = False
        return None if _end(self) else 0

    cdef int _write(self, const char* p, Py_ssize_t n) except -1:
        # ``write`` from a pointer (Feed, for the compiled driver): the same checks and stamp
        # around the scan, no bytes object and no call
        if self._finished or self._closed:
            return 0
        _begin(self)
        try:
            self._scan(p, n)
        finally:
            self._writing = False
        return _end(self)

    def feed(self, data: bytes | bytearray | memoryview, /) -> list[Event]:
        """``write`` under the Decoder's name: events are folded, so it returns ``[]``."""
        self.write(data)
        return []

    def close(self, *, truncated: bool = False) -> list[Event]:
        """Mark the end of the byte stream; returns ``[]`` (events are folded, not returned).
        ``truncated=True`` says the transfer broke (a transport error): without its terminal event
        the stream is then reported truncated even if it ended on an event boundary."""
        if not self._closed:
            self._closed = True
            Decoder.close(self)
            self._eof_truncated = (self._truncated or truncated) and not self._finished
        return []

    @property
    def verdict(self) -> FormatVerdict:
        """How complete the stream is so far (``complete``, ``terminal``, ``why``, ...)."""
        return self._verdict_now()

    def timing(self):
        """The timing record so far (a new ``fastsse.Timing`` dict on every call), or None when
        the stream was made without ``timing=True``; the request stamps are left to a client."""
        arrays = self._timing_arrays()
        return None if arrays is None else build_timing(*arrays)

    def _timing_arrays(self):
        # With timing=True: (reads, token_reads, tokens, token_kinds, anchor), copies, in the shape
        # of the chat stream's timing record (one token per text or reasoning delta event).
        if not self._timed:
            return None
        return (list(self._reads), list(self._token_reads), list(self._tokens), list(self._token_kinds), list(self._anchor))

    cdef int _token(self, int kind) except -1:
        PyList_Append(self._token_reads, len(self._reads) - 1)
        PyList_Append(self._tokens, 1)
        PyList_Append(self._token_kinds, kind)
        return 0

    cdef int _kind(self, object event) except -1:
        # The token kind of a parsed event (CONTENT, REASONING), 0 for none.
        return 0

    cdef bint _stops_on_error(self) except -1:
        # True once the events folded so far end the stream with an error.
        return False

    cdef object _verdict_now(self):
        raise NotImplementedError

    cdef int _deliver(self, object event) except -1:
        # After the format parsed and folded an event: its timing token, then on_chunk; 1 once the
        # stream stops (the answer Decoder._on_event gives).
        cdef int kind
        cdef bint stop
        if event is None:
            return 0
        if self._timed:
            kind = self._kind(event)
            if kind:
                self._token(kind)
        stop = self._stops_on_error()
        on_chunk = self._on_chunk
        if on_chunk is not None:
            try:
                answer = on_chunk(event)
                if answer is not None and not answer:
                    self._aborted = True
                    stop = True
            except BaseException:
                self._aborted = True
                self._finished = True
                raise
        if stop:
            self._finished = True
        return stop


cdef class FoldSink:
    """The base of a translator's fast path on a fused format stream (see ``fold/_stream_c.pxd``);
    this one takes nothing."""

    cdef bint ready(self) except -1:
        return False

    cdef int take(self, FastDelta* delta) except -1:
        return 0

    cdef int flush(self) except -1:
        return 0


cdef int set_fold_sink(object stream, FoldSink sink) except -1:
    (<FoldStream>stream)._sink = sink
    return 0


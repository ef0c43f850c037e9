# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""The compiled plumbing both fused format streams share (``FoldStream`` in ``responses/_fold_py.py`` is
its readable twin): write/feed/close, the re-entry guard, ``max_event_bytes``, ``on_chunk``, the
verdict and the timing arrays. A format supplies its aggregator, its own ``_on_event`` (skip,
fold the hot event from its bytes, or parse it and hand it to ``_deliver``: the fast path pays for
no extra call) and three cdef hooks: ``_kind`` (the token kind of a parsed event),
``_stops_on_error`` and ``_verdict_now``. Not a public class: it is only subclassed.
"""

cimport cython
from cpython.list cimport PyList_Append

from ..sse._decoder_c cimport Decoder

from time import monotonic_ns as _monotonic_ns

from .._errors import too_large
from ._base import anchor_pair, format_verdict_dict
from .._timing import build_timing


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
        if self._writing:
            raise RuntimeError(f"{type(self).__name__}.write() called again from inside on_chunk")
        if self._timed:
            PyList_Append(self._reads, _monotonic_ns())  # as the bytes arrive, before any is parsed
        self._writing = True
        self._overflowed = False
        try:
            self._feed_object(data)
        finally:
            self._writing = False
        if self._overflowed:
            self._too_large = True
            self._finished = True
            raise too_large(self._limit, [])
        return 0 if self._finished else None

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

# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""The compiled plumbing both fused format streams share (``FoldStream`` in ``responses/_fold_py.py`` is
its readable twin): over ``FusedStream`` (``sse/_decoder_c.pyx``: write/feed/close, the compiled
driver's C entry point, the re-entry guard, ``max_event_bytes`` and the timing arrays, shared
with ``ChatStream``), ``on_chunk``, the verdict and the translators' sink. A format
supplies its aggregator, its own ``_on_event`` (skip, fold the hot event from its bytes, or parse
it and hand it to ``_deliver``: the fast path pays for no extra call) and three cdef hooks:
``_kind`` (the token kind of a parsed event), ``_stops_on_error`` and ``_verdict_now``. Not a
public class: it is only subclassed. ``FoldCounters`` is the same for the two aggregators
(``FoldCounters`` in ``fold/_stream_py.py`` is its twin): the error, the counters, the departures
and the orjson way in; each supplies ``_take`` and ``_verdict``.
"""

from ..sse._decoder_c cimport FusedStream

import orjson

from ._base import MAX_DEPARTURES, loads as _loads_slow

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


cdef class FoldStream(FusedStream):
    """FoldStream(on_chunk=None, *, max_event_bytes=None, timing=False)
--

The base of ``ResponsesStream`` and ``MessagesStream``; not used on its own."""

    @property
    def verdict(self) -> FormatVerdict:
        """How complete the stream is so far (``complete``, ``terminal``, ``why``, ...)."""
        return self._verdict_now()

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
                self._token(kind, 1)
        stop = self._stops_on_error()
        on_chunk = self._on_chunk
        if on_chunk is not None:
            try:
                answer = on_chunk(event)
                if answer is not None and not answer:
                    self._aborted = True
                    stop = True
            except BaseException as exc:
                self._aborted = True
                self._finished = True
                self._exception = exc
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


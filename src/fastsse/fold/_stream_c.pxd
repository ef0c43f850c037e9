# cython: language_level=3
# The layout both fused format streams share (ResponsesStream and MessagesStream subclass it: the
# plumbing is FusedStream's, in sse/_decoder_c.pxd, which ChatStream shares) and
# the small byte helpers of their event hook, inline so each fold module gets its own copy.

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.string cimport memcmp

from ..sse._decoder_c cimport FusedStream
from .._native.reader cimport Span


cdef enum:
    # What a format's fast reader folded (FastDelta.which): the delta kinds a translator carries.
    D_TEXT = 1       # Messages text_delta, Responses output_text
    D_REASONING      # Messages thinking_delta, Responses reasoning_text / reasoning_summary_text
    D_REFUSAL        # Responses refusal
    D_ARGUMENTS      # Messages input_json_delta, Responses function_call_arguments


cdef struct FastDelta:
    int which
    long long index  # the Messages block index or the Responses output_index
    Span text        # the delta's string, as read (valid: the fold decoded it)


cdef class FoldSink:
    # A translator's fast path on a fused format stream (its callback is the translator's core):
    # while ready() the stream offers the hot delta events to the fold's fast reader and, when it
    # folds one, hands the sink what it read (take) instead of parsing the event for the callback;
    # before the callback sees any event the stream calls flush.
    cdef bint ready(self) except -1
    cdef int take(self, FastDelta* delta) except -1
    cdef int flush(self) except -1


cdef class FoldCounters:
    # What both format aggregators keep and report the same way (FoldCounters in _stream_py.py is
    # the twin): the error, the counters, the departures, the verdict's entry and the orjson way in.
    cdef object _error
    cdef dict _departures
    cdef Py_ssize_t _skipped
    cdef Py_ssize_t _ignored
    cdef Py_ssize_t _malformed
    cdef Py_ssize_t _deltas
    cdef Py_ssize_t _fast_count  # payloads the byte reader folded (tests read it as _fast_folds)

    cdef int _depart(self, str what) except -1
    cdef object _parse_take(self, object payload, object name)
    # A format supplies these:
    cdef int _take(self, dict ev, object name) except -1
    cdef object _verdict(self, bint aborted, bint too_big, bint truncated)


cdef class FoldStream(FusedStream):
    cdef FoldSink _sink

    cdef int _deliver(self, object event) except -1
    # A format overrides Decoder._on_event (its hot path stays one call deep) and these:
    cdef int _kind(self, object event) except -1
    cdef bint _stops_on_error(self) except -1
    cdef object _verdict_now(self)


cdef inline bint event_name_given(const char* etype, Py_ssize_t tn) noexcept:
    return tn != 0 and not (tn == 7 and memcmp(etype, b"message", 7) == 0)


cdef inline object event_name(const char* etype, Py_ssize_t tn):
    # The ``event:`` line's name, None when absent or the default "message".
    if not event_name_given(etype, tn):
        return None
    return PyBytes_FromStringAndSize(etype, tn).decode("utf-8", "replace")


cdef int set_fold_sink(object stream, FoldSink sink) except -1
cdef int check_payload(object payload) except -1  # TypeError unless str or bytes-like

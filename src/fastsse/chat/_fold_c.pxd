# cython: language_level=3
# What other compiled modules reuse of the chat fold: the key codes, the fast reader's plan and
# ``_read``, and a few entry points into ChatAggregator (module functions rather than the class
# itself, so its layout, and _Choice's and _Call's, stay private to chat/_fold_c.pyx). The relay
# (relay/_relay_c.pyx) reads each payload once with ``_read``, decides from the plan whether the chunk
# can be forwarded as it is, and folds it with ``fast_apply``.

# The fast reader's plan, its key codes and limits (chat/_chunk_reader.pxd) and the byte reader's
# Span and string flags (_native/reader.pxd), for the cimporters of this module.
from .._native.reader cimport F_ESC, F_UTF8, Span
from ._chunk_reader cimport *


cdef bint _read(const char* p, Py_ssize_t size, Plan* plan) noexcept nogil

# ChatAggregator entry points (agg must be a compiled ChatAggregator).
cdef int fast_apply(object agg, Plan* plan) except -1
cdef object fold_usage(object agg)
cdef int fix_top(object agg, object id, object model) except -1
cdef dict fold_choices(object agg)
cdef object fold_verdict(object agg, bint aborted, bint too_large, bint truncated, bint ended)
cdef bint fold_finished(object agg) except -1
cdef bint fold_complete(object agg) except -1
cdef dict fold_result(object agg, bint aborted, bint too_large, bint truncated, bint ended)


# A translator's fast path on a ChatStream (see ChatSink in chat/_fold_c.pyx).
cdef class ChatSink:
    cdef int take(self, const char* data, Py_ssize_t n, bint is_error) except -1

cdef int set_sink(object stream, ChatSink sink) except -1
cdef object stream_aggregator(object stream)

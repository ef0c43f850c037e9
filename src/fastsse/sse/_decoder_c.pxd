# cython: language_level=3
# The compiled decoder's layout, so the fused streams can subclass it (they fold inside
# ``_on_event`` with no Event object per chunk), the one C entry point of every stream the
# compiled driver feeds (Feed), and the plumbing the fused streams share (FusedStream).

cdef struct Buf:
    char* ptr
    Py_ssize_t len
    Py_ssize_t cap


cdef class Feed:
    # What the compiled driver (client/_curl_c.pyx) hands each read to, whatever the stream:
    # ``write`` from a pointer, one vtable call, no bytes object for a fused stream. 1 to go on,
    # 0 once the stream has stopped; it raises what ``write`` raises. ChatStream, FoldStream and
    # BytesStream implement it; a plain Decoder (or a Relay) is not fed from C and raises TypeError.
    cdef int _write(self, const char* p, Py_ssize_t n) except -1
    # The same read as a bytes object (never None) the caller already holds (the event loop's
    # ReadRoute): ``_write`` on its buffer, unless the stream keeps the object itself (BytesStream
    # hands it to its writer, where ``_write`` would have to copy it into a new one).
    cdef int _write_bytes(self, bytes data) except -1


cdef class Decoder(Feed):
    cdef Buf _line          # the unterminated line
    cdef Buf _data          # the event's data, lines joined by LF
    cdef Buf _type          # the event's type
    cdef Py_ssize_t _limit  # max_event_bytes, or -1 for none
    cdef Py_ssize_t _ndata  # data lines in the current event
    cdef unsigned char _head[3]
    cdef Py_ssize_t _head_len
    cdef bint _bom_done
    cdef bint _pending_cr
    cdef bint _has_type
    cdef bint _discarding
    cdef bint _discard_partial
    cdef bint _in_event
    cdef bint _truncated
    cdef bint _overflowed
    cdef bint _stopped
    cdef bint _busy
    cdef str _last_id
    cdef object _retry
    cdef list _out

    cdef int _on_event(self, const char* data, Py_ssize_t n, const char* etype, Py_ssize_t tn) except -1
    cdef int _on_comment(self, const char* line, Py_ssize_t n) except -1
    cdef int _scan(self, const char* p, Py_ssize_t n) except -1
    cdef int _feed_object(self, object data) except -1
    cdef int _process(self, const char* line, Py_ssize_t n) except -1
    cdef int _add_data(self, const char* value, Py_ssize_t value_len) except -1
    cdef void _reset_event(self) noexcept
    cdef void _reset_stream(self) noexcept
    cdef void _overflow(self, bint partial) noexcept


cdef struct TokenRec:
    Py_ssize_t read   # index into the reads array
    long long count
    int kind


cdef class FusedStream(Decoder):
    # What the fused streams share (ChatStream, and FoldStream for ResponsesStream and
    # MessagesStream): write/feed/close and the C entry point, the checks and the stamp around each
    # scan, the flags, the exception that stopped the stream and the timing record, in C arrays.
    # A stream supplies its aggregator, its ``_on_event`` and its sink.
    cdef object _agg
    cdef object _on_chunk
    cdef bint _finished  # stopped by abort, error payload, exception or oversized event
    cdef bint _aborted
    cdef bint _too_large
    cdef bint _closed
    cdef bint _eof_truncated
    cdef bint _writing
    # the timing record: C arrays, grown by doubling, handed out by timing()
    cdef bint _timed
    cdef list _anchor
    cdef long long* _reads
    cdef Py_ssize_t _nreads
    cdef Py_ssize_t _reads_cap
    cdef TokenRec* _toks
    cdef Py_ssize_t _ntoks
    cdef Py_ssize_t _toks_cap
    cdef object _exception

    cdef int _write_object(self, object data) except -1  # write(): 1 to go on, 0 once stopped
    cdef int _token(self, int kind, long long count) except -1  # a token of the last read
    cdef int _close(self, bint truncated) except -1

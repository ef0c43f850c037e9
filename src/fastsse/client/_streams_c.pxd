# cython: language_level=3
# The compiled byte-out stream's layout and its C entry point, for the compiled driver.

cdef class BytesStream:
    cdef public object holder  # the engine's Response: it holds the transfer for a future
    cdef object _writer
    cdef object _send
    cdef list _reads
    cdef list _anchor
    cdef bint _stopped
    cdef bint _relay  # EventTooLarge carries what came before (a Relay) instead of close() giving it

    cdef object _take(self, object data)
    cdef bint _deliver(self, object piece) except -1


# BytesStream.write from a pointer, for a compiled transfer driver (stream_feed's twin for the byte
# formats): 1 to go on, 0 once the stream has stopped; it raises what ``write`` raises. ``stream``
# must be a BytesStream (the caller checks the type once, not per read).
cdef int bytes_feed(object stream, const char* p, Py_ssize_t n) except -1


# The caller's socket as a transfer's on_bytes (gateway.Downstream's fast path): BytesStream calls
# ``put`` without a Python frame.
cdef class WireSink:
    cdef public object write
    cdef public object slow
    cdef public object lost
    cdef public object first
    cdef public bint direct
    cdef public bint gone
    cdef public long long relayed
    cdef public long long first_ns
    cdef public long long last_ns
    cdef long long _gaps[64]

    cdef object put(self, object data)

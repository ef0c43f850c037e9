# cython: language_level=3
# The compiled byte-out stream's layout (its C entry point for the compiled driver is Feed._write).

from ..sse._decoder_c cimport Feed


cdef class BytesStream(Feed):
    cdef public object holder  # the engine's Response: it holds the transfer for a future
    cdef public object on_complete  # called once the writer's answer is complete (a Relay's)
    cdef object _writer
    cdef object _send
    cdef list _reads
    cdef list _anchor
    cdef bint _stopped
    cdef bint _relay  # EventTooLarge carries what came before (a Relay) instead of close() giving it

    cdef object _take(self, object data)
    cdef bint _deliver(self, object piece, bint framed=*, bint last=*) except -1


# The caller's socket as a transfer's on_bytes (gateway.Downstream's fast path): BytesStream calls
# ``put`` without a Python frame.
cdef class WireSink:
    cdef public object write
    cdef public object slow
    cdef public object lost
    cdef public object first
    cdef public object ends
    cdef public bint direct
    cdef public bint gone
    cdef public long long relayed
    cdef public long long first_ns
    cdef public long long last_ns
    cdef long long _gaps[64]

    cdef object put(self, object data, bint end=*)
    cdef object put_framed(self, bytes framed, bint end=*)

# cython: language_level=3
# The growable output buffer of the compiled writers (the relay, the translators): bytes are
# appended after one reserve per event, and taken as one bytes object per write. A buffer that grew
# past KEEP_CAPACITY is freed once taken, the Decoder's rule, so one huge event does not pin memory.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memcpy


cdef enum:
    KEEP_CAPACITY = 1 << 20


cdef struct OutBuf:
    char* ptr
    Py_ssize_t len
    Py_ssize_t cap


cdef inline int out_reserve(OutBuf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap
    cdef char* grown
    if b.len + extra <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 1024
    if cap < b.len + extra:
        cap = b.len + extra
    grown = <char*>PyMem_Realloc(b.ptr, cap)
    if grown == NULL:
        raise MemoryError()
    b.ptr = grown
    b.cap = cap
    return 0


cdef inline void out_put(OutBuf* b, const char* p, Py_ssize_t n) noexcept:
    # room was reserved
    memcpy(b.ptr + b.len, p, n)
    b.len += n


cdef inline void out_put_bytes(OutBuf* b, bytes data) noexcept:
    # room was reserved
    out_put(b, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef inline void out_put_int(OutBuf* b, long long v) noexcept:
    # a non-negative integer in decimal; room was reserved (20 bytes)
    cdef char digits[24]
    cdef int i = 0
    if v <= 0:
        b.ptr[b.len] = 48
        b.len += 1
        return
    while v > 0:
        digits[i] = <char>(48 + v % 10)
        v //= 10
        i += 1
    while i > 0:
        i -= 1
        b.ptr[b.len] = digits[i]
        b.len += 1


cdef inline bytes out_take(OutBuf* b):
    cdef bytes out = PyBytes_FromStringAndSize(b.ptr, b.len)
    b.len = 0
    if b.cap > KEEP_CAPACITY:
        PyMem_Free(b.ptr)
        b.ptr = NULL
        b.cap = 0
    return out


cdef inline void out_free(OutBuf* b) noexcept:
    PyMem_Free(b.ptr)
    b.ptr = NULL
    b.len = 0
    b.cap = 0


cdef inline bytes out_after(object core, OutBuf* b):
    # What a translator's write produced, in order: the pieces its core appended to ``core.out``
    # (which begin with what the sink handed over before each event the core saw), then what the
    # sink wrote since.
    cdef list pieces = core.out
    if not pieces:
        return out_take(b)
    if b.len:
        PyList_Append(pieces, out_take(b))
    if len(pieces) == 1:
        return pieces.pop()
    return core.take()

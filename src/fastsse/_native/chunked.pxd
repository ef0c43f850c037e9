# cython: language_level=3
# One HTTP/1.1 chunk (``<hex size>\r\n`` the bytes ``\r\n``) as one bytes object, the header
# written in front of one copy of the bytes: what the wire sink and the relay's framed output
# hand a caller's transport.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy


cdef inline bytes frame_chunk(const char* data, Py_ssize_t n):
    # ``n`` > 0: an empty chunk is the body's end, never a piece
    cdef const char* hexdigits = b"0123456789abcdef"
    cdef Py_ssize_t digits = 1
    cdef Py_ssize_t size = n
    cdef Py_ssize_t i
    cdef bytes framed
    cdef char* out
    while size >= 16:
        size >>= 4
        digits += 1
    framed = PyBytes_FromStringAndSize(NULL, digits + 2 + n + 2)
    out = PyBytes_AS_STRING(framed)
    size = n
    for i in range(digits - 1, -1, -1):
        out[i] = hexdigits[size & 15]
        size >>= 4
    out[digits] = 13
    out[digits + 1] = 10
    memcpy(out + digits + 2, data, n)
    out[digits + 2 + n] = 13
    out[digits + 3 + n] = 10
    return framed

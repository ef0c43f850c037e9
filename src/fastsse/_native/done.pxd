# The end-of-stream sentinel, recognised on the raw bytes before any JSON parsing: ``[DONE]`` with
# blanks (space, tab, CR, LF) around it, as the folds and the relay accept it.

from libc.string cimport memcmp


cdef inline bint payload_is_done(const char* p, Py_ssize_t n) noexcept nogil:
    while n > 0 and (p[0] == 32 or p[0] == 9 or p[0] == 10 or p[0] == 13):
        p += 1
        n -= 1
    while n > 0 and (p[n - 1] == 32 or p[n - 1] == 9 or p[n - 1] == 10 or p[n - 1] == 13):
        n -= 1
    return n == 6 and memcmp(p, b"[DONE]", 6) == 0

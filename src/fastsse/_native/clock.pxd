# cython: language_level=3
# The clock of time.monotonic_ns(), read without the GIL or an object (3.13 made it public): the
# stamps taken in C compare with those Python code takes.

cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030D0000
    static long long fastsse_monotonic_ns(void) {
        PyTime_t t;
        if (PyTime_MonotonicRaw(&t) < 0) { return 0; }
        return (long long)t;
    }
    #else
    static long long fastsse_monotonic_ns(void) { return (long long)_PyTime_GetMonotonicClock(); }
    #endif
    """
    long long fastsse_monotonic_ns() noexcept nogil

# cython: language_level=3
# A small validating JSON reader, inline so a fold cimports it with no module of its own: the
# Responses and Messages folds read their hot delta events straight from the payload's bytes with
# it. It accepts a strict subset of JSON (keys without escapes, non-negative integers, ASCII
# strings without escapes where a value is skipped, ``[]``) and answers NULL for anything else, so
# the caller hands that payload to orjson; every string it decodes is validated (control
# characters, escapes, surrogate pairs, UTF-8) exactly as orjson would. The chat fold's reader in
# chat/_fold_c.pyx is the fuller sibling; both belong here once that module can be split.

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8


cdef struct Span:
    const char* p       # the string's bytes between its quotes
    Py_ssize_t n
    bint escaped        # holds a backslash escape
    bint wide           # holds a byte >= 0x80


cdef inline const char* skip_ws(const char* p, const char* end) noexcept nogil:
    while p < end and (p[0] == 32 or p[0] == 10 or p[0] == 13 or p[0] == 9):
        p += 1
    return p


cdef inline int _hex(char c) noexcept nogil:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef inline const char* read_string(const char* p, const char* end, Span* s) noexcept nogil:
    # p is at the opening quote. Checks escape syntax and control characters; the text itself is
    # checked when decoded. Returns the byte after the closing quote, or NULL.
    cdef unsigned char c
    if p >= end or p[0] != 34:
        return NULL
    p += 1
    s.p = p
    s.escaped = False
    s.wide = False
    while p < end:
        c = <unsigned char>p[0]
        if c == 34:
            s.n = p - s.p
            return p + 1
        if c == 92:
            s.escaped = True
            if p + 1 >= end:
                return NULL
            c = <unsigned char>p[1]
            if c == 117:  # \uXXXX
                if p + 6 > end or _hex(p[2]) < 0 or _hex(p[3]) < 0 or _hex(p[4]) < 0 or _hex(p[5]) < 0:
                    return NULL
                p += 6
                continue
            if c not in b'"\\/bfnrt':
                return NULL
            p += 2
            continue
        if c < 32:
            return NULL
        if c >= 128:
            s.wide = True
        p += 1
    return NULL


cdef inline const char* read_key(const char* p, const char* end, Span* s) noexcept nogil:
    # A key: a plain ASCII string (a key spelled with escapes is left to orjson), then the colon.
    p = read_string(p, end, s)
    if p == NULL or s.escaped or s.wide:
        return NULL
    p = skip_ws(p, end)
    if p >= end or p[0] != 58:
        return NULL
    return skip_ws(p + 1, end)


cdef inline const char* read_plain(const char* p, const char* end, Span* s) noexcept nogil:
    # A value string kept as raw bytes (a type name, an id): ASCII without escapes only.
    p = read_string(p, end, s)
    if p == NULL or s.escaped or s.wide:
        return NULL
    return p


cdef inline const char* read_uint(const char* p, const char* end, long long* out) noexcept nogil:
    # 0 or [1-9][0-9]{0,17}, not followed by a fraction or an exponent.
    cdef long long v = 0
    cdef int digits = 0
    if p >= end or not (48 <= p[0] <= 57):
        return NULL
    if p[0] == 48:
        p += 1
    else:
        while p < end and 48 <= p[0] <= 57:
            v = v * 10 + (p[0] - 48)
            p += 1
            digits += 1
            if digits > 18:
                return NULL
    if p < end and (p[0] == 46 or p[0] == 101 or p[0] == 69):
        return NULL
    out[0] = v
    return p


cdef inline const char* read_empty_array(const char* p, const char* end) noexcept nogil:
    if p >= end or p[0] != 91:
        return NULL
    p = skip_ws(p + 1, end)
    if p >= end or p[0] != 93:
        return NULL
    return p + 1


cdef inline const char* after_value(const char* p, const char* end, bint* more) noexcept nogil:
    # After a member's value: a comma (another member follows) or the closing brace.
    p = skip_ws(p, end)
    if p >= end:
        return NULL
    if p[0] == 44:
        more[0] = True
        return skip_ws(p + 1, end)
    if p[0] == 125:
        more[0] = False
        return p + 1
    return NULL


cdef inline bint span_is(Span s, const char* name, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if s.n != n:
        return False
    for i in range(n):
        if s.p[i] != name[i]:
            return False
    return True


cdef inline Py_ssize_t _put_utf8(char* out, unsigned int cp) noexcept nogil:
    if cp < 0x80:
        out[0] = <char>cp
        return 1
    if cp < 0x800:
        out[0] = <char>(0xC0 | (cp >> 6))
        out[1] = <char>(0x80 | (cp & 0x3F))
        return 2
    if cp < 0x10000:
        out[0] = <char>(0xE0 | (cp >> 12))
        out[1] = <char>(0x80 | ((cp >> 6) & 0x3F))
        out[2] = <char>(0x80 | (cp & 0x3F))
        return 3
    out[0] = <char>(0xF0 | (cp >> 18))
    out[1] = <char>(0x80 | ((cp >> 12) & 0x3F))
    out[2] = <char>(0x80 | ((cp >> 6) & 0x3F))
    out[3] = <char>(0x80 | (cp & 0x3F))
    return 4


cdef inline Py_ssize_t _unescape(Span s, char* out) noexcept nogil:
    # The span's UTF-8 with escapes resolved (never longer than the span), or -1 for a lone
    # surrogate escape (orjson refuses those; the caller's fallback mends them).
    cdef const char* p = s.p
    cdef const char* end = s.p + s.n
    cdef Py_ssize_t n = 0
    cdef unsigned int cp, low
    cdef char c
    while p < end:
        if p[0] != 92:
            out[n] = p[0]
            n += 1
            p += 1
            continue
        c = p[1]
        if c == 117:
            cp = (_hex(p[2]) << 12) | (_hex(p[3]) << 8) | (_hex(p[4]) << 4) | _hex(p[5])
            p += 6
            if 0xDC00 <= cp <= 0xDFFF:
                return -1
            if 0xD800 <= cp <= 0xDBFF:
                if p + 6 > end or p[0] != 92 or p[1] != 117:
                    return -1
                low = (_hex(p[2]) << 12) | (_hex(p[3]) << 8) | (_hex(p[4]) << 4) | _hex(p[5])
                if not (0xDC00 <= low <= 0xDFFF):
                    return -1
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                p += 6
            n += _put_utf8(out + n, cp)
            continue
        if c == 110:
            out[n] = 10
        elif c == 116:
            out[n] = 9
        elif c == 114:
            out[n] = 13
        elif c == 98:
            out[n] = 8
        elif c == 102:
            out[n] = 12
        else:  # " \ /
            out[n] = c
        n += 1
        p += 2
    return n


cdef inline object decode(Span s):
    # The string the span spells, or None when orjson would refuse it (invalid UTF-8, a lone
    # surrogate escape): the caller then leaves the payload to orjson and its fallback.
    cdef char* buf
    cdef char small[256]  # most escaped fragments (tool input: \" around every key) fit here
    cdef Py_ssize_t n
    if not s.escaped:
        if not s.wide:
            return PyUnicode_DecodeASCII(s.p, s.n, NULL)
        try:
            return PyUnicode_DecodeUTF8(s.p, s.n, NULL)
        except UnicodeDecodeError:
            return None
    if s.n < 256:
        n = _unescape(s, small)
        if n < 0:
            return None
        try:
            return PyUnicode_DecodeUTF8(small, n, NULL)
        except UnicodeDecodeError:
            return None
    buf = <char*>PyMem_Malloc(s.n + 1)
    if buf == NULL:
        raise MemoryError()
    try:
        n = _unescape(s, buf)
        if n < 0:
            return None
        try:
            return PyUnicode_DecodeUTF8(buf, n, NULL)
        except UnicodeDecodeError:
            return None
    finally:
        PyMem_Free(buf)

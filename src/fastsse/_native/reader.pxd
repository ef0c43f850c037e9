# cython: language_level=3
# The validating JSON byte reader every compiled fold reads payloads with (the chat chunk reader in
# chat/_chunk_reader.pxd, the Responses and Messages delta readers, the relay and the translators
# through them), inline so each module gets its own copy in its hot loop. It accepts a strict
# subset of JSON (keys plain ASCII, integers non-negative and at most MAX_DIGITS digits) and
# answers NULL for anything else, so the caller hands that payload to orjson. Every string it
# accepts is valid exactly as orjson would have it (no control characters, valid escapes, no lone
# surrogate escape, strict UTF-8), so ``decode`` and the JSON string writer (json_out.pxd) can
# trust a span it returned.

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.stdint cimport uint64_t
from libc.string cimport memcmp, memcpy


cdef enum:
    F_ESC = 1        # the string holds a backslash escape
    F_UTF8 = 2       # the string holds non-ASCII bytes (valid UTF-8)
    MAX_DEPTH = 64   # of a value skip_value walks (orjson's own limit for the whole payload is 1024)
    MAX_DIGITS = 18  # any 18-digit integer fits an int64


cdef struct Span:
    const char* p   # the string's bytes between the quotes, escapes undecoded; NULL when absent
    Py_ssize_t n
    int flags       # F_ESC | F_UTF8; 0 for plain ASCII


cdef inline const char* skip_ws(const char* p, const char* end) noexcept nogil:
    # Every whitespace byte is at most a space: the byte after a token, almost never whitespace,
    # is told apart in one test.
    while p < end and <unsigned char>p[0] <= c' ' and (
        p[0] == c' ' or p[0] == c'\n' or p[0] == c'\r' or p[0] == c'\t'
    ):
        p += 1
    return p


cdef inline int hex_digit(char c) noexcept nogil:
    if c'0' <= c <= c'9':
        return c - c'0'
    if c'a' <= c <= c'f':
        return c - c'a' + 10
    if c'A' <= c <= c'F':
        return c - c'A' + 10
    return -1


cdef inline int hex4(const char* p) noexcept nogil:
    cdef int a = hex_digit(p[0]), b = hex_digit(p[1]), c = hex_digit(p[2]), d = hex_digit(p[3])
    if a < 0 or b < 0 or c < 0 or d < 0:
        return -1
    return (a << 12) | (b << 8) | (c << 4) | d


cdef inline const char* u_escape(const char* p, const char* end, unsigned int* cp) noexcept nogil:
    # p is at the backslash of a \uXXXX escape: past it (and past the low surrogate escape a high
    # one must be followed by), with its code point in cp; NULL for bad hex digits or a lone
    # surrogate, which orjson refuses. The one place surrogate pairs are decoded.
    cdef int u, low
    if end - p < 6:
        return NULL
    u = hex4(p + 2)
    if u < 0 or 0xDC00 <= u <= 0xDFFF:
        return NULL
    if 0xD800 <= u <= 0xDBFF:
        if end - p < 12 or p[6] != c'\\' or p[7] != c'u':
            return NULL
        low = hex4(p + 8)
        if not 0xDC00 <= low <= 0xDFFF:
            return NULL
        cp[0] = 0x10000 + ((<unsigned int>u - 0xD800) << 10) + (<unsigned int>low - 0xDC00)
        return p + 12
    cp[0] = <unsigned int>u
    return p + 6


cdef inline bint _cont(const char* p, unsigned char lo, unsigned char hi) noexcept nogil:
    return lo <= <unsigned char>p[0] <= hi


cdef inline const char* utf8_char(const char* p, const char* end) noexcept nogil:
    # Past one strict UTF-8 sequence starting at p (a byte >= 0x80), or NULL: the same rules as
    # CPython's and orjson's decoders (no overlongs, no surrogates, nothing past U+10FFFF).
    cdef unsigned char c = <unsigned char>p[0]
    if 0xC2 <= c <= 0xDF:
        if end - p >= 2 and _cont(p + 1, 0x80, 0xBF):
            return p + 2
    elif 0xE0 <= c <= 0xEF:
        if end - p >= 3 and _cont(p + 2, 0x80, 0xBF) and (
            _cont(p + 1, 0xA0, 0xBF) if c == 0xE0 else
            _cont(p + 1, 0x80, 0x9F) if c == 0xED else
            _cont(p + 1, 0x80, 0xBF)
        ):
            return p + 3
    elif 0xF0 <= c <= 0xF4:
        if end - p >= 4 and _cont(p + 2, 0x80, 0xBF) and _cont(p + 3, 0x80, 0xBF) and (
            _cont(p + 1, 0x90, 0xBF) if c == 0xF0 else
            _cont(p + 1, 0x80, 0x8F) if c == 0xF4 else
            _cont(p + 1, 0x80, 0xBF)
        ):
            return p + 4
    return NULL


cdef inline const char* read_escape(const char* p, const char* end) noexcept nogil:
    # Past one valid escape starting at the backslash p, or NULL (a lone surrogate too).
    cdef unsigned int cp
    if end - p < 2:
        return NULL
    cdef char c = p[1]
    if c == c'"' or c == c'\\' or c == c'/' or c == c'b' or c == c'f' or c == c'n' or c == c'r' or c == c't':
        return p + 2
    if c != c'u':
        return NULL
    return u_escape(p, end, &cp)


# A word loaded little-endian holds the byte first in memory in its lowest bits, where no borrow
# from another byte reaches: only there does the lowest marked byte of _special8 tell where the
# first byte that is not plain is. Elsewhere the word that holds one goes one byte at a time.
cdef extern from *:
    """
    #if (defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) || defined(_MSC_VER)
    #define FASTSSE_LITTLE_ENDIAN 1
    #else
    #define FASTSSE_LITTLE_ENDIAN 0
    #endif
    """
    enum: FASTSSE_LITTLE_ENDIAN


cdef inline uint64_t _special8(const char* p) noexcept nogil:
    # The high bit set in each of the 8 bytes at p that is a quote, a backslash, a control
    # character or non-ASCII, and maybe in bytes above one that is: a borrow starts only at a byte
    # a test looks for, so the lowest byte of the word marked is always the lowest such byte.
    cdef uint64_t ones = 0x0101010101010101
    cdef uint64_t x, q, b
    memcpy(&x, p, 8)
    q = x ^ (ones * 0x22)
    b = x ^ (ones * 0x5C)
    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) & (ones * 0x80)


cdef inline const char* _skip_plain(const char* p, const char* end) noexcept nogil:
    # Past the plain ASCII at p, 8 bytes at a time: at the first byte that is not plain, or in the
    # last 7 bytes before end (the caller goes on one byte at a time), or, unless the machine is
    # little-endian, at the start of the word that holds the first byte that is not plain.
    cdef uint64_t m
    cdef uint64_t positions = 0x0001020304050607
    while end - p >= 8:
        m = _special8(p)
        if m:
            if FASTSSE_LITTLE_ENDIAN:
                # the first marked byte's position: its bit alone, shifted to the byte's lowest
                # bit, shifts the constant so that its top byte is that position
                return p + <Py_ssize_t>((((m & (~m + 1)) >> 7) * positions) >> 56)
            return p
        p += 8
    return p


cdef inline const char* read_string(const char* p, const char* end, Span* s) noexcept nogil:
    # p is at an opening quote: past the closing quote of a valid JSON string, or NULL. Plain
    # ASCII is skipped 8 bytes at a time; anything else goes one byte at a time.
    cdef int flags = 0
    cdef unsigned char c
    if p >= end or p[0] != c'"':
        return NULL
    p += 1
    s.p = p
    while True:
        p = _skip_plain(p, end)
        if p >= end:
            return NULL
        c = <unsigned char>p[0]
        if c == c'"':
            s.n = p - s.p
            s.flags = flags
            return p + 1
        if c == c'\\':
            flags |= F_ESC
            p = read_escape(p, end)
        elif c >= 0x80:
            flags |= F_UTF8
            p = utf8_char(p, end)
        elif c < 0x20:
            return NULL
        else:
            p += 1
        if p == NULL:
            return NULL


cdef inline const char* read_key(const char* p, const char* end, Span* key) noexcept nogil:
    # p is at a member's opening quote: past the colon, or NULL. Keys must be plain ASCII (an
    # escaped or non-ASCII key goes the slow way, where orjson decodes it), so the first byte
    # that is not plain ends the key, as its closing quote or as a reason to give up.
    cdef unsigned char c
    if p >= end or p[0] != c'"':
        return NULL
    p += 1
    key.p = p
    key.flags = 0
    while True:
        p = _skip_plain(p, end)
        if p >= end:
            return NULL
        c = <unsigned char>p[0]
        if c == c'"':
            key.n = p - key.p
            p = skip_ws(p + 1, end)
            if p >= end or p[0] != c':':
                return NULL
            return skip_ws(p + 1, end)
        if c == c'\\' or c < 0x20 or c >= 0x80:
            return NULL
        p += 1


cdef inline const char* read_plain(const char* p, const char* end, Span* s) noexcept nogil:
    # A value string kept as raw bytes (a type name, an id): plain ASCII only.
    p = read_string(p, end, s)
    if p == NULL or s.flags:
        return NULL
    return p


cdef inline const char* read_null(const char* p, const char* end) noexcept nogil:
    if end - p >= 4 and memcmp(p, b"null", 4) == 0:
        return p + 4
    return NULL


cdef inline bint is_null(const char* p, const char* end) noexcept nogil:
    return p < end and p[0] == c'n'


cdef inline const char* read_uint(const char* p, const char* end, long long* out) noexcept nogil:
    # A non-negative JSON integer of at most MAX_DIGITS digits (anything else: NULL).
    cdef long long v = 0
    cdef const char* start = p
    if p >= end or not (c'0' <= p[0] <= c'9'):
        return NULL
    if p[0] == c'0':
        p += 1
    else:
        while p < end and c'0' <= p[0] <= c'9':
            v = v * 10 + (p[0] - c'0')
            p += 1
            if p - start > MAX_DIGITS:
                return NULL
    if p < end and (p[0] == c'.' or p[0] == c'e' or p[0] == c'E' or c'0' <= p[0] <= c'9'):
        return NULL  # a float, or a leading zero
    out[0] = v
    return p


cdef inline const char* read_empty_array(const char* p, const char* end) noexcept nogil:
    if p >= end or p[0] != c'[':
        return NULL
    p = skip_ws(p + 1, end)
    if p >= end or p[0] != c']':
        return NULL
    return p + 1


cdef inline const char* read_text(const char* p, const char* end, Span* s) noexcept nogil:
    # A string or null (s.p stays as it was: the caller sets it to NULL first).
    if is_null(p, end):
        return read_null(p, end)
    return read_string(p, end, s)


cdef inline const char* next_member(const char* p, const char* end, bint* more, char close) noexcept nogil:
    # After a value (p, NULL if reading it failed): past the ',' (more) or the closing bracket
    # (no more), or NULL.
    if p == NULL:
        return NULL
    p = skip_ws(p, end)
    if p >= end:
        return NULL
    if p[0] == c',':
        more[0] = True
        return skip_ws(p + 1, end)
    if p[0] == close:
        more[0] = False
        return p + 1
    return NULL


cdef inline bint named(const char* key, Py_ssize_t n, const char* name, Py_ssize_t m) noexcept nogil:
    return n == m and memcmp(key, name, m) == 0


cdef inline bint span_is(Span s, const char* name, Py_ssize_t n) noexcept nogil:
    # n is a constant at every call: a short name is compared byte by byte (most candidates
    # differ in the first byte), a long one (an event type) with memcmp.
    cdef Py_ssize_t i
    if s.n != n:
        return False
    if n >= 20:
        return memcmp(s.p, name, n) == 0
    for i in range(n):
        if s.p[i] != name[i]:
            return False
    return True


cdef inline const char* skip_value(const char* p, const char* end, int depth) noexcept nogil:
    # Past one JSON value (or NULL): strings and structure are checked here, numbers only
    # delimited (orjson parses the whole value afterwards and refuses a bad one).
    cdef Span s
    cdef bint more = True
    cdef char close
    if p >= end or depth > MAX_DEPTH:
        return NULL
    if p[0] == c'"':
        return read_string(p, end, &s)
    if p[0] == c'{' or p[0] == c'[':
        close = c'}' if p[0] == c'{' else c']'
        p = skip_ws(p + 1, end)
        if p < end and p[0] == close:
            return p + 1
        while more:
            if close == c'}':
                p = read_string(p, end, &s)
                if p == NULL:
                    return NULL
                p = skip_ws(p, end)
                if p >= end or p[0] != c':':
                    return NULL
                p = skip_ws(p + 1, end)
            p = skip_value(p, end, depth + 1)
            p = next_member(p, end, &more, close)
            if p == NULL:
                return NULL
        return p
    if end - p >= 4 and (memcmp(p, b"true", 4) == 0 or memcmp(p, b"null", 4) == 0):
        return p + 4
    if end - p >= 5 and memcmp(p, b"false", 5) == 0:
        return p + 5
    if p[0] == c'-' or c'0' <= p[0] <= c'9':
        while p < end and (c'0' <= p[0] <= c'9' or p[0] == c'-' or p[0] == c'+' or p[0] == c'.' or p[0] == c'e' or p[0] == c'E'):
            p += 1
        return p
    return NULL


cdef inline Py_ssize_t put_utf8(char* out, unsigned int cp) noexcept nogil:
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


cdef inline Py_ssize_t unescape(Span s, char* out) noexcept nogil:
    # The span's UTF-8 with escapes resolved (never longer than the span), or -1 for an escape
    # read_string would have refused.
    cdef const char* p = s.p
    cdef const char* end = s.p + s.n
    cdef Py_ssize_t n = 0
    cdef unsigned int cp
    cdef char c
    while p < end:
        if p[0] != c'\\':
            out[n] = p[0]
            n += 1
            p += 1
            continue
        c = p[1]
        if c == c'u':
            p = u_escape(p, end, &cp)
            if p == NULL:
                return -1
            n += put_utf8(out + n, cp)
            continue
        if c == c'n':
            out[n] = c'\n'
        elif c == c't':
            out[n] = c'\t'
        elif c == c'r':
            out[n] = c'\r'
        elif c == c'b':
            out[n] = c'\b'
        elif c == c'f':
            out[n] = c'\f'
        else:  # " \ /
            out[n] = c
        n += 1
        p += 2
    return n


cdef inline object decode(Span s):
    # The str a span read_string accepted stands for (None only for a span it would have refused:
    # invalid UTF-8, a lone surrogate escape).
    cdef char* buf
    cdef char small[256]  # most escaped fragments (tool input: \" around every key) fit here
    cdef Py_ssize_t n
    if not s.flags & F_ESC:
        if not s.flags & F_UTF8:
            return PyUnicode_DecodeASCII(s.p, s.n, NULL)
        try:
            return PyUnicode_DecodeUTF8(s.p, s.n, NULL)
        except UnicodeDecodeError:
            return None
    if s.n < 256:
        n = unescape(s, small)
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
        n = unescape(s, buf)
        if n < 0:
            return None
        try:
            return PyUnicode_DecodeUTF8(buf, n, NULL)
        except UnicodeDecodeError:
            return None
    finally:
        PyMem_Free(buf)

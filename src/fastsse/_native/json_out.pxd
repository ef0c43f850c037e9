# cython: language_level=3
# Writing a JSON string exactly as orjson.dumps writes it, straight from the bytes of a string a
# validating reader accepted (between its quotes, escapes undecoded): the translators copy each
# upstream text delta into their output with no str in between. orjson's form: UTF-8 as is (no
# \u escapes for non-ASCII, DEL or U+2028), '"' and '\' escaped, the control characters as \b \t
# \n \f \r or else \u00xx in lowercase hex; so an escape in the input is decoded and written again
# in that form ('\/' becomes '/', '\u00e9' the two UTF-8 bytes of e-acute).

from .reader cimport put_utf8, u_escape

cdef inline Py_ssize_t _control_into(char* out, unsigned int c) noexcept nogil:
    # A character below U+0020, '"' or '\' as orjson escapes it.
    cdef const char* digits = b"0123456789abcdef"
    out[0] = 92
    if c == 34 or c == 92:
        out[1] = <char>c
    elif c == 8:
        out[1] = 98
    elif c == 9:
        out[1] = 116
    elif c == 10:
        out[1] = 110
    elif c == 12:
        out[1] = 102
    elif c == 13:
        out[1] = 114
    else:
        out[1] = 117
        out[2] = 48
        out[3] = 48
        out[4] = digits[c >> 4]
        out[5] = digits[c & 15]
        return 6
    return 2


cdef inline Py_ssize_t json_string_max(Py_ssize_t n) noexcept nogil:
    # The most bytes json_string_into writes for an n-byte span: every escape is written in at
    # most as many bytes as it was read in, and every other byte is copied.
    return n + 2


cdef inline Py_ssize_t json_string_into(
    char* out, const char* p, Py_ssize_t n, bint escaped, Py_ssize_t* chars
) noexcept nogil:
    # Write the quoted JSON string orjson.dumps gives for the str the span spells; return the bytes
    # written (at most json_string_max(n)), or -1 for an escape orjson.loads refuses (a lone
    # surrogate, which read_string refuses too). The span must be valid UTF-8 with escapes
    # already checked for syntax (what reader.pxd's read_string accepts). chars, if not NULL, gets
    # the str's length in code points (len() of the str).
    cdef const char* end = p + n
    cdef Py_ssize_t w = 1
    cdef Py_ssize_t count = 0
    cdef unsigned int cp
    cdef unsigned char c
    cdef Py_ssize_t i
    out[0] = 34
    if not escaped:
        # no escapes: every byte is copied (the reader refused control characters and quotes)
        for i in range(n):
            c = <unsigned char>p[i]
            out[w + i] = <char>c
            if c & 0xC0 != 0x80:
                count += 1
        w += n
    else:
        while p < end:
            c = <unsigned char>p[0]
            if c != 92:
                out[w] = <char>c
                w += 1
                p += 1
                if c & 0xC0 != 0x80:
                    count += 1
                continue
            count += 1
            c = <unsigned char>p[1]
            if c == 117:
                p = u_escape(p, end, &cp)
                if p == NULL:
                    return -1
                if cp < 32 or cp == 34 or cp == 92:
                    w += _control_into(out + w, cp)
                elif cp < 128:
                    out[w] = <char>cp
                    w += 1
                else:
                    w += put_utf8(out + w, cp)
                continue
            p += 2
            if c == 47:  # \/ is a plain slash
                out[w] = 47
                w += 1
            elif c == 110:
                w += _control_into(out + w, 10)
            elif c == 116:
                w += _control_into(out + w, 9)
            elif c == 114:
                w += _control_into(out + w, 13)
            elif c == 98:
                w += _control_into(out + w, 8)
            elif c == 102:
                w += _control_into(out + w, 12)
            else:  # \" and \\
                w += _control_into(out + w, c)
    out[w] = 34
    if chars != NULL:
        chars[0] = count
    return w + 1

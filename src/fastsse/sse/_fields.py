"""SSE field rules shared by both decoders, for their cold paths only."""

from __future__ import annotations

from typing import Final


def split_field(line: bytes) -> tuple[bytes, bytes]:
    """``name:value`` with one leading space of the value dropped; a line without a colon is a
    field with an empty value (WHATWG "process the field")."""
    colon = line.find(b":")
    if colon < 0:
        return line, b""
    if line[colon + 1 : colon + 2] == b" ":
        return line[:colon], line[colon + 2 :]
    return line[:colon], line[colon + 1 :]


# CPython's default int(str) limit; exact conversion of longer values costs quadratic time.
MAX_RETRY_DIGITS: Final = 4300
_PIECE: Final = 600  # below the lowest limit sys.set_int_max_str_digits accepts (640)


def long_retry(digits: bytes) -> int | None:
    """The value of a ``retry`` field of ASCII ``digits`` too long for the fast path, or None when
    it is to be ignored: leading zeros do not count, and a value of more than MAX_RETRY_DIGITS
    significant digits is ignored like any other unusable retry value. It never depends on the
    interpreter's ``sys.set_int_max_str_digits`` setting."""
    digits = digits.lstrip(b"0")
    if len(digits) > MAX_RETRY_DIGITS:
        return None
    value = 0
    for start in range(0, len(digits), _PIECE):
        part = digits[start : start + _PIECE]
        value = value * 10 ** len(part) + int(part)
    return value

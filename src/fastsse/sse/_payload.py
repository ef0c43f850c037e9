"""The mending every fold's payload reader falls back to: ``loads_replacing`` parses a payload orjson
refused, with invalid UTF-8 and lone surrogate escapes replaced, as the decoders replace invalid
UTF-8 in the events they return."""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

_ESCAPE: Final = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def _mend_surrogates(text: str) -> str | None:
    """``text`` with every lone surrogate escape (a ``\\ud83d`` without its low half, a low half
    alone) written as ``\\ufffd``, or None if it has none. Escapes are read in order, so an escaped
    backslash followed by ``ud83d`` is text, not an escape."""
    out: list[str] = []
    last = 0
    high: re.Match[str] | None = None  # a high half waiting for its low half
    changed = False
    at = 0
    # A search loop, not finditer: on CPython 3.11 finditer's scanner leaves memory behind
    # (tracemalloc sees it grow with every call; tests/test_leaks.py caught it).
    while (m := _ESCAPE.search(text, at)) is not None:
        at = m.end()
        code = int(m[1], 16) if m[1] else -1
        if high is not None:
            if 0xDC00 <= code <= 0xDFFF and m.start() == high.end():
                high = None  # a pair
                continue
            out.append(text[last : high.start()] + "\\ufffd")
            last, high, changed = high.end(), None, True
        if 0xD800 <= code <= 0xDBFF:
            high = m
        elif 0xDC00 <= code <= 0xDFFF:
            out.append(text[last : m.start()] + "\\ufffd")
            last, changed = m.end(), True
    if high is not None:
        out.append(text[last : high.start()] + "\\ufffd")
        last, changed = high.end(), True
    if not changed:
        return None
    out.append(text[last:])
    return "".join(out)


def loads_replacing(payload: Any) -> Any:
    """Parse a payload orjson refused, once more with invalid UTF-8 and lone surrogate escapes
    replaced by U+FFFD.

    orjson rejects invalid UTF-8 in bytes, where the decoder (and so ``feed_event``) replaces it,
    and lone surrogate escapes (``"\\ud83d"``), which a server that cuts its text in UTF-16 units
    sends when an emoji falls on a chunk boundary. Retrying keeps every path to the fold alike, and
    a character a server split across two events costs U+FFFD instead of both chunks. It raises
    ``orjson.JSONDecodeError`` when the payload is still not JSON.
    """
    text = payload if isinstance(payload, str) else bytes(payload).decode("utf-8", "replace")
    mended = _mend_surrogates(text)
    if mended is not None:
        return orjson.loads(mended)
    if isinstance(payload, str):  # orjson has already read it as text
        raise orjson.JSONDecodeError("not JSON", payload, 0)
    return orjson.loads(text)

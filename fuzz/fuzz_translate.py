"""atheris target: the stream translators of both backends on arbitrary bytes in arbitrary chunks.

For every input and every direction (chat -> Messages, chat -> Responses, Messages -> chat,
Responses -> chat, and Messages <-> Responses through chat), the compiled translator and its
pure-Python twin must return the same bytes from every ``write`` and from ``close`` (with or
without ``truncated=True``, as the input says), raise the same ``EventTooLarge`` (one input in four
has a cap of 4-124 bytes), and end with the same ``result()``, ``verdict``, ``dropped`` and, for the
to-chat translators, ``complete``, ``error`` and ``skipped``. No other exception may escape. The
compiled chat translators write the hot deltas from the payload bytes (``translate/_from_chat_c.pyx``), so
this is a check of that writer against orjson. Mode 2 of the input wraps each line of the body as a
``data:`` payload, so dictionary tokens become chunks and events quickly.

    python fuzz/fuzz_translate.py -dict=fuzz/sse.dict [libFuzzer flags] [corpus dirs]
    FASTSSE_FUZZ_DIRECTIONS=chat-messages,chat-responses python fuzz/fuzz_translate.py ...

See fuzz/README.md.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import atheris

with atheris.instrument_imports(include=["fastsse"]):
    from _harness import check_translate, directions_from_env

DIRECTIONS = directions_from_env()


def test_one_input(buf: bytes) -> None:
    check_translate(buf, DIRECTIONS)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

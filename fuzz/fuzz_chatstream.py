"""atheris target: ChatStream of both backends on arbitrary bytes in arbitrary chunks.

For every input, both backends must deliver the same chunks to ``on_chunk``, return the same values
from ``write`` (None, then 0 once stopped), raise the same ``EventTooLarge`` and the same exception
from ``on_chunk`` (which answers False, or raises, at a call number chosen by the input), and fold the
same ``result()``. When nothing stops the stream early, the compiled stream without ``on_chunk`` (its
fast reader) must end the same, and the fused path must equal the unfused one:
the compiled Decoder's events fed to a ChatAggregator with ``feed_event``. No other exception may
escape. Mode 2 of the input wraps each line of the body as a ``data:`` payload, so dictionary tokens
become JSON chunks quickly.

    python fuzz/fuzz_chatstream.py -dict=fuzz/sse.dict [libFuzzer flags] [corpus dirs]

See fuzz/README.md.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import atheris

with atheris.instrument_imports(include=["fastsse"]):
    from _harness import check_chatstream


def main() -> None:
    atheris.Setup(sys.argv, check_chatstream)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

"""atheris target: the Decoder of both backends on arbitrary bytes in arbitrary chunks.

Checks, for every input: the compiled and the Python decoder give the same events per ``feed`` call,
the same ``EventTooLarge`` outcomes, the same ``close`` state; the events do not depend on the
chunking (the same stream fed whole gives them too); no exception escapes but ``EventTooLarge``.

    python fuzz/fuzz_decoder.py -dict=fuzz/sse.dict [libFuzzer flags] [corpus dirs]

See fuzz/README.md.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import atheris

with atheris.instrument_imports(include=["fastsse"]):
    from _harness import check_decoder


def main() -> None:
    atheris.Setup(sys.argv, check_decoder)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

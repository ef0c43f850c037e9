"""atheris target: Relay of both backends on arbitrary bytes in arbitrary chunks.

For every input, both backends must send the same events (the same JSON values: the compiled relay
splices where the twin re-serialises), hand ``on_chunk`` the same chunks (it answers False at a call
number chosen by the input), raise the same ``EventTooLarge`` and fold the same ``result()``; the
output never holds a CR and always ends on a blank line; without a cap the chunking never changes
what is sent. No other exception may escape.

    python fuzz/fuzz_relay.py -dict=fuzz/sse.dict [libFuzzer flags] [corpus dirs]

See fuzz/README.md.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import atheris

with atheris.instrument_imports(include=["fastsse"]):
    from _harness import check_relay


def main() -> None:
    atheris.Setup(sys.argv, check_relay)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

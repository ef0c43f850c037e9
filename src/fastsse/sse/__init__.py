"""The WHATWG event-stream scanner: ``Decoder`` and ``Event``, compiled (``_decoder_c``) or its twin
(``_decoder_py``) as ``fastsse._backend.COMPILED`` says, and the field rules both share (``_fields``);
the SSE framing rules every API's linter builds on (``lint``, reached through ``fastsse.check``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _backend

# The field rules, shared with the framing linter (it reads a stream's fields as the scanner does).
from ._fields import split_field as split_field

# The payload mending every fold and the relay fall back to when orjson refuses a payload.
from ._payload import loads_replacing as loads_replacing

# type checkers read the twin: the compiled module has the same names and signatures
if TYPE_CHECKING or not _backend.COMPILED:
    from ._decoder_py import Decoder, Event
else:
    from ._decoder_c import Decoder, Event

__all__ = ["Decoder", "Event"]

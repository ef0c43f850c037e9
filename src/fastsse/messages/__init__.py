"""The Anthropic Messages API: the fold and ``MessagesStream`` (compiled ``_fold_c`` or its twin
``_fold_py``, as ``fastsse._backend.COMPILED`` says), the cold half (``_result``), the server side
(``encode``) and the linter's rules (``lint``, reached through ``fastsse.check``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _backend

# How the timing record counts an event's tokens, for fastsse._formats; not public API.
from ._result import token_kind as token_kind
from .encode import MessagesEncoder, chat_usage_to_messages

if TYPE_CHECKING or not _backend.COMPILED:
    from ._fold_py import MessagesAggregator, MessagesStream
else:
    from ._fold_c import MessagesAggregator, MessagesStream

__all__ = ["MessagesAggregator", "MessagesEncoder", "MessagesStream", "chat_usage_to_messages"]

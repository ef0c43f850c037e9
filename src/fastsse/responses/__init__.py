"""The OpenAI Responses API: the fold and ``ResponsesStream`` (compiled ``_fold_c`` or its twin
``_fold_py``, as ``fastsse._backend.COMPILED`` says), the cold half (``_result``), the server side
(``encode``) and the linter's rules (``lint``, reached through ``fastsse.check``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _backend

# How the timing record counts an event's tokens, for fastsse._formats; not public API.
from ._result import token_kind as token_kind
from .encode import ResponsesEncoder, chat_usage_to_responses

if TYPE_CHECKING or not _backend.COMPILED:
    from ._fold_py import ResponsesAggregator, ResponsesStream
else:
    from ._fold_c import ResponsesAggregator, ResponsesStream

__all__ = ["ResponsesAggregator", "ResponsesEncoder", "ResponsesStream", "chat_usage_to_responses"]

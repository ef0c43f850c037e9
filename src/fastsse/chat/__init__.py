"""Chat completions: the fold and ``ChatStream`` (compiled ``_fold_c`` or its twin ``_fold_py``, as
``fastsse._backend.COMPILED`` says), the cold half both share (``_result``: the result, the
verdict), the server side (``encode``) and the linter's rules (``lint``, reached through
``fastsse.check``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _backend

# The cold half's helpers the relay (both twins) builds on; not public API.
from ._result import INDEX_LIMIT as INDEX_LIMIT
from ._result import ChatVerdict
from ._result import content_parts as content_parts
from ._result import over_index_bound as over_index_bound
from ._result import verdict_dict as verdict_dict
from .encode import ChatChunkEncoder, encode_event

if TYPE_CHECKING or not _backend.COMPILED:
    from ._fold_py import ChatAggregator, ChatStream
else:
    from ._fold_c import ChatAggregator, ChatStream

__all__ = ["ChatAggregator", "ChatChunkEncoder", "ChatStream", "ChatVerdict", "encode_event"]

"""What the typed-event folds (Responses, Messages) share: the fused stream base ``FoldStream`` and
the counters ``FoldCounters`` (compiled ``_stream_c`` or the twin ``_stream_py``, as
``fastsse._backend.COMPILED`` says), the verdict ``FormatVerdict`` and helpers (``_base``) and the
event-grammar linter base (``lint``, reached through ``fastsse.check``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _backend

# The cold half's helpers both APIs' folds (both twins) and results build on; not public API.
from ._base import CONTENT as CONTENT
from ._base import MAX_INDEX as MAX_INDEX
from ._base import REASONING as REASONING
from ._base import FormatVerdict
from ._base import format_verdict_dict as format_verdict_dict
from ._base import is_done as is_done
from ._base import is_index as is_index
from ._base import joined as joined
from ._base import loads as loads
from ._base import why_not as why_not

if TYPE_CHECKING or not _backend.COMPILED:
    from ._stream_py import FoldCounters, FoldStream
else:
    from ._stream_c import FoldCounters, FoldStream

__all__ = ["FoldCounters", "FoldStream", "FormatVerdict"]

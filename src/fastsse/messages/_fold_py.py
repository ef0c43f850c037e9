"""Pure-Python Messages fold and MessagesStream: the readable twin of ``_fold_c.pyx`` and the
reference for its behaviour. The cold half (result assembly, the verdict) is shared in
``_result.py``; the fused stream's plumbing, shared with the Responses twin, is ``fold/_stream_py.py``.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..fold import FormatVerdict, is_done, is_index, joined, loads
from ..fold._stream_py import FoldCounters, FoldStream, OnEvent, check_payload
from ._result import BLOCK_OF_DELTA, build_message, event_error, start_content, tool_input
from ._result import make_verdict as _make_verdict
from ._result import token_kind as _token_kind


class _Block:
    """One content block being assembled."""

    __slots__ = ("citations", "fields", "index", "input", "json", "parsed", "started", "stopped", "texts")

    def __init__(self, index: int) -> None:
        self.index = index
        self.fields: dict[str, Any] = {}
        self.texts: dict[str, list[str]] = {}  # field -> streamed fragments
        self.json: list[str] | None = None  # input_json_delta fragments
        self.input: Any = None
        self.parsed = False
        self.citations: list[Any] | None = None
        self.started = False
        self.stopped = False


class MessagesAggregator(FoldCounters):
    """Folds the events of an Anthropic Messages stream into the message the API returns without
    streaming. One aggregator per stream; not safe to share between threads.

    ``feed(event)``, ``feed_data(payload)``, ``feed_event(event)``, ``result()`` and the properties
    work as on ``ResponsesAggregator``.

    Rules (from the Messages streaming reference, loosened for what recorded servers send):

    - ``message_start``: the message's fields (last non-null wins); ``usage`` is merged key by key
      with ``message_delta``'s (a later non-null value wins, so ``message_delta`` can override).
      ``message_delta``'s ``delta`` fields (``stop_reason``, ``stop_sequence``, ``stop_details``,
      ``container``, ...) are set on the message when not null.
    - Blocks by ``index``, listed in index order. ``content_block_start`` sets the block's fields.
      Deltas: ``input_json_delta`` pieces are appended and parsed once, at ``content_block_stop``
      (input that is not JSON keeps the start's ``input`` and adds ``partial_json`` with the raw
      text); ``citations_delta`` appends its ``citation`` to ``citations``; every other delta
      (``text_delta``, ``thinking_delta``, ``signature_delta``, ``compaction_delta``, new kinds)
      appends each string field to the block's field of the same name and sets the others.
    - ``message_stop`` is the terminal event; ``error`` is recorded and ends the stream; ``ping``
      is ignored. After either, every payload is ignored and counted in ``ignored``.
    - Tolerated and recorded in ``verdict.departures``: no ``message_start``, a delta or stop for a
      block never started (the block is created with the type the delta implies), a block started
      twice or out of index order, a block never stopped, tool input that is not JSON, an event
      line that disagrees with the payload's ``type``, an unknown event type.
    """

    def __init__(self) -> None:
        self._fields: dict[str, Any] = {}
        self._usage: dict[str, Any] | None = None
        self._blocks: dict[int, _Block] = {}
        self._high = -1
        self._started = False
        self._terminal = False
        self._error: Any = None
        self._departures: dict[str, None] = {}
        self._skipped = 0
        self._ignored = 0
        self._malformed = 0
        self._deltas = 0

    # Public API

    def feed(self, event: dict[str, Any], /) -> None:
        """Fold one parsed event. Something other than a dict is skipped and counted in ``skipped``."""
        if self._terminal or self._error is not None:
            self._ignored += 1
        elif type(event) is dict:
            self._take(event, None)
        else:
            self._skipped += 1

    def feed_data(self, payload: str | bytes | bytearray | memoryview, /) -> bool:
        """Parse one event's data and fold it: True if it was folded, False for a skipped or ignored
        payload. It raises TypeError if ``payload`` is not str or bytes-like."""
        check_payload(payload)
        return self._fold(payload, None) is not None

    def feed_event(self, event: Any, /) -> bool:
        """Fold one SSE event (anything with ``event`` and ``data`` attributes); returns what
        ``feed_data`` returns. It raises TypeError if ``event.data`` is not str or bytes-like."""
        data = event.data
        check_payload(data)
        name = event.event
        return self._fold(data, name if name and name != "message" else None) is not None

    def result(self) -> dict[str, Any]:
        """The message folded so far: a new dict (and new lists) on every call."""
        return build_message(self._fields, self._usage, self._blocks, self._error)

    @property
    def terminal(self) -> str | None:
        """``"message_stop"`` once it arrived, else None."""
        return "message_stop" if self._terminal else None

    @property
    def deltas(self) -> int:
        """Content deltas folded so far."""
        return self._deltas

    @property
    def ignored(self) -> int:
        """Payloads ignored because they came after ``message_stop`` or an error."""
        return self._ignored

    # Internal entry points shared with MessagesStream

    def _verdict(self, aborted: bool, too_big: bool, truncated: bool) -> FormatVerdict:
        return _make_verdict(
            self._fields,
            self._usage,
            self._blocks,
            self._started,
            self._terminal,
            self._error,
            self._departures,
            self._skipped,
            self._ignored,
            self._malformed,
            aborted,
            too_big,
            truncated,
        )

    def _fold(self, payload: Any, name: str | None) -> dict[str, Any] | None:
        if self._terminal or self._error is not None:
            self._ignored += 1
            return None
        if is_done(payload):
            return None
        try:
            event = loads(payload)
        except orjson.JSONDecodeError:
            self._skipped += 1
            return None
        if type(event) is not dict:
            self._skipped += 1
            return None
        self._take(event, name)
        return event

    def _take(self, ev: dict[str, Any], name: str | None) -> None:
        kind = ev.get("type")
        if type(kind) is not str:
            if kind is not None:
                self._malformed += 1
            if name is None:
                self._depart("untyped_event")
                return
            kind = name
        elif name is not None and name != kind:
            self._depart("type_mismatch")
        if kind == "content_block_delta":
            self._delta(ev)
        elif kind == "content_block_start":
            self._start(ev)
        elif kind == "content_block_stop":
            self._stop(ev)
        elif kind == "message_delta":
            self._message_delta(ev)
        elif kind == "message_start":
            self._message_start(ev)
        elif kind == "message_stop":
            self._terminal = True
        elif kind == "error":
            self._error = event_error(ev)
        elif kind != "ping":
            self._depart("unknown_event")

    def _index(self, ev: dict[str, Any]) -> int:
        index = ev.get("index")
        if is_index(index):
            return index
        self._malformed += 1
        return max(self._high, 0)

    def _block(self, index: int, delta_type: Any) -> _Block:
        b = self._blocks.get(index)
        if b is None:
            b = self._blocks[index] = _Block(index)
            b.fields["type"] = BLOCK_OF_DELTA.get(delta_type, "text") if type(delta_type) is str else "text"
            self._depart("block_not_started")
            if index > self._high:
                self._high = index
        return b

    def _message_start(self, ev: dict[str, Any]) -> None:
        if self._started:
            self._depart("message_start_twice")
        elif self._blocks:
            self._depart("message_start_late")
        self._started = True
        message = ev.get("message")
        if type(message) is not dict:
            self._malformed += 1
            return
        for key, value in message.items():
            if value is None:
                continue
            if key == "usage":
                self._merge_usage(value)
            elif key == "content":
                self._fields[key], bad = start_content(value)
                self._malformed += bad
            else:
                self._fields[key] = value

    def _merge_usage(self, usage: Any) -> None:
        if type(usage) is not dict:
            self._malformed += 1
            return
        if self._usage is None:
            self._usage = {}
        for key, value in usage.items():
            if value is not None:
                self._usage[key] = value

    def _message_delta(self, ev: dict[str, Any]) -> None:
        delta = ev.get("delta")
        if type(delta) is dict:
            for key, value in delta.items():
                if value is not None:
                    self._fields[key] = value
        elif delta is not None:
            self._malformed += 1
        usage = ev.get("usage")
        if usage is not None:
            self._merge_usage(usage)

    def _start(self, ev: dict[str, Any]) -> None:
        index = self._index(ev)
        block = ev.get("content_block")
        if type(block) is not dict:
            self._malformed += 1  # no block to make: a content block always has a type
            return
        b = self._blocks.get(index)
        if b is None:
            b = self._blocks[index] = _Block(index)
        elif b.started:
            self._depart("block_started_twice")
        if index < self._high:
            self._depart("block_out_of_order")
        elif index > self._high:
            self._high = index
        b.started = True
        for key, value in block.items():
            if key not in b.texts:
                b.fields[key] = value

    def _delta(self, ev: dict[str, Any]) -> None:
        index = self._index(ev)
        delta = ev.get("delta")
        if type(delta) is not dict:
            self._malformed += 1
            return
        dtype = delta.get("type")
        b = self._blocks.get(index)
        if b is None:
            b = self._block(index, dtype)
        self._deltas += 1
        if dtype == "input_json_delta":
            piece = delta.get("partial_json")
            if type(piece) is str:
                if b.json is None:
                    b.json = [piece]
                else:
                    b.json.append(piece)
            elif piece is not None:
                self._malformed += 1
            return
        if dtype == "citations_delta":
            citation = delta.get("citation")
            if citation is not None:
                if b.citations is None:
                    b.citations = []
                b.citations.append(citation)
            return
        for key, value in delta.items():
            if key == "type" or value is None:
                continue
            if type(value) is str:
                parts = b.texts.get(key)
                if parts is None:
                    b.texts[key] = [value]
                else:
                    parts.append(value)
            else:
                b.fields[key] = value

    def _stop(self, ev: dict[str, Any]) -> None:
        index = self._index(ev)
        b = self._blocks.get(index)
        if b is None:
            self._depart("block_not_started")
            return
        b.stopped = True
        if b.json is not None and not b.parsed:
            raw = joined(b.json)
            if raw.strip():
                ok, value = tool_input(raw)  # once, at the block's end
                if ok:
                    b.input, b.parsed = value, True
                else:
                    self._depart("unparsed_input")


class MessagesStream(FoldStream):
    """Scans, parses and folds an Anthropic Messages stream in one pass, for pycurl's
    ``WRITEFUNCTION`` (or any push source): ``MessagesStream(on_chunk=None, *,
    max_event_bytes=None, timing=False)``; one per stream, not safe to share between threads.
    With ``timing=True`` each ``write`` is stamped as it arrives and each text or reasoning delta
    event recorded with its read, in the arrays of the chat stream's timing record.

    The protocol of ``ResponsesStream``, except that an ``error`` event stops the stream (after
    ``on_chunk`` saw it), as the Messages API ends a stream with it. ``result()`` is
    ``MessagesAggregator.result()`` with ``"verdict"``.
    """

    _stops_on_error = True
    _kind = staticmethod(_token_kind)

    def __init__(
        self, on_chunk: OnEvent | None = None, *, max_event_bytes: int | None = None, timing: bool = False
    ) -> None:
        super().__init__(on_chunk, max_event_bytes=max_event_bytes, timing=timing)
        self._agg = MessagesAggregator()

    @property
    def aggregator(self) -> MessagesAggregator:
        """The ``MessagesAggregator`` this stream folds into."""
        agg: MessagesAggregator = self._agg
        return agg

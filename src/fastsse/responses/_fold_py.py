"""Pure-Python Responses fold and ResponsesStream: the readable twin of ``_fold_c.pyx`` and the
reference for its behaviour. The cold half (vocabulary, result assembly, the verdict) is shared in
``_result.py``; the fused stream's plumbing, shared with the Messages twin, is ``fold/_stream_py.py``.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..fold import (
    FormatVerdict,
    is_done,
    is_index,
    joined,
    loads,
)
from ..fold._stream_py import FoldCounters, FoldStream, OnEvent, check_payload
from ._result import ITEM_OF_PART, ITEM_TEXT, LIFECYCLE, PART_TEXT, TERMINAL, build_response, event_error
from ._result import make_verdict as _make_verdict
from ._result import token_kind as _token_kind


class _Part:
    """One content or summary part being assembled."""

    __slots__ = ("annotations", "done_text", "fields", "index", "logprobs", "text", "text_key")

    def __init__(self, index: int, text_key: str) -> None:
        self.index = index
        self.fields: dict[str, Any] = {}
        self.text: list[str] | None = None  # streamed fragments
        self.done_text: str | None = None  # the ``*.done`` event's whole text
        self.text_key = text_key
        self.annotations: list[Any] | None = None
        self.logprobs: list[Any] | None = None


class _Item:
    """One output item being assembled."""

    __slots__ = ("announced", "args", "args_done", "args_key", "done", "fields", "index", "parts", "summary")

    def __init__(self, index: int) -> None:
        self.index = index
        self.fields: dict[str, Any] = {}
        self.parts: dict[int, _Part] = {}
        self.summary: dict[int, _Part] = {}
        self.args: list[str] | None = None
        self.args_done: str | None = None
        self.args_key: str | None = None
        self.announced = False
        self.done = False


def _merge(held: dict[str, Any], new: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
    for key, value in new.items():
        if value is not None and key not in skip:
            held[key] = value


class ResponsesAggregator(FoldCounters):
    """Folds the events of an OpenAI Responses stream into the object the API returns without
    streaming. One aggregator per stream; not safe to share between threads.

    ``feed(event)`` takes a parsed event (a dict), ``feed_data(payload)`` the JSON text of one
    event, ``feed_event(event)`` a fastsse ``Event`` (its ``event:`` name is used when the payload
    has no ``type``). ``result()`` may be called at any time (a partial result) and again later;
    ``verdict``, ``terminal``, ``error`` and the counters describe the stream so far.

    Rules (from the Responses streaming reference, loosened for what recorded servers send):

    - ``response.created`` / ``in_progress`` / ``queued`` and the terminal ``response.completed`` /
      ``incomplete`` / ``failed``: the ``response`` object's fields, last non-null value wins
      (``output`` excepted: items are folded from their own events). Items only a terminal
      ``output`` holds (at an ``output_index`` no event named) are taken whole.
    - Items by ``output_index`` (else by ``item_id``, else the latest item), listed in index
      order. ``output_item.added`` / ``done`` merge the item's fields (last non-null wins).
      Parts by ``content_index`` / ``summary_index``: ``content_part.*`` /
      ``reasoning_summary_part.*`` merge the part's fields.
    - Text: ``output_text``, ``refusal``, ``reasoning_text``, ``reasoning_summary_text`` deltas are
      appended to their part; ``function_call_arguments``, ``mcp_call_arguments``,
      ``custom_tool_call_input``, ``code_interpreter_call_code`` deltas to their item. Streamed
      text wins over a ``.done`` event's and a done item's; the ``.done`` text is used when no
      delta came. ``output_text.annotation.added`` appends to the part's annotations.
    - Tolerated and recorded in ``verdict.departures``: an event for an item or part never
      announced (the item is created with the type the event implies), an item announced twice,
      a ``.done`` text that differs from the streamed one, an event line that disagrees with the
      payload's ``type``, an unknown event type, items never done.
    - ``error``: recorded (``error``, ``result()["error"]`` when the response has none); folding
      goes on, since ``response.failed`` follows. After a terminal event every payload is ignored
      and counted in ``ignored``; ``[DONE]`` is ignored silently. A payload that is not a JSON
      object is counted in ``skipped``, a value of the wrong type in ``malformed``. Nothing a server
      sends makes the aggregator raise.
    """

    def __init__(self) -> None:
        self._top: dict[str, Any] = {}
        self._items: dict[int, _Item] = {}
        self._by_id: dict[str, int] = {}
        self._extra: dict[int, Any] = {}
        self._last = -1
        self._terminal: str | None = None
        self._error: Any = None
        self._departures: dict[str, None] = {}
        self._skipped = 0
        self._ignored = 0
        self._malformed = 0
        self._deltas = 0

    # Public API

    def feed(self, event: dict[str, Any], /) -> None:
        """Fold one parsed event. Something other than a dict is skipped and counted in ``skipped``."""
        if self._terminal is not None:
            self._ignored += 1
        elif type(event) is dict:
            self._take(event, None)
        else:
            self._skipped += 1

    def feed_data(self, payload: str | bytes | bytearray | memoryview, /) -> bool:
        """Parse one event's data and fold it: True if it was folded, False for a skipped or ignored
        payload and ``[DONE]``. It raises TypeError if ``payload`` is not str or bytes-like."""
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
        """The response folded so far: a new dict (and new lists) on every call."""
        return build_response(self._top, self._items, self._extra, self._error)

    @property
    def terminal(self) -> str | None:
        """The terminal event that arrived (``"response.completed"``, ...), or None."""
        return self._terminal

    @property
    def deltas(self) -> int:
        """Text deltas folded so far (output, refusal, reasoning, arguments, code)."""
        return self._deltas

    @property
    def ignored(self) -> int:
        """Payloads ignored because they came after the terminal event."""
        return self._ignored

    # Internal entry points shared with ResponsesStream

    def _verdict(self, aborted: bool, too_big: bool, truncated: bool) -> FormatVerdict:
        return _make_verdict(
            self._top,
            self._items,
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
        """Parse and fold one payload; the event dict, or None if skipped, ignored or [DONE]."""
        if is_done(payload):
            return None
        if self._terminal is not None:
            self._ignored += 1
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

    def _take(self, ev: dict[str, Any], name: str | None) -> bool:
        kind = ev.get("type")
        if type(kind) is not str:
            if kind is not None:
                self._malformed += 1
            if name is None:
                self._depart("untyped_event")
                return False
            kind = name
        elif name is not None and name != kind:
            self._depart("type_mismatch")
        stem, _, tail = kind.rpartition(".")
        if tail == "delta":
            if stem in PART_TEXT:
                self._part_text(ev, stem, True)
            elif stem in ITEM_TEXT:
                self._item_text(ev, stem, True)
            else:
                self._depart("unknown_event")
        elif kind in LIFECYCLE or kind in TERMINAL:
            self._response(ev, kind)
        elif tail == "done" and stem in PART_TEXT:
            self._part_text(ev, stem, False)
        elif tail == "done" and stem in ITEM_TEXT:
            self._item_text(ev, stem, False)
        elif kind == "response.output_item.added" or kind == "response.output_item.done":
            self._item_event(ev, tail == "done")
        elif kind == "response.content_part.added" or kind == "response.content_part.done":
            self._part_event(ev, "content", "content_index", tail == "done")
        elif (
            kind == "response.reasoning_summary_part.added" or kind == "response.reasoning_summary_part.done"
        ):
            self._part_event(ev, "summary", "summary_index", tail == "done")
        elif kind == "response.output_text.annotation.added":
            p = self._part(ev, "content", "output_text", "text", "content_index")
            annotation = ev.get("annotation")
            if annotation is not None:
                if p.annotations is None:
                    p.annotations = []
                p.annotations.append(annotation)
        elif kind == "error":
            self._error = event_error(ev)
        elif not kind.startswith("response."):
            self._depart("unknown_event")
        # Other response.* events are progress notes (web_search_call.searching, ...): the items'
        # own events carry their final state.
        return False

    def _response(self, ev: dict[str, Any], kind: str) -> None:
        response = ev.get("response")
        if type(response) is not dict:
            if response is not None:
                self._malformed += 1
        else:
            _merge(self._top, response, ("output",))
            output = response.get("output")
            if kind in TERMINAL and type(output) is list:
                for i, item in enumerate(output):
                    if type(item) is not dict:
                        self._malformed += 1  # an entry that is no item: dropped, counted
                        continue
                    held = self._items.get(i)
                    if held is None:
                        self._extra[i] = item
                        self._depart("item_only_in_terminal")
                    elif item.get("id") != held.fields.get("id"):
                        self._depart("terminal_ids_differ")  # OpenRouter: the streamed items are kept
        if kind in TERMINAL:
            self._terminal = kind

    def _item(self, ev: dict[str, Any], assumed: str) -> _Item:
        index = ev.get("output_index")
        if not is_index(index):
            if index is not None:
                self._malformed += 1
            item_id = ev.get("item_id")
            index = self._by_id.get(item_id) if type(item_id) is str else None
            if index is None:
                index = max(self._last, 0)
        it = self._items.get(index)
        if it is None:
            it = self._items[index] = _Item(index)
            it.fields["type"] = assumed
            item_id = ev.get("item_id")
            if type(item_id) is str:
                it.fields["id"] = item_id
                self._by_id[item_id] = index
            self._depart("item_not_announced")
        if index > self._last:
            self._last = index
        return it

    def _item_event(self, ev: dict[str, Any], done: bool) -> None:
        item = ev.get("item")
        index = ev.get("output_index")
        if type(item) is not dict:
            # no item to make: an output item always has a type, and this event names none
            self._malformed += 1 + (not is_index(index))
            return
        index = ev.get("output_index")
        if not is_index(index):
            self._malformed += 1
            item_id = item.get("id")
            index = self._by_id.get(item_id) if type(item_id) is str else None
            if index is None:
                index = self._last + (0 if done else 1)
                if index < 0:
                    index = 0
        it = self._items.get(index)
        if it is None:
            it = self._items[index] = _Item(index)
            if done:
                self._depart("item_not_announced")
        elif not done and it.announced:
            self._depart("item_announced_twice")
        if index > self._last:
            self._last = index
        it.announced = True
        it.done = it.done or done
        _merge(it.fields, item)
        item_id = item.get("id")
        if type(item_id) is str:
            self._by_id[item_id] = index

    def _part(self, ev: dict[str, Any], which: str, part_type: str, text_key: str, key: str) -> _Part:
        # A part a text event names: created with the type the event implies if never announced.
        it = self._item(ev, ITEM_OF_PART[part_type])
        parts = it.parts if which == "content" else it.summary
        index = self._index(ev, key)
        p = parts.get(index)
        if p is None:
            p = parts[index] = _Part(index, text_key)
            p.fields["type"] = part_type
            self._depart("part_not_announced")
        return p

    def _index(self, ev: dict[str, Any], key: str) -> int:
        index = ev.get(key)
        if is_index(index):
            return index
        if index is not None:
            self._malformed += 1
        return 0

    def _part_event(self, ev: dict[str, Any], which: str, key: str, done: bool) -> None:
        part = ev.get("part")
        if type(part) is not dict:
            self._malformed += 1
            part = {}
        ptype = part.get("type")
        # a summary part belongs to a reasoning item; a content part's type names its item's
        assumed = (
            "reasoning"
            if which == "summary"
            else ITEM_OF_PART.get(ptype, "message")
            if type(ptype) is str
            else "message"
        )
        it = self._item(ev, assumed)
        parts = it.parts if which == "content" else it.summary
        index = self._index(ev, key)
        p = parts.get(index)
        if p is None:
            text_key = "refusal" if ptype == "refusal" else "text"
            p = parts[index] = _Part(index, text_key)
            if done:
                self._depart("part_not_announced")
        _merge(p.fields, part, (p.text_key, "annotations", "logprobs"))
        whole = part.get(p.text_key)
        if type(whole) is str:
            self._done_text(p, whole)
        elif whole is not None:
            self._malformed += 1
        for field in ("annotations", "logprobs"):
            value = part.get(field)
            if type(value) is list:
                if getattr(p, field) is None or len(getattr(p, field)) < len(value):
                    setattr(p, field, list(value))
            elif value is not None:
                self._malformed += 1

    def _done_text(self, p: _Part, whole: str) -> None:
        if p.text is not None:
            if joined(p.text) != whole:
                self._depart("done_text_differs")
        elif p.done_text is None or len(whole) >= len(p.done_text):
            p.done_text = whole

    def _part_text(self, ev: dict[str, Any], stem: str, delta: bool) -> None:
        p = self._part(ev, *PART_TEXT[stem])
        if delta:
            text = ev.get("delta")
            if type(text) is str:
                if p.text is None:
                    p.text = [text]
                else:
                    p.text.append(text)
                self._deltas += 1
            elif text is not None:
                self._malformed += 1
            logprobs = ev.get("logprobs")
            if type(logprobs) is list and logprobs:
                if p.logprobs is None:
                    p.logprobs = []
                p.logprobs.extend(logprobs)
        else:
            text = ev.get(p.text_key)
            if type(text) is str:
                self._done_text(p, text)
            elif text is not None:
                self._malformed += 1

    def _item_text(self, ev: dict[str, Any], stem: str, delta: bool) -> None:
        item_type, field = ITEM_TEXT[stem]
        it = self._item(ev, item_type)
        it.args_key = field
        if delta:
            text = ev.get("delta")
            if type(text) is str:
                if it.args is None:
                    it.args = [text]
                else:
                    it.args.append(text)
                self._deltas += 1
            elif text is not None:
                self._malformed += 1
        else:
            text = ev.get(field)
            if type(text) is str:
                if it.args is not None:
                    if joined(it.args) != text:
                        self._depart("done_text_differs")
                else:
                    it.args_done = text
            elif text is not None:
                self._malformed += 1


class ResponsesStream(FoldStream):
    """Scans, parses and folds an OpenAI Responses stream in one pass, for pycurl's
    ``WRITEFUNCTION`` (or any push source): ``ResponsesStream(on_chunk=None, *,
    max_event_bytes=None, timing=False)``; one per stream, not safe to share between threads.
    With ``timing=True`` each ``write`` is stamped as it arrives and each text or reasoning delta
    event recorded with its read, in the arrays of the chat stream's timing record.

    The same protocol as ``ChatStream``: ``write(data)`` returns None to go on and 0 once the
    stream stopped; ``on_chunk(event)`` sees every folded event dict (never ``[DONE]``, a skipped
    payload, or one after the terminal event) and stops the stream by returning a false value
    other than None or by raising (which propagates out of ``write``); an event over
    ``max_event_bytes`` makes ``write`` raise ``EventTooLarge``. An ``error`` event does not stop
    the stream (``response.failed`` follows it). ``close()`` marks the end of the bytes;
    ``result()`` is ``ResponsesAggregator.result()`` with ``"verdict"``; ``aggregator`` is the
    fold. ``write`` raises TypeError for other input types and RuntimeError if ``on_chunk`` calls
    ``write`` on its own stream.
    """

    _kind = staticmethod(_token_kind)

    def __init__(
        self, on_chunk: OnEvent | None = None, *, max_event_bytes: int | None = None, timing: bool = False
    ) -> None:
        super().__init__(on_chunk, max_event_bytes=max_event_bytes, timing=timing)
        self._agg = ResponsesAggregator()

    @property
    def aggregator(self) -> ResponsesAggregator:
        """The ``ResponsesAggregator`` this stream folds into."""
        agg: ResponsesAggregator = self._agg
        return agg

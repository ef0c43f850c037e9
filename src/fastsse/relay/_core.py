"""The repair rules of ``Relay``, shared by both backends: one implementation.

``RelayCore`` holds what a relay remembers about the stream it forwards (the first chunk's
``id``/``created``/``model``, each choice's role, finish and the tool calls' ids and names already
sent, whether a usage value is held back for the end) and handles every event the compiled fast
path does not: it parses the payload, repairs the chunk by the encoder's rules, folds what it
forwards into the ``ChatAggregator`` (through its public ``feed``) and serialises it. A chunk
that needs no repair is forwarded as its own bytes. The compiled relay (``relay/_relay_c.pyx``) calls
into this module only for chunks its fast path cannot forward or splice; the pure-Python relay
(``relay/_relay_py.py``) calls it for every event.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Final

import orjson

from .._errors import InvalidRequest
from ..chat import INDEX_LIMIT, content_parts, over_index_bound
from ..sse import loads_replacing

DONE: Final = b"data: [DONE]\n\n"
USAGE_MODES: Final = ("end", "keep", "drop")
_TEXT_KEYS: Final = ("content", "reasoning_content", "reasoning", "refusal")
_BLANKS: Final = b" \t\r\n"
# Tool calls one choice may start (the indexes are bounded by INDEX_LIMIT, but Gemini and Ollama
# start each new call at a used index): fragments of a call past this are dropped and counted.
RELAY_CALLS: Final = 128
# The field names the compiled reader reads itself (at the top, choice or delta level) rather
# than handing them over as "other" values.
READER_FIELDS: Final = frozenset(
    [
        "id",
        "object",
        "created",
        "model",
        "system_fingerprint",
        "service_tier",
        "usage",
        "choices",
        "error",
        "obfuscation",
        "index",
        "delta",
        "message",
        "finish_reason",
        "logprobs",
        "text",
        "content",
        "role",
        "tool_calls",
        "reasoning_content",
        "reasoning",
        "refusal",
        "annotations",
        "function_call",
        "audio",
    ]
)

OnChunk = Callable[[dict[str, Any]], Any]

# A tool-call fragment the fold drops and counts (its index is out of bounds), folded once for
# each fragment the relay dropped, so the relay's verdict counts them in ``malformed``.
_UNREAD_CALL: Final = {"index": -1}


class _Call:
    __slots__ = ("id", "name", "type")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.type: str | None = None


_DROPPED: Final = _Call()  # a call past RELAY_CALLS: every fragment at its index is dropped


class _Choice:
    __slots__ = ("calls", "finished", "last", "role", "started")

    def __init__(self) -> None:
        self.role: str | None = None
        self.finished = False
        self.calls: dict[int, _Call] = {}
        self.started = 0  # calls started (RELAY_CALLS at most)
        # the call a fragment without an index continues (the fold's rule: the most recent one),
        # _DROPPED when that call is past the bound; exact once a call was dropped (the compiled
        # fast path then hands every tool-call fragment to the core)
        self.last: _Call | None = None


def check_options(
    usage: str, model: str | None, id: str | None, drop_fields: Collection[str]
) -> frozenset[str]:
    """Validate the relay's options; returns ``drop_fields`` as a frozenset."""
    if usage not in USAGE_MODES:
        raise InvalidRequest(f'usage must be "end", "keep" or "drop", not {usage!r}')
    for name, value in (("model", model), ("id", id)):
        if value is not None and (not isinstance(value, str) or not value):
            raise TypeError(f"{name} must be a non-empty str or None, not {value!r}")
    if isinstance(drop_fields, str) or not all(isinstance(f, str) for f in drop_fields):
        raise TypeError("drop_fields must be a collection of field names (str)")
    return frozenset(drop_fields)


def error_shape(value: Any) -> dict[str, Any]:
    """The OpenAI error object for an upstream error value: ``message``, ``type``, ``param``,
    ``code`` always present (other fields kept), so every client finds the message where the
    openai SDK looks for it."""
    if isinstance(value, dict):
        message = value.get("message")
        out: dict[str, Any] = {
            "message": message if isinstance(message, str) else orjson.dumps(value).decode(),
            "type": value.get("type") if value.get("type") is not None else "upstream_error",
            "param": value.get("param"),
            "code": value.get("code"),
        }
        for key, item in value.items():
            out.setdefault(key, item)
        return out
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return {"message": text, "type": "upstream_error", "param": None, "code": None}


def _frame(chunk: Any) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


class RelayCore:
    """Per-stream repair state and the event handler every non-fast event goes through."""

    __slots__ = (
        "aborted",
        "agg",
        "bad",
        "capped",
        "choices",
        "drop_fields",
        "head",
        "head_created",
        "head_id",
        "head_model",
        "id",
        "last_usage",
        "lost",
        "model",
        "on_chunk",
        "stopped",
        "usage",
        "usage_held",
    )

    def __init__(
        self,
        agg: Any,
        *,
        usage: str,
        model: str | None,
        id: str | None,
        drop_fields: frozenset[str],
        on_chunk: OnChunk | None,
    ) -> None:
        self.agg = agg
        self.usage = usage
        self.model = model
        self.id = id
        self.drop_fields = drop_fields
        self.on_chunk = on_chunk
        self.choices: dict[int, _Choice] = {}
        self.head = False  # the first chunk has set head_id / head_created / head_model
        self.head_id: Any = None
        self.head_created: Any = None
        self.head_model: Any = None
        self.usage_held = False  # a usage value was taken off a chunk and waits for the end
        self.last_usage: Any = None
        self.stopped = False  # [DONE], an error payload or an abort: nothing more is forwarded
        self.aborted = False
        # a payload that looked like a chunk ("{") could not be read: the answer misses it, so it
        # never gets a [DONE] and is not complete
        self.lost = False
        self.bad: list[Any] = []  # choice entries dropped by the repair, folded (counted) after it
        self.capped = (
            False  # a choice reached RELAY_CALLS: the compiled fast path leaves its calls to the core
        )

    # events

    def event(self, payload: bytes, is_error: bool, multi_line: bool) -> bytes:
        """Relay one dispatched event; returns the bytes to send (maybe ``b""``)."""
        agg = self.agg
        mended = False
        if over_index_bound(payload):  # dropped whole before it is parsed (chat._result)
            self.lost = True
            agg.feed(None)
            return b""
        if not is_error and len(payload) < 64 and payload.strip(_BLANKS) == b"[DONE]":
            return self.done()  # recognised before parsing: orjson would raise twice
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            try:
                chunk = loads_replacing(payload)
                mended = True  # invalid UTF-8 or a lone surrogate: never forward those bytes
            except orjson.JSONDecodeError:
                chunk = None
        if is_error:
            if not (isinstance(chunk, dict) and chunk.get("error") is not None):
                text = payload.decode("utf-8", "replace")
                chunk = {"error": chunk if chunk is not None else text}
            return self._error(chunk, payload, mended or multi_line, force=True)
        if chunk is None:
            payload = payload.strip(_BLANKS)
            if payload == b"[DONE]":
                return self.done()
            if payload[:1] == b"{":  # a chunk we cannot read (too deep, a raw NUL): text is missing
                self.lost = True
            agg.feed(None)  # counted as skipped: a client's JSON parser would fail on it
            return b""
        if not isinstance(chunk, dict):
            agg.feed(None)
            return b""
        if chunk.get("error") is not None:
            return self._error(chunk, payload, mended or multi_line, force=False)
        out = self.repair(chunk)
        if out is None:
            if self.on_chunk is not None and not self._ask(chunk):
                return b""
            agg.feed(chunk)
            if mended or multi_line:
                return _frame(chunk)
            return b"data: " + payload + b"\n\n"
        parts = []
        for piece in out:
            if self.on_chunk is not None and not self._ask(piece):
                break
            agg.feed(piece)
            parts.append(_frame(piece))
        if self.bad:
            # what the repair dropped, folded on its own: the fold counts each entry in
            # ``malformed`` and keeps none of it (its index is out of bounds)
            agg.feed({"choices": self.bad})
            self.bad = []
        return b"".join(parts)

    def _ask(self, chunk: dict[str, Any]) -> bool:
        assert self.on_chunk is not None
        try:
            answer = self.on_chunk(chunk)
        except BaseException:
            self.aborted = self.stopped = True
            raise
        if answer is not None and not answer:
            self.aborted = self.stopped = True
            return False
        return True

    def _error(self, chunk: dict[str, Any], payload: bytes, reframe: bool, *, force: bool) -> bytes:
        shape = error_shape(chunk["error"])
        if shape != chunk["error"]:
            chunk = {**chunk, "error": shape}
            reframe = True
        self.stopped = True  # the stream ends here whatever on_chunk answers
        if self.on_chunk is not None and not self._ask(chunk):
            return b""  # refused like any other chunk: not sent, not folded
        self.agg.feed(chunk)
        if reframe or force:
            return _frame(chunk)
        return b"data: " + payload + b"\n\n"

    def done(self) -> bytes:
        """``[DONE]`` from upstream (or added at a whole end): the held usage chunk, then ``[DONE]``
        (not when a chunk was lost: the answer then ends without one)."""
        self.stopped = True
        out = self._usage_chunk(self._held_usage())
        if self.lost:
            return out
        self.agg.feed_data(b"[DONE]")
        return out + DONE

    def close(self, whole: bool) -> bytes:
        """The tail at the end of the upstream: nothing unless the answer is whole."""
        if self.stopped or not whole or self.lost:
            return b""
        return self.done()

    def _held_usage(self) -> Any:
        if not self.usage_held or self.usage != "end":
            return None
        self.usage_held = False
        return self.last_usage

    def _usage_chunk(self, usage: Any) -> bytes:
        if usage is None:
            return b""
        chunk: dict[str, Any] = {}
        if self.head_id is not None:
            chunk["id"] = self.head_id
        chunk["object"] = "chat.completion.chunk"
        if self.head_created is not None:
            chunk["created"] = self.head_created
        if self.head_model is not None:
            chunk["model"] = self.head_model
        chunk["choices"] = []
        chunk["usage"] = usage
        return _frame(chunk)

    # the repair rules

    def _set_head(self, chunk: dict[str, Any]) -> None:
        self.head = True
        self.head_id = self.id if self.id is not None else chunk.get("id")
        self.head_created = chunk.get("created")
        self.head_model = self.model if self.model is not None else chunk.get("model")

    def repair(self, chunk: dict[str, Any]) -> list[dict[str, Any]] | None:
        """None when ``chunk`` needs no repair; else the chunks to send instead (maybe none)."""
        changed = False
        if not self.head:
            self._set_head(chunk)
        for key, value, forced in (
            ("id", self.head_id, self.id is not None),
            ("created", self.head_created, False),
            ("model", self.head_model, self.model is not None),
        ):
            # every chunk carries the first chunk's values (clients key the answer on them); a
            # rewrite option also fills chunks that lacked the field
            if value is not None and (chunk.get(key, value) != value or (forced and key not in chunk)):
                chunk[key] = value
                changed = True
        obj = chunk.get("object")
        if obj is not None and obj != "chat.completion.chunk" and obj != "text_completion":
            chunk["object"] = "chat.completion.chunk"
            changed = True
        if self.drop_fields:
            changed = _drop(chunk, self.drop_fields) or changed
        usage = chunk.get("usage")
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            if usage is None:
                return []  # a chunk with nothing to deliver ends some clients' streams (LocalAI#1886)
            if self.usage == "drop":
                self.agg.feed({"usage": usage})
                self.last_usage = usage
                return []
            if not isinstance(choices, list):
                chunk["choices"] = []
                changed = True
            self.usage_held = False  # the upstream's own usage chunk carries it
            return [chunk] if changed else None
        if usage is not None and self.usage != "keep":
            del chunk["usage"]
            self.agg.feed({"usage": usage})  # folded now, so a truncated stream still bills it
            self.last_usage = usage
            self.usage_held = self.usage == "end"
            changed = True
        kept: list[Any] = []
        finals: list[dict[str, Any]] = []
        for choice in choices:
            outcome = self._choice(choice)
            if outcome is None:
                kept.append(choice)
                continue
            changed = True
            keep, final = outcome
            if keep:
                kept.append(choice)
            if final is not None:
                finals.append(final)
        if not changed:
            return None
        out: list[dict[str, Any]] = []
        if kept:
            chunk["choices"] = kept
            out.append(chunk)
        elif chunk.get("usage") is not None:  # usage="keep": the usage stays, as a usage chunk
            chunk["choices"] = []
            out.append(chunk)
        for final in finals:
            out.append(self._final(chunk, final))
        return out

    def _final(self, chunk: dict[str, Any], choice: dict[str, Any]) -> dict[str, Any]:
        final: dict[str, Any] = {k: chunk[k] for k in ("id", "object", "created", "model") if k in chunk}
        final["choices"] = [choice]
        return final

    def _choice(self, choice: Any) -> tuple[bool, dict[str, Any] | None] | None:
        """Repair one choice entry in place. None: untouched; else (keep it, a final entry to add)."""
        if not isinstance(choice, dict):
            return None
        index = choice.get("index")
        delta = choice.get("delta")
        if index is not None and (type(index) is not int or not 0 <= index < INDEX_LIMIT):
            self.bad.append(choice)  # a client would fold it into another choice: dropped, counted
            return (False, None)
        if type(index) is not int or not isinstance(delta, dict):
            return None
        state = self.choices.get(index)
        first = state is None
        if state is None:
            state = self.choices[index] = _Choice()
        changed = False
        flat = _flatten_parts(delta)
        if flat is not None:
            choice["delta"] = delta = flat  # clients read content as a string
            changed = True
        for key in _TEXT_KEYS:
            if delta.get(key) == "":
                del delta[key]  # carries nothing, and an empty first content ends some clients' streams
                changed = True
        role = delta.get("role")
        if first:
            if not role:
                choice["delta"] = delta = {
                    "role": "assistant",
                    **{k: v for k, v in delta.items() if k != "role"},
                }
                role = "assistant"
                changed = True
            state.role = role
        elif role is not None:
            del delta["role"]  # clients concatenate a repeated role
            changed = True
        calls = delta.get("tool_calls")
        if calls == []:
            del delta["tool_calls"]
            changed = True
        elif isinstance(calls, list):
            kept_calls = []
            dropped = []
            for call in calls:
                keep, call_changed = _tool_call(state, call)
                if keep is None and state.started >= RELAY_CALLS:
                    self.capped = True
                changed = changed or call_changed
                if keep:
                    kept_calls.append(call)
                elif keep is None:
                    dropped.append(call)
            if dropped:
                # one out-of-bounds fragment per dropped one: the fold counts each, keeps none
                self.bad.append({"index": index, "delta": {"tool_calls": [_UNREAD_CALL] * len(dropped)}})
            if not kept_calls:
                del delta["tool_calls"]
            elif len(kept_calls) != len(calls):
                delta["tool_calls"] = kept_calls
        reason = choice.get("finish_reason")
        if reason == "":
            choice["finish_reason"] = reason = None
            changed = True
        elif not isinstance(reason, str):
            reason = None  # null, or a value of the wrong type the fold drops: no finish either way
        has_payload = any(v is not None for v in delta.values())
        if reason is None or state.finished:
            if not first and not has_payload and _bare(choice):
                return (False, None)  # nothing to deliver: an empty delta is noise, or worse
            return (True, None) if changed else None
        state.finished = True
        if not has_payload:
            if delta:
                choice["delta"] = {}
                changed = True
            return (True, None) if changed else None
        # the reason rides on a chunk with text in it: send the text, then an empty-delta final chunk
        choice["finish_reason"] = None
        final = {"index": index, "delta": {}, "finish_reason": reason}
        return (True, final)


def _flatten_parts(delta: dict[str, Any]) -> dict[str, Any] | None:
    """The delta with a list-valued ``content`` (Mistral's parts) written as strings by the fold's
    rule (text parts to ``content``, thinking parts to ``reasoning_content``, in key order), or None
    when there is no list or it holds something strings cannot carry (an unknown or malformed part,
    which then stays visible to the client and the linter)."""
    parts = delta.get("content")
    if not isinstance(parts, list):
        return None
    texts, thinking, unknown, bad = content_parts(parts)
    if unknown or bad:
        return None
    out: dict[str, Any] = {}
    for key, value in delta.items():
        if key == "content":
            if thinking:
                out["reasoning_content"] = out.get("reasoning_content", "") + "".join(thinking)
            if texts:
                out["content"] = "".join(texts)
        elif key == "reasoning_content" and isinstance(value, str):
            out[key] = out.get(key, "") + value
        else:
            out[key] = value
    return out


def _bare(choice: dict[str, Any]) -> bool:
    """Whether a choice entry holds nothing but index, delta and finish_reason (no logprobs etc.)."""
    return all(v is None or k in ("index", "delta", "finish_reason") for k, v in choice.items())


def _tool_call(state: _Choice, call: Any) -> tuple[bool | None, bool]:
    """Drop what a tool call already sent (id, type, name: clients concatenate them); returns
    (keep the fragment, changed), keep None for a fragment dropped as malformed or over the
    bound (an index outside 0..127, a call past RELAY_CALLS)."""
    if not isinstance(call, dict):
        return True, False
    at = call.get("index")
    if at is not None and (type(at) is not int or not 0 <= at < INDEX_LIMIT):
        return None, True
    function = call.get("function")
    # Only non-empty strings count: null means absent, "" adds nothing to what clients join, and
    # a value of another type is the fold's to count as malformed, not the relay's to touch.
    name = _text(function.get("name")) if isinstance(function, dict) else None
    call_id = _text(call.get("id"))
    if type(at) is not int:
        # Without an index it continues the most recent call, or starts one (a new id and name):
        # it is forwarded as sent, but a call past the bound takes such fragments with it too.
        last = state.last
        if (
            call_id
            and name
            and (last is None or last is _DROPPED or (last.id is not None and call_id != last.id))
        ):
            if state.started >= RELAY_CALLS:
                state.last = _DROPPED
                return None, True
            state.started += 1
            state.last = last = _Call()
            last.id = call_id
        return (None, True) if last is _DROPPED else (True, False)
    changed = False
    held = state.calls.get(at)
    if held is _DROPPED:
        state.last = _DROPPED
        return None, True
    if held is not None and call_id and name and held.id is not None and call_id != held.id:
        held = None  # a new call at a used index (Gemini, Ollama): left as sent, tracked anew
    if held is None:
        if state.started >= RELAY_CALLS:
            state.calls[at] = state.last = _DROPPED  # the rest of this call's fragments go with it
            return None, True
        state.started += 1
        held = state.calls[at] = _Call()
    state.last = held
    if call_id:
        if held.id is None:
            held.id = call_id
        else:
            del call["id"]
            changed = True
    call_type = _text(call.get("type"))
    if call_type:
        if held.type is None:
            held.type = call_type
        elif call_type == held.type:
            del call["type"]
            changed = True
    if name:
        assert isinstance(function, dict)
        if held.name is None:
            held.name = name
        elif name == held.name:
            del function["name"]
            changed = True
        else:
            held.name += name
    keep = any(v is not None for k, v in call.items() if k not in ("index", "function")) or (
        isinstance(function, dict) and any(v is not None for v in function.values())
    )
    return keep, changed or not keep


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _drop(chunk: dict[str, Any], names: frozenset[str]) -> bool:
    changed = False
    for key in [k for k in chunk if k in names]:
        del chunk[key]
        changed = True
    choices = chunk.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            for key in [k for k in choice if k in names]:
                del choice[key]
                changed = True
            delta = choice.get("delta")
            if isinstance(delta, dict):
                for key in [k for k in delta if k in names]:
                    del delta[key]
                    changed = True
    return changed

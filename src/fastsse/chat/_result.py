"""The cold half of the chat fold, shared by both backends: the verdict type and the assembly of
the final response from the fold's per-choice state.

The hot half (one call per chunk) lives twice, in ``chat/_fold_c.pyx`` and ``chat/_fold_py.py``;
both keep their state in objects with the attribute names read here, so the two backends cannot
disagree about the shape of ``result()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final

import orjson

from .._verdict import Verdict as _Base
from ..fold import joined


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatVerdict(_Base):
    """How complete a chat stream was, so a caller can tell a finished answer from a truncated one
    (the fields every API shares are ``fastsse.Verdict``'s).

    ``complete`` is True exactly when all of these hold:

    1. at least one choice arrived and every choice has a non-empty ``finish_reason``;
    2. no error payload came (``error`` is False);
    3. the stream was not stopped on the client side (``aborted`` and ``too_large`` are False);
    4. and the answer's end was seen: either ``[DONE]`` arrived (``done``), or the byte stream
       ended cleanly, that is ``close()`` was called on the ``ChatStream`` (or the
       ``ChatAggregator``) and ``truncated`` is False (the bytes did not end inside an event, and
       the caller did not report a broken transfer with ``close(truncated=True)``).

    ``why`` names the first of these that failed (None when complete). ``done`` only says whether
    ``[DONE]`` was seen: an answer whose choices all finished, from a server that ends its streams
    without ``[DONE]`` (Cerebras behind the Hugging Face router, Anthropic-compatible servers), is
    complete once its bytes end cleanly; before ``close()``, and after a cut transfer, it is not.
    Once ``[DONE]`` has arrived the answer has ended, so what happens to the bytes after it (a
    cut, trailing junk) does not change ``complete``, though ``truncated`` still reports a cut.
    The linter reports every missing ``[DONE]`` (``missing-done``), complete or not.

    The chat fields: ``done``, ``finish_reasons`` (one per choice, in the order of
    ``result()["choices"]``, None where none arrived), and the counter ``unknown_parts``: parts of
    a list-valued ``content`` that are neither text nor thinking (kept in the message's
    ``content_parts``). ``usage`` is a non-null ``usage``, or Groq's ``x_groq.usage``.
    """

    done: bool
    finish_reasons: tuple[str | None, ...]
    unknown_parts: int = 0


def chat_why(
    done: bool,
    reasons: list[str | None] | tuple[str | None, ...],
    failed: object,
    aborted: bool,
    too_large: bool,
    truncated: bool,
    ended: bool,
) -> str | None:
    """The first reason a chat answer is not complete (``ChatVerdict``'s rule), or None."""
    if aborted:
        return "aborted by the caller"
    if too_large:
        return "an event passed max_event_bytes"
    if failed is not None:
        kind = failed.get("type") or failed.get("code") if isinstance(failed, dict) else None
        return f"error: {kind}" if isinstance(kind, str) and kind else "error"
    cut = "the stream was cut" if truncated else None
    if not reasons:
        return f"{cut}: no choice arrived" if cut else "no choice arrived"
    if None in reasons:
        first = reasons.index(None)
        missing = f"choice {first} has no finish_reason" if len(reasons) > 1 else "no finish_reason"
        return f"{cut} ({missing})" if cut else missing
    if done:
        return None
    if truncated:
        return "the stream was cut before [DONE]"
    if not ended:
        return "no [DONE] and the stream was not closed"
    return None


def verdict_data(
    done: bool,
    choices: dict[int, Any],
    usage: bool,
    error: object,
    skipped: int,
    ignored: int,
    malformed: int,
    aborted: bool,
    too_large: bool,
    truncated: bool,
    ended: bool,
    unknown_parts: int,
) -> dict[str, Any]:
    """The verdict of a fold as plain data: ``verdict_dict(make_verdict(...))`` built directly, the
    ``"verdict"`` entry of ``result()`` (every answer ends with one, so no dataclass is made for
    it). ``usage``: a usage arrived; ``ended``: the byte stream was closed (cleanly unless
    ``truncated``). The keys are ``ChatVerdict``'s fields in their order."""
    reasons = list(map(_finish_reason, _in_order(choices)))
    why = chat_why(done, reasons, error, aborted, too_large, truncated, ended)
    return {
        "complete": why is None,
        "why": why,
        "usage": usage,
        "error": error is not None,
        "aborted": aborted,
        "too_large": too_large,
        "truncated": truncated,
        "skipped": skipped,
        "ignored": ignored,
        "malformed": malformed,
        "stop_reason": reasons[0] if reasons else None,
        "done": done,
        "finish_reasons": reasons,
        "unknown_parts": unknown_parts,
    }


def make_verdict(data: dict[str, Any]) -> ChatVerdict:
    """``verdict_data``'s dict as the frozen ``ChatVerdict`` (``finish_reasons`` a tuple)."""
    return ChatVerdict(**{**data, "finish_reasons": tuple(data["finish_reasons"])})


_finish_reason: Final = attrgetter("finish_reason")


def _in_order(choices: dict[int, Any]) -> Iterable[Any]:
    """The choices by ascending index (most answers have one: no sort for it)."""
    if len(choices) < 2:
        return choices.values()
    return [choices[i] for i in sorted(choices)]


# Choice and tool-call indexes are 0 <= index < INDEX_LIMIT (OpenAI's n is at most 128). Any other
# value is malformed: clients read a negative index from the end (Python's -1 is the last choice)
# and an absurd one as the next position, so each fold and the relay drop it and count it, and the
# linter reports it (index-out-of-range). It also bounds what one stream can make a relay keep
# and send (a choice's finish is sent once, RELAY_CALLS calls per choice at most).
INDEX_LIMIT: Final = 128
# A chunk holding more indexes than every choice and each of its calls could use (INDEX_LIMIT
# choices of INDEX_LIMIT calls) is over the bound by itself: the folds and the relay drop it whole
# (counted in ``skipped``; the answer then misses it, so it is not complete) before it is parsed,
# since the parse alone costs some 20 times the chunk's size in small objects. The count is a byte
# scan (a quote cannot follow ``index`` inside a JSON string), made only on payloads longer than
# SCAN_FROM bytes.
MAX_INDEXES: Final = INDEX_LIMIT * (INDEX_LIMIT + 1)
SCAN_FROM: Final = 1 << 16


def over_index_bound(payload: Any) -> bool:
    """Whether a data payload (str or bytes-like) longer than SCAN_FROM names ``"index"`` more
    than MAX_INDEXES times: a chunk no answer within the index bounds can send."""
    if len(payload) <= SCAN_FROM:
        return False
    if isinstance(payload, str):
        return payload.count('"index"') > MAX_INDEXES
    data = payload if isinstance(payload, (bytes, bytearray)) else bytes(payload)
    return data.count(b'"index"') > MAX_INDEXES


def _is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Annotations:
    """The ``annotations`` of one choice: every list that arrives is appended in arrival order, and
    an entry equal to one already kept (the same JSON, keys in any order) is dropped, so citations
    sent one per chunk (OpenRouter) all stay and a provider that resends the whole list so far
    does not double it. Null entries are absent. Not hot: a stream carries a few annotations."""

    __slots__ = ("_seen", "items")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._seen: set[bytes] = set()

    def add(self, value: list[Any]) -> None:
        for entry in value:
            if entry is None:
                continue
            try:
                key = orjson.dumps(entry, option=orjson.OPT_SORT_KEYS)
            except TypeError:  # what orjson cannot write (too deep, or from feed()): compare it as it is
                try:
                    known = entry in self.items
                except RecursionError:  # nested past Python's limit: kept, never a crash
                    known = False
                if not known:
                    self.items.append(entry)
                continue
            if key not in self._seen:
                self._seen.add(key)
                self.items.append(entry)


# Fields of a reasoning_details part that stream in fragments.
DETAIL_TEXT: Final = ("text", "summary")


class ReasoningDetails:
    """The ``reasoning_details`` of one choice (OpenRouter, Snowflake): parts merged by ``index``
    like tool calls, listed by ascending index. In a part, ``text`` and ``summary`` are
    concatenated; every other field (``type``, ``signature``, ``data``, ``format``, ``id``, ...)
    keeps its last non-null value, except that an empty string never replaces one already held
    (OpenRouter opens an Anthropic part with ``"signature": ""`` and sends the signature at the
    end). A part without ``index`` continues the most recent part (or starts one at the index
    after the highest seen). ``add`` returns how many malformed values it dropped (a part that is
    not an object, an index that is not an integer, a text fragment that is not a string)."""

    __slots__ = ("by_index", "last", "next_index")

    def __init__(self) -> None:
        self.by_index: dict[int, dict[str, Any]] = {}
        self.last: dict[str, Any] | None = None
        self.next_index = 0

    def add(self, value: list[Any]) -> int:
        bad = 0
        for item in value:
            if item is None:
                continue
            if type(item) is not dict:
                bad += 1
                continue
            index = item.get("index")
            if index is not None and not _is_index(index):
                bad += 1
                continue
            part = self.last if index is None else self.by_index.get(index)
            if part is None:
                if index is None:
                    index = self.next_index
                part = self.by_index[index] = {"index": index}
                if index >= self.next_index:
                    self.next_index = index + 1
            self.last = part
            for key, field in item.items():
                if field is None or key == "index":
                    continue
                if key in DETAIL_TEXT:
                    if isinstance(field, str):
                        held = part.get(key)
                        if type(held) is list:
                            held.append(field)
                        else:
                            part[key] = [field]
                    else:
                        bad += 1
                elif field != "" or key not in part:
                    part[key] = field
        return bad

    def result(self) -> list[dict[str, Any]]:
        return [
            {k: joined(v) if k in DETAIL_TEXT else v for k, v in self.by_index[i].items()}
            for i in sorted(self.by_index)
        ]


def content_parts(parts: list[Any]) -> tuple[list[str], list[str], list[Any], int]:
    """Split a list-valued ``delta.content`` (Mistral's magistral models) into its text fragments
    (``{"type": "text", "text": ...}``), its thinking fragments (``{"type": "thinking",
    "thinking": [<text parts>]}``, or ``"thinking": "<text>"``), the parts it does not know (kept
    whole, in order: anything else, including a non-text part inside ``thinking``) and the number
    of malformed values (a ``text`` or ``thinking`` of the wrong type). Null parts are absent."""
    texts: list[str] = []
    thinking: list[str] = []
    unknown: list[Any] = []
    bad = 0
    for part in parts:
        if part is None:
            continue
        kind = part.get("type") if type(part) is dict else None
        if kind == "text":
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
            elif text is not None:
                bad += 1
        elif kind == "thinking":
            inner = part.get("thinking")
            if isinstance(inner, str):
                thinking.append(inner)
            elif isinstance(inner, list):
                for sub in inner:
                    if sub is None:
                        continue
                    text = sub.get("text") if type(sub) is dict and sub.get("type") == "text" else None
                    if isinstance(text, str):
                        thinking.append(text)
                    else:
                        unknown.append(sub)
            elif inner is not None:
                bad += 1
        else:
            unknown.append(part)
    return texts, thinking, unknown, bad


def provider_usage(value: object) -> Any:
    """The usage inside a top-level ``x_groq`` object (Groq), or None."""
    return value.get("usage") if type(value) is dict else None


def verdict_dict(verdict: ChatVerdict) -> dict[str, Any]:
    """The verdict as plain JSON data: the ``"verdict"`` entry of every ``result()`` (ChatAggregator,
    ChatStream, create_stream, iter_chunks)."""
    out = {name: getattr(verdict, name) for name in _VERDICT_FIELDS}
    out["finish_reasons"] = list(verdict.finish_reasons)
    return out


_VERDICT_FIELDS: Final = tuple(ChatVerdict.__dataclass_fields__)


def with_provider_usage(top: dict[Any, Any], usage: object) -> dict[Any, Any]:
    """``top`` with ``usage`` taken from a provider's own field when no top-level usage came."""
    if usage is None or "usage" in top:
        return top
    return {**top, "usage": usage}


def build_result(
    top: dict[Any, Any], choices: dict[int, Any], error: object, text_completion: bool
) -> dict[str, Any]:
    # The standard fields (null when none came), then a provider's own in arrival order. Not
    # copied: ``object`` is rewritten, ``choices`` folded, ``error`` reported on its own (the folds
    # drop ``obfuscation``, OpenAI's per-chunk random padding).
    get = top.get
    out: dict[Any, Any] = {
        "id": get("id"),
        "object": "text_completion" if text_completion else "chat.completion",
        "created": get("created"),
        "model": get("model"),
        "choices": list(map(_choice, _in_order(choices))),
        "usage": get("usage"),
        "system_fingerprint": get("system_fingerprint"),
        "service_tier": get("service_tier"),
    }
    if not top.keys() <= out.keys():
        for key, value in top.items():
            if key not in out:
                out[key] = value
    if error is not None:
        out["error"] = error
    return out


def _choice(c: Any) -> dict[str, Any]:
    text = c.text
    if text is None:
        out: dict[str, Any] = {"index": c.index, "message": _message(c)}
    elif c.has_delta:
        out = {"index": c.index, "message": _message(c), "text": joined(text)}
    else:
        out = {"index": c.index, "text": joined(text)}
    out["finish_reason"] = c.finish_reason
    logprobs = c.logprobs
    out["logprobs"] = None if logprobs is None else _logprobs(logprobs)
    extras = c.extras
    if extras:
        for key, value in extras.items():
            out.setdefault(key, value)
    return out


def _message(c: Any) -> dict[str, Any]:
    role = c.role
    content = c.content
    refusal = c.refusal
    msg: dict[str, Any] = {
        "role": "assistant" if role is None else role,
        "content": None if content is None else joined(content),
        "refusal": None if refusal is None else joined(refusal),
    }
    if c.reasoning_content is not None:
        msg["reasoning_content"] = joined(c.reasoning_content)
    if c.reasoning is not None:
        msg["reasoning"] = joined(c.reasoning)
    if c.calls:
        msg["tool_calls"] = [_tool_call(call) for call in sorted(c.calls, key=_by_index)]
    if c.function_call is not None:
        msg["function_call"] = _function(c.function_call)
    if c.audio is not None:
        msg["audio"] = {k: joined(v) if k in ("data", "transcript") else v for k, v in c.audio.items()}
    if c.annotations is not None:
        msg["annotations"] = list(c.annotations.items)
    if c.reasoning_details is not None:
        msg["reasoning_details"] = c.reasoning_details.result()
    if c.content_parts is not None:
        msg["content_parts"] = list(c.content_parts)
    extras = c.delta_extras
    if extras:
        for key, value in extras.items():
            msg.setdefault(key, value)
    return msg


def _by_index(call: Any) -> Any:
    return call.index  # sorted() is stable: calls sharing an index keep their arrival order


def _function(call: Any) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": joined(call.name), "arguments": joined(call.arguments)}
    for key, value in call.function_extras.items():
        fn.setdefault(key, value)
    return fn


def _tool_call(call: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": call.id,
        "type": call.type if call.type is not None else "function",
        "function": _function(call),
    }
    for key, value in call.extras.items():
        out.setdefault(key, value)
    return out


def _logprobs(lp: dict[Any, Any]) -> dict[Any, Any]:
    # The fold extends these lists in place; hand out copies so the caller cannot reach our state.
    return {k: list(v) if type(v) is list else v for k, v in lp.items()}

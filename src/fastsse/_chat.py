"""The cold half of the chat fold, shared by both backends: the verdict type and the assembly of
the final response from the fold's per-choice state.

The hot half (one call per chunk) lives twice, in ``_aggregator_c.pyx`` and ``_aggregator_py.py``;
both keep their state in objects with the attribute names read here, so the two backends cannot
disagree about the shape of ``result()``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import orjson

_ESCAPE: Final = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def _mend_surrogates(text: str) -> str | None:
    """``text`` with every lone surrogate escape (a ``\\ud83d`` without its low half, a low half
    alone) written as ``\\ufffd``, or None if it has none. Escapes are read in order, so an escaped
    backslash followed by ``ud83d`` is text, not an escape."""
    out: list[str] = []
    last = 0
    high: re.Match[str] | None = None  # a high half waiting for its low half
    changed = False
    at = 0
    # A search loop, not finditer: on CPython 3.11 finditer's scanner leaves memory behind
    # (tracemalloc sees it grow with every call; tests/test_leaks.py caught it).
    while (m := _ESCAPE.search(text, at)) is not None:
        at = m.end()
        code = int(m[1], 16) if m[1] else -1
        if high is not None:
            if 0xDC00 <= code <= 0xDFFF and m.start() == high.end():
                high = None  # a pair
                continue
            out.append(text[last : high.start()] + "\\ufffd")
            last, high, changed = high.end(), None, True
        if 0xD800 <= code <= 0xDBFF:
            high = m
        elif 0xDC00 <= code <= 0xDFFF:
            out.append(text[last : m.start()] + "\\ufffd")
            last, changed = m.end(), True
    if high is not None:
        out.append(text[last : high.start()] + "\\ufffd")
        last, changed = high.end(), True
    if not changed:
        return None
    out.append(text[last:])
    return "".join(out)


def loads_replacing(payload: Any) -> Any:
    """Parse a payload orjson refused, once more with invalid UTF-8 and lone surrogate escapes
    replaced by U+FFFD.

    orjson rejects invalid UTF-8 in bytes, where the decoder (and so ``feed_event``) replaces it,
    and lone surrogate escapes (``"\\ud83d"``), which a server that cuts its text in UTF-16 units
    sends when an emoji falls on a chunk boundary. Retrying keeps every path to the fold alike, and
    a character a server split across two events costs U+FFFD instead of both chunks. It raises
    ``orjson.JSONDecodeError`` when the payload is still not JSON.
    """
    text = payload if isinstance(payload, str) else bytes(payload).decode("utf-8", "replace")
    mended = _mend_surrogates(text)
    if mended is not None:
        return orjson.loads(mended)
    if isinstance(payload, str):  # orjson has already read it as text
        raise orjson.JSONDecodeError("not JSON", payload, 0)
    return orjson.loads(text)


# Top-level chunk keys that are not copied into the result: ``object`` is rewritten, ``choices`` is
# folded, ``error`` is reported on its own, ``obfuscation`` is OpenAI's per-chunk random padding.
STANDARD_TOP: Final = ("usage", "system_fingerprint", "service_tier")


@dataclass(frozen=True, slots=True)
class Verdict:
    """How complete a chat stream was, so a caller can tell a finished answer from a truncated one.

    ``complete`` is True when ``[DONE]`` arrived, no error payload came, the stream was not stopped
    on the client side, and at least one choice arrived and every choice has a ``finish_reason``.
    The other fields say which of those failed: ``done`` (``[DONE]`` seen), ``finish_reasons`` (one
    per choice, in the order of ``result()["choices"]``, None where none arrived), ``usage`` (a
    non-null ``usage`` arrived), ``error`` (an error payload stopped the stream). For a
    ``ChatStream`` also: ``aborted`` (``on_chunk`` returned False or raised), ``too_large`` (an
    event passed ``max_event_bytes``, which stops the stream), ``truncated`` (the byte stream
    ended inside an event). The counters: ``skipped`` payloads that were not a JSON object,
    ``ignored`` payloads that came after ``[DONE]`` or an error, ``malformed`` values of the wrong
    type that were dropped from otherwise usable chunks.
    """

    complete: bool
    done: bool
    finish_reasons: tuple[str | None, ...]
    usage: bool
    error: bool
    aborted: bool = False
    too_large: bool = False
    truncated: bool = False
    skipped: int = 0
    ignored: int = 0
    malformed: int = 0


def make_verdict(
    done: bool,
    choices: dict[int, Any],
    top: dict[Any, Any],
    error: object,
    skipped: int,
    ignored: int,
    malformed: int,
    *,
    aborted: bool = False,
    too_large: bool = False,
    truncated: bool = False,
) -> Verdict:
    reasons = tuple(choices[i].finish_reason for i in sorted(choices))
    failed = error is not None
    return Verdict(
        complete=done and not (failed or aborted or too_large) and bool(reasons) and None not in reasons,
        done=done,
        finish_reasons=reasons,
        usage="usage" in top,
        error=failed,
        aborted=aborted,
        too_large=too_large,
        truncated=truncated,
        skipped=skipped,
        ignored=ignored,
        malformed=malformed,
    )


def verdict_dict(verdict: Verdict) -> dict[str, Any]:
    """The verdict as plain JSON data: the ``"verdict"`` entry of every ``result()`` (ChatAggregator,
    ChatStream, create_stream, iter_chunks)."""
    out = {name: getattr(verdict, name) for name in Verdict.__dataclass_fields__}
    out["finish_reasons"] = list(verdict.finish_reasons)
    return out


def joined(parts: list[str]) -> str:
    """Join fragments once; keep the joined string as the only fragment, so a later ``result()``
    (partial results are allowed at any time) copies one string instead of re-walking thousands."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return ""
    text = "".join(parts)
    parts[:] = [text]
    return text


def build_result(
    top: dict[Any, Any], choices: dict[int, Any], error: object, text_completion: bool
) -> dict[str, Any]:
    out: dict[Any, Any] = {
        "id": top.get("id"),
        "object": "text_completion" if text_completion else "chat.completion",
        "created": top.get("created"),
        "model": top.get("model"),
        "choices": [_choice(choices[i]) for i in sorted(choices)],
    }
    for key in STANDARD_TOP:
        out[key] = top.get(key)
    for key, value in top.items():
        if key not in out:
            out[key] = value
    if error is not None:
        out["error"] = error
    return out


def _choice(c: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": c.index}
    if c.text is not None and not c.has_delta:
        out["text"] = joined(c.text)
    else:
        out["message"] = _message(c)
        if c.text is not None:
            out["text"] = joined(c.text)
    out["finish_reason"] = c.finish_reason
    out["logprobs"] = _logprobs(c.logprobs)
    for key, value in c.extras.items():
        out.setdefault(key, value)
    return out


def _message(c: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": c.role if c.role is not None else "assistant",
        "content": joined(c.content) if c.content is not None else None,
        "refusal": joined(c.refusal) if c.refusal is not None else None,
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
        msg["annotations"] = c.annotations
    for key, value in c.delta_extras.items():
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


def _logprobs(lp: dict[Any, Any] | None) -> dict[Any, Any] | None:
    if lp is None:
        return None
    # The fold extends these lists in place; hand out copies so the caller cannot reach our state.
    return {k: list(v) if type(v) is list else v for k, v in lp.items()}

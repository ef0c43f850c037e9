"""Whole (non-streaming) answers and HTTP error bodies translated between chat completions,
Responses and Messages, with the stream translators' mapping: the same stop reasons, usage,
tool calls, refusals and thinking. Chat is the hub: Messages <-> Responses goes through it.
docs/translation.md has the tables.
"""

from __future__ import annotations

import time
from typing import Any, Final

import orjson

from ._translate import FINISH_FROM_MESSAGES, _messages_usage, _responses_usage
from ._translate_bodies import (
    ANTHROPIC_FORMAT,
    Path,
    Translated,
    _check_apis,
    _Ctx,
    _dict,
    _extra,
    _list,
    _str,
)
from .encode_messages import STOP_REASONS, chat_usage_to_messages
from .encode_responses import INCOMPLETE, chat_usage_to_responses

__all__ = ["error", "response"]

_CHOICE_KEYS: Final = frozenset({"index", "message", "finish_reason", "logprobs"})


def _absent(value: object) -> bool:
    return value is None or value == [] or value == {}


# chat.completion -> the hub's parts


def _chat_answer(ctx: _Ctx, body: dict[str, Any]) -> dict[str, Any]:
    """What the other APIs can carry of a chat.completion, read once: id, model, created, the
    reasoning (text and OpenRouter details), text, refusal, tool calls, url citations,
    finish_reason, usage."""
    for key in _extra(body, _CHAT_ANSWER_KEYS):
        if not _absent(body[key]):
            ctx.drop(key, "no counterpart")
    choices = _list(ctx, body.get("choices"), "choices")
    if not choices:
        raise ctx.bad("choices", "a chat.completion with no choice has no answer to carry")
    for i in range(1, len(choices)):
        ctx.drop(("choices", i), "the target writes one answer")
    choice = _dict(ctx, choices[0], "choices[0]")
    for key in _extra(choice, _CHOICE_KEYS):
        if not _absent(choice[key]):
            ctx.drop(f"choices[0].{key}", "no counterpart")
    if not _absent(choice.get("logprobs")):
        ctx.drop("choices[0].logprobs", "no counterpart")
    msg = _dict(ctx, choice.get("message"), "choices[0].message")
    for key in _extra(msg, _CHAT_ANSWER_MESSAGE_KEYS):
        if not _absent(msg[key]):
            ctx.drop(f"choices[0].message.{key}", "no counterpart")
    reasoning = msg.get("reasoning_content")
    if reasoning is None:
        reasoning = msg.get("reasoning")
    calls = []
    for k, call in enumerate(_list(ctx, msg.get("tool_calls") or [], "choices[0].message.tool_calls")):
        where = ((("choices", 0), ".message.tool_calls"), k)
        call = _dict(ctx, call, where)
        fn = _dict(ctx, call.get("function"), (where, ".function"))
        calls.append(
            (
                _str(ctx, call.get("id") or f"call_{k}", (where, ".id")),
                _str(ctx, fn.get("name"), (where, ".function.name")),
                _str(ctx, fn.get("arguments") or "", (where, ".function.arguments")),
            )
        )
    content = msg.get("content")
    if isinstance(content, list):  # some servers answer with parts
        content = "".join(
            p.get("text", "") for p in content if type(p) is dict and isinstance(p.get("text"), str)
        )
    return {
        "id": body.get("id"),
        "model": body.get("model"),
        "created": body.get("created"),
        "reasoning": reasoning if isinstance(reasoning, str) else None,
        "details": _list(ctx, msg.get("reasoning_details") or [], "choices[0].message.reasoning_details"),
        "content": _str(ctx, content, "choices[0].message.content") if content is not None else None,
        "refusal": _str(ctx, msg["refusal"], "choices[0].message.refusal") if msg.get("refusal") else None,
        "calls": calls,
        "annotations": _list(ctx, msg.get("annotations") or [], "choices[0].message.annotations"),
        "finish": choice.get("finish_reason"),
        "usage": body.get("usage") if type(body.get("usage")) is dict else None,
    }


_CHAT_ANSWER_KEYS: Final = frozenset(
    {"id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier"}
)
_CHAT_ANSWER_MESSAGE_KEYS: Final = frozenset(
    {
        "role",
        "content",
        "refusal",
        "tool_calls",
        "reasoning_content",
        "reasoning",
        "reasoning_details",
        "annotations",
    }
)


def _chat_to_messages(ctx: _Ctx, body: dict[str, Any]) -> dict[str, Any]:
    a = _chat_answer(ctx, body)
    blocks: list[dict[str, Any]] = []
    signed = False
    for k, entry in enumerate(a["details"]):
        where = ((("choices", 0), ".message.reasoning_details"), k)
        entry = _dict(ctx, entry, where)
        kind = entry.get("type")
        if kind == "reasoning.text" and entry.get("signature"):
            # the thinking text is in reasoning_content too: the details carry its signature
            signed = True
            text = entry.get("text")
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": text if isinstance(text, str) else "",
                    "signature": _str(ctx, entry["signature"], (where, ".signature")),
                }
            )
        elif kind == "reasoning.encrypted" and entry.get("format", ANTHROPIC_FORMAT) == ANTHROPIC_FORMAT:
            blocks.append(
                {"type": "redacted_thinking", "data": _str(ctx, entry.get("data"), (where, ".data"))}
            )
        elif kind != "reasoning.text":
            ctx.drop(where, "no Messages counterpart")
    if a["reasoning"] and not signed:
        blocks.insert(0, {"type": "thinking", "thinking": a["reasoning"], "signature": ""})
    for text in (a["content"], a["refusal"]):  # a refusal is text in Messages (stop_reason says it)
        if text:
            blocks.append({"type": "text", "text": text})
    if a["annotations"]:
        ctx.drop("choices[0].message.annotations", "no Messages counterpart")
    for k, (call_id, name, raw) in enumerate(a["calls"]):
        argued: Path = (((("choices", 0), ".message.tool_calls"), k), ".function.arguments")
        try:
            value = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            value = None
        if type(value) is not dict:
            ctx.drop(argued, "not a JSON object, and a Messages tool_use input is one")
            value = {}
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": value})
    finish = a["finish"]
    return {
        "id": a["id"] if isinstance(a["id"], str) and a["id"] else "msg_fastsse",
        "type": "message",
        "role": "assistant",
        "model": a["model"] if isinstance(a["model"], str) else "",
        "content": blocks,
        "stop_reason": STOP_REASONS.get(finish, "end_turn") if isinstance(finish, str) else None,
        "stop_sequence": None,
        "usage": chat_usage_to_messages(a["usage"])
        if a["usage"] is not None
        else {"input_tokens": 0, "output_tokens": 0},
    }


def _chat_to_responses(ctx: _Ctx, body: dict[str, Any]) -> dict[str, Any]:
    a = _chat_answer(ctx, body)
    ident = a["id"] if isinstance(a["id"], str) and a["id"] else "resp_fastsse"
    output: list[dict[str, Any]] = []
    for k, entry in enumerate(a["details"]):
        if type(entry) is dict and entry.get("type") != "reasoning.text":
            ctx.drop(((("choices", 0), ".message.reasoning_details"), k), "no Responses counterpart")
    if a["reasoning"]:
        output.append(
            {
                "id": f"rs_{len(output)}_{ident}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": a["reasoning"]}],
            }
        )
    parts: list[dict[str, Any]] = []
    if a["content"] is not None and (a["content"] or not a["refusal"]):
        notes = []
        for k, note in enumerate(a["annotations"]):
            cited = note.get("url_citation") if type(note) is dict else None
            if note.get("type") == "url_citation" and type(cited) is dict:
                notes.append({"type": "url_citation", **cited})
            else:
                ctx.drop(((("choices", 0), ".message.annotations"), k), "no Responses counterpart")
        parts.append({"type": "output_text", "text": a["content"], "annotations": notes})
    elif a["annotations"]:
        ctx.drop("choices[0].message.annotations", "no text to hold them")
    if a["refusal"]:
        parts.append({"type": "refusal", "refusal": a["refusal"]})
    if parts:
        output.append(
            {
                "id": f"msg_{len(output)}_{ident}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": parts,
            }
        )
    for call_id, name, raw in a["calls"]:
        output.append(
            {
                "id": f"fc_{len(output)}_{ident}",
                "type": "function_call",
                "status": "completed",
                "arguments": raw,
                "call_id": call_id,
                "name": name,
            }
        )
    finish = a["finish"]
    incomplete = INCOMPLETE.get(finish) if isinstance(finish, str) else None
    created = a["created"]
    return {
        "id": ident,
        "object": "response",
        "created_at": created if type(created) is int else int(time.time()),
        "status": "incomplete" if incomplete else "completed",
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "model": a["model"] if isinstance(a["model"], str) else "",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": chat_usage_to_responses(a["usage"]) if a["usage"] is not None else None,
    }


# Messages / Responses -> chat.completion


def _chat_completion(
    ident: object,
    model: object,
    created: int | None,
    message: dict[str, Any],
    finish: str | None,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": ident if isinstance(ident, str) and ident else "chatcmpl-fastsse",
        "object": "chat.completion",
        "created": created if created is not None else int(time.time()),
        "model": model if isinstance(model, str) else "",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
    }
    if usage is not None:
        out["usage"] = usage
    return out


_MESSAGE_KEYS: Final = frozenset(
    {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
)


def _messages_to_chat(ctx: _Ctx, body: dict[str, Any], created: int | None) -> dict[str, Any]:
    for key in _extra(body, _MESSAGE_KEYS):
        if not _absent(body[key]):
            ctx.drop(key, "no chat counterpart")
    if body.get("stop_sequence") is not None:
        ctx.drop("stop_sequence", "chat does not say which stop sequence ended the answer")
    text: list[str] = []
    thinking: list[str] = []
    details: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for j, block in enumerate(_list(ctx, body.get("content") or [], "content")):
        where = ("content", j)
        block = _dict(ctx, block, where)
        kind = block.get("type")
        if kind == "text":
            start = sum(map(len, text))
            text.append(_str(ctx, block.get("text"), (where, ".text")))
            for k, cited in enumerate(_list(ctx, block.get("citations") or [], (where, ".citations"))):
                if type(cited) is dict and cited.get("type") == "web_search_result_location":
                    found = {key: cited[key] for key in ("url", "title") if isinstance(cited.get(key), str)}
                    span = {"start_index": start, "end_index": start + len(text[-1])}
                    notes.append({"type": "url_citation", "url_citation": {**found, **span}})
                else:
                    ctx.drop(((where, ".citations"), k), "no chat counterpart")
        elif kind == "thinking":
            said = _str(ctx, block.get("thinking"), (where, ".thinking"))
            thinking.append(said)
            entry: dict[str, Any] = {"type": "reasoning.text", "text": said}
            if block.get("signature"):
                entry["signature"] = _str(ctx, block["signature"], (where, ".signature"))
            details.append({**entry, "format": ANTHROPIC_FORMAT, "index": j})
        elif kind == "redacted_thinking":
            data = _str(ctx, block.get("data"), (where, ".data"))
            details.append(
                {"type": "reasoning.encrypted", "data": data, "format": ANTHROPIC_FORMAT, "index": j}
            )
        elif kind in ("tool_use", "server_tool_use"):
            given = block.get("input")
            calls.append(
                {
                    "id": _str(ctx, block.get("id"), (where, ".id")),
                    "type": "function",
                    "function": {
                        "name": _str(ctx, block.get("name"), (where, ".name")),
                        "arguments": orjson.dumps(given if given is not None else {}).decode(),
                    },
                }
            )
        else:
            ctx.drop(where, f"a {kind!r} block has no chat counterpart")
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(text) if text else None,
        "refusal": None,
    }
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    if details:
        message["reasoning_details"] = details
    if calls:
        message["tool_calls"] = calls
    if notes:
        message["annotations"] = notes
    reason = body.get("stop_reason")
    finish = FINISH_FROM_MESSAGES.get(reason, "stop") if isinstance(reason, str) else None
    if finish == "tool_calls" and not calls:
        finish = "stop"
    usage = body.get("usage")
    return _chat_completion(
        body.get("id"),
        body.get("model"),
        created,
        message,
        finish,
        _messages_usage(usage) if type(usage) is dict else None,
    )


def _responses_to_chat(ctx: _Ctx, body: dict[str, Any], created: int | None) -> dict[str, Any]:
    if body.get("status") == "failed" or not _absent(body.get("error")):
        raise ctx.bad("error", "a failed response has no answer: translate its error with error()")
    text: list[str] = []
    refusal: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for i, item in enumerate(_list(ctx, body.get("output") or [], "output")):
        where = ("output", i)
        item = _dict(ctx, item, where)
        kind = item.get("type")
        if kind == "message":
            for j, part in enumerate(_list(ctx, item.get("content") or [], (where, ".content"))):
                at = ((where, ".content"), j)
                part = _dict(ctx, part, at)
                if part.get("type") == "output_text":
                    start = sum(map(len, text))
                    text.append(_str(ctx, part.get("text"), (at, ".text")))
                    for k, note in enumerate(_list(ctx, part.get("annotations") or [], (at, ".annotations"))):
                        if type(note) is dict and note.get("type") == "url_citation":
                            cited = {
                                key: note[key]
                                for key in ("url", "title", "start_index", "end_index")
                                if key in note
                            }
                            for key in ("start_index", "end_index"):
                                if type(cited.get(key)) is int:
                                    cited[key] += start
                            notes.append({"type": "url_citation", "url_citation": cited})
                        else:
                            ctx.drop(((at, ".annotations"), k), "no chat counterpart")
                    if part.get("logprobs"):
                        ctx.drop((at, ".logprobs"), "no chat counterpart here")
                elif part.get("type") == "refusal":
                    refusal.append(_str(ctx, part.get("refusal"), (at, ".refusal")))
                else:
                    ctx.drop(at, "no chat counterpart")
        elif kind == "reasoning":
            for key in ("summary", "content"):
                for j, part in enumerate(_list(ctx, item.get(key) or [], (where, "." + key))):
                    part = _dict(ctx, part, ((where, "." + key), j))
                    reasoning.append(_str(ctx, part.get("text"), (((where, "." + key), j), ".text")))
            if item.get("encrypted_content"):
                ctx.drop((where, ".encrypted_content"), "no chat counterpart")
        elif kind == "function_call":
            calls.append(
                {
                    "id": _str(ctx, item.get("call_id"), (where, ".call_id")),
                    "type": "function",
                    "function": {
                        "name": _str(ctx, item.get("name"), (where, ".name")),
                        "arguments": _str(ctx, item.get("arguments") or "", (where, ".arguments")),
                    },
                }
            )
        else:
            ctx.drop(where, f"a {kind!r} item has no chat counterpart")
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(text) if text else None,
        "refusal": "".join(refusal) if refusal else None,
    }
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    if notes:
        message["annotations"] = notes
    status = body.get("status")
    finish: str | None = "tool_calls" if calls else "stop"
    if status == "incomplete":
        details = body.get("incomplete_details")
        why = details.get("reason") if type(details) is dict else None
        finish = "content_filter" if why == "content_filter" else "length"
    elif status not in ("completed", None):
        finish = None  # in progress: not finished
    usage = body.get("usage")
    stamp = body.get("created_at")
    return _chat_completion(
        body.get("id"),
        body.get("model"),
        created if created is not None else stamp if type(stamp) is int else None,
        message,
        finish,
        _responses_usage(usage) if type(usage) is dict else None,
    )


def response(
    body: dict[str, Any], source: str, target: str, /, *, lossy: bool = False, created: int | None = None
) -> Translated:
    """``response(body, source, target, /, *, lossy=False, created=None) -> Translated``

    Translate a whole (non-streaming) answer from ``source`` to ``target`` (``"chat"``,
    ``"responses"`` or ``"messages"``): a ``chat.completion``, a Responses ``response`` object, a
    Messages ``message``. It returns a ``Translated`` dict (``dropped`` lists what ``lossy=True``
    left out). The mapping is the stream translators' (stop reasons, usage with cached tokens,
    tool calls, refusals, thinking with its signature in OpenRouter's ``reasoning_details``).
    ``created`` is the chat ``created`` when the source has none (Messages), else the current time.

    It raises TypeError if ``body`` is not a dict, ValueError for an unknown API or ``source ==
    target``, and ``Untranslatable`` (a ValueError) naming the field for a body its API does not
    allow (a wrong type, no choices, a failed response) or, unless ``lossy``, for what the target
    cannot express.
    """
    if not isinstance(body, dict):
        raise TypeError(f"response() takes the body as a dict, not {type(body).__name__}")
    _check_apis(source, target)
    ctx = _Ctx(lossy)
    if source == "messages":
        out = _messages_to_chat(ctx, body, created)
    elif source == "responses":
        out = _responses_to_chat(ctx, body, created)
    else:
        out = body
    if target != "chat":
        second = ctx if source == "chat" else _Ctx(lossy, lambda path: f"{path} (of the answer in chat)")
        out = (_chat_to_messages if target == "messages" else _chat_to_responses)(second, out)
        if second is not ctx:
            ctx.dropped += second.dropped
    return Translated(out, ctx.dropped)


# HTTP errors

# Anthropic's error type for each HTTP status it documents
_ANTHROPIC_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
MESSAGE_LIMIT: Final = 4096  # characters of an upstream's error text kept: a bound on what is echoed


def _upstream_error(body: object) -> tuple[str | None, str, Any, Any]:
    """(type, message, param, code) of an upstream error body in any of the APIs' shapes, or text."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        raw = bytes(body)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
    if isinstance(body, str):
        return None, body.strip()[:MESSAGE_LIMIT], None, None
    if type(body) is dict:
        inner = body.get("error")
        if type(inner) is dict:
            kind, message = inner.get("type"), inner.get("message")
            return (
                kind if isinstance(kind, str) else None,
                (message if isinstance(message, str) else orjson.dumps(inner).decode())[:MESSAGE_LIMIT],
                inner.get("param"),
                inner.get("code"),
            )
        if isinstance(inner, str):
            return None, inner[:MESSAGE_LIMIT], None, None
        message = body.get("message") or body.get("detail")
        if isinstance(message, str):
            return None, message[:MESSAGE_LIMIT], None, None
    return None, orjson.dumps(body, default=repr).decode()[:MESSAGE_LIMIT], None, None


def error(status: int, body: object, target: str, /) -> tuple[int, dict[str, Any]]:
    """``error(status, body, target, /) -> (status, body)``

    Turn an upstream's HTTP error (its status and its body: bytes, text or the parsed JSON, in
    any of the three APIs' shapes or none) into the error ``target``'s clients expect: Messages
    ``{"type": "error", "error": {"type", "message"}}`` with the type Anthropic gives that
    status, chat and Responses ``{"error": {"message", "type", "param", "code"}}``. The status
    is kept, except Anthropic's 529 (overloaded), which becomes 503 for OpenAI clients and the
    reverse. The message is kept (at most ``MESSAGE_LIMIT`` characters).
    It raises ValueError for an unknown ``target`` or a status that is not an HTTP error (400-599).
    """
    if target not in ("chat", "responses", "messages"):
        raise ValueError(f"unknown API {target!r}")
    if type(status) is not int or not 400 <= status <= 599:
        raise ValueError(f"status must be an HTTP error status (400-599), not {status!r}")
    kind, message, param, code = _upstream_error(body)
    if target == "messages":
        status = 529 if status == 503 else status
        known = set(_ANTHROPIC_TYPES.values())
        if kind not in known:
            kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return status, {"type": "error", "error": {"type": kind, "message": message}}
    status = 503 if status == 529 else status
    if kind is None:
        kind = "server_error" if status >= 500 else "invalid_request_error"
    return status, {"error": {"message": message, "type": kind, "param": param, "code": code}}

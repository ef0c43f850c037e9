"""Whole (non-streaming) answers and HTTP error bodies translated between chat completions,
Responses and Messages, with the stream translators' mapping: the same stop reasons, usage,
tool calls, refusals and thinking. Chat is the hub: each source is read into what a chat answer
carries (``_Answer``) and written out in the target's shape, so Messages <-> Responses gives what
the two halves through chat give, in one read and one write. docs/translation.md has the tables.
"""

from __future__ import annotations

import time
from typing import Any, Final

import orjson

from .._errors import InvalidRequest
from ..apis import NAMES
from ..messages.encode import STOP_REASONS, chat_usage_to_messages
from ..responses.encode import INCOMPLETE, chat_usage_to_responses
from ._bodies import (
    ANTHROPIC_FORMAT,
    Path,
    Translated,
    _api_error,
    _Ctx,
    _dict,
    _list,
    _str,
)
from ._rules import FINISH_FROM_MESSAGES, _messages_usage, _responses_usage

__all__ = ["error", "response"]


def _absent(value: object) -> bool:
    return value is None or value == [] or value == {}


def _others(ctx: _Ctx, body: dict[str, Any], allowed: frozenset[str], base: str, why: str) -> None:
    """Drop the fields of ``body`` beyond ``allowed`` that hold something."""
    if not allowed.issuperset(body):
        for key in body:
            if key not in allowed and not _absent(body[key]):
                ctx.drop(base + key, why)


class _Answer:
    """What a chat answer carries, read from any of the three: the hub between a read and a write.
    ``details`` are OpenRouter's ``reasoning_details`` entries of a chat answer, each with the path it
    came from; ``thoughts`` the thinking blocks of a Messages answer (kind, text or data, signature,
    block index, path), which become such entries in chat;
    ``calls`` are (id, name, arguments as a string, path of the arguments); ``notes`` the url
    citations in chat's shape, with the path that holds them."""

    # the fields most answers leave empty are class defaults: one answer is read per call, and the
    # fewer attributes set, the less the read costs beside orjson
    reasoning: str | None = None
    text: str | None = None
    refusal: str | None = None
    notes_at: Path = ""
    finish: str | None = None
    usage: dict[str, Any] | None = None  # chat's shape
    usage_messages: dict[str, Any] | None = None  # a Messages usage not yet in chat's shape

    def __init__(self, ident: object, model: object, created: object) -> None:
        self.id = ident
        self.model = model
        self.created = created
        self.details: list[tuple[Any, Path]] = []
        self.thoughts: list[tuple[str, str, str, int, Path]] = []
        self.calls: list[tuple[str, str, str, Path]] = []
        self.notes: list[Any] = []

    def chat_usage(self) -> dict[str, Any] | None:
        if self.usage is None and self.usage_messages is not None:
            self.usage = _messages_usage(self.usage_messages)
        return self.usage


# reading


_CHAT_ANSWER_KEYS: Final = frozenset(
    {"id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier"}
)
_CHOICE_KEYS: Final = frozenset({"index", "message", "finish_reason", "logprobs"})
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
_MESSAGE_PATH: Final = ("choices", 0), ".message"


def _read_chat(ctx: _Ctx, body: dict[str, Any], created: int | None) -> _Answer:
    _others(ctx, body, _CHAT_ANSWER_KEYS, "", "no counterpart")
    choices = body.get("choices")
    if type(choices) is not list:
        choices = _list(ctx, choices, "choices")
    if not choices:
        raise ctx.bad("choices", "a chat.completion with no choice has no answer to carry")
    for i in range(1, len(choices)):
        ctx.drop(("choices", i), "the target writes one answer")
    choice = choices[0]
    if type(choice) is not dict:
        choice = _dict(ctx, choice, "choices[0]")
    _others(ctx, choice, _CHOICE_KEYS, "choices[0].", "no counterpart")
    if not _absent(choice.get("logprobs")):
        ctx.drop("choices[0].logprobs", "no counterpart")
    msg = choice.get("message")
    if type(msg) is not dict:
        msg = _dict(ctx, msg, "choices[0].message")
    _others(ctx, msg, _CHAT_ANSWER_MESSAGE_KEYS, "choices[0].message.", "no counterpart")
    a = _Answer(body.get("id"), body.get("model"), body.get("created"))
    reasoning = msg.get("reasoning_content")
    if reasoning is None:
        reasoning = msg.get("reasoning")
    if isinstance(reasoning, str):
        a.reasoning = reasoning
    details = msg.get("reasoning_details")
    if details:
        at = (_MESSAGE_PATH, ".reasoning_details")
        a.details = [(entry, (at, k)) for k, entry in enumerate(_list(ctx, details, at))]
    content = msg.get("content")
    if isinstance(content, list):  # some servers answer with parts
        content = "".join(
            p.get("text", "") for p in content if type(p) is dict and isinstance(p.get("text"), str)
        )
    if content is not None:
        a.text = content if type(content) is str else _str(ctx, content, "choices[0].message.content")
    if msg.get("refusal"):
        a.refusal = _str(ctx, msg["refusal"], "choices[0].message.refusal")
    calls = msg.get("tool_calls")
    if calls:
        at = (_MESSAGE_PATH, ".tool_calls")
        for k, call in enumerate(_list(ctx, calls, at)):
            where = (at, k)
            if type(call) is not dict:
                call = _dict(ctx, call, where)
            fn = call.get("function")
            if type(fn) is not dict:
                fn = _dict(ctx, fn, (where, ".function"))
            ident, name, args = call.get("id") or f"call_{k}", fn.get("name"), fn.get("arguments") or ""
            if type(ident) is not str or type(name) is not str or type(args) is not str:
                ident = _str(ctx, ident, (where, ".id"))
                name = _str(ctx, name, (where, ".function.name"))
                args = _str(ctx, args, (where, ".function.arguments"))
            a.calls.append((ident, name, args, (where, ".function.arguments")))
    notes = msg.get("annotations")
    if notes:
        a.notes_at = (_MESSAGE_PATH, ".annotations")
        a.notes = _list(ctx, notes, a.notes_at)
    finish = choice.get("finish_reason")
    a.finish = finish if isinstance(finish, str) else None
    usage = body.get("usage")
    a.usage = usage if type(usage) is dict else None
    return a


_MESSAGE_KEYS: Final = frozenset(
    {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
)


def _read_messages(ctx: _Ctx, body: dict[str, Any], created: int | None) -> _Answer:
    _others(ctx, body, _MESSAGE_KEYS, "", "no chat counterpart")
    if body.get("stop_sequence") is not None:
        ctx.drop("stop_sequence", "chat does not say which stop sequence ended the answer")
    a = _Answer(body.get("id"), body.get("model"), created)
    text: list[str] = []
    thinking: list[str] = []
    uses = False
    for j, block in enumerate(_list(ctx, body.get("content") or [], "content")):
        where = ("content", j)
        if type(block) is not dict:
            block = _dict(ctx, block, where)
        kind = block.get("type")
        if kind == "text":
            said = block.get("text")
            text.append(said if type(said) is str else _str(ctx, said, (where, ".text")))
            cited = block.get("citations")
            if cited:
                start = sum(map(len, text[:-1]))
                _citations(ctx, a, cited, where, start, start + len(text[-1]))
        elif kind == "thinking":
            said = block.get("thinking")
            if type(said) is not str:
                said = _str(ctx, said, (where, ".thinking"))
            thinking.append(said)
            signature = block.get("signature")
            if signature:
                signature = _str(ctx, signature, (where, ".signature"))
            a.thoughts.append(("thinking", said, signature or "", j, where))
        elif kind == "redacted_thinking":
            data = _str(ctx, block.get("data"), (where, ".data"))
            a.thoughts.append(("redacted", data, "", j, where))
        elif kind == "tool_use" or kind == "server_tool_use":
            given = block.get("input")
            ident, name = block.get("id"), block.get("name")
            if type(ident) is not str or type(name) is not str:
                ident = _str(ctx, ident, (where, ".id"))
                name = _str(ctx, name, (where, ".name"))
            args = orjson.dumps(given if given is not None else {}).decode()
            a.calls.append((ident, name, args, (where, ".input")))
            uses = True
        else:
            ctx.drop(where, f"a {kind!r} block has no chat counterpart")
    a.text = "".join(text) if text else None
    if thinking:
        a.reasoning = "".join(thinking)
    reason = body.get("stop_reason")
    if isinstance(reason, str):
        a.finish = FINISH_FROM_MESSAGES.get(reason, "stop")
        if a.finish == "tool_calls" and not uses:
            a.finish = "stop"
    usage = body.get("usage")
    if type(usage) is dict:
        a.usage_messages = usage
    return a


def _citations(ctx: _Ctx, a: _Answer, cited: object, where: Path, start: int, end: int) -> None:
    at = (where, ".citations")
    for k, one in enumerate(_list(ctx, cited, at)):
        if type(one) is dict and one.get("type") == "web_search_result_location":
            found = {key: one[key] for key in ("url", "title") if isinstance(one.get(key), str)}
            a.notes.append(
                {"type": "url_citation", "url_citation": {**found, "start_index": start, "end_index": end}}
            )
            a.notes_at = at
        else:
            ctx.drop((at, k), "no chat counterpart")


def _read_responses(ctx: _Ctx, body: dict[str, Any], created: int | None) -> _Answer:
    if body.get("status") == "failed" or not _absent(body.get("error")):
        raise ctx.bad("error", "a failed response has no answer: translate its error with error()")
    # the other top-level fields restate the request (instructions, tools, sampling): not the answer
    stamp = body.get("created_at")
    a = _Answer(
        body.get("id"),
        body.get("model"),
        created if created is not None else stamp if type(stamp) is int else None,
    )
    text: list[str] = []
    refusal: list[str] = []
    reasoning: list[str] = []
    for i, item in enumerate(_list(ctx, body.get("output") or [], "output")):
        where = ("output", i)
        if type(item) is not dict:
            item = _dict(ctx, item, where)
        kind = item.get("type")
        if kind == "message":
            for j, part in enumerate(_list(ctx, item.get("content") or [], (where, ".content"))):
                at = ((where, ".content"), j)
                if type(part) is not dict:
                    part = _dict(ctx, part, at)
                if part.get("type") == "output_text":
                    start = sum(map(len, text))
                    said = part.get("text")
                    text.append(said if type(said) is str else _str(ctx, said, (at, ".text")))
                    if part.get("annotations"):
                        _annotations(ctx, a, part["annotations"], at, start)
                    if part.get("logprobs"):
                        ctx.drop((at, ".logprobs"), "no chat counterpart here")
                elif part.get("type") == "refusal":
                    refusal.append(_str(ctx, part.get("refusal"), (at, ".refusal")))
                else:
                    ctx.drop(at, "no chat counterpart")
        elif kind == "reasoning":
            for key in ("summary", "content"):
                parts = item.get(key)
                if not parts:
                    continue
                for j, part in enumerate(_list(ctx, parts, (where, "." + key))):
                    said = part.get("text") if type(part) is dict else None
                    if type(said) is not str:
                        part = _dict(ctx, part, ((where, "." + key), j))
                        said = _str(ctx, said, (((where, "." + key), j), ".text"))
                    reasoning.append(said)
            if item.get("encrypted_content"):
                ctx.drop((where, ".encrypted_content"), "no chat counterpart")
        elif kind == "function_call":
            ident, name, args = item.get("call_id"), item.get("name"), item.get("arguments") or ""
            if type(ident) is not str or type(name) is not str or type(args) is not str:
                ident = _str(ctx, ident, (where, ".call_id"))
                name = _str(ctx, name, (where, ".name"))
                args = _str(ctx, args, (where, ".arguments"))
            a.calls.append((ident, name, args, (where, ".arguments")))
        else:
            ctx.drop(where, f"a {kind!r} item has no chat counterpart")
    a.text = "".join(text) if text else None
    a.refusal = "".join(refusal) if refusal else None
    if reasoning:
        a.reasoning = "".join(reasoning)
    status = body.get("status")
    if status == "incomplete":
        details = body.get("incomplete_details")
        why = details.get("reason") if type(details) is dict else None
        a.finish = "content_filter" if why == "content_filter" else "length"
    elif status in ("completed", None):
        a.finish = "tool_calls" if a.calls else "stop"
    usage = body.get("usage")
    a.usage = _responses_usage(usage) if type(usage) is dict else None
    return a


def _annotations(ctx: _Ctx, a: _Answer, notes: object, at: Path, start: int) -> None:
    where = (at, ".annotations")
    for k, note in enumerate(_list(ctx, notes, where)):
        if type(note) is dict and note.get("type") == "url_citation":
            cited = {key: note[key] for key in ("url", "title", "start_index", "end_index") if key in note}
            for key in ("start_index", "end_index"):
                if type(cited.get(key)) is int:
                    cited[key] += start
            a.notes.append({"type": "url_citation", "url_citation": cited})
            a.notes_at = where
        else:
            ctx.drop((where, k), "no chat counterpart")


# writing


def _write_chat(ctx: _Ctx, a: _Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": a.text, "refusal": a.refusal}
    if a.reasoning is not None:
        message["reasoning_content"] = a.reasoning
    if a.details:
        message["reasoning_details"] = [entry for entry, _ in a.details]
    elif a.thoughts:
        # OpenRouter's shape, under the block's index, as the stream translator writes it
        message["reasoning_details"] = [
            {"type": "reasoning.encrypted", "data": said, "format": ANTHROPIC_FORMAT, "index": j}
            if kind == "redacted"
            else {
                "type": "reasoning.text",
                "text": said,
                "signature": signature,
                "format": ANTHROPIC_FORMAT,
                "index": j,
            }
            if signature
            else {"type": "reasoning.text", "text": said, "format": ANTHROPIC_FORMAT, "index": j}
            for kind, said, signature, j, _ in a.thoughts
        ]
    if a.calls:
        message["tool_calls"] = [
            {"id": ident, "type": "function", "function": {"name": name, "arguments": args}}
            for ident, name, args, _ in a.calls
        ]
    if a.notes:
        message["annotations"] = a.notes
    out: dict[str, Any] = {
        "id": a.id if isinstance(a.id, str) and a.id else "chatcmpl-fastsse",
        "object": "chat.completion",
        "created": a.created if a.created is not None else int(time.time()),
        "model": a.model if isinstance(a.model, str) else "",
        "choices": [{"index": 0, "message": message, "finish_reason": a.finish, "logprobs": None}],
    }
    usage = a.chat_usage()
    if usage is not None:
        out["usage"] = usage
    return out


def _write_messages(ctx: _Ctx, a: _Answer) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    signed = False
    for entry, where in a.details:
        if type(entry) is not dict:
            entry = _dict(ctx, entry, where)
        kind = entry.get("type")
        if kind == "reasoning.text" and entry.get("signature"):
            # the thinking text is in reasoning_content too: the details carry its signature
            signed = True
            text = entry.get("text")
            signature = _str(ctx, entry["signature"], (where, ".signature"))
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": text if isinstance(text, str) else "",
                    "signature": signature,
                }
            )
        elif kind == "reasoning.encrypted" and entry.get("format", ANTHROPIC_FORMAT) == ANTHROPIC_FORMAT:
            blocks.append(
                {"type": "redacted_thinking", "data": _str(ctx, entry.get("data"), (where, ".data"))}
            )
        elif kind != "reasoning.text":
            ctx.drop(where, "no Messages counterpart")
    if a.reasoning and not signed:
        blocks.insert(0, {"type": "thinking", "thinking": a.reasoning, "signature": ""})
    if a.text:
        blocks.append({"type": "text", "text": a.text})
    if a.refusal:  # a refusal is text in Messages (its stop_reason says it)
        blocks.append({"type": "text", "text": a.refusal})
    if a.notes:
        ctx.drop(a.notes_at, "no Messages counterpart")
    for ident, name, args, where in a.calls:
        try:
            value = orjson.loads(args) if args.strip() else {}
        except orjson.JSONDecodeError:
            value = None
        if type(value) is not dict:
            ctx.drop(where, "not a JSON object, and a Messages tool_use input is one")
            value = {}
        blocks.append({"type": "tool_use", "id": ident, "name": name, "input": value})
    finish = a.finish
    return {
        "id": a.id if isinstance(a.id, str) and a.id else "msg_fastsse",
        "type": "message",
        "role": "assistant",
        "model": a.model if isinstance(a.model, str) else "",
        "content": blocks,
        "stop_reason": STOP_REASONS.get(finish, "end_turn") if finish is not None else None,
        "stop_sequence": None,
        "usage": chat_usage_to_messages(usage)
        if (usage := a.chat_usage()) is not None
        else {"input_tokens": 0, "output_tokens": 0},
    }


def _write_responses(ctx: _Ctx, a: _Answer) -> dict[str, Any]:
    ident = a.id if isinstance(a.id, str) and a.id else "resp_fastsse"
    output: list[dict[str, Any]] = []
    for entry, where in a.details:
        kind = entry.get("type") if type(entry) is dict else None
        if kind != "reasoning.text":
            ctx.drop(where, "no Responses counterpart")
        elif entry.get("signature"):
            # the text goes as the reasoning summary; OpenAI's encrypted_content is its own format
            ctx.drop((where, ".signature"), "no Responses counterpart")
    for kind, _, signature, _, where in a.thoughts:
        if kind == "redacted":
            ctx.drop(where, "no Responses counterpart")
        elif signature:
            ctx.drop((where, ".signature"), "no Responses counterpart")
    if a.reasoning:
        output.append(
            {
                "id": f"rs_{len(output)}_{ident}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": a.reasoning}],
            }
        )
    parts: list[dict[str, Any]] = []
    if a.text is not None and (a.text or not a.refusal):
        notes = []
        for k, note in enumerate(a.notes):
            cited = note.get("url_citation") if type(note) is dict else None
            if type(cited) is dict and note.get("type") == "url_citation":
                notes.append({"type": "url_citation", **cited})
            else:
                ctx.drop((a.notes_at, k), "no Responses counterpart")
        parts.append({"type": "output_text", "text": a.text, "annotations": notes})
    elif a.notes:
        ctx.drop(a.notes_at, "no text to hold them")
    if a.refusal:
        parts.append({"type": "refusal", "refusal": a.refusal})
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
    for call_id, name, args, _ in a.calls:
        output.append(
            {
                "id": f"fc_{len(output)}_{ident}",
                "type": "function_call",
                "status": "completed",
                "arguments": args,
                "call_id": call_id,
                "name": name,
            }
        )
    incomplete = INCOMPLETE.get(a.finish) if a.finish is not None else None
    return {
        "id": ident,
        "object": "response",
        "created_at": a.created if type(a.created) is int else int(time.time()),
        "status": "incomplete" if incomplete else "completed",
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "model": a.model if isinstance(a.model, str) else "",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": _messages_usage_to_responses(a.usage_messages)
        if a.usage_messages is not None
        else chat_usage_to_responses(a.usage)
        if a.usage is not None
        else None,
    }


def _messages_usage_to_responses(usage: dict[str, Any]) -> dict[str, Any]:
    """``chat_usage_to_responses(_messages_usage(usage))`` in one step (a test holds them equal):
    the prompt counts the cache reads and writes, the cache reads are the cached tokens."""
    get = usage.get
    cached, fresh, written, completion = (
        get("cache_read_input_tokens"),
        get("input_tokens"),
        get("cache_creation_input_tokens"),
        get("output_tokens"),
    )
    cached = cached if type(cached) is int else 0
    prompt = cached + (fresh if type(fresh) is int else 0) + (written if type(written) is int else 0)
    completion = completion if type(completion) is int else 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


_READ: Final = {"chat": _read_chat, "messages": _read_messages, "responses": _read_responses}
_WRITE: Final = {"chat": _write_chat, "messages": _write_messages, "responses": _write_responses}


def response(
    body: dict[str, Any], source: str, target: str, /, *, lossy: bool = False, created: int | None = None
) -> Translated:
    """``response(body, source, target, /, *, lossy=False, created=None) -> Translated``

    Translate a whole (non-streaming) answer from ``source`` to ``target`` (``"chat"``,
    ``"responses"`` or ``"messages"``): a ``chat.completion``, a Responses ``response`` object, a
    Messages ``message``. It returns a ``Translated`` dict (``dropped`` lists what ``lossy=True``
    left out). The mapping is the stream translators' (stop reasons, usage with cached tokens,
    tool calls, refusals, thinking with its signature in OpenRouter's ``reasoning_details``);
    Messages <-> Responses gives what the two halves through chat give. ``created`` is the chat
    ``created`` (and Responses ``created_at``) when the source has none (Messages), else the
    current time.

    It raises TypeError if ``body`` is not a dict, ValueError for an unknown API or ``source ==
    target``, and ``Untranslatable`` (a ValueError) naming the field for a body its API does not
    allow (a wrong type, no choices, a failed response) or, unless ``lossy``, for what the target
    cannot express.
    """
    if not isinstance(body, dict):
        raise TypeError(f"response() takes the body as a dict, not {type(body).__name__}")
    read = _READ.get(source) if type(source) is str else None
    write = _WRITE.get(target) if type(target) is str else None
    if read is None or write is None or source == target:
        raise _api_error(source, target) or ValueError(f"cannot translate {source!r} to {target!r}")
    ctx = _Ctx(lossy)
    out = write(ctx, read(ctx, body, created))
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
    It raises InvalidRequest for an unknown ``target`` or a status that is not an HTTP error (400-599).
    """
    if target not in NAMES:
        raise InvalidRequest(f"unknown API {target!r}")
    if type(status) is not int or not 400 <= status <= 599:
        raise InvalidRequest(f"status must be an HTTP error status (400-599), not {status!r}")
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

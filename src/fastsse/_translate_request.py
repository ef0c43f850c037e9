"""Request bodies translated between chat completions, Responses and Messages.

``request(body, source, target)`` returns the body a ``target`` upstream takes for a ``source``
client's request: the system prompt, the turns with their text and images, tool definitions and
``tool_choice``, earlier tool calls and their results matched by id, earlier thinking with its
signature, the sampling and token limits, streaming and the user id. Chat is the hub, as for the
stream translators: Messages <-> Responses goes through it. Whatever the target cannot express
raises ``Untranslatable`` naming the field, or with ``lossy=True`` is left out and listed in the
result's ``dropped``. docs/translation.md has the mapping tables and the normalisations a round
trip may show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from ._errors import SSEError

__all__ = ["APIS", "Translated", "Untranslatable", "request"]

APIS: Final = ("chat", "responses", "messages")

# OpenRouter's names for thinking carried in chat (``reasoning_details``): the format says whose it is
ANTHROPIC_FORMAT: Final = "anthropic-claude-v1"
OPENAI_FORMAT: Final = "openai-responses-v1"


class Untranslatable(SSEError):
    """A request or answer holds something the target API cannot express (or is not what its
    API allows). ``field`` is the path of that field in the source body, e.g.
    ``messages[2].content[0].cache_control``."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field


class Translated(dict[str, Any]):
    """A translated body: the dict itself, plus ``dropped``, the paths (in the source body) of what
    the target could not carry and ``lossy=True`` left out, in the order met; empty otherwise."""

    __slots__ = ("dropped",)

    def __init__(self, body: dict[str, Any], dropped: list[str]) -> None:
        super().__init__(body)
        self.dropped = dropped


class _Ctx:
    """One translation's bookkeeping: strict (raise) or lossy (list), and how a path is named."""

    __slots__ = ("dropped", "lossy", "name", "origins")

    def __init__(self, lossy: bool, name: Callable[[str], str] | None = None) -> None:
        self.lossy = lossy
        self.dropped: list[str] = []
        self.name = name
        self.origins: list[str] = []  # towards chat: the source path of each chat message written

    def drop(self, path: str, why: str) -> None:
        """What the target cannot express: raise, or (lossy) list it and go on."""
        if self.name is not None:
            path = self.name(path)
        if not self.lossy:
            raise Untranslatable(path, why)
        self.dropped.append(path)

    def bad(self, path: str, why: str) -> Untranslatable:
        """What no API allows (a wrong type, a result with no call): an error in every mode."""
        return Untranslatable(self.name(path) if self.name is not None else path, why)


def _check_apis(source: object, target: object) -> None:
    if source not in APIS or target not in APIS:
        raise ValueError(f"unknown API {source if source not in APIS else target!r}; expected one of {APIS}")
    if source == target:
        raise ValueError(f"nothing to translate: source and target are both {source!r}")


def _number(value: object) -> bool:
    return type(value) in (int, float)


def _text(value: object) -> bool:
    return isinstance(value, str)


def _dict(ctx: _Ctx, value: object, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ctx.bad(path, f"expected an object, not {type(value).__name__}")
    return value


def _list(ctx: _Ctx, value: object, path: str) -> list[Any]:
    if type(value) is not list:
        raise ctx.bad(path, f"expected a list, not {type(value).__name__}")
    return value


def _str(ctx: _Ctx, value: object, path: str) -> str:
    if not isinstance(value, str):
        raise ctx.bad(path, f"expected a string, not {type(value).__name__}")
    return value


def _data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a ``data:<type>;base64,<data>`` URL, else None."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url.partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[5:-7], data


def _arguments(ctx: _Ctx, raw: object, path: str) -> dict[str, Any] | None:
    """A chat tool call's ``arguments`` string as the object Messages' ``input`` holds."""
    raw = _str(ctx, raw, path)
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        ctx.drop(path, "not JSON, and a Messages tool_use input is an object")
        return None
    if type(value) is not dict:
        ctx.drop(path, "not a JSON object, and a Messages tool_use input is an object")
        return None
    return value


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


# the sampling and limit fields each side shares under one name (chat <-> Responses)
_SAME_CR: Final = (
    "model",
    "temperature",
    "top_p",
    "stream",
    "user",
    "metadata",
    "store",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
    "parallel_tool_calls",
)


# chat -> Messages


def _chat_tools_to_messages(ctx: _Ctx, tools: list[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        tool = _dict(ctx, tool, path)
        if tool.get("type", "function") != "function":
            ctx.drop(path, f"a {tool.get('type')!r} tool has no Messages counterpart")
            continue
        fn = _dict(ctx, tool.get("function"), f"{path}.function")
        for key in fn.keys() - {"name", "description", "parameters", "strict"}:
            ctx.drop(f"{path}.function.{key}", "no Messages counterpart")
        new: dict[str, Any] = {"name": _str(ctx, fn.get("name"), f"{path}.function.name")}
        if fn.get("description") is not None:
            new["description"] = _str(ctx, fn["description"], f"{path}.function.description")
        params = fn.get("parameters")
        new["input_schema"] = (
            _dict(ctx, params, f"{path}.function.parameters")
            if params is not None
            else {"type": "object", "properties": {}}
        )
        if fn.get("strict") is True:
            new["strict"] = True
        out.append(new)
    return out


def _chat_tool_choice_to_messages(ctx: _Ctx, choice: object) -> dict[str, Any] | None:
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    if type(choice) is dict and choice.get("type") == "function":
        fn = _dict(ctx, choice.get("function"), "tool_choice.function")
        return {"type": "tool", "name": _str(ctx, fn.get("name"), "tool_choice.function.name")}
    ctx.drop("tool_choice", f"{_short(choice)} has no Messages counterpart")
    return None


def _short(value: object) -> str:
    text = _dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _chat_part_to_block(ctx: _Ctx, part: object, path: str) -> dict[str, Any] | None:
    part = _dict(ctx, part, path)
    kind = part.get("type")
    if kind == "text":
        for key in part.keys() - {"type", "text"}:
            ctx.drop(f"{path}.{key}", "no Messages counterpart")
        return {"type": "text", "text": _str(ctx, part.get("text"), f"{path}.text")}
    if kind == "image_url":
        image = _dict(ctx, part.get("image_url"), f"{path}.image_url")
        url = _str(ctx, image.get("url"), f"{path}.image_url.url")
        detail = image.get("detail")
        if detail not in (None, "auto"):
            ctx.drop(f"{path}.image_url.detail", "Messages has no image detail level")
        inline = _data_url(url)
        if inline is not None:
            return {"type": "image", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    if kind == "refusal":
        # Messages has no refusal in a turn: the words are kept as text (as the stream translators do)
        return {"type": "text", "text": _str(ctx, part.get("refusal"), f"{path}.refusal")}
    ctx.drop(path, f"a {kind!r} part has no Messages counterpart")
    return None


def _chat_content_to_messages(ctx: _Ctx, content: object, path: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    blocks = []
    for j, part in enumerate(_list(ctx, content, path)):
        block = _chat_part_to_block(ctx, part, f"{path}[{j}]")
        if block is not None:
            blocks.append(block)
    return blocks


def _chat_system_to_messages(ctx: _Ctx, system: list[tuple[int, dict[str, Any]]]) -> str | list[Any]:
    if len(system) == 1 and isinstance(system[0][1].get("content"), str):
        return str(system[0][1]["content"])
    blocks: list[Any] = []
    for i, msg in system:
        content = _chat_content_to_messages(ctx, msg.get("content"), f"messages[{i}].content")
        blocks += [{"type": "text", "text": content}] if isinstance(content, str) else content
    return blocks


def _reasoning_to_blocks(ctx: _Ctx, msg: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """Thinking kept in a chat assistant turn (OpenRouter's ``reasoning_details``) as Messages
    blocks: signed thinking and redacted thinking; reasoning without a signature cannot go back."""
    blocks: list[dict[str, Any]] = []
    details = msg.get("reasoning_details")
    if details is not None:
        for k, entry in enumerate(_list(ctx, details, f"{path}.reasoning_details")):
            where = f"{path}.reasoning_details[{k}]"
            entry = _dict(ctx, entry, where)
            kind = entry.get("type")
            foreign = entry.get("format") not in (None, ANTHROPIC_FORMAT)
            if (
                kind == "reasoning.text"
                and _text(entry.get("signature"))
                and entry["signature"]
                and not foreign
            ):
                blocks.append(
                    {"type": "thinking", "thinking": entry.get("text") or "", "signature": entry["signature"]}
                )
            elif kind == "reasoning.encrypted" and _text(entry.get("data")) and not foreign:
                blocks.append({"type": "redacted_thinking", "data": entry["data"]})
            else:
                ctx.drop(where, "Messages takes back only thinking signed by Anthropic")
    else:
        for key in ("reasoning_content", "reasoning"):
            if msg.get(key):
                ctx.drop(f"{path}.{key}", "thinking without a signature cannot be sent back to Messages")
    return blocks


def _chat_to_messages(body: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    out: dict[str, Any] = {}
    messages = _list(ctx, body.get("messages"), "messages")
    calls: set[str] = set()
    system: list[tuple[int, dict[str, Any]]] = []
    turns: list[dict[str, Any]] = []
    results_turn: dict[str, Any] | None = None  # the user turn holding the latest tool results
    for i, msg in enumerate(messages):
        path = f"messages[{i}]"
        msg = _dict(ctx, msg, path)
        role = msg.get("role")
        if role not in _CHAT_MESSAGE_KEYS:
            raise ctx.bad(f"{path}.role", f"unknown role {_short(role)}")
        for key in msg.keys() - _CHAT_MESSAGE_KEYS[role]:
            if msg[key] is not None:
                ctx.drop(f"{path}.{key}", "no Messages counterpart")
        if role in ("system", "developer"):
            if turns:
                ctx.drop(path, "Messages has a system prompt only before the first turn")
            else:
                system.append((i, msg))
            continue
        if role == "user":
            content = _chat_content_to_messages(ctx, msg.get("content"), f"{path}.content")
            if results_turn is not None:
                # a user message right after tool results joins their turn (Messages wants them in one)
                results_turn["content"] += (
                    [{"type": "text", "text": content}] if isinstance(content, str) else content
                )
                results_turn = None
            else:
                turns.append({"role": "user", "content": content})
            continue
        if role == "tool":
            call_id = _str(ctx, msg.get("tool_call_id"), f"{path}.tool_call_id")
            if call_id not in calls:
                raise ctx.bad(
                    f"{path}.tool_call_id", f"no earlier assistant tool call has the id {call_id!r}"
                )
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": _chat_content_to_messages(ctx, msg.get("content"), f"{path}.content"),
            }
            if results_turn is None:
                results_turn = {"role": "user", "content": []}
                turns.append(results_turn)
            results_turn["content"].append(result)
            continue
        results_turn = None
        blocks = _reasoning_to_blocks(ctx, msg, path)
        said = msg.get("content")
        text: list[dict[str, Any]] = []
        if said is not None:
            parsed = _chat_content_to_messages(ctx, said, f"{path}.content")
            if isinstance(parsed, str):
                text = [{"type": "text", "text": parsed}] if parsed else []
            else:
                text = parsed
        refusal = msg.get("refusal")
        if refusal:
            text.append({"type": "text", "text": _str(ctx, refusal, f"{path}.refusal")})
        uses = []
        for k, call in enumerate(_list(ctx, msg.get("tool_calls") or [], f"{path}.tool_calls")):
            where = f"{path}.tool_calls[{k}]"
            call = _dict(ctx, call, where)
            fn = _dict(ctx, call.get("function"), f"{where}.function")
            call_id = _str(ctx, call.get("id"), f"{where}.id")
            args = _arguments(ctx, fn.get("arguments", ""), f"{where}.function.arguments")
            if args is None:
                continue
            calls.add(call_id)
            uses.append(
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": _str(ctx, fn.get("name"), f"{where}.function.name"),
                    "input": args,
                }
            )
        if isinstance(said, str) and not blocks and not uses and not refusal:
            turns.append({"role": "assistant", "content": said})
        else:
            turns.append({"role": "assistant", "content": blocks + text + uses})
    if system:
        out["system"] = _chat_system_to_messages(ctx, system)
    out["messages"] = turns
    _chat_settings_to_messages(body, ctx, out)
    return out


_CHAT_MESSAGE_KEYS: Final = {
    "system": frozenset({"role", "content"}),
    "developer": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
    "assistant": frozenset(
        {"role", "content", "refusal", "tool_calls", "reasoning_details", "reasoning_content", "reasoning"}
    ),
}

_CHAT_TOP_TO_MESSAGES: Final = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "stream",
        "stream_options",
        "user",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "n",
    }
)


def _max_tokens(ctx: _Ctx, body: dict[str, Any]) -> int | None:
    new, old = body.get("max_completion_tokens"), body.get("max_tokens")
    if new is not None and old is not None and new != old:
        raise ctx.bad("max_tokens", "max_tokens and max_completion_tokens disagree")
    value = new if new is not None else old
    if value is not None and type(value) is not int:
        raise ctx.bad("max_completion_tokens" if new is not None else "max_tokens", "expected an integer")
    return value


def _stream_options(ctx: _Ctx, body: dict[str, Any], target: str) -> None:
    options = body.get("stream_options")
    if options is None:
        return
    for key in _dict(ctx, options, "stream_options"):
        if key != "include_usage":
            ctx.drop(f"stream_options.{key}", f"no {target} counterpart")
    # include_usage needs no counterpart: Messages and Responses streams always report usage


def _chat_settings_to_messages(body: dict[str, Any], ctx: _Ctx, out: dict[str, Any]) -> None:
    for key in body:
        if key not in _CHAT_TOP_TO_MESSAGES and body[key] is not None:
            ctx.drop(key, "no Messages counterpart")
    if body.get("model") is not None:
        out["model"] = body["model"]
    limit = _max_tokens(ctx, body)
    if limit is None:
        raise ctx.bad("max_tokens", "Messages requires max_tokens and the request has none")
    out["max_tokens"] = limit
    temperature = body.get("temperature")
    if temperature is not None:
        if not _number(temperature):
            raise ctx.bad("temperature", "expected a number")
        if 0 <= temperature <= 1:
            out["temperature"] = temperature
        else:
            ctx.drop("temperature", f"{temperature} is outside Messages' range 0..1")
    if body.get("top_p") is not None:
        out["top_p"] = body["top_p"]
    stop = body.get("stop")
    if stop is not None:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else _list(ctx, stop, "stop")
    if body.get("stream") is not None:
        out["stream"] = body["stream"]
    _stream_options(ctx, body, "Messages")
    n = body.get("n")
    if n is not None and n != 1:
        ctx.drop("n", "Messages writes one answer")
    if body.get("user") is not None:
        out["metadata"] = {"user_id": _str(ctx, body["user"], "user")}
    if body.get("tools") is not None:
        out["tools"] = _chat_tools_to_messages(ctx, _list(ctx, body["tools"], "tools"))
    choice = None
    if body.get("tool_choice") is not None:
        choice = _chat_tool_choice_to_messages(ctx, body["tool_choice"])
    if body.get("parallel_tool_calls") is False:
        choice = choice if choice is not None else {"type": "auto"}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    if choice is not None:
        out["tool_choice"] = choice


# Messages -> chat


def _image_to_chat(ctx: _Ctx, block: dict[str, Any], path: str) -> dict[str, Any] | None:
    source = _dict(ctx, block.get("source"), f"{path}.source")
    kind = source.get("type")
    if kind == "base64":
        media = _str(ctx, source.get("media_type"), f"{path}.source.media_type")
        data = _str(ctx, source.get("data"), f"{path}.source.data")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if kind == "url":
        return {"type": "image_url", "image_url": {"url": _str(ctx, source.get("url"), f"{path}.source.url")}}
    ctx.drop(f"{path}.source", f"a {kind!r} image source has no chat counterpart")
    return None


def _block_to_part(ctx: _Ctx, block: dict[str, Any], path: str) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        for key in block.keys() - {"type", "text"}:
            if block[key] is not None:
                ctx.drop(f"{path}.{key}", "no chat counterpart")
        return {"type": "text", "text": _str(ctx, block.get("text"), f"{path}.text")}
    if kind == "image":
        for key in block.keys() - {"type", "source"}:
            if block[key] is not None:
                ctx.drop(f"{path}.{key}", "no chat counterpart")
        return _image_to_chat(ctx, block, path)
    ctx.drop(path, f"a {kind!r} block has no chat counterpart here")
    return None


def _plain(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and block.keys() == {"type", "text"}


def _messages_system_to_chat(ctx: _Ctx, system: object) -> dict[str, Any]:
    if isinstance(system, str):
        return {"role": "system", "content": system}
    parts = []
    for j, block in enumerate(_list(ctx, system, "system")):
        block = _dict(ctx, block, f"system[{j}]")
        if block.get("type") != "text":
            raise ctx.bad(f"system[{j}].type", "a system prompt holds text blocks")
        part = _block_to_part(ctx, block, f"system[{j}]")
        if part is not None:
            parts.append(part)
    return {"role": "system", "content": parts}


def _messages_to_chat(body: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    out: dict[str, Any] = {}
    chat: list[dict[str, Any]] = []
    if body.get("system") is not None:
        chat.append(_messages_system_to_chat(ctx, body["system"]))
        ctx.origins.append("system")
    calls: set[str] = set()
    for i, turn in enumerate(_list(ctx, body.get("messages"), "messages")):
        path = f"messages[{i}]"
        turn = _dict(ctx, turn, path)
        for key in turn.keys() - {"role", "content"}:
            ctx.drop(f"{path}.{key}", "no chat counterpart")
        role = turn.get("role")
        content = turn.get("content")
        if role not in ("user", "assistant"):
            raise ctx.bad(f"{path}.role", f"unknown role {_short(role)}")
        if isinstance(content, str):
            chat.append({"role": role, "content": content})
            ctx.origins.append(path)
            continue
        blocks = [
            _dict(ctx, b, f"{path}.content[{j}]")
            for j, b in enumerate(_list(ctx, content, f"{path}.content"))
        ]
        if role == "user":
            chat += _user_turn_to_chat(ctx, blocks, path, calls)
        else:
            chat.append(_assistant_turn_to_chat(ctx, blocks, path, calls))
        ctx.origins += [path] * (len(chat) - len(ctx.origins))
    out["messages"] = chat
    _messages_settings_to_chat(body, ctx, out)
    return out


def _user_turn_to_chat(
    ctx: _Ctx, blocks: list[dict[str, Any]], path: str, calls: set[str]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    had_results = False
    for j, block in enumerate(blocks):
        where = f"{path}.content[{j}]"
        if block.get("type") != "tool_result":
            part = _block_to_part(ctx, block, where)
            if part is not None:
                rest.append(part)
            continue
        had_results = True
        call_id = _str(ctx, block.get("tool_use_id"), f"{where}.tool_use_id")
        if call_id not in calls:
            raise ctx.bad(f"{where}.tool_use_id", f"no earlier tool_use block has the id {call_id!r}")
        for key in block.keys() - {"type", "tool_use_id", "content", "is_error"}:
            if block[key] is not None:
                ctx.drop(f"{where}.{key}", "no chat counterpart")
        if block.get("is_error"):
            ctx.drop(f"{where}.is_error", "a chat tool message cannot say the tool failed")
        content = block.get("content", "")
        if isinstance(content, str):
            result: str | list[dict[str, Any]] = content
        else:
            result = []
            for k, inner in enumerate(_list(ctx, content, f"{where}.content")):
                inner = _dict(ctx, inner, f"{where}.content[{k}]")
                if inner.get("type") != "text":
                    ctx.drop(f"{where}.content[{k}]", "a chat tool message holds text only")
                    continue
                part = _block_to_part(ctx, inner, f"{where}.content[{k}]")
                if part is not None:
                    result.append(part)
        out.append({"role": "tool", "tool_call_id": call_id, "content": result})
    if rest or not had_results:
        if had_results and len(rest) == 1 and rest[0].keys() == {"type", "text"}:
            out.append({"role": "user", "content": rest[0]["text"]})
        else:
            out.append({"role": "user", "content": rest})
    return out


def _assistant_turn_to_chat(
    ctx: _Ctx, blocks: list[dict[str, Any]], path: str, calls: set[str]
) -> dict[str, Any]:
    details: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        where = f"{path}.content[{j}]"
        kind = block.get("type")
        if kind == "thinking":
            details.append(
                {
                    "type": "reasoning.text",
                    "text": _str(ctx, block.get("thinking"), f"{where}.thinking"),
                    "signature": _str(ctx, block.get("signature"), f"{where}.signature"),
                    "format": ANTHROPIC_FORMAT,
                    "index": j,
                }
            )
        elif kind == "redacted_thinking":
            data = _str(ctx, block.get("data"), f"{where}.data")
            details.append(
                {"type": "reasoning.encrypted", "data": data, "format": ANTHROPIC_FORMAT, "index": j}
            )
        elif kind == "tool_use":
            for key in block.keys() - {"type", "id", "name", "input"}:
                if block[key] is not None:
                    ctx.drop(f"{where}.{key}", "no chat counterpart")
            call_id = _str(ctx, block.get("id"), f"{where}.id")
            calls.add(call_id)
            tool_calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": _str(ctx, block.get("name"), f"{where}.name"),
                        "arguments": _dumps(_dict(ctx, block.get("input", {}), f"{where}.input")),
                    },
                }
            )
        elif kind == "text":
            part = _block_to_part(ctx, block, where)
            if part is not None:
                texts.append(part)
        else:
            ctx.drop(where, f"a {kind!r} block has no chat counterpart")
    msg: dict[str, Any] = {"role": "assistant"}
    if texts and not details and not tool_calls:
        msg["content"] = texts
    elif len(texts) == 1 and texts[0].keys() == {"type", "text"}:
        msg["content"] = texts[0]["text"]
    else:
        msg["content"] = texts or None
    if tool_calls:
        msg["tool_calls"] = tool_calls
    if details:
        msg["reasoning_details"] = details
    return msg


_MESSAGES_TOP: Final = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "temperature",
        "top_p",
        "stop_sequences",
        "stream",
        "metadata",
        "tools",
        "tool_choice",
    }
)


def _messages_settings_to_chat(body: dict[str, Any], ctx: _Ctx, out: dict[str, Any]) -> None:
    for key in body:
        if key not in _MESSAGES_TOP and body[key] is not None:
            ctx.drop(key, "no chat counterpart")
    if body.get("model") is not None:
        out["model"] = body["model"]
    if body.get("max_tokens") is not None:
        if type(body["max_tokens"]) is not int:
            raise ctx.bad("max_tokens", "expected an integer")
        out["max_completion_tokens"] = body["max_tokens"]
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            out[key] = body[key]
    if body.get("stop_sequences") is not None:
        out["stop"] = _list(ctx, body["stop_sequences"], "stop_sequences")
    if body.get("stream") is not None:
        out["stream"] = body["stream"]
        if body["stream"] is True:
            # Messages streams always end with usage; in chat it must be asked for
            out["stream_options"] = {"include_usage": True}
    metadata = body.get("metadata")
    if metadata is not None:
        for key, value in _dict(ctx, metadata, "metadata").items():
            if key == "user_id" and value is not None:
                out["user"] = _str(ctx, value, "metadata.user_id")
            elif value is not None:
                ctx.drop(f"metadata.{key}", "no chat counterpart")
    if body.get("tools") is not None:
        tools = []
        for i, tool in enumerate(_list(ctx, body["tools"], "tools")):
            path = f"tools[{i}]"
            tool = _dict(ctx, tool, path)
            if tool.get("type") not in (None, "custom"):
                ctx.drop(path, f"the server tool {tool.get('type')!r} has no chat counterpart")
                continue
            for key in tool.keys() - {"type", "name", "description", "input_schema", "strict"}:
                if tool[key] is not None:
                    ctx.drop(f"{path}.{key}", "no chat counterpart")
            fn: dict[str, Any] = {"name": _str(ctx, tool.get("name"), f"{path}.name")}
            if tool.get("description") is not None:
                fn["description"] = tool["description"]
            fn["parameters"] = _dict(ctx, tool.get("input_schema"), f"{path}.input_schema")
            if tool.get("strict") is True:
                fn["strict"] = True
            tools.append({"type": "function", "function": fn})
        out["tools"] = tools
    choice = body.get("tool_choice")
    if choice is not None:
        choice = _dict(ctx, choice, "tool_choice")
        kind = choice.get("type")
        if kind in ("auto", "none"):
            out["tool_choice"] = kind
        elif kind == "any":
            out["tool_choice"] = "required"
        elif kind == "tool":
            out["tool_choice"] = {
                "type": "function",
                "function": {"name": _str(ctx, choice.get("name"), "tool_choice.name")},
            }
        else:
            raise ctx.bad("tool_choice.type", f"unknown tool_choice {_short(kind)}")
        if choice.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False


# chat -> Responses


def _chat_part_to_input(ctx: _Ctx, part: object, path: str, assistant: bool) -> dict[str, Any] | None:
    part = _dict(ctx, part, path)
    kind = part.get("type")
    if kind == "text":
        for key in part.keys() - {"type", "text"}:
            ctx.drop(f"{path}.{key}", "no Responses counterpart")
        text = _str(ctx, part.get("text"), f"{path}.text")
        return {"type": "output_text", "text": text} if assistant else {"type": "input_text", "text": text}
    if kind == "refusal" and assistant:
        return {"type": "refusal", "refusal": _str(ctx, part.get("refusal"), f"{path}.refusal")}
    if kind == "image_url" and not assistant:
        image = _dict(ctx, part.get("image_url"), f"{path}.image_url")
        detail = image.get("detail")
        return {
            "type": "input_image",
            "image_url": _str(ctx, image.get("url"), f"{path}.image_url.url"),
            "detail": detail if detail is not None else "auto",
        }
    if kind == "file" and not assistant:
        file = _dict(ctx, part.get("file"), f"{path}.file")
        return {"type": "input_file", **file}
    ctx.drop(path, f"a {kind!r} part has no Responses counterpart here")
    return None


def _chat_content_to_input(ctx: _Ctx, content: object, path: str, assistant: bool = False) -> str | list[Any]:
    if isinstance(content, str):
        return content
    parts = []
    for j, part in enumerate(_list(ctx, content, path)):
        new = _chat_part_to_input(ctx, part, f"{path}[{j}]", assistant)
        if new is not None:
            parts.append(new)
    return parts


def _reasoning_items(ctx: _Ctx, msg: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """OpenAI reasoning kept in a chat assistant turn (``reasoning_details`` of OpenRouter's
    ``openai-responses-v1`` format) as Responses reasoning items, one per id."""
    items: list[dict[str, Any]] = []
    details = msg.get("reasoning_details")
    if details is None:
        for key in ("reasoning_content", "reasoning"):
            if msg.get(key):
                ctx.drop(f"{path}.{key}", "Responses takes back only reasoning items with their id")
        return items
    for k, entry in enumerate(_list(ctx, details, f"{path}.reasoning_details")):
        where = f"{path}.reasoning_details[{k}]"
        entry = _dict(ctx, entry, where)
        ident = entry.get("id")
        if entry.get("format") != OPENAI_FORMAT or not _text(ident) or not ident:
            ctx.drop(where, "Responses takes back only OpenAI reasoning items with their id")
            continue
        if not items or items[-1]["id"] != ident:
            items.append({"type": "reasoning", "id": ident, "summary": []})
        item = items[-1]
        kind = entry.get("type")
        if kind == "reasoning.summary":
            summary = _str(ctx, entry.get("summary"), f"{where}.summary")
            if summary:
                item["summary"].append({"type": "summary_text", "text": summary})
        elif kind == "reasoning.encrypted":
            item["encrypted_content"] = _str(ctx, entry.get("data"), f"{where}.data")
        elif kind == "reasoning.text":
            item.setdefault("content", []).append(
                {"type": "reasoning_text", "text": _str(ctx, entry.get("text"), f"{where}.text")}
            )
        else:
            ctx.drop(where, f"unknown reasoning detail {_short(kind)}")
    return items


_CHAT_TOP_TO_RESPONSES: Final = frozenset(
    {
        *_SAME_CR,
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "stream_options",
        "tools",
        "tool_choice",
        "n",
        "reasoning_effort",
        "response_format",
        "verbosity",
    }
)


def _chat_to_responses(body: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    calls: set[str] = set()
    for i, msg in enumerate(_list(ctx, body.get("messages"), "messages")):
        path = f"messages[{i}]"
        msg = _dict(ctx, msg, path)
        role = msg.get("role")
        if role not in _CHAT_MESSAGE_KEYS:
            raise ctx.bad(f"{path}.role", f"unknown role {_short(role)}")
        for key in msg.keys() - _CHAT_MESSAGE_KEYS[role]:
            if msg[key] is not None:
                ctx.drop(f"{path}.{key}", "no Responses counterpart")
        if role == "tool":
            call_id = _str(ctx, msg.get("tool_call_id"), f"{path}.tool_call_id")
            if call_id not in calls:
                raise ctx.bad(
                    f"{path}.tool_call_id", f"no earlier assistant tool call has the id {call_id!r}"
                )
            output = _chat_content_to_input(ctx, msg.get("content"), f"{path}.content")
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
        elif role != "assistant":
            items.append(
                {"role": role, "content": _chat_content_to_input(ctx, msg.get("content"), f"{path}.content")}
            )
        else:
            items += _reasoning_items(ctx, msg, path)
            content = msg.get("content")
            refusal = msg.get("refusal")
            if content is not None or refusal:
                parts = _chat_content_to_input(
                    ctx, content if content is not None else [], f"{path}.content", True
                )
                if refusal:
                    if isinstance(parts, str):
                        parts = [{"type": "output_text", "text": parts}] if parts else []
                    parts.append({"type": "refusal", "refusal": _str(ctx, refusal, f"{path}.refusal")})
                items.append({"role": "assistant", "content": parts})
            for k, call in enumerate(_list(ctx, msg.get("tool_calls") or [], f"{path}.tool_calls")):
                where = f"{path}.tool_calls[{k}]"
                call = _dict(ctx, call, where)
                fn = _dict(ctx, call.get("function"), f"{where}.function")
                call_id = _str(ctx, call.get("id"), f"{where}.id")
                calls.add(call_id)
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": _str(ctx, fn.get("name"), f"{where}.function.name"),
                        "arguments": _str(ctx, fn.get("arguments", ""), f"{where}.function.arguments"),
                    }
                )
    out: dict[str, Any] = {"input": items}
    for key in body:
        if key not in _CHAT_TOP_TO_RESPONSES and body[key] is not None:
            ctx.drop(key, "no Responses counterpart")
    for key in _SAME_CR:
        if body.get(key) is not None:
            out[key] = body[key]
    limit = _max_tokens(ctx, body)
    if limit is not None:
        out["max_output_tokens"] = limit
    _stream_options(ctx, body, "Responses")
    n = body.get("n")
    if n is not None and n != 1:
        ctx.drop("n", "Responses writes one answer")
    if body.get("reasoning_effort") is not None:
        out["reasoning"] = {"effort": body["reasoning_effort"]}
    text: dict[str, Any] = {}
    fmt = body.get("response_format")
    if fmt is not None:
        fmt = _dict(ctx, fmt, "response_format")
        if fmt.get("type") == "json_schema":
            text["format"] = {
                "type": "json_schema",
                **_dict(ctx, fmt.get("json_schema"), "response_format.json_schema"),
            }
        else:
            text["format"] = dict(fmt)
    if body.get("verbosity") is not None:
        text["verbosity"] = body["verbosity"]
    if text:
        out["text"] = text
    if body.get("tools") is not None:
        tools = []
        for i, tool in enumerate(_list(ctx, body["tools"], "tools")):
            path = f"tools[{i}]"
            tool = _dict(ctx, tool, path)
            if tool.get("type", "function") != "function":
                ctx.drop(path, f"a {tool.get('type')!r} tool has no Responses counterpart")
                continue
            fn = _dict(ctx, tool.get("function"), f"{path}.function")
            for key in fn.keys() - {"name", "description", "parameters", "strict"}:
                ctx.drop(f"{path}.function.{key}", "no Responses counterpart")
            new: dict[str, Any] = {
                "type": "function",
                "name": _str(ctx, fn.get("name"), f"{path}.function.name"),
            }
            if fn.get("description") is not None:
                new["description"] = fn["description"]
            # both are required in Responses, and its strict defaults to true where chat's is false
            new["parameters"] = fn.get("parameters")
            new["strict"] = fn.get("strict") is True
            tools.append(new)
        out["tools"] = tools
    choice = body.get("tool_choice")
    if choice is not None:
        if choice in ("auto", "none", "required"):
            out["tool_choice"] = choice
        elif type(choice) is dict and choice.get("type") == "function":
            fn = _dict(ctx, choice.get("function"), "tool_choice.function")
            out["tool_choice"] = {
                "type": "function",
                "name": _str(ctx, fn.get("name"), "tool_choice.function.name"),
            }
        else:
            ctx.drop("tool_choice", f"{_short(choice)} has no Responses counterpart")
    return out


# Responses -> chat


def _input_part_to_chat(ctx: _Ctx, part: object, path: str) -> dict[str, Any] | None:
    part = _dict(ctx, part, path)
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        for key in part.keys() - {"type", "text", "annotations", "logprobs"}:
            if part[key] is not None:
                ctx.drop(f"{path}.{key}", "no chat counterpart")
        for key in ("annotations", "logprobs"):
            if part.get(key):
                ctx.drop(f"{path}.{key}", "no chat counterpart in a request")
        return {"type": "text", "text": _str(ctx, part.get("text"), f"{path}.text")}
    if kind == "refusal":
        return {"type": "refusal", "refusal": _str(ctx, part.get("refusal"), f"{path}.refusal")}
    if kind == "input_image":
        if part.get("image_url") is None:
            ctx.drop(path, "an image by file id has no chat counterpart")
            return None
        image: dict[str, Any] = {"url": _str(ctx, part["image_url"], f"{path}.image_url")}
        if part.get("detail") not in (None, "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        file = {k: v for k, v in part.items() if k in ("file_data", "file_id", "filename") and v is not None}
        for key in part.keys() - {"type", "file_data", "file_id", "filename"}:
            if part[key] is not None:
                ctx.drop(f"{path}.{key}", "no chat counterpart")
        return {"type": "file", "file": file}
    ctx.drop(path, f"a {kind!r} part has no chat counterpart")
    return None


def _input_content_to_chat(ctx: _Ctx, content: object, path: str) -> str | list[Any]:
    if isinstance(content, str):
        return content
    parts = []
    for j, part in enumerate(_list(ctx, content, path)):
        new = _input_part_to_chat(ctx, part, f"{path}[{j}]")
        if new is not None:
            parts.append(new)
    return parts


# an assistant turn in chat holds reasoning, then text, then tool calls: Responses items of a
# kind earlier than the last one taken start a new turn
_STAGE: Final = {"reasoning": 0, "message": 1, "function_call": 2}

_ITEM_KEYS: Final = {
    "message": frozenset({"type", "role", "content", "id", "status"}),
    "function_call": frozenset({"type", "call_id", "name", "arguments", "id", "status"}),
    "function_call_output": frozenset({"type", "call_id", "output", "id", "status"}),
    "reasoning": frozenset({"type", "id", "summary", "encrypted_content", "content", "status"}),
}


def _responses_to_chat(body: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    chat: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        chat.append({"role": "system", "content": _input_content_to_chat(ctx, instructions, "instructions")})
        ctx.origins.append("instructions")
    given = body.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else _list(ctx, given, "input")
    turn: dict[str, Any] | None = None  # the assistant turn being built
    stage = -1
    calls: set[str] = set()
    path = ""
    for i, item in enumerate(items):
        ctx.origins += [path] * (len(chat) - len(ctx.origins))  # what the last item started
        path = f"input[{i}]"
        item = _dict(ctx, item, path)
        kind = item.get("type", "message")
        if kind in _ITEM_KEYS:
            for key in item.keys() - _ITEM_KEYS[kind]:
                if item[key] is not None:
                    ctx.drop(f"{path}.{key}", "no chat counterpart")
        if kind == "message" and item.get("role") != "assistant":
            turn = None
            role = item.get("role")
            if role not in ("user", "system", "developer"):
                raise ctx.bad(f"{path}.role", f"unknown role {_short(role)}")
            chat.append(
                {"role": role, "content": _input_content_to_chat(ctx, item.get("content"), f"{path}.content")}
            )
            continue
        if kind == "function_call_output":
            turn = None
            call_id = _str(ctx, item.get("call_id"), f"{path}.call_id")
            if call_id not in calls:
                raise ctx.bad(f"{path}.call_id", f"no earlier function_call has the call_id {call_id!r}")
            output = item.get("output")
            if isinstance(output, str):
                content: str | list[Any] = output
            else:
                content = []
                for k, part in enumerate(_list(ctx, output, f"{path}.output")):
                    part = _dict(ctx, part, f"{path}.output[{k}]")
                    if part.get("type") != "input_text":
                        ctx.drop(f"{path}.output[{k}]", "a chat tool message holds text only")
                        continue
                    new = _input_part_to_chat(ctx, part, f"{path}.output[{k}]")
                    if new is not None:
                        content.append(new)
            chat.append({"role": "tool", "tool_call_id": call_id, "content": content})
            continue
        if kind not in _STAGE:
            ctx.drop(path, f"a {kind!r} item has no chat counterpart")
            continue
        now = _STAGE[kind]
        if turn is None or now < stage or (now == stage == 1):
            turn = {"role": "assistant", "content": None}
            chat.append(turn)
        stage = now
        if kind == "reasoning":
            details = turn.setdefault("reasoning_details", [])
            ident = _str(ctx, item.get("id"), f"{path}.id")
            summary = item.get("summary") or []
            for k, part in enumerate(_list(ctx, summary, f"{path}.summary")):
                part = _dict(ctx, part, f"{path}.summary[{k}]")
                text = _str(ctx, part.get("text"), f"{path}.summary[{k}].text")
                details.append(
                    {
                        "type": "reasoning.summary",
                        "summary": text,
                        "id": ident,
                        "format": OPENAI_FORMAT,
                        "index": len(details),
                    }
                )
            for k, part in enumerate(_list(ctx, item.get("content") or [], f"{path}.content")):
                part = _dict(ctx, part, f"{path}.content[{k}]")
                text = _str(ctx, part.get("text"), f"{path}.content[{k}].text")
                details.append(
                    {
                        "type": "reasoning.text",
                        "text": text,
                        "id": ident,
                        "format": OPENAI_FORMAT,
                        "index": len(details),
                    }
                )
            if item.get("encrypted_content") is not None:
                data = _str(ctx, item["encrypted_content"], f"{path}.encrypted_content")
                details.append(
                    {
                        "type": "reasoning.encrypted",
                        "data": data,
                        "id": ident,
                        "format": OPENAI_FORMAT,
                        "index": len(details),
                    }
                )
            if not summary and item.get("encrypted_content") is None and not item.get("content"):
                details.append(
                    {
                        "type": "reasoning.summary",
                        "summary": "",
                        "id": ident,
                        "format": OPENAI_FORMAT,
                        "index": len(details),
                    }
                )
        elif kind == "message":
            content = _input_content_to_chat(ctx, item.get("content"), f"{path}.content")
            if (
                isinstance(content, list)
                and content
                and all(p["type"] == "refusal" for p in content)
                and len(content) == 1
            ):
                turn["refusal"] = content[0]["refusal"]
            else:
                turn["content"] = content
        else:
            call_id = _str(ctx, item.get("call_id"), f"{path}.call_id")
            calls.add(call_id)
            turn.setdefault("tool_calls", []).append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": _str(ctx, item.get("name"), f"{path}.name"),
                        "arguments": _str(ctx, item.get("arguments", ""), f"{path}.arguments"),
                    },
                }
            )
    ctx.origins += [path] * (len(chat) - len(ctx.origins))
    out: dict[str, Any] = {"messages": chat}
    _responses_settings_to_chat(body, ctx, out)
    return out


_RESPONSES_TOP: Final = frozenset(
    {
        *_SAME_CR,
        "input",
        "instructions",
        "max_output_tokens",
        "stream_options",
        "reasoning",
        "text",
        "tools",
        "tool_choice",
    }
)


def _responses_settings_to_chat(body: dict[str, Any], ctx: _Ctx, out: dict[str, Any]) -> None:
    for key in body:
        if key not in _RESPONSES_TOP and body[key] is not None:
            ctx.drop(key, "no chat counterpart")
    for key in _SAME_CR:
        if body.get(key) is not None:
            out[key] = body[key]
    if body.get("max_output_tokens") is not None:
        if type(body["max_output_tokens"]) is not int:
            raise ctx.bad("max_output_tokens", "expected an integer")
        out["max_completion_tokens"] = body["max_output_tokens"]
    if body.get("stream") is True:
        out["stream_options"] = {"include_usage": True}  # Responses streams always end with usage
    options = body.get("stream_options")
    if options is not None:
        for key, value in _dict(ctx, options, "stream_options").items():
            if value is not None:
                ctx.drop(f"stream_options.{key}", "no chat counterpart")
    reasoning = body.get("reasoning")
    if reasoning is not None:
        for key, value in _dict(ctx, reasoning, "reasoning").items():
            if key == "effort" and value is not None:
                out["reasoning_effort"] = value
            elif value is not None:
                ctx.drop(f"reasoning.{key}", "no chat counterpart")
    text = body.get("text")
    if text is not None:
        for key, value in _dict(ctx, text, "text").items():
            if value is None:
                continue
            if key == "verbosity":
                out["verbosity"] = value
            elif key == "format":
                fmt = dict(_dict(ctx, value, "text.format"))
                if fmt.get("type") == "json_schema":
                    fmt.pop("type")
                    out["response_format"] = {"type": "json_schema", "json_schema": fmt}
                else:
                    out["response_format"] = fmt
            else:
                ctx.drop(f"text.{key}", "no chat counterpart")
    if body.get("tools") is not None:
        tools = []
        for i, tool in enumerate(_list(ctx, body["tools"], "tools")):
            path = f"tools[{i}]"
            tool = _dict(ctx, tool, path)
            if tool.get("type") != "function":
                ctx.drop(path, f"the built-in tool {tool.get('type')!r} has no chat counterpart")
                continue
            for key in tool.keys() - {"type", "name", "description", "parameters", "strict"}:
                if tool[key] is not None:
                    ctx.drop(f"{path}.{key}", "no chat counterpart")
            fn: dict[str, Any] = {"name": _str(ctx, tool.get("name"), f"{path}.name")}
            if tool.get("description") is not None:
                fn["description"] = tool["description"]
            if tool.get("parameters") is not None:
                fn["parameters"] = _dict(ctx, tool["parameters"], f"{path}.parameters")
            if tool.get("strict") is not False:
                fn["strict"] = True  # Responses' default
            tools.append({"type": "function", "function": fn})
        out["tools"] = tools
    choice = body.get("tool_choice")
    if choice is not None:
        if choice in ("auto", "none", "required"):
            out["tool_choice"] = choice
        elif type(choice) is dict and choice.get("type") == "function":
            out["tool_choice"] = {
                "type": "function",
                "function": {"name": _str(ctx, choice.get("name"), "tool_choice.name")},
            }
        else:
            ctx.drop("tool_choice", f"{_short(choice)} has no chat counterpart")


# through chat: Messages <-> Responses

_TO_CHAT: Final = {"messages": _messages_to_chat, "responses": _responses_to_chat}
_FROM_CHAT: Final = {"messages": _chat_to_messages, "responses": _chat_to_responses}

# a chat field an error in the second half names, as the source API calls it
_CHAT_NAMES: Final = {
    "messages": {"stop": "stop_sequences", "user": "metadata.user_id", "max_completion_tokens": "max_tokens"},
    "responses": {
        "reasoning_effort": "reasoning.effort",
        "response_format": "text.format",
        "verbosity": "text.verbosity",
        "max_completion_tokens": "max_output_tokens",
        "max_tokens": "max_output_tokens",
    },
}


def _via_chat(source: str, middle: dict[str, Any], origins: list[str], path: str) -> str:
    """A path in the chat body between the two halves, named in the source body: the message it
    came from (and for Messages thinking, its block), else the source's name of the field."""
    head, sep, rest = path.partition(".")
    if head.startswith("messages[") and head.endswith("]") and head[9:-1].isdigit():
        n = int(head[9:-1])
        origin = origins[n] if n < len(origins) else head
        if rest.startswith("reasoning_details[") and source == "messages":
            k = int(rest[18 : rest.index("]")])
            block = middle["messages"][n]["reasoning_details"][k].get("index")
            return f"{origin}.content[{block}]"
        return f"{origin} ({rest} in chat)" if rest else origin
    named = _CHAT_NAMES[source].get(head)
    return named + sep + rest if named is not None else path


def request(body: dict[str, Any], source: str, target: str, /, *, lossy: bool = False) -> Translated:
    """``request(body, source, target, /, *, lossy=False) -> Translated``

    Translate a request body from ``source`` to ``target`` (``"chat"``, ``"responses"`` or
    ``"messages"``) and return it as a ``Translated`` dict (the body for the target upstream,
    ready for ``orjson.dumps``; ``dropped`` lists what ``lossy=True`` left out). Messages <->
    Responses goes through chat. The input is not modified; the result may share its nested
    values (schemas, metadata).

    It raises TypeError if ``body`` is not a dict, ValueError for an unknown API or ``source ==
    target``, and ``Untranslatable`` (a ValueError) naming the field when the body is not what
    its API allows (a wrong type, an unknown role, a tool result whose call is not in the history,
    a Messages target without ``max_tokens``) or, unless ``lossy``, when it holds what the target
    cannot express.
    """
    if not isinstance(body, dict):
        raise TypeError(f"request() takes the body as a dict, not {type(body).__name__}")
    _check_apis(source, target)
    ctx = _Ctx(lossy)
    if source == "chat":
        out = _FROM_CHAT[target](body, ctx)
    elif target == "chat":
        out = _TO_CHAT[source](body, ctx)
    else:
        middle = _TO_CHAT[source](body, ctx)
        second = _Ctx(lossy, lambda path: _via_chat(source, middle, ctx.origins, path))
        out = _FROM_CHAT[target](middle, second)
        ctx.dropped += second.dropped
    return Translated(out, ctx.dropped)

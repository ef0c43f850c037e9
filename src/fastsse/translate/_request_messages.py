"""Request bodies between chat and Messages, both ways: the system prompt, turns, text and image
parts, tools and ``tool_choice``, tool calls and their results matched by id, signed thinking
(OpenRouter's ``reasoning_details`` in chat), limits, sampling, streaming, the user id."""

from __future__ import annotations

from typing import Any, Final

from ._bodies import (
    _CHAT_MESSAGE_KEYS,
    _FUNCTION_KEYS,
    _IMAGE_KEYS,
    _RESULT_KEYS,
    _TEXT_KEYS,
    _TOOL_KEYS,
    _TOOL_USE_KEYS,
    _TURN_KEYS,
    ANTHROPIC_FORMAT,
    Path,
    _arguments,
    _Ctx,
    _data_url,
    _dict,
    _dumps,
    _extra,
    _list,
    _max_tokens,
    _number,
    _short,
    _str,
    _stream_options,
    _text,
)

# chat -> Messages


def _chat_tools_to_messages(ctx: _Ctx, tools: list[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        path = ("tools", i)
        tool = _dict(ctx, tool, path)
        if tool.get("type", "function") != "function":
            ctx.drop(path, f"a {tool.get('type')!r} tool has no Messages counterpart")
            continue
        fn = _dict(ctx, tool.get("function"), (path, ".function"))
        for key in _extra(fn, _FUNCTION_KEYS):
            ctx.drop((path, ".function." + key), "no Messages counterpart")
        new: dict[str, Any] = {"name": _str(ctx, fn.get("name"), (path, ".function.name"))}
        if fn.get("description") is not None:
            new["description"] = _str(ctx, fn["description"], (path, ".function.description"))
        params = fn.get("parameters")
        new["input_schema"] = (
            _dict(ctx, params, (path, ".function.parameters"))
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


def _chat_part_to_block(ctx: _Ctx, part: object, path: Path) -> dict[str, Any] | None:
    part = _dict(ctx, part, path)
    kind = part.get("type")
    if kind == "text":
        for key in _extra(part, _TEXT_KEYS):
            ctx.drop((path, "." + key), "no Messages counterpart")
        return {"type": "text", "text": _str(ctx, part.get("text"), (path, ".text"))}
    if kind == "image_url":
        image = _dict(ctx, part.get("image_url"), (path, ".image_url"))
        url = _str(ctx, image.get("url"), (path, ".image_url.url"))
        detail = image.get("detail")
        if detail not in (None, "auto"):
            ctx.drop((path, ".image_url.detail"), "Messages has no image detail level")
        inline = _data_url(url)
        if inline is not None:
            return {"type": "image", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    if kind == "refusal":
        # Messages has no refusal in a turn: the words are kept as text (as the stream translators do)
        return {"type": "text", "text": _str(ctx, part.get("refusal"), (path, ".refusal"))}
    ctx.drop(path, f"a {kind!r} part has no Messages counterpart")
    return None


def _chat_content_to_messages(ctx: _Ctx, content: object, path: Path) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    blocks = []
    for j, part in enumerate(_list(ctx, content, path)):
        block = _chat_part_to_block(ctx, part, (path, j))
        if block is not None:
            blocks.append(block)
    return blocks


def _chat_system_to_messages(ctx: _Ctx, system: list[tuple[int, dict[str, Any]]]) -> str | list[Any]:
    if len(system) == 1 and isinstance(system[0][1].get("content"), str):
        return str(system[0][1]["content"])
    blocks: list[Any] = []
    for i, msg in system:
        content = _chat_content_to_messages(ctx, msg.get("content"), (("messages", i), ".content"))
        blocks += [{"type": "text", "text": content}] if isinstance(content, str) else content
    return blocks


def _reasoning_to_blocks(ctx: _Ctx, msg: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """Thinking kept in a chat assistant turn (OpenRouter's ``reasoning_details``) as Messages
    blocks: signed thinking and redacted thinking; reasoning without a signature cannot go back."""
    blocks: list[dict[str, Any]] = []
    details = msg.get("reasoning_details")
    if details is not None:
        for k, entry in enumerate(_list(ctx, details, (path, ".reasoning_details"))):
            where = ((path, ".reasoning_details"), k)
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
                ctx.drop((path, "." + key), "thinking without a signature cannot be sent back to Messages")
    return blocks


def _chat_calls_to_uses(ctx: _Ctx, tool_calls: object, path: Path, calls: set[str]) -> list[dict[str, Any]]:
    uses = []
    for k, call in enumerate(_list(ctx, tool_calls, (path, ".tool_calls"))):
        where = ((path, ".tool_calls"), k)
        if type(call) is not dict:
            call = _dict(ctx, call, where)
        fn = call.get("function")
        if type(fn) is not dict:
            fn = _dict(ctx, fn, (where, ".function"))
        call_id, name = call.get("id"), fn.get("name")
        if type(call_id) is not str or type(name) is not str:
            call_id = _str(ctx, call_id, (where, ".id"))
            name = _str(ctx, name, (where, ".function.name"))
        args = _arguments(ctx, fn.get("arguments", ""), (where, ".function.arguments"))
        if args is None:
            continue
        calls.add(call_id)
        uses.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
    return uses


def _chat_to_messages(body: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    out: dict[str, Any] = {}
    messages = _list(ctx, body.get("messages"), "messages")
    calls: set[str] = set()
    system: list[tuple[int, dict[str, Any]]] = []
    turns: list[dict[str, Any]] = []
    results_turn: dict[str, Any] | None = None  # the user turn holding the latest tool results
    for i, msg in enumerate(messages):
        path = ("messages", i)
        if type(msg) is not dict:
            msg = _dict(ctx, msg, path)
        role = msg.get("role")
        allowed = _CHAT_MESSAGE_KEYS.get(role) if type(role) is str else None
        if allowed is None:
            raise ctx.bad((path, ".role"), f"unknown role {_short(role)}")
        if not allowed.issuperset(msg):
            for key in _extra(msg, allowed):
                if msg[key] is not None:
                    ctx.drop((path, "." + key), "no Messages counterpart")
        if role in ("system", "developer"):
            if turns:
                ctx.drop(path, "Messages has a system prompt only before the first turn")
            else:
                system.append((i, msg))
            continue
        if role == "user":
            content = msg.get("content")
            if type(content) is not str:
                content = _chat_content_to_messages(ctx, content, (path, ".content"))
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
            call_id = msg.get("tool_call_id")
            if type(call_id) is not str or call_id not in calls:
                call_id = _str(ctx, call_id, (path, ".tool_call_id"))
                raise ctx.bad(
                    (path, ".tool_call_id"), f"no earlier assistant tool call has the id {call_id!r}"
                )
            content = msg.get("content")
            if type(content) is not str:
                content = _chat_content_to_messages(ctx, content, (path, ".content"))
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
            if results_turn is None:
                results_turn = {"role": "user", "content": []}
                turns.append(results_turn)
            results_turn["content"].append(result)
            continue
        results_turn = None
        thought = "reasoning_details" in msg or "reasoning_content" in msg or "reasoning" in msg
        blocks = _reasoning_to_blocks(ctx, msg, path) if thought else []
        said = msg.get("content")
        text: list[dict[str, Any]] = []
        if type(said) is str:
            if said:
                text = [{"type": "text", "text": said}]
        elif said is not None:
            parsed = _chat_content_to_messages(ctx, said, (path, ".content"))
            text = parsed if isinstance(parsed, list) else [{"type": "text", "text": parsed}]
        refusal = msg.get("refusal")
        if refusal:
            text.append({"type": "text", "text": _str(ctx, refusal, (path, ".refusal"))})
        uses = []
        tool_calls = msg.get("tool_calls")
        if tool_calls:
            uses = _chat_calls_to_uses(ctx, tool_calls, path, calls)
        if isinstance(said, str) and not blocks and not uses and not refusal:
            turns.append({"role": "assistant", "content": said})
        else:
            turns.append({"role": "assistant", "content": blocks + text + uses})
    if system:
        out["system"] = _chat_system_to_messages(ctx, system)
    out["messages"] = turns
    _chat_settings_to_messages(body, ctx, out)
    return out


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


def _image_to_chat(ctx: _Ctx, block: dict[str, Any], path: Path) -> dict[str, Any] | None:
    source = _dict(ctx, block.get("source"), (path, ".source"))
    kind = source.get("type")
    if kind == "base64":
        media = _str(ctx, source.get("media_type"), (path, ".source.media_type"))
        data = _str(ctx, source.get("data"), (path, ".source.data"))
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if kind == "url":
        return {
            "type": "image_url",
            "image_url": {"url": _str(ctx, source.get("url"), (path, ".source.url"))},
        }
    ctx.drop((path, ".source"), f"a {kind!r} image source has no chat counterpart")
    return None


def _block_to_part(ctx: _Ctx, block: dict[str, Any], path: Path) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        for key in _extra(block, _TEXT_KEYS):
            if block[key] is not None:
                ctx.drop((path, "." + key), "no chat counterpart")
        return {"type": "text", "text": _str(ctx, block.get("text"), (path, ".text"))}
    if kind == "image":
        for key in _extra(block, _IMAGE_KEYS):
            if block[key] is not None:
                ctx.drop((path, "." + key), "no chat counterpart")
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
        block = _dict(ctx, block, ("system", j))
        if block.get("type") != "text":
            raise ctx.bad((("system", j), ".type"), "a system prompt holds text blocks")
        part = _block_to_part(ctx, block, ("system", j))
        if part is not None:
            parts.append(part)
    return {"role": "system", "content": parts}


def _messages_to_chat(body: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    out: dict[str, Any] = {}
    chat: list[dict[str, Any]] = []
    origins = ctx.origins
    if body.get("system") is not None:
        chat.append(_messages_system_to_chat(ctx, body["system"]))
        if origins is not None:
            origins.append("system")
    calls: set[str] = set()
    turns = body.get("messages")
    for i, turn in enumerate(turns if type(turns) is list else _list(ctx, turns, "messages")):
        path = ("messages", i)
        if type(turn) is not dict:
            turn = _dict(ctx, turn, path)
        if not _TURN_KEYS.issuperset(turn):
            for key in _extra(turn, _TURN_KEYS):
                ctx.drop((path, "." + key), "no chat counterpart")
        role = turn.get("role")
        content = turn.get("content")
        if role != "user" and role != "assistant":
            raise ctx.bad((path, ".role"), f"unknown role {_short(role)}")
        if type(content) is str:
            chat.append({"role": role, "content": content})
        elif role == "user":
            chat += _user_turn_to_chat(ctx, _list(ctx, content, (path, ".content")), path, calls)
        else:
            chat.append(_assistant_turn_to_chat(ctx, _list(ctx, content, (path, ".content")), path, calls))
        if origins is not None:
            origins += [path] * (len(chat) - len(origins))
    out["messages"] = chat
    _messages_settings_to_chat(body, ctx, out)
    return out


def _user_turn_to_chat(ctx: _Ctx, blocks: list[Any], path: Path, calls: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    had_results = False
    for j, block in enumerate(blocks):
        if type(block) is not dict:
            block = _dict(ctx, block, ((path, ".content"), j))
        kind = block.get("type")
        if kind == "text" and len(block) == 2 and type(block.get("text")) is str:
            rest.append({"type": "text", "text": block["text"]})
            continue
        where = ((path, ".content"), j)
        if kind != "tool_result":
            part = _block_to_part(ctx, block, where)
            if part is not None:
                rest.append(part)
            continue
        had_results = True
        call_id = block.get("tool_use_id")
        if type(call_id) is not str:
            call_id = _str(ctx, call_id, (where, ".tool_use_id"))
        if call_id not in calls:
            raise ctx.bad((where, ".tool_use_id"), f"no earlier tool_use block has the id {call_id!r}")
        if not _RESULT_KEYS.issuperset(block):
            for key in _extra(block, _RESULT_KEYS):
                if block[key] is not None:
                    ctx.drop((where, "." + key), "no chat counterpart")
        if block.get("is_error"):
            ctx.drop((where, ".is_error"), "a chat tool message cannot say the tool failed")
        content = block.get("content", "")
        if type(content) is str:
            result: str | list[dict[str, Any]] = content
        else:
            result = []
            for k, inner in enumerate(_list(ctx, content, (where, ".content"))):
                inner = _dict(ctx, inner, ((where, ".content"), k))
                if inner.get("type") != "text":
                    ctx.drop(((where, ".content"), k), "a chat tool message holds text only")
                    continue
                part = _block_to_part(ctx, inner, ((where, ".content"), k))
                if part is not None:
                    result.append(part)
        out.append({"role": "tool", "tool_call_id": call_id, "content": result})
    if rest or not had_results:
        if had_results and len(rest) == 1 and rest[0]["type"] == "text":
            out.append({"role": "user", "content": rest[0]["text"]})
        else:
            out.append({"role": "user", "content": rest})
    return out


def _assistant_turn_to_chat(ctx: _Ctx, blocks: list[Any], path: Path, calls: set[str]) -> dict[str, Any]:
    details: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        where = ((path, ".content"), j)
        if type(block) is not dict:
            block = _dict(ctx, block, where)
        kind = block.get("type")
        if kind == "text" and len(block) == 2 and type(block.get("text")) is str:
            texts.append({"type": "text", "text": block["text"]})
        elif kind == "tool_use" and _TOOL_USE_KEYS.issuperset(block):
            call_id, name, given = block.get("id"), block.get("name"), block.get("input", {})
            if type(call_id) is not str or type(name) is not str or type(given) is not dict:
                call_id = _str(ctx, call_id, (where, ".id"))
                name = _str(ctx, name, (where, ".name"))
                given = _dict(ctx, given, (where, ".input"))
            calls.add(call_id)
            tool_calls.append(
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": _dumps(given)}}
            )
        elif kind == "thinking":
            details.append(
                {
                    "type": "reasoning.text",
                    "text": _str(ctx, block.get("thinking"), (where, ".thinking")),
                    "signature": _str(ctx, block.get("signature"), (where, ".signature")),
                    "format": ANTHROPIC_FORMAT,
                    "index": j,
                }
            )
        elif kind == "redacted_thinking":
            data = _str(ctx, block.get("data"), (where, ".data"))
            details.append(
                {"type": "reasoning.encrypted", "data": data, "format": ANTHROPIC_FORMAT, "index": j}
            )
        elif kind == "tool_use":
            for key in _extra(block, _TOOL_USE_KEYS):
                if block[key] is not None:
                    ctx.drop((where, "." + key), "no chat counterpart")
            call_id = _str(ctx, block.get("id"), (where, ".id"))
            calls.add(call_id)
            tool_calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": _str(ctx, block.get("name"), (where, ".name")),
                        "arguments": _dumps(_dict(ctx, block.get("input", {}), (where, ".input"))),
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
    elif len(texts) == 1:
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
            path = ("tools", i)
            tool = _dict(ctx, tool, path)
            if tool.get("type") not in (None, "custom"):
                ctx.drop(path, f"the server tool {tool.get('type')!r} has no chat counterpart")
                continue
            for key in _extra(tool, _TOOL_KEYS):
                if tool[key] is not None:
                    ctx.drop((path, "." + key), "no chat counterpart")
            fn: dict[str, Any] = {"name": _str(ctx, tool.get("name"), (path, ".name"))}
            if tool.get("description") is not None:
                fn["description"] = tool["description"]
            fn["parameters"] = _dict(ctx, tool.get("input_schema"), (path, ".input_schema"))
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

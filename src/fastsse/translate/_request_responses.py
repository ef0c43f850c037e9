"""Request bodies between chat and Responses, both ways: messages and input items, text, image and
file parts, tools and ``tool_choice``, function calls and their outputs matched by id, OpenAI
reasoning items (OpenRouter's ``reasoning_details`` in chat), limits, sampling, output format,
streaming, metadata and the user fields both have."""

from __future__ import annotations

from typing import Any, Final

from ._bodies import (
    _CHAT_MESSAGE_KEYS,
    _FUNCTION_KEYS,
    _INPUT_FILE_KEYS,
    _INPUT_TEXT_KEYS,
    _RESPONSES_TOOL_KEYS,
    _SAME_CR,
    _TEXT_KEYS,
    OPENAI_FORMAT,
    Path,
    _Ctx,
    _dict,
    _extra,
    _list,
    _max_tokens,
    _short,
    _str,
    _stream_options,
    _text,
)

# chat -> Responses


def _chat_part_to_input(ctx: _Ctx, part: object, path: Path, assistant: bool) -> dict[str, Any] | None:
    part = _dict(ctx, part, path)
    kind = part.get("type")
    if kind == "text":
        for key in _extra(part, _TEXT_KEYS):
            ctx.drop((path, "." + key), "no Responses counterpart")
        text = _str(ctx, part.get("text"), (path, ".text"))
        return {"type": "output_text", "text": text} if assistant else {"type": "input_text", "text": text}
    if kind == "refusal" and assistant:
        return {"type": "refusal", "refusal": _str(ctx, part.get("refusal"), (path, ".refusal"))}
    if kind == "image_url" and not assistant:
        image = _dict(ctx, part.get("image_url"), (path, ".image_url"))
        detail = image.get("detail")
        return {
            "type": "input_image",
            "image_url": _str(ctx, image.get("url"), (path, ".image_url.url")),
            "detail": detail if detail is not None else "auto",
        }
    if kind == "file" and not assistant:
        file = _dict(ctx, part.get("file"), (path, ".file"))
        return {"type": "input_file", **file}
    ctx.drop(path, f"a {kind!r} part has no Responses counterpart here")
    return None


def _chat_content_to_input(
    ctx: _Ctx, content: object, path: Path, assistant: bool = False
) -> str | list[Any]:
    if isinstance(content, str):
        return content
    parts = []
    for j, part in enumerate(_list(ctx, content, path)):
        new = _chat_part_to_input(ctx, part, (path, j), assistant)
        if new is not None:
            parts.append(new)
    return parts


def _reasoning_items(ctx: _Ctx, msg: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """OpenAI reasoning kept in a chat assistant turn (``reasoning_details`` of OpenRouter's
    ``openai-responses-v1`` format) as Responses reasoning items, one per id."""
    items: list[dict[str, Any]] = []
    details = msg.get("reasoning_details")
    if details is None:
        for key in ("reasoning_content", "reasoning"):
            if msg.get(key):
                ctx.drop((path, "." + key), "Responses takes back only reasoning items with their id")
        return items
    for k, entry in enumerate(_list(ctx, details, (path, ".reasoning_details"))):
        where = ((path, ".reasoning_details"), k)
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
            summary = _str(ctx, entry.get("summary"), (where, ".summary"))
            if summary:
                item["summary"].append({"type": "summary_text", "text": summary})
        elif kind == "reasoning.encrypted":
            item["encrypted_content"] = _str(ctx, entry.get("data"), (where, ".data"))
        elif kind == "reasoning.text":
            item.setdefault("content", []).append(
                {"type": "reasoning_text", "text": _str(ctx, entry.get("text"), (where, ".text"))}
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
        path = ("messages", i)
        msg = _dict(ctx, msg, path)
        role = msg.get("role")
        allowed = _CHAT_MESSAGE_KEYS.get(role) if type(role) is str else None
        if allowed is None:
            raise ctx.bad((path, ".role"), f"unknown role {_short(role)}")
        for key in _extra(msg, allowed):
            if msg[key] is not None:
                ctx.drop((path, "." + key), "no Responses counterpart")
        if role == "tool":
            call_id = _str(ctx, msg.get("tool_call_id"), (path, ".tool_call_id"))
            if call_id not in calls:
                raise ctx.bad(
                    (path, ".tool_call_id"), f"no earlier assistant tool call has the id {call_id!r}"
                )
            output = _chat_content_to_input(ctx, msg.get("content"), (path, ".content"))
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
        elif role != "assistant":
            items.append(
                {"role": role, "content": _chat_content_to_input(ctx, msg.get("content"), (path, ".content"))}
            )
        else:
            items += _reasoning_items(ctx, msg, path)
            content = msg.get("content")
            refusal = msg.get("refusal")
            if content is not None or refusal:
                parts = _chat_content_to_input(
                    ctx, content if content is not None else [], (path, ".content"), True
                )
                if refusal:
                    if isinstance(parts, str):
                        parts = [{"type": "output_text", "text": parts}] if parts else []
                    parts.append({"type": "refusal", "refusal": _str(ctx, refusal, (path, ".refusal"))})
                items.append({"role": "assistant", "content": parts})
            for k, call in enumerate(_list(ctx, msg.get("tool_calls") or [], (path, ".tool_calls"))):
                where = ((path, ".tool_calls"), k)
                call = _dict(ctx, call, where)
                fn = _dict(ctx, call.get("function"), (where, ".function"))
                call_id = _str(ctx, call.get("id"), (where, ".id"))
                calls.add(call_id)
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": _str(ctx, fn.get("name"), (where, ".function.name")),
                        "arguments": _str(ctx, fn.get("arguments", ""), (where, ".function.arguments")),
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
            path = ("tools", i)
            tool = _dict(ctx, tool, path)
            if tool.get("type", "function") != "function":
                ctx.drop(path, f"a {tool.get('type')!r} tool has no Responses counterpart")
                continue
            fn = _dict(ctx, tool.get("function"), (path, ".function"))
            for key in _extra(fn, _FUNCTION_KEYS):
                ctx.drop((path, ".function." + key), "no Responses counterpart")
            new: dict[str, Any] = {
                "type": "function",
                "name": _str(ctx, fn.get("name"), (path, ".function.name")),
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


def _input_part_to_chat(ctx: _Ctx, part: object, path: Path) -> dict[str, Any] | None:
    part = _dict(ctx, part, path)
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        for key in _extra(part, _INPUT_TEXT_KEYS):
            if part[key] is not None:
                ctx.drop((path, "." + key), "no chat counterpart")
        for key in ("annotations", "logprobs"):
            if part.get(key):
                ctx.drop((path, "." + key), "no chat counterpart in a request")
        return {"type": "text", "text": _str(ctx, part.get("text"), (path, ".text"))}
    if kind == "refusal":
        return {"type": "refusal", "refusal": _str(ctx, part.get("refusal"), (path, ".refusal"))}
    if kind == "input_image":
        if part.get("image_url") is None:
            ctx.drop(path, "an image by file id has no chat counterpart")
            return None
        image: dict[str, Any] = {"url": _str(ctx, part["image_url"], (path, ".image_url"))}
        if part.get("detail") not in (None, "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        file = {k: v for k, v in part.items() if k in ("file_data", "file_id", "filename") and v is not None}
        for key in _extra(part, _INPUT_FILE_KEYS):
            if part[key] is not None:
                ctx.drop((path, "." + key), "no chat counterpart")
        return {"type": "file", "file": file}
    ctx.drop(path, f"a {kind!r} part has no chat counterpart")
    return None


def _input_content_to_chat(ctx: _Ctx, content: object, path: Path) -> str | list[Any]:
    if isinstance(content, str):
        return content
    parts = []
    for j, part in enumerate(_list(ctx, content, path)):
        new = _input_part_to_chat(ctx, part, (path, j))
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
        if ctx.origins is not None:
            ctx.origins.append("instructions")
    given = body.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else _list(ctx, given, "input")
    turn: dict[str, Any] | None = None  # the assistant turn being built
    stage = -1
    calls: set[str] = set()
    path: Path = ""
    for i, item in enumerate(items):
        if ctx.origins is not None:  # what the last item started
            ctx.origins += [path] * (len(chat) - len(ctx.origins))
        path = ("input", i)
        item = _dict(ctx, item, path)
        kind = item.get("type", "message")
        if type(kind) is not str:
            raise ctx.bad((path, ".type"), f"an item type is a string, not {_short(kind)}")
        if kind in _ITEM_KEYS:
            for key in _extra(item, _ITEM_KEYS[kind]):
                if item[key] is not None:
                    ctx.drop((path, "." + key), "no chat counterpart")
        if kind == "message" and item.get("role") != "assistant":
            turn = None
            role = item.get("role")
            if role not in ("user", "system", "developer"):
                raise ctx.bad((path, ".role"), f"unknown role {_short(role)}")
            chat.append(
                {
                    "role": role,
                    "content": _input_content_to_chat(ctx, item.get("content"), (path, ".content")),
                }
            )
            continue
        if kind == "function_call_output":
            turn = None
            call_id = _str(ctx, item.get("call_id"), (path, ".call_id"))
            if call_id not in calls:
                raise ctx.bad((path, ".call_id"), f"no earlier function_call has the call_id {call_id!r}")
            output = item.get("output")
            if isinstance(output, str):
                content: str | list[Any] = output
            else:
                content = []
                for k, part in enumerate(_list(ctx, output, (path, ".output"))):
                    part = _dict(ctx, part, ((path, ".output"), k))
                    if part.get("type") != "input_text":
                        ctx.drop(((path, ".output"), k), "a chat tool message holds text only")
                        continue
                    new = _input_part_to_chat(ctx, part, ((path, ".output"), k))
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
            ident = _str(ctx, item.get("id"), (path, ".id"))
            summary = item.get("summary") or []
            for k, part in enumerate(_list(ctx, summary, (path, ".summary"))):
                part = _dict(ctx, part, ((path, ".summary"), k))
                text = _str(ctx, part.get("text"), (((path, ".summary"), k), ".text"))
                details.append(
                    {
                        "type": "reasoning.summary",
                        "summary": text,
                        "id": ident,
                        "format": OPENAI_FORMAT,
                        "index": len(details),
                    }
                )
            for k, part in enumerate(_list(ctx, item.get("content") or [], (path, ".content"))):
                part = _dict(ctx, part, ((path, ".content"), k))
                text = _str(ctx, part.get("text"), (((path, ".content"), k), ".text"))
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
                data = _str(ctx, item["encrypted_content"], (path, ".encrypted_content"))
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
            content = _input_content_to_chat(ctx, item.get("content"), (path, ".content"))
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
            call_id = _str(ctx, item.get("call_id"), (path, ".call_id"))
            calls.add(call_id)
            turn.setdefault("tool_calls", []).append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": _str(ctx, item.get("name"), (path, ".name")),
                        "arguments": _str(ctx, item.get("arguments", ""), (path, ".arguments")),
                    },
                }
            )
    if ctx.origins is not None:
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
            path = ("tools", i)
            tool = _dict(ctx, tool, path)
            if tool.get("type") != "function":
                ctx.drop(path, f"the built-in tool {tool.get('type')!r} has no chat counterpart")
                continue
            for key in _extra(tool, _RESPONSES_TOOL_KEYS):
                if tool[key] is not None:
                    ctx.drop((path, "." + key), "no chat counterpart")
            fn: dict[str, Any] = {"name": _str(ctx, tool.get("name"), (path, ".name"))}
            if tool.get("description") is not None:
                fn["description"] = tool["description"]
            if tool.get("parameters") is not None:
                fn["parameters"] = _dict(ctx, tool["parameters"], (path, ".parameters"))
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

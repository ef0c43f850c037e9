"""Request bodies between Messages and Responses in one walk: the same body as the two halves
through chat would give (the tests hold it to that), without building the chat body in between,
and with every path named in the source body."""

from __future__ import annotations

from typing import Any

from ._bodies import (
    _INPUT_TEXT_KEYS,
    _RESPONSES_TOOL_KEYS,
    _RESULT_KEYS,
    _TEXT_KEYS,
    _TOOL_KEYS,
    _TOOL_USE_KEYS,
    _TURN_KEYS,
    Path,
    _arguments,
    _Ctx,
    _dict,
    _dumps,
    _extra,
    _list,
    _number,
    _short,
    _str,
)
from ._request_messages import _MESSAGES_TOP, _chat_content_to_messages
from ._request_responses import _ITEM_KEYS, _RESPONSES_TOP, _STAGE, _input_content_to_chat

_NO_THINKING = "Responses takes back only OpenAI reasoning items with their id"
_NO_REASONING = "Messages takes back only thinking signed by Anthropic"


# Messages -> Responses


def _text_part(ctx: _Ctx, block: dict[str, Any], path: Path, kind: str) -> dict[str, Any]:
    for key in _extra(block, _TEXT_KEYS):
        if block[key] is not None:
            ctx.drop((path, "." + key), "no Responses counterpart")
    return {"type": kind, "text": _str(ctx, block.get("text"), (path, ".text"))}


def _image_part(ctx: _Ctx, block: dict[str, Any], path: Path) -> dict[str, Any] | None:
    for key in block:
        if key not in ("type", "source") and block[key] is not None:
            ctx.drop((path, "." + key), "no Responses counterpart")
    source = _dict(ctx, block.get("source"), (path, ".source"))
    kind = source.get("type")
    if kind == "base64":
        media = _str(ctx, source.get("media_type"), (path, ".source.media_type"))
        data = _str(ctx, source.get("data"), (path, ".source.data"))
        url = f"data:{media};base64,{data}"
    elif kind == "url":
        url = _str(ctx, source.get("url"), (path, ".source.url"))
    else:
        ctx.drop((path, ".source"), f"a {kind!r} image source has no Responses counterpart")
        return None
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _user_blocks(
    ctx: _Ctx, blocks: list[Any], path: Path, calls: set[str], items: list[dict[str, Any]]
) -> None:
    rest: list[dict[str, Any]] = []
    had_results = False
    for j, block in enumerate(blocks):
        if (
            type(block) is dict
            and block.get("type") == "text"
            and len(block) == 2
            and type(block.get("text")) is str
        ):
            rest.append({"type": "input_text", "text": block["text"]})
            continue
        where = ((path, ".content"), j)
        block = _dict(ctx, block, where)
        kind = block.get("type")
        if kind == "text":
            rest.append(_text_part(ctx, block, where, "input_text"))
        elif kind == "image":
            part = _image_part(ctx, block, where)
            if part is not None:
                rest.append(part)
        elif kind == "tool_result":
            had_results = True
            call_id = block.get("tool_use_id")
            if type(call_id) is not str or call_id not in calls:
                call_id = _str(ctx, call_id, (where, ".tool_use_id"))
                raise ctx.bad((where, ".tool_use_id"), f"no earlier tool_use block has the id {call_id!r}")
            for key in _extra(block, _RESULT_KEYS):
                if block[key] is not None:
                    ctx.drop((where, "." + key), "no Responses counterpart")
            if block.get("is_error"):
                ctx.drop((where, ".is_error"), "a function_call_output cannot say the tool failed")
            content = block.get("content", "")
            if isinstance(content, str):
                output: str | list[dict[str, Any]] = content
            else:
                output = []
                for k, inner in enumerate(_list(ctx, content, (where, ".content"))):
                    inner = _dict(ctx, inner, ((where, ".content"), k))
                    if inner.get("type") != "text":
                        # as through chat, whose tool messages hold text only
                        ctx.drop(((where, ".content"), k), "a tool result goes through as text only")
                        continue
                    output.append(_text_part(ctx, inner, ((where, ".content"), k), "input_text"))
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
        else:
            ctx.drop(where, f"a {kind!r} block has no Responses counterpart")
    if rest or not had_results:
        if had_results and len(rest) == 1 and rest[0]["type"] == "input_text":
            items.append({"role": "user", "content": rest[0]["text"]})
        else:
            items.append({"role": "user", "content": rest})


def _assistant_blocks(
    ctx: _Ctx, blocks: list[Any], path: Path, calls: set[str], items: list[dict[str, Any]]
) -> None:
    thought = False
    texts: list[dict[str, Any]] = []
    uses: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        where = ((path, ".content"), j)
        if type(block) is not dict:
            block = _dict(ctx, block, where)
        kind = block.get("type")
        if kind == "text":
            if len(block) == 2 and type(block.get("text")) is str:
                texts.append({"type": "output_text", "text": block["text"]})
            else:
                texts.append(_text_part(ctx, block, where, "output_text"))
        elif kind == "tool_use":
            if not _TOOL_USE_KEYS.issuperset(block):
                for key in _extra(block, _TOOL_USE_KEYS):
                    if block[key] is not None:
                        ctx.drop((where, "." + key), "no Responses counterpart")
            call_id, name, given = block.get("id"), block.get("name"), block.get("input", {})
            if type(call_id) is not str or type(name) is not str or type(given) is not dict:
                call_id = _str(ctx, call_id, (where, ".id"))
                name = _str(ctx, name, (where, ".name"))
                given = _dict(ctx, given, (where, ".input"))
            calls.add(call_id)
            uses.append(
                {"type": "function_call", "call_id": call_id, "name": name, "arguments": _dumps(given)}
            )
        elif kind == "thinking":
            _str(ctx, block.get("thinking"), (where, ".thinking"))
            _str(ctx, block.get("signature"), (where, ".signature"))
            thought = True
            ctx.drop(where, _NO_THINKING)
        elif kind == "redacted_thinking":
            _str(ctx, block.get("data"), (where, ".data"))
            thought = True
            ctx.drop(where, _NO_THINKING)
        else:
            ctx.drop(where, f"a {kind!r} block has no Responses counterpart")
    # the shape chat would give the turn's text: a list when it is all the turn holds, one string
    # beside thinking or tool calls
    if texts and not thought and not uses:
        items.append({"role": "assistant", "content": texts})
    elif len(texts) == 1:
        items.append({"role": "assistant", "content": texts[0]["text"]})
    elif texts:
        items.append({"role": "assistant", "content": texts})
    items += uses


def messages_to_responses(body: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        if isinstance(system, str):
            items.append({"role": "system", "content": system})
        else:
            parts = []
            for j, block in enumerate(_list(ctx, system, "system")):
                block = _dict(ctx, block, ("system", j))
                if block.get("type") != "text":
                    raise ctx.bad((("system", j), ".type"), "a system prompt holds text blocks")
                parts.append(_text_part(ctx, block, ("system", j), "input_text"))
            items.append({"role": "system", "content": parts})
    calls: set[str] = set()
    for i, turn in enumerate(_list(ctx, body.get("messages"), "messages")):
        path = ("messages", i)
        if type(turn) is not dict:
            turn = _dict(ctx, turn, path)
        if not _TURN_KEYS.issuperset(turn):
            for key in _extra(turn, _TURN_KEYS):
                ctx.drop((path, "." + key), "no Responses counterpart")
        role = turn.get("role")
        if role != "user" and role != "assistant":
            raise ctx.bad((path, ".role"), f"unknown role {_short(role)}")
        content = turn.get("content")
        if isinstance(content, str):
            items.append({"role": role, "content": content})
        elif role == "user":
            _user_blocks(ctx, _list(ctx, content, (path, ".content")), path, calls, items)
        else:
            _assistant_blocks(ctx, _list(ctx, content, (path, ".content")), path, calls, items)
    out: dict[str, Any] = {"input": items}
    for key in body:
        if key not in _MESSAGES_TOP and body[key] is not None:
            ctx.drop(key, "no Responses counterpart")
    for key in ("model", "temperature", "top_p", "stream"):
        if body.get(key) is not None:
            out[key] = body[key]
    limit = body.get("max_tokens")
    if limit is not None:
        if type(limit) is not int:
            raise ctx.bad("max_tokens", "expected an integer")
        out["max_output_tokens"] = limit
    if body.get("stop_sequences") is not None:
        _list(ctx, body["stop_sequences"], "stop_sequences")
        ctx.drop("stop_sequences", "no Responses counterpart")
    metadata = body.get("metadata")
    if metadata is not None:
        for key, value in _dict(ctx, metadata, "metadata").items():
            if key == "user_id" and value is not None:
                out["user"] = _str(ctx, value, "metadata.user_id")
            elif value is not None:
                ctx.drop(("metadata", "." + key), "no Responses counterpart")
    if body.get("tools") is not None:
        tools = []
        for i, tool in enumerate(_list(ctx, body["tools"], "tools")):
            path = ("tools", i)
            tool = _dict(ctx, tool, path)
            if tool.get("type") not in (None, "custom"):
                ctx.drop(path, f"the server tool {tool.get('type')!r} has no Responses counterpart")
                continue
            for key in _extra(tool, _TOOL_KEYS):
                if tool[key] is not None:
                    ctx.drop((path, "." + key), "no Responses counterpart")
            new: dict[str, Any] = {"type": "function", "name": _str(ctx, tool.get("name"), (path, ".name"))}
            if tool.get("description") is not None:
                new["description"] = tool["description"]
            new["parameters"] = _dict(ctx, tool.get("input_schema"), (path, ".input_schema"))
            new["strict"] = tool.get("strict") is True
            tools.append(new)
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
                "name": _str(ctx, choice.get("name"), "tool_choice.name"),
            }
        else:
            raise ctx.bad("tool_choice.type", f"unknown tool_choice {_short(kind)}")
        if choice.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False
    return out


# Responses -> Messages


def _input_blocks(ctx: _Ctx, content: object, path: Path) -> str | list[dict[str, Any]]:
    """A Responses message's content as Messages content: text stays text, through chat's parts."""
    if isinstance(content, str):
        return content
    if type(content) is list and all(
        type(p) is dict and p.get("type") == "input_text" and p.keys() <= _INPUT_TEXT_KEYS for p in content
    ):
        blocks = []
        for j, part in enumerate(content):
            if part.get("annotations") or part.get("logprobs"):
                break
            blocks.append({"type": "text", "text": _str(ctx, part.get("text"), (((path, j)), ".text"))})
        else:
            return blocks
    return _chat_content_to_messages(ctx, _input_content_to_chat(ctx, content, path), path)


def responses_to_messages(body: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    system: list[Any] = []
    turns: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        system.append(_input_blocks(ctx, instructions, "instructions"))
    given = body.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else _list(ctx, given, "input")
    turn: _Turn | None = None  # the assistant turn being built
    stage = -1
    results: dict[str, Any] | None = None  # the user turn holding the latest tool results
    called: set[str] = set()  # function calls in the input
    usable: set[str] = set()  # those that became tool_use blocks
    built: list[_Turn] = []
    for i, item in enumerate(items):
        path = ("input", i)
        if type(item) is not dict:
            item = _dict(ctx, item, path)
        kind = item.get("type", "message")
        if type(kind) is not str:
            raise ctx.bad((path, ".type"), f"an item type is a string, not {_short(kind)}")
        keys = _ITEM_KEYS.get(kind)
        if keys is not None and not keys.issuperset(item):
            for key in _extra(item, keys):
                if item[key] is not None:
                    ctx.drop((path, "." + key), "no Messages counterpart")
        role = item.get("role")
        if kind == "message" and role != "assistant":
            turn = None
            if role not in ("user", "system", "developer"):
                raise ctx.bad((path, ".role"), f"unknown role {_short(role)}")
            content = _input_blocks(ctx, item.get("content"), (path, ".content"))
            if role != "user":
                if turns:
                    ctx.drop(path, "Messages has a system prompt only before the first turn")
                else:
                    system.append(content)
            elif results is not None:
                results["content"] += (
                    [{"type": "text", "text": content}] if isinstance(content, str) else content
                )
                results = None
            else:
                turns.append({"role": "user", "content": content})
            continue
        if kind == "function_call_output":
            turn = None
            call_id = _str(ctx, item.get("call_id"), (path, ".call_id"))
            if call_id not in called:
                raise ctx.bad((path, ".call_id"), f"no earlier function_call has the call_id {call_id!r}")
            if call_id not in usable:
                raise ctx.bad((path, ".call_id"), f"the function_call {call_id!r} did not become a tool_use")
            if results is None:
                results = {"role": "user", "content": []}
                turns.append(results)
            results["content"].append(
                {"type": "tool_result", "tool_use_id": call_id, "content": _tool_output(ctx, item, path)}
            )
            continue
        results = None
        if kind not in _STAGE:
            ctx.drop(path, f"a {kind!r} item has no Messages counterpart")
            continue
        now = _STAGE[kind]
        if turn is None or now < stage or now == stage == 1:
            turn = _Turn()
            turns.append(turn.message)
            built.append(turn)
        stage = now
        if kind == "reasoning":
            _str(ctx, item.get("id"), (path, ".id"))
            ctx.drop(path, _NO_REASONING)
        elif kind == "message":
            raw = item.get("content")
            if (
                type(raw) is list
                and len(raw) == 1
                and type(raw[0]) is dict
                and raw[0].get("type") == "refusal"
            ):
                turn.refusal = _str(ctx, raw[0].get("refusal"), (((path, ".content"), 0), ".refusal"))
            else:
                turn.said = _input_blocks(ctx, raw, (path, ".content"))
        else:
            call_id = _str(ctx, item.get("call_id"), (path, ".call_id"))
            called.add(call_id)
            name = _str(ctx, item.get("name"), (path, ".name"))
            args = _arguments(ctx, item.get("arguments", ""), (path, ".arguments"))
            if args is not None:
                usable.add(call_id)
                turn.uses.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
    for turn in built:
        turn.settle()
    out: dict[str, Any] = {}
    if system:
        if len(system) == 1 and isinstance(system[0], str):
            out["system"] = system[0]
        else:
            out["system"] = [
                b for s in system for b in ([{"type": "text", "text": s}] if isinstance(s, str) else s)
            ]
    out["messages"] = turns
    _responses_settings_to_messages(body, ctx, out)
    return out


class _Turn:
    """An assistant turn from Responses items, as chat would carry it to Messages: its text (a
    string or blocks), a refusal (text in Messages), its tool calls; ``settle`` writes the content."""

    __slots__ = ("message", "refusal", "said", "uses")

    def __init__(self) -> None:
        self.message: dict[str, Any] = {"role": "assistant", "content": []}
        self.said: str | list[dict[str, Any]] | None = None
        self.refusal = ""
        self.uses: list[dict[str, Any]] = []

    def settle(self) -> None:
        said = self.said
        if isinstance(said, str) and not self.uses and not self.refusal:
            self.message["content"] = said
            return
        text = (
            ([{"type": "text", "text": said}] if said else []) if isinstance(said, str) else list(said or [])
        )
        if self.refusal:
            text.append({"type": "text", "text": self.refusal})
        self.message["content"] = text + self.uses


def _tool_output(ctx: _Ctx, item: dict[str, Any], path: Path) -> str | list[dict[str, Any]]:
    output = item.get("output")
    if isinstance(output, str):
        return output
    result: list[dict[str, Any]] = []
    for k, part in enumerate(_list(ctx, output, (path, ".output"))):
        where = ((path, ".output"), k)
        part = _dict(ctx, part, where)
        if part.get("type") != "input_text":
            ctx.drop(where, "a tool result goes through as text only")
            continue
        blocks = _input_blocks(ctx, [part], where)
        result += [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks
    return result


def _responses_settings_to_messages(body: dict[str, Any], ctx: _Ctx, out: dict[str, Any]) -> None:
    for key in body:
        if key not in _RESPONSES_TOP and body[key] is not None:
            ctx.drop(key, "no Messages counterpart")
    if body.get("model") is not None:
        out["model"] = body["model"]
    limit = body.get("max_output_tokens")
    if limit is None:
        raise ctx.bad("max_output_tokens", "Messages requires max_tokens and the request has none")
    if type(limit) is not int:
        raise ctx.bad("max_output_tokens", "expected an integer")
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
    if body.get("stream") is not None:
        out["stream"] = body["stream"]
    for key in ("metadata", "store", "service_tier", "safety_identifier", "prompt_cache_key"):
        if body.get(key) is not None:
            ctx.drop(key, "no Messages counterpart")
    if body.get("user") is not None:
        out["metadata"] = {"user_id": _str(ctx, body["user"], "user")}
    for group in ("stream_options", "reasoning", "text"):
        if body.get(group) is not None:
            for key, value in _dict(ctx, body[group], group).items():
                if value is not None:
                    ctx.drop((group, "." + key), "no Messages counterpart")
    if body.get("tools") is not None:
        tools = []
        for i, tool in enumerate(_list(ctx, body["tools"], "tools")):
            path = ("tools", i)
            tool = _dict(ctx, tool, path)
            if tool.get("type") != "function":
                ctx.drop(path, f"the built-in tool {tool.get('type')!r} has no Messages counterpart")
                continue
            for key in _extra(tool, _RESPONSES_TOOL_KEYS):
                if tool[key] is not None:
                    ctx.drop((path, "." + key), "no Messages counterpart")
            new: dict[str, Any] = {"name": _str(ctx, tool.get("name"), (path, ".name"))}
            if tool.get("description") is not None:
                new["description"] = tool["description"]
            params = tool.get("parameters")
            new["input_schema"] = (
                _dict(ctx, params, (path, ".parameters"))
                if params is not None
                else {"type": "object", "properties": {}}
            )
            if tool.get("strict") is not False:
                new["strict"] = True  # Responses' default
            tools.append(new)
        out["tools"] = tools
    choice: dict[str, Any] | None = None
    given = body.get("tool_choice")
    if given is not None:
        if given in ("auto", "none"):
            choice = {"type": given}
        elif given == "required":
            choice = {"type": "any"}
        elif type(given) is dict and given.get("type") == "function":
            choice = {"type": "tool", "name": _str(ctx, given.get("name"), "tool_choice.name")}
        else:
            ctx.drop("tool_choice", f"{_short(given)} has no Messages counterpart")
    if body.get("parallel_tool_calls") is False:
        choice = choice if choice is not None else {"type": "auto"}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    if choice is not None:
        out["tool_choice"] = choice

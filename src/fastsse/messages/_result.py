"""The cold half of the Messages fold, shared by both backends: result assembly and the verdict.
The fold's block state (``_Block``) carries the attribute names read here on both backends.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from ..fold import CONTENT, REASONING, FormatVerdict, joined, why_not

# The block type a delta implies when its block was never started.
BLOCK_OF_DELTA: Final = {
    "text_delta": "text",
    "input_json_delta": "tool_use",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "citations_delta": "text",
    "compaction_delta": "compaction",
}


def event_error(event: dict[str, Any]) -> Any:
    """The error an ``error`` event carries: its ``error`` object, else its own other fields."""
    nested = event.get("error")
    if isinstance(nested, dict):
        return nested
    return {k: v for k, v in event.items() if k != "type"}


def tool_input(raw: str) -> tuple[bool, Any]:
    """Parse a tool's streamed input: (True, value) or (False, None) if it is not JSON."""
    try:
        return True, orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False, None


def build_block(b: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict(b.fields)
    for key, parts in b.texts.items():
        start = out.get(key)
        text = joined(parts)
        out[key] = start + text if isinstance(start, str) else text
    if b.json is not None:
        raw = joined(b.json)
        if b.parsed:
            out["input"] = b.input
        elif raw.strip():
            ok, value = tool_input(raw)  # a block never stopped: parsed on demand, not kept
            if ok:
                out["input"] = value
            else:
                out["partial_json"] = raw  # never drop what the model wrote
                out.setdefault("input", {})
    if b.citations is not None:
        held = out.get("citations")
        out["citations"] = (list(held) if isinstance(held, list) else []) + b.citations
    return out


def start_content(value: Any) -> tuple[list[Any], int]:
    """The content blocks a ``message_start`` carries that are blocks (an object with a string
    ``type``), and how many entries were not (a value that is no list counts one): each fold keeps
    the first and adds the second to ``malformed``."""
    if type(value) is not list:
        return [], 1
    kept = [b for b in value if type(b) is dict and type(b.get("type")) is str]
    return kept, len(value) - len(kept)


def build_message(
    fields: dict[str, Any], usage: dict[str, Any] | None, blocks: dict[int, Any], error: Any
) -> dict[str, Any]:
    """The message object: ``message_start``'s fields updated by ``message_delta``'s, the content
    blocks in ``index`` order, usage merged key by key, and the error if one arrived."""
    content: dict[int, Any] = {}
    base = fields.get("content")
    if isinstance(base, list):
        content.update(enumerate(base))
    for i, b in blocks.items():
        content[i] = build_block(b)
    out: dict[str, Any] = {
        "id": fields.get("id"),
        "type": fields.get("type", "message"),
        "role": fields.get("role", "assistant"),
        "model": fields.get("model"),
        "content": [content[i] for i in sorted(content)],
        "stop_reason": fields.get("stop_reason"),
        "stop_sequence": fields.get("stop_sequence"),
        "usage": dict(usage) if usage is not None else None,
    }
    for key, value in fields.items():
        if key not in out:
            out[key] = value
    if error is not None:
        out["error"] = error
    return out


def make_verdict(
    fields: dict[str, Any],
    usage: dict[str, Any] | None,
    blocks: dict[int, Any],
    started: bool,
    terminal: bool,
    error: Any,
    departures: dict[str, None],
    skipped: int,
    ignored: int,
    malformed: int,
    aborted: bool,
    too_large: bool,
    truncated: bool,
) -> FormatVerdict:
    found = dict(departures)
    if not started and (blocks or terminal):
        found["no_message_start"] = None
    if any(not b.stopped for b in blocks.values()):
        found["block_not_stopped"] = None
    reason = fields.get("stop_reason")
    name = "message_stop" if terminal else None
    why = why_not(name, error, aborted, too_large, truncated, None)
    return FormatVerdict(
        complete=why is None,
        terminal=name,
        status=reason if isinstance(reason, str) else None,
        stop_reason=reason if isinstance(reason, str) else None,
        why=why,
        usage=usage is not None,
        error=error is not None,
        departures=tuple(found),
        aborted=aborted,
        too_large=too_large,
        truncated=truncated,
        skipped=skipped,
        ignored=ignored,
        malformed=malformed,
    )


_KINDS: Final = {
    "text_delta": ("text", CONTENT),
    "input_json_delta": ("partial_json", CONTENT),
    "thinking_delta": ("thinking", REASONING),
}


def token_kind(event: Any) -> int:
    """What a parsed Messages event carries for the timing record: CONTENT, REASONING or 0
    (signatures, citations and bookkeeping are not tokens)."""
    if event.get("type") != "content_block_delta":
        return 0
    delta = event.get("delta")
    if not isinstance(delta, dict):
        return 0
    field, kind = _KINDS.get(str(delta.get("type")), ("", 0))
    value = delta.get(field)
    return kind if isinstance(value, str) and value else 0

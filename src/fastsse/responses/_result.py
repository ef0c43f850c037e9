"""The cold half of the Responses fold, shared by both backends: event vocabulary, result assembly
and the verdict. The fold's state objects (``_Item``, ``_Part``) carry the attribute names read
here on both backends.
"""

from __future__ import annotations

from typing import Any, Final

from ..apis import APIS
from ..fold import CONTENT, REASONING, FormatVerdict, joined, why_not

# The lifecycle events whose ``response`` object is merged into the result.
LIFECYCLE: Final = ("response.created", "response.in_progress", "response.queued")
TERMINAL: Final = APIS["responses"].terminal
# the terminal events that end a whole answer (the status says which, incomplete_details why)
WHOLE: Final = APIS["responses"].whole

# Streamed item fields appended from ``*.delta`` events, and set from the matching ``*.done``
# event's field: event type stem -> (item type to assume for an unannounced item, field).
ITEM_TEXT: Final = {
    "response.function_call_arguments": ("function_call", "arguments"),
    "response.mcp_call_arguments": ("mcp_call", "arguments"),
    "response.custom_tool_call_input": ("custom_tool_call", "input"),
    "response.code_interpreter_call_code": ("code_interpreter_call", "code"),
}
# Streamed part text: event type stem -> (which list of parts, part type, text field, index key).
PART_TEXT: Final = {
    "response.output_text": ("content", "output_text", "text", "content_index"),
    "response.refusal": ("content", "refusal", "refusal", "content_index"),
    "response.reasoning_text": ("content", "reasoning_text", "text", "content_index"),
    "response.reasoning_summary_text": ("summary", "summary_text", "text", "summary_index"),
}
# The item type an unannounced item's first event implies.
ITEM_OF_PART: Final = {
    "output_text": "message",
    "refusal": "message",
    "reasoning_text": "reasoning",
    "summary_text": "reasoning",
}


def event_error(event: dict[str, Any]) -> Any:
    """The error an ``error`` event carries: its nested ``error`` object (some servers nest the
    fields), else the event's own fields without ``type`` and ``sequence_number``."""
    nested = event.get("error")
    if isinstance(nested, dict):
        return nested
    return {k: v for k, v in event.items() if k not in ("type", "sequence_number")}


def _overlay(base: Any, parts: dict[int, Any]) -> list[Any]:
    """A list of parts: ``base`` (the item's own list, e.g. from ``output_item.done``) with each
    streamed part laid over the entry at its index, in index order."""
    by_index: dict[int, dict[str, Any]] = {}
    if isinstance(base, list):
        for i, entry in enumerate(base):
            by_index[i] = dict(entry) if isinstance(entry, dict) else entry
    for i in sorted(parts):
        p = parts[i]
        entry = by_index.get(i)
        out = dict(entry) if isinstance(entry, dict) else {}
        out.update(p.fields)
        if p.text is not None:
            out[p.text_key] = joined(p.text)
        elif p.done_text is not None:
            out[p.text_key] = p.done_text
        elif p.text_key not in out:
            out[p.text_key] = ""
        if p.annotations is not None:
            held = out.get("annotations")
            if not isinstance(held, list) or len(held) < len(p.annotations):
                out["annotations"] = list(p.annotations)
        if p.logprobs is not None:
            held = out.get("logprobs")
            if not isinstance(held, list) or len(held) < len(p.logprobs):
                out["logprobs"] = list(p.logprobs)
        by_index[i] = out
    return [by_index[i] for i in sorted(by_index)]


def build_item(it: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict(it.fields)
    if it.parts:
        out["content"] = _overlay(out.get("content"), it.parts)
    if it.summary:
        out["summary"] = _overlay(out.get("summary"), it.summary)
    if it.args_key is not None:
        if it.args is not None:
            out[it.args_key] = joined(it.args)
        elif it.args_done is not None:
            out[it.args_key] = it.args_done
    return out


def build_response(
    top: dict[str, Any], items: dict[int, Any], extra: dict[int, Any], error: Any
) -> dict[str, Any]:
    """The response object: the lifecycle events' ``response`` fields (last non-null wins), the
    items in ``output_index`` order, and an ``error`` event's error when the response has none."""
    out: dict[str, Any] = {
        "id": top.get("id"),
        "object": top.get("object", "response"),
        "created_at": top.get("created_at"),
        "status": top.get("status"),
        "model": top.get("model"),
        "output": [],
        "usage": top.get("usage"),
        "incomplete_details": top.get("incomplete_details"),
        "error": top.get("error"),
    }
    for key, value in top.items():
        if key not in out:
            out[key] = value
    output: dict[int, Any] = {i: build_item(items[i]) for i in items}
    for i, item in extra.items():
        output.setdefault(i, item)
    out["output"] = [output[i] for i in sorted(output)]
    if out["error"] is None and error is not None:
        out["error"] = error
    return out


def make_verdict(
    top: dict[str, Any],
    items: dict[int, Any],
    terminal: str | None,
    error: Any,
    departures: dict[str, None],
    skipped: int,
    ignored: int,
    malformed: int,
    aborted: bool,
    too_large: bool,
    truncated: bool,
) -> FormatVerdict:
    status = top.get("status")
    found = dict(departures)
    if terminal is not None and any(not it.done for it in items.values()):
        found["item_not_done"] = None
    detail = None
    if terminal == "response.failed":
        failure = top.get("error")
        code = failure.get("code") if isinstance(failure, dict) else None
        detail = f"response.failed: {code}" if code else "response.failed"
    if error is None and terminal == "response.failed":
        error = top.get("error") or {}
    why = why_not(terminal, error, aborted, too_large, truncated, detail)
    details = top.get("incomplete_details")
    limit = details.get("reason") if isinstance(details, dict) else None
    return FormatVerdict(
        # response.incomplete (max_output_tokens, content_filter) ends an answer as the API ends
        # one a limit stopped, as chat's finish_reason "length" and Messages' "max_tokens" do: whole
        complete=why is None and terminal in WHOLE,
        terminal=terminal,
        status=status if isinstance(status, str) else None,
        # why it stopped, once a terminal event said: the limit that ended it, else its status
        stop_reason=None
        if terminal is None
        else limit
        if isinstance(limit, str)
        else status
        if isinstance(status, str)
        else None,
        why=why,
        usage=top.get("usage") is not None,
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
    "response.output_text.delta": CONTENT,
    "response.refusal.delta": CONTENT,
    "response.function_call_arguments.delta": CONTENT,
    "response.mcp_call_arguments.delta": CONTENT,
    "response.custom_tool_call_input.delta": CONTENT,
    "response.reasoning_text.delta": REASONING,
    "response.reasoning_summary_text.delta": REASONING,
}


def token_kind(event: Any) -> int:
    """What a parsed Responses event carries for the timing record: CONTENT, REASONING or 0."""
    kind = _KINDS.get(event.get("type"), 0)
    delta = event.get("delta")
    return kind if isinstance(delta, str) and delta else 0

"""Writes formats/responses.json and formats/messages.json. The streams follow the OpenAI Responses
streaming events reference and the Anthropic Messages streaming reference; every expected result
and verdict below is written by hand from those references and the fold rules in the
aggregators' docstrings. Nothing here is produced by running fastsse.

Each vector: ``events`` (each a JSON value sent as one event's data, a string being the raw
text; the ``event:`` line is the payload's ``type`` when the framing names events), ``result``
(exact) and ``verdict`` (the fields listed). ``stream_stops``: the fused stream stops at an
event, so it never counts what follows in ``ignored``.
"""

import json
from pathlib import Path

OUT = Path(__file__).parent / "formats"


def resp(rid, status, created=1700000000, **extra):
    r = {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": "gpt-x",
        "output": [],
        "usage": None,
        "error": None,
        "incomplete_details": None,
    }
    r.update(extra)
    return r


def result(rid, status, output, created=1700000000, usage=None, error=None, incomplete=None):
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": "gpt-x",
        "output": output,
        "usage": usage,
        "incomplete_details": incomplete,
        "error": error,
    }


R = []

# 1. The reference's text stream, every bookkeeping event present.
msg1_done = {
    "id": "msg_1",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hello, world", "annotations": []}],
}
usage1 = {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
R.append(
    {
        "name": "text_basic",
        "source": "Responses streaming reference: created, in_progress, output_item.added, content_part.added, output_text.delta, output_text.done, content_part.done, output_item.done, completed",
        "events": [
            {"type": "response.created", "sequence_number": 0, "response": resp("resp_1", "in_progress")},
            {"type": "response.in_progress", "sequence_number": 1, "response": resp("resp_1", "in_progress")},
            {
                "type": "response.output_item.added",
                "sequence_number": 2,
                "output_index": 0,
                "item": {
                    "id": "msg_1",
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
            },
            {
                "type": "response.content_part.added",
                "sequence_number": 3,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            },
            {
                "type": "response.output_text.delta",
                "sequence_number": 4,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "Hello",
            },
            {
                "type": "response.output_text.delta",
                "sequence_number": 5,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": ", world",
            },
            {
                "type": "response.output_text.done",
                "sequence_number": 6,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "text": "Hello, world",
            },
            {
                "type": "response.content_part.done",
                "sequence_number": 7,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "Hello, world", "annotations": []},
            },
            {"type": "response.output_item.done", "sequence_number": 8, "output_index": 0, "item": msg1_done},
            {
                "type": "response.completed",
                "sequence_number": 9,
                "response": resp("resp_1", "completed", output=[msg1_done], usage=usage1),
            },
        ],
        "result": result("resp_1", "completed", [msg1_done], usage=usage1),
        "verdict": {
            "complete": True,
            "terminal": "response.completed",
            "status": "completed",
            "why": None,
            "usage": True,
            "error": False,
            "departures": [],
            "skipped": 0,
            "ignored": 0,
            "malformed": 0,
        },
    }
)

# 2. Parallel function calls; arguments only in deltas for one, a .done for the other; a terminal
#    response without output; [DONE] after it (OpenRouter).
fc1 = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city":"Paris"}',
}
fc2 = {
    "id": "fc_2",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_2",
    "name": "get_time",
    "arguments": '{"tz":"CET"}',
}
usage2 = {"input_tokens": 9, "output_tokens": 12, "total_tokens": 21}
R.append(
    {
        "name": "parallel_function_calls",
        "source": "Responses reference: output_item.added (function_call), function_call_arguments.delta / .done, output_item.done; parallel calls at output_index 0 and 1",
        "events": [
            {"type": "response.created", "response": resp("resp_2", "in_progress", created=2)},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "id": "fc_1",
                    "type": "function_call",
                    "status": "in_progress",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": "",
                },
            },
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "delta": '{"city":',
            },
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "delta": '"Paris"',
            },
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "delta": "}",
            },
            {"type": "response.output_item.done", "output_index": 0, "item": fc1},
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {
                    "id": "fc_2",
                    "type": "function_call",
                    "status": "in_progress",
                    "call_id": "call_2",
                    "name": "get_time",
                    "arguments": "",
                },
            },
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_2",
                "output_index": 1,
                "arguments": '{"tz":"CET"}',
            },
            {"type": "response.output_item.done", "output_index": 1, "item": fc2},
            {
                "type": "response.completed",
                "response": {
                    "id": "resp_2",
                    "object": "response",
                    "created_at": 2,
                    "status": "completed",
                    "model": "gpt-x",
                    "usage": usage2,
                },
            },
            "[DONE]",
        ],
        "result": result("resp_2", "completed", [fc1, fc2], created=2, usage=usage2),
        "verdict": {
            "complete": True,
            "terminal": "response.completed",
            "status": "completed",
            "why": None,
            "usage": True,
            "departures": [],
            "skipped": 0,
            "ignored": 0,
        },
    }
)

# 3. A reasoning item with a summary and encrypted content, then a refusal.
rs3 = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Thinking hard."}],
    "encrypted_content": "gAAA",
}
msg3 = {
    "id": "msg_3",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "refusal", "refusal": "I can't help."}],
}
usage3 = {
    "input_tokens": 3,
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 4},
    "total_tokens": 10,
}
R.append(
    {
        "name": "reasoning_summary_and_refusal",
        "source": "Responses reference: reasoning_summary_part.added/done, reasoning_summary_text.delta/done, content_part (refusal), refusal.delta/done",
        "events": [
            {"type": "response.created", "response": resp("resp_3", "in_progress", created=3)},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"id": "rs_1", "type": "reasoning", "summary": []},
            },
            {
                "type": "response.reasoning_summary_part.added",
                "item_id": "rs_1",
                "output_index": 0,
                "summary_index": 0,
                "part": {"type": "summary_text", "text": ""},
            },
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_1",
                "output_index": 0,
                "summary_index": 0,
                "delta": "Thinking",
            },
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_1",
                "output_index": 0,
                "summary_index": 0,
                "delta": " hard.",
            },
            {
                "type": "response.reasoning_summary_text.done",
                "item_id": "rs_1",
                "output_index": 0,
                "summary_index": 0,
                "text": "Thinking hard.",
            },
            {
                "type": "response.reasoning_summary_part.done",
                "item_id": "rs_1",
                "output_index": 0,
                "summary_index": 0,
                "part": {"type": "summary_text", "text": "Thinking hard."},
            },
            {"type": "response.output_item.done", "output_index": 0, "item": rs3},
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {
                    "id": "msg_3",
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
            },
            {
                "type": "response.content_part.added",
                "item_id": "msg_3",
                "output_index": 1,
                "content_index": 0,
                "part": {"type": "refusal", "refusal": ""},
            },
            {
                "type": "response.refusal.delta",
                "item_id": "msg_3",
                "output_index": 1,
                "content_index": 0,
                "delta": "I can't",
            },
            {
                "type": "response.refusal.delta",
                "item_id": "msg_3",
                "output_index": 1,
                "content_index": 0,
                "delta": " help.",
            },
            {
                "type": "response.refusal.done",
                "item_id": "msg_3",
                "output_index": 1,
                "content_index": 0,
                "refusal": "I can't help.",
            },
            {
                "type": "response.content_part.done",
                "item_id": "msg_3",
                "output_index": 1,
                "content_index": 0,
                "part": {"type": "refusal", "refusal": "I can't help."},
            },
            {"type": "response.output_item.done", "output_index": 1, "item": msg3},
            {"type": "response.completed", "response": resp("resp_3", "completed", created=3, usage=usage3)},
        ],
        "result": result("resp_3", "completed", [rs3, msg3], created=3, usage=usage3),
        "verdict": {
            "complete": True,
            "terminal": "response.completed",
            "status": "completed",
            "departures": [],
        },
    }
)

# 4. Deltas for items and parts never announced, and no terminal event.
R.append(
    {
        "name": "orphan_deltas_no_terminal",
        "source": "issue 18 tolerance rule; LiteLLM and gateway trackers: output_text.delta with no output_item.added, stream ending without response.completed",
        "events": [
            {
                "type": "response.output_text.delta",
                "item_id": "msg_9",
                "output_index": 0,
                "content_index": 0,
                "delta": "orphan ",
            },
            {
                "type": "response.output_text.delta",
                "item_id": "msg_9",
                "output_index": 0,
                "content_index": 0,
                "delta": "text",
            },
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_9",
                "output_index": 1,
                "delta": "{}",
            },
        ],
        "result": {
            "id": None,
            "object": "response",
            "created_at": None,
            "status": None,
            "model": None,
            "output": [
                {
                    "type": "message",
                    "id": "msg_9",
                    "content": [{"type": "output_text", "text": "orphan text"}],
                },
                {"type": "function_call", "id": "fc_9", "arguments": "{}"},
            ],
            "usage": None,
            "incomplete_details": None,
            "error": None,
        },
        "verdict": {
            "complete": False,
            "terminal": None,
            "status": None,
            "why": "no terminal event",
            "usage": False,
            "departures": ["item_not_announced", "part_not_announced"],
        },
    }
)

# 5. Cut by max_output_tokens: response.incomplete; a delta after it is ignored.
R.append(
    {
        "name": "incomplete_max_output_tokens",
        "source": "Responses reference: response.incomplete with incomplete_details.reason",
        "events": [
            {"type": "response.created", "response": resp("resp_5", "in_progress", created=5)},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "id": "msg_5",
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
            },
            {
                "type": "response.content_part.added",
                "item_id": "msg_5",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            },
            {
                "type": "response.output_text.delta",
                "item_id": "msg_5",
                "output_index": 0,
                "content_index": 0,
                "delta": "The answer is",
            },
            {
                "type": "response.incomplete",
                "response": resp(
                    "resp_5",
                    "incomplete",
                    created=5,
                    usage={"input_tokens": 2, "output_tokens": 3, "total_tokens": 5},
                    incomplete_details={"reason": "max_output_tokens"},
                ),
            },
            {
                "type": "response.output_text.delta",
                "item_id": "msg_5",
                "output_index": 0,
                "content_index": 0,
                "delta": " late",
            },
        ],
        "result": result(
            "resp_5",
            "incomplete",
            [
                {
                    "id": "msg_5",
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "The answer is", "annotations": []}],
                }
            ],
            created=5,
            usage={"input_tokens": 2, "output_tokens": 3, "total_tokens": 5},
            incomplete={"reason": "max_output_tokens"},
        ),
        # a limit ended the answer as the API ends such answers (chat's "length"): complete
        "verdict": {
            "complete": True,
            "terminal": "response.incomplete",
            "status": "incomplete",
            "why": None,
            "departures": ["item_not_done"],
            "ignored": 1,
        },
    }
)

# 6. An error event, then response.failed carrying the response's own error.
R.append(
    {
        "name": "error_then_failed",
        "source": "Responses reference: error event (code, message, param), response.failed with response.error",
        "events": [
            {"type": "response.created", "response": resp("resp_6", "in_progress", created=6)},
            {"type": "error", "sequence_number": 1, "code": "server_error", "message": "boom", "param": None},
            {
                "type": "response.failed",
                "response": resp(
                    "resp_6", "failed", created=6, error={"code": "server_error", "message": "boom"}
                ),
            },
        ],
        "result": result(
            "resp_6", "failed", [], created=6, error={"code": "server_error", "message": "boom"}
        ),
        "verdict": {
            "complete": False,
            "terminal": "response.failed",
            "status": "failed",
            "why": "error: server_error",
            "error": True,
            "usage": False,
            "departures": [],
        },
    }
)

# 7. Only a terminal event, its output whole.
msg7 = {
    "id": "msg_7",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Whole.", "annotations": []}],
}
R.append(
    {
        "name": "terminal_output_only",
        "source": "issue 18 tolerance rule: items only response.completed holds are taken whole",
        "events": [
            {"type": "response.completed", "response": resp("resp_7", "completed", created=7, output=[msg7])}
        ],
        "result": result("resp_7", "completed", [msg7], created=7),
        "verdict": {
            "complete": True,
            "terminal": "response.completed",
            "usage": False,
            "departures": ["item_only_in_terminal"],
        },
    }
)

# 8. An annotation; an output_text.done whose text differs from the streamed one (streamed wins).
cite = {
    "type": "url_citation",
    "url": "https://example.com",
    "title": "Example",
    "start_index": 4,
    "end_index": 7,
}
R.append(
    {
        "name": "annotation_and_done_text_differs",
        "source": "Responses reference: response.output_text.annotation.added (annotation_index, annotation)",
        "events": [
            {"type": "response.created", "response": resp("resp_8", "in_progress", created=8)},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "id": "msg_8",
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
            },
            {
                "type": "response.content_part.added",
                "item_id": "msg_8",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            },
            {
                "type": "response.output_text.delta",
                "item_id": "msg_8",
                "output_index": 0,
                "content_index": 0,
                "delta": "See [1].",
            },
            {
                "type": "response.output_text.annotation.added",
                "item_id": "msg_8",
                "output_index": 0,
                "content_index": 0,
                "annotation_index": 0,
                "annotation": cite,
            },
            {
                "type": "response.output_text.done",
                "item_id": "msg_8",
                "output_index": 0,
                "content_index": 0,
                "text": "See [1]. Extra",
            },
            {"type": "response.completed", "response": resp("resp_8", "completed", created=8)},
        ],
        "result": result(
            "resp_8",
            "completed",
            [
                {
                    "id": "msg_8",
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "See [1].", "annotations": [cite]}],
                }
            ],
            created=8,
        ),
        "verdict": {
            "complete": True,
            "terminal": "response.completed",
            "departures": ["done_text_differs", "item_not_done"],
        },
    }
)


def mstart(mid, usage):
    return {
        "type": "message_start",
        "message": {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-x",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        },
    }


def bstart(i, block):
    return {"type": "content_block_start", "index": i, "content_block": block}


def delta(i, d):
    return {"type": "content_block_delta", "index": i, "delta": d}


def text(i, t):
    return delta(i, {"type": "text_delta", "text": t})


def bstop(i):
    return {"type": "content_block_stop", "index": i}


def mdelta(reason, usage, seq=None):
    return {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": seq}, "usage": usage}


STOP = {"type": "message_stop"}
PING = {"type": "ping"}


def message(mid, content, reason, usage, seq=None, **extra):
    m = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": content,
        "stop_reason": reason,
        "stop_sequence": seq,
        "usage": usage,
    }
    m.update(extra)
    return m


M = []

M.append(
    {
        "name": "text_basic",
        "source": "Messages streaming reference, basic request: message_start, content_block_start, ping, text_delta, content_block_stop, message_delta, message_stop",
        "events": [
            mstart("msg_1", {"input_tokens": 25, "output_tokens": 1}),
            bstart(0, {"type": "text", "text": ""}),
            PING,
            text(0, "Hello"),
            text(0, "!"),
            bstop(0),
            mdelta("end_turn", {"output_tokens": 15}),
            STOP,
        ],
        "result": message(
            "msg_1",
            [{"type": "text", "text": "Hello!"}],
            "end_turn",
            {"input_tokens": 25, "output_tokens": 15},
        ),
        "verdict": {
            "complete": True,
            "terminal": "message_stop",
            "status": "end_turn",
            "why": None,
            "usage": True,
            "error": False,
            "departures": [],
            "skipped": 0,
            "ignored": 0,
            "malformed": 0,
        },
    }
)

M.append(
    {
        "name": "thinking_then_tool_use",
        "source": "Messages streaming reference: thinking_delta, signature_delta, tool_use with input_json_delta (first piece empty)",
        "events": [
            mstart("msg_2", {"input_tokens": 10, "cache_read_input_tokens": 0, "output_tokens": 1}),
            bstart(0, {"type": "thinking", "thinking": "", "signature": ""}),
            delta(0, {"type": "thinking_delta", "thinking": "Let me "}),
            delta(0, {"type": "thinking_delta", "thinking": "check."}),
            delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAh"}),
            bstop(0),
            bstart(1, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}),
            delta(1, {"type": "input_json_delta", "partial_json": ""}),
            delta(1, {"type": "input_json_delta", "partial_json": '{"location": "Par'}),
            delta(1, {"type": "input_json_delta", "partial_json": 'is", "unit": "c"}'}),
            bstop(1),
            mdelta("tool_use", {"output_tokens": 40, "cache_read_input_tokens": 5}),
            STOP,
        ],
        "result": message(
            "msg_2",
            [
                {"type": "thinking", "thinking": "Let me check.", "signature": "EqQBCgIYAh"},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"location": "Paris", "unit": "c"},
                },
            ],
            "tool_use",
            {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 40},
        ),
        "verdict": {"complete": True, "terminal": "message_stop", "status": "tool_use", "departures": []},
    }
)

search = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://example.com",
            "title": "Ex",
            "encrypted_content": "abc",
            "page_age": None,
        }
    ],
}
citation = {
    "type": "web_search_result_location",
    "url": "https://example.com",
    "title": "Ex",
    "encrypted_index": "xyz",
    "cited_text": "Sunny",
}
M.append(
    {
        "name": "redacted_server_tool_citations",
        "source": "Messages reference: redacted_thinking, server_tool_use, web_search_tool_result, citations_delta",
        "events": [
            mstart("msg_3", {"input_tokens": 100, "output_tokens": 0}),
            bstart(0, {"type": "redacted_thinking", "data": "EmwKAhgB"}),
            bstop(0),
            bstart(1, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
            delta(1, {"type": "input_json_delta", "partial_json": '{"query": "weather"}'}),
            bstop(1),
            bstart(2, search),
            bstop(2),
            bstart(3, {"type": "text", "text": "", "citations": []}),
            delta(3, {"type": "citations_delta", "citation": citation}),
            text(3, "It is sunny."),
            bstop(3),
            mdelta("end_turn", {"output_tokens": 20, "server_tool_use": {"web_search_requests": 1}}),
            STOP,
        ],
        "result": message(
            "msg_3",
            [
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {"query": "weather"},
                },
                search,
                {"type": "text", "text": "It is sunny.", "citations": [citation]},
            ],
            "end_turn",
            {"input_tokens": 100, "output_tokens": 20, "server_tool_use": {"web_search_requests": 1}},
        ),
        "verdict": {"complete": True, "status": "end_turn", "departures": []},
    }
)

M.append(
    {
        "name": "error_midstream",
        "source": "Messages reference, error events: an overloaded_error mid-stream ends it; what follows is ignored",
        "stream_stops": True,
        "events": [
            mstart("msg_4", {"input_tokens": 5, "output_tokens": 1}),
            bstart(0, {"type": "text", "text": ""}),
            text(0, "Par"),
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            text(0, "tial"),
            STOP,
        ],
        "result": message(
            "msg_4",
            [{"type": "text", "text": "Par"}],
            None,
            {"input_tokens": 5, "output_tokens": 1},
            error={"type": "overloaded_error", "message": "Overloaded"},
        ),
        "verdict": {
            "complete": False,
            "terminal": None,
            "status": None,
            "why": "error: overloaded_error",
            "error": True,
            "departures": ["block_not_stopped"],
            "ignored": 2,
        },
    }
)

M.append(
    {
        "name": "no_start_unparsed_input_no_stop",
        "source": "issue 18 tolerance rule; m25 of the recorded corpus (max_tokens inside tool input)",
        "events": [
            text(0, "Hi"),
            bstart(1, {"type": "tool_use", "id": "toolu_5", "name": "f", "input": {}}),
            delta(1, {"type": "input_json_delta", "partial_json": '{"a": [1, 2'}),
            bstop(1),
            mdelta("max_tokens", {"output_tokens": 9}),
        ],
        "result": {
            "id": None,
            "type": "message",
            "role": "assistant",
            "model": None,
            "content": [
                {"type": "text", "text": "Hi"},
                {
                    "type": "tool_use",
                    "id": "toolu_5",
                    "name": "f",
                    "input": {},
                    "partial_json": '{"a": [1, 2',
                },
            ],
            "stop_reason": "max_tokens",
            "stop_sequence": None,
            "usage": {"output_tokens": 9},
        },
        "verdict": {
            "complete": False,
            "terminal": None,
            "status": "max_tokens",
            "why": "no terminal event",
            "departures": ["block_not_started", "unparsed_input", "no_message_start", "block_not_stopped"],
        },
    }
)

M.append(
    {
        "name": "junk_payloads",
        "source": "fold rules: payloads that are not a JSON object are skipped, values of the wrong type dropped, unknown events noted",
        "events": [
            mstart("msg_6", {"input_tokens": 1, "output_tokens": 1}),
            "not json",
            [1, 2],
            bstart(0, {"type": "text", "text": ""}),
            text(0, "ok"),
            {"type": "content_block_delta", "index": 0, "delta": "oops"},
            delta(0, {"type": "input_json_delta", "partial_json": 5}),
            {"type": "mystery_event"},
            bstop(0),
            mdelta("end_turn", {"output_tokens": 3}),
            STOP,
        ],
        "result": message(
            "msg_6", [{"type": "text", "text": "ok"}], "end_turn", {"input_tokens": 1, "output_tokens": 3}
        ),
        "verdict": {"complete": True, "skipped": 2, "malformed": 2, "departures": ["unknown_event"]},
    }
)

M.append(
    {
        "name": "stop_sequence_and_compaction",
        "source": "Messages reference: stop_reason stop_sequence with the sequence; a new delta kind (compaction_delta) appends its string fields",
        "events": [
            mstart("msg_7", {"input_tokens": 4, "output_tokens": 1}),
            bstart(0, {"type": "compaction", "content": None}),
            delta(0, {"type": "compaction_delta", "content": "Summary "}),
            delta(0, {"type": "compaction_delta", "content": "so far."}),
            bstop(0),
            bstart(1, {"type": "text", "text": ""}),
            text(1, "```py"),
            bstop(1),
            mdelta("stop_sequence", {"output_tokens": 6}, seq="```"),
            STOP,
        ],
        "result": message(
            "msg_7",
            [{"type": "compaction", "content": "Summary so far."}, {"type": "text", "text": "```py"}],
            "stop_sequence",
            {"input_tokens": 4, "output_tokens": 6},
            seq="```",
        ),
        "verdict": {"complete": True, "status": "stop_sequence", "departures": []},
    }
)

if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    for name, vectors in (("responses", R), ("messages", M)):
        with open(OUT / f"{name}.json", "w", encoding="utf-8") as f:
            json.dump(vectors, f, ensure_ascii=False, indent=1)
            f.write("\n")

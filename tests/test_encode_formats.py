"""ResponsesEncoder and MessagesEncoder: exact bytes from the API references, and the errors they promise."""

# The expected bytes are JSON text; %-formatting keeps their braces readable.
# ruff: noqa: UP031

from __future__ import annotations

import pytest

from fastsse import check_stream
from fastsse.messages.encode import MessagesEncoder, chat_usage_to_messages
from fastsse.responses.encode import ResponsesEncoder, chat_usage_to_responses


def ev(name: str, data: str) -> bytes:
    return f"event: {name}\ndata: {data}\n\n".encode()


RESP = (
    '{"id":"r1","object":"response","created_at":7,"status":"in_progress","error":null,'
    '"incomplete_details":null,"model":"m","output":[],"parallel_tool_calls":true,'
    '"tool_choice":"auto","tools":[],"usage":null}'
)


def test_responses_text_stream_bytes() -> None:
    enc = ResponsesEncoder(id="r1", model="m", created_at=7)
    out = enc.start() + enc.text("Hi") + enc.text(" there") + enc.complete(usage={"input_tokens": 1})
    item = '{"id":"msg_0_r1","type":"message","status":"%s","role":"assistant","content":[%s]}'
    part = '{"type":"output_text","text":"%s","annotations":[]}'
    where = '"item_id":"msg_0_r1","output_index":0,"content_index":0'
    done_item = item % ("completed", part % "Hi there")
    final = RESP.replace('"status":"in_progress"', '"status":"completed"').replace(
        '"output":[]', f'"output":[{done_item}]'
    )
    final = final.replace('"usage":null', '"usage":{"input_tokens":1}')
    expected = b"".join(
        [
            ev("response.created", '{"type":"response.created","sequence_number":0,"response":%s}' % RESP),
            ev(
                "response.in_progress",
                '{"type":"response.in_progress","sequence_number":1,"response":%s}' % RESP,
            ),
            ev(
                "response.output_item.added",
                '{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":%s}'
                % (item % ("in_progress", "")),
            ),
            ev(
                "response.content_part.added",
                '{"type":"response.content_part.added","sequence_number":3,%s,"part":%s}'
                % (where, part % ""),
            ),
            ev(
                "response.output_text.delta",
                '{"type":"response.output_text.delta","sequence_number":4,%s,"delta":"Hi","logprobs":[]}'
                % where,
            ),
            ev(
                "response.output_text.delta",
                '{"type":"response.output_text.delta","sequence_number":5,%s,"delta":" there","logprobs":[]}'
                % where,
            ),
            ev(
                "response.output_text.done",
                '{"type":"response.output_text.done","sequence_number":6,%s,"text":"Hi there","logprobs":[]}'
                % where,
            ),
            ev(
                "response.content_part.done",
                '{"type":"response.content_part.done","sequence_number":7,%s,"part":%s}'
                % (where, part % "Hi there"),
            ),
            ev(
                "response.output_item.done",
                '{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":%s}'
                % done_item,
            ),
            ev(
                "response.completed",
                '{"type":"response.completed","sequence_number":9,"response":%s}' % final,
            ),
        ]
    )
    assert out == expected
    assert check_stream(out, api="responses") == []


def test_responses_items_follow_each_other() -> None:
    enc = ResponsesEncoder(id="r", model="m", created_at=0)
    out = enc.start() + enc.reasoning("think") + enc.text("a") + enc.refusal("no")
    out += enc.function_call(0, call_id="c0", name="f", arguments='{"x"') + enc.function_call(
        1, call_id="c1", name="g"
    )
    out += enc.arguments(0, ":1}") + enc.complete(incomplete_reason="max_output_tokens")
    text = out.decode()
    # the reasoning item is closed before the message opens, the message before the calls
    assert text.index('"response.output_item.done","sequence_number"') < text.index('"item":{"id":"msg_1_r"')
    assert '"summary":[{"type":"summary_text","text":"think"}]' in text
    assert (
        '"content":[{"type":"output_text","text":"a","annotations":[]},{"type":"refusal","refusal":"no"}]'
        in text
    )
    assert '"arguments":"{\\"x\\":1}","call_id":"c0","name":"f"' in text
    assert '"incomplete_details":{"reason":"max_output_tokens"}' in text
    assert '"type":"response.incomplete"' in text and '"status":"incomplete"' in text
    assert [f.code for f in check_stream(out, api="responses")] == ["missing-usage"]


def test_responses_encoder_errors() -> None:
    enc = ResponsesEncoder(id="r", model="m")
    with pytest.raises(ValueError, match="before start"):
        enc.text("x")
    enc.start()
    with pytest.raises(ValueError, match="start\\(\\) twice"):
        enc.start()
    with pytest.raises(ValueError, match="empty"):
        enc.text("")
    with pytest.raises(TypeError):
        enc.text(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="call_id and name"):
        enc.function_call(0, call_id="", name="f")
    with pytest.raises(ValueError, match="never opened"):
        enc.arguments(3, "x")
    enc.function_call(0, call_id="c", name="f")
    with pytest.raises(ValueError, match="used twice"):
        enc.function_call(0, call_id="d", name="f")
    enc.fail(code="x", message="boom")
    with pytest.raises(ValueError, match="after the terminal"):
        enc.complete()
    with pytest.raises(ValueError, match="id"):
        ResponsesEncoder(id="", model="m")


def test_messages_stream_bytes() -> None:
    enc = MessagesEncoder(id="msg_1", model="claude")
    out = enc.start() + enc.thinking("hm") + enc.signature("sig") + enc.text("Hi") + enc.ping()
    out += enc.tool_use("a", id="toolu_1", name="get", input_json='{"q":') + enc.input_json("a", '"x"}')
    out += enc.stop("tool_use", usage={"input_tokens": 3, "output_tokens": 9})
    expected = b"".join(
        [
            ev(
                "message_start",
                '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
                '"content":[],"model":"claude","stop_reason":null,"stop_sequence":null,'
                '"usage":{"input_tokens":0,"output_tokens":0}}}',
            ),
            ev(
                "content_block_start",
                '{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}',
            ),
            ev(
                "content_block_delta",
                '{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}',
            ),
            ev(
                "content_block_delta",
                '{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}',
            ),
            ev("content_block_stop", '{"type":"content_block_stop","index":0}'),
            ev(
                "content_block_start",
                '{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}',
            ),
            ev(
                "content_block_delta",
                '{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}',
            ),
            ev("ping", '{"type":"ping"}'),
            ev("content_block_stop", '{"type":"content_block_stop","index":1}'),
            ev(
                "content_block_start",
                '{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get","input":{}}}',
            ),
            ev(
                "content_block_delta",
                '{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\\"q\\":"}}',
            ),
            ev(
                "content_block_delta",
                '{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\\"x\\"}"}}',
            ),
            ev("content_block_stop", '{"type":"content_block_stop","index":2}'),
            ev(
                "message_delta",
                '{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},'
                '"usage":{"input_tokens":3,"output_tokens":9}}',
            ),
            ev("message_stop", '{"type":"message_stop"}'),
        ]
    )
    assert out == expected
    assert check_stream(out, api="messages") == []


def test_messages_parallel_tools_stay_open_until_stop() -> None:
    enc = MessagesEncoder(id="m", model="x")
    out = enc.start() + enc.tool_use(0, id="a", name="f") + enc.tool_use(1, id="b", name="g")
    out += enc.input_json(0, "{}") + enc.input_json(1, "{}")
    out += enc.stop("tool_use", usage={"input_tokens": 2, "output_tokens": 4})
    text = out.decode()
    assert text.index('"index":1,"delta"') > text.index('"index":0,"delta"')
    assert text.count("content_block_stop") == 4  # two events, each naming its type twice
    assert check_stream(out, api="messages") == []


def test_messages_encoder_errors() -> None:
    enc = MessagesEncoder(id="m", model="x")
    with pytest.raises(ValueError, match="before start"):
        enc.text("x")
    enc.start()
    with pytest.raises(ValueError, match="no open thinking"):
        enc.signature("s")
    with pytest.raises(ValueError, match="id and name"):
        enc.tool_use(0, id="a", name="")
    with pytest.raises(ValueError, match="not open"):
        enc.input_json(0, "{")
    with pytest.raises(ValueError, match="empty"):
        enc.text("")
    with pytest.raises(ValueError, match="stop_reason"):
        enc.stop("")
    assert enc.error(message="boom") == ev(
        "error", '{"type":"error","error":{"type":"api_error","message":"boom"}}'
    )
    with pytest.raises(ValueError, match="after the end"):
        enc.stop("end_turn")
    with pytest.raises(TypeError):
        MessagesEncoder(id="m", model="x").start([])  # type: ignore[arg-type]


def test_usage_mappings() -> None:
    chat = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    assert chat_usage_to_responses(chat) == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 4},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 2},
        "total_tokens": 15,
    }
    assert chat_usage_to_messages(chat) == {
        "input_tokens": 6,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 4,
        "output_tokens": 5,
    }
    with pytest.raises(TypeError):
        chat_usage_to_messages([])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        chat_usage_to_responses(None)  # type: ignore[arg-type]


def test_responses_annotation() -> None:
    enc = ResponsesEncoder(id="r", model="m", created_at=0)
    enc.start()
    with pytest.raises(ValueError, match="no open output_text"):
        enc.annotation({"type": "url_citation"})
    enc.text("Hi")
    note = {"type": "url_citation", "url": "u", "title": "t", "start_index": 0, "end_index": 2}
    assert enc.annotation(note) == ev(
        "response.output_text.annotation.added",
        '{"type":"response.output_text.annotation.added","sequence_number":5,"item_id":"msg_0_r",'
        '"output_index":0,"content_index":0,"annotation_index":0,"annotation":'
        '{"type":"url_citation","url":"u","title":"t","start_index":0,"end_index":2}}',
    )
    with pytest.raises(TypeError):
        enc.annotation([])  # type: ignore[arg-type]
    done = enc.complete().decode()
    assert '"part":{"type":"output_text","text":"Hi","annotations":[{"type":"url_citation"' in done

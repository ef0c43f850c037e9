"""The Responses and Messages linter rules, each on a hand-written stream, any chunking, and ``check --api``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from fastsse import check_stream
from fastsse.check import API_CODES, MessagesChecker, ResponsesChecker, checker

SRC = str(Path(__file__).resolve().parents[1] / "src")


def ev(payload: dict[str, Any], name: str | None = "") -> bytes:
    head = b"" if name is None else b"event: " + (name or payload["type"]).encode() + b"\n"
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def resp(*events: dict[str, Any], numbered: bool = True) -> list[dict[str, Any]]:
    out = []
    for k, e in enumerate(events):
        out.append(
            {
                "type": e["type"],
                **({"sequence_number": k} if numbered else {}),
                **{x: y for x, y in e.items() if x != "type"},
            }
        )
    return out


R = {"id": "r", "object": "response", "status": "in_progress", "output": []}
DONE_R = {**R, "status": "completed", "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}
MSG = {"id": "m0", "type": "message", "role": "assistant", "content": []}
WHERE = {"item_id": "m0", "output_index": 0, "content_index": 0}
GOOD_R = [
    {"type": "response.created", "response": R},
    {"type": "response.output_item.added", "output_index": 0, "item": MSG},
    {"type": "response.content_part.added", **WHERE, "part": {"type": "output_text", "text": ""}},
    {"type": "response.output_text.delta", **WHERE, "delta": "Hi"},
    {"type": "response.output_text.done", **WHERE, "text": "Hi"},
    {"type": "response.content_part.done", **WHERE, "part": {"type": "output_text", "text": "Hi"}},
    {"type": "response.output_item.done", "output_index": 0, "item": MSG},
    {"type": "response.completed", "response": DONE_R},
]


def responses_body(events: list[dict[str, Any]], **kw: Any) -> bytes:
    return b"".join(ev(e) for e in resp(*events, **kw))


def codes(body: bytes, api: str) -> list[str]:
    return [f.code for f in check_stream(body, api=api)]


def test_compliant_responses_stream() -> None:
    assert codes(responses_body(GOOD_R), "responses") == []


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (GOOD_R[1:], ["missing-created"]),
        ([*GOOD_R[:2], *GOOD_R[3:]], ["missing-content-part-added"]),
        ([GOOD_R[0], *GOOD_R[2:]], ["missing-output-item-added"]),
        ([*GOOD_R[:2], GOOD_R[1], *GOOD_R[2:]], ["duplicate-output-index"]),
        ([*GOOD_R[:4], *GOOD_R[5:]], ["missing-output-text-done"]),
        ([*GOOD_R[:4], {**GOOD_R[4], "text": "Hx"}, *GOOD_R[5:]], ["text-done-mismatch"]),
        ([*GOOD_R[:6], GOOD_R[7]], ["missing-output-item-done"]),
        (GOOD_R[:7], ["missing-terminal"]),
        ([*GOOD_R, GOOD_R[3]], ["after-terminal"]),
        (
            [*GOOD_R[:7], {"type": "response.completed", "response": {**DONE_R, "usage": None}}],
            ["missing-usage"],
        ),
        ([*GOOD_R[:7], GOOD_R[3]], ["delta-after-done", "missing-terminal"]),
        ([GOOD_R[0], {**GOOD_R[1], "output_index": 2}], ["output-index-gap", "missing-output-item-done"]),
        (
            [*GOOD_R[:4], {"type": "response.failed", "response": {**R, "error": {"message": "boom"}}}],
            ["error-object"],
        ),
        (
            [GOOD_R[0], {**GOOD_R[1], "output_index": "0"}, *GOOD_R[2:]],
            ["malformed-chunk", "missing-output-item-added"],
        ),
    ],
)
def test_responses_rules(events: list[dict[str, Any]], expected: list[str]) -> None:
    body = responses_body(events)
    if expected == ["output-index-gap", "missing-output-item-done"]:
        body += ev(resp(*events, {"type": "response.completed", "response": DONE_R})[-1])
    assert codes(body, "responses") == expected
    assert set(expected) <= set(API_CODES["responses"])


def test_responses_sequence_and_event_lines() -> None:
    body = responses_body(GOOD_R, numbered=False)
    assert codes(body, "responses") == ["sequence-number"]
    unnamed = b"".join(ev(e, None) for e in resp(*GOOD_R))
    assert codes(unnamed, "responses") == ["missing-event-field"]
    wrong = ev(resp(*GOOD_R)[0], "response.in_progress") + b"".join(ev(e) for e in resp(*GOOD_R)[1:])
    assert codes(wrong, "responses") == ["event-type-mismatch"]
    odd = responses_body([GOOD_R[0], {"type": "response.made_up"}, *GOOD_R[1:]])
    assert codes(odd, "responses") == ["unknown-event"]


M_START = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "c", "usage": {"input_tokens": 3, "output_tokens": 1}}}  # fmt: skip
GOOD_M = [
    M_START,
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a":1}'}},
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
]  # fmt: skip


def messages_body(events: list[dict[str, Any]]) -> bytes:
    return b"".join(ev(e) for e in events)


def test_compliant_messages_stream() -> None:
    assert codes(messages_body(GOOD_M), "messages") == []


ZERO = {**M_START, "message": {**M_START["message"], "usage": {"input_tokens": 0, "output_tokens": 0}}}


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (GOOD_M[1:], ["missing-message-start"]),
        ([{**M_START, "message": {"id": "m"}}, *GOOD_M[1:]], ["message-start-usage"]),
        ([ZERO, *GOOD_M[1:]], ["zero-usage"]),
        (
            [ZERO, *GOOD_M[1:9], {**GOOD_M[9], "usage": {"input_tokens": 3, "output_tokens": 9}}, GOOD_M[10]],
            [],
        ),
        ([GOOD_M[0], {**GOOD_M[1], "index": 1}, *GOOD_M[2:]], ["block-index-order", "block-not-started", "block-index-order"]),
        ([GOOD_M[0], GOOD_M[3], *GOOD_M[1:]], ["block-not-started"]),
        ([*GOOD_M[:5], GOOD_M[3], *GOOD_M[5:]], ["delta-after-block-stop"]),
        ([*GOOD_M[:7], {**GOOD_M[7], "delta": {"type": "text_delta", "text": '{"a":1}'}}, *GOOD_M[8:]], ["delta-type-mismatch", "tool-input-empty"]),
        ([*GOOD_M[:5], {**GOOD_M[5], "content_block": {**GOOD_M[5]["content_block"], "input": {}}}, GOOD_M[6], *GOOD_M[8:]], ["tool-input-empty"]),
        ([*GOOD_M[:5], {**GOOD_M[5], "content_block": {"type": "tool_use", "id": "t", "name": "", "input": {}}}, *GOOD_M[6:]], ["tool-use-incomplete"]),
        ([*GOOD_M[:7], {**GOOD_M[7], "delta": {"type": "input_json_delta", "partial_json": '{"a":'}}, *GOOD_M[8:]], ["tool-input-invalid"]),
        ([*GOOD_M[:8], *GOOD_M[9:]], ["missing-content-block-stop"]),
        ([*GOOD_M[:9], GOOD_M[10]], ["missing-stop-reason"]),
        (GOOD_M[:10], ["missing-message-stop"]),
        ([*GOOD_M, GOOD_M[2]], ["after-message-stop"]),
        ([*GOOD_M[:4], {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}], ["error-object"]),
        ([GOOD_M[0], {**GOOD_M[1], "index": None}, *GOOD_M[2:]], ["malformed-chunk", "block-not-started", "block-index-order"]),
    ],
)  # fmt: skip
def test_messages_rules(events: list[dict[str, Any]], expected: list[str]) -> None:
    assert codes(messages_body(events), "messages") == expected
    assert set(expected) <= set(API_CODES["messages"])


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_any_chunking_gives_the_same_findings(api: str) -> None:
    body = responses_body(GOOD_R[1:6]) if api == "responses" else messages_body([GOOD_M[1], *GOOD_M[3:]])
    body = body.replace(b"\n", b"\r\n")
    whole = check_stream(body, api=api)
    assert [f.code for f in whole][:1] == ["crlf-line-endings"]  # the chat framing rules apply too
    for size in (1, 2, 5, 17):
        c = checker(api)
        found = []
        for i in range(0, len(body), size):
            found += c.feed(body[i : i + size])
        found += c.close()
        assert found == whole


def test_checker_factory() -> None:
    assert isinstance(checker("responses"), ResponsesChecker)
    assert isinstance(checker("messages"), MessagesChecker)
    with pytest.raises(ValueError, match="unknown api"):
        checker("gemini")
    with pytest.raises(ValueError, match="expect_usage"):
        checker("messages", expect_usage=True)
    with pytest.raises(ValueError, match="unknown api"):
        check_stream(b"", api="x")


def test_cli_api(tmp_path: Path) -> None:
    good = tmp_path / "good.sse"
    good.write_bytes(messages_body(GOOD_M))
    bad = tmp_path / "bad.sse"
    bad.write_bytes(responses_body(GOOD_R[:7]))
    env = {"PYTHONPATH": SRC}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fastsse", "check", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )

    ok = run("--api", "messages", str(good))
    assert ok.returncode == 0 and "compliant" in ok.stdout
    found = run("--api", "responses", "--json", str(bad))
    assert found.returncode == 1
    assert [f["code"] for f in orjson.loads(found.stdout)["findings"]] == ["missing-terminal"]
    assert run("--api", "messages", "--expect-usage", str(good)).returncode == 2


@pytest.mark.parametrize(("api", "model", "codes"), [("messages", "tools", []), ("responses", "reasoning", []), ("messages", "no-block-stop", ["missing-content-block-stop"] * 2), ("responses", "orphan-delta", ["missing-output-item-added"])])  # fmt: skip
def test_cli_url(server: Any, api: str, model: str, codes: list[str]) -> None:
    args = [
        "--api",
        api,
        "--url",
        server.base_url,
        "--model",
        model,
        "--json",
        "--api-key",
        "k",
        "--timeout",
        "20",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "fastsse", "check", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC},
        timeout=60,
    )
    assert done.returncode == (1 if codes else 0), done.stderr
    assert [f["code"] for f in orjson.loads(done.stdout)["findings"]] == codes


def test_cli_url_sends_the_api_headers() -> None:
    from fastsse.testing.server import serve_in_thread

    with serve_in_thread(api_key="secret") as srv:
        base = [sys.executable, "-m", "fastsse", "check", "--url", srv.base_url, "--model", "plain"]
        env = {"PYTHONPATH": SRC}
        for api in ("messages", "responses"):
            ok = subprocess.run(
                [*base, "--api", api, "--api-key", "secret"],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert ok.returncode == 0 and "compliant" in ok.stdout, ok.stderr
            refused = subprocess.run(
                [*base, "--api", api, "--api-key", "wrong"],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert refused.returncode == 2
            # the line names the URL the request went to, not the chat path (issue 25, point 11)
            assert refused.stderr.startswith(f"fastsse check: {srv.base_url}/{api}: HTTP 401: "), (
                refused.stderr
            )


def test_every_code_has_a_doc_row() -> None:
    import re

    doc = (Path(__file__).resolve().parents[1] / "docs" / "conformance.md").read_text(encoding="utf-8")
    section = doc.split("\n## Responses and Messages streams")[1]
    parts = {
        "responses": section.split("\n### Responses")[1].split("\n### Messages")[0],
        "messages": section.split("\n### Messages")[1],
    }
    common = section.split("\n### Both grammars")[1].split("\n### Responses")[0]
    for api, text in parts.items():
        rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| (error|warning) \|", common + text, re.M))
        assert rows == {code: info.severity for code, info in API_CODES[api].items()}, api


# issue 25, point 9: every event type the SDKs define is a known event; unknown-event stays for the rest


def _sdk_types(union: Any) -> set[str]:
    import typing

    members = typing.get_args(union)
    if members and typing.get_origin(members[0]) is typing.Union:  # Annotated[Union[...], discriminator]
        members = typing.get_args(members[0])
    found = set()
    for member in members:
        (name,) = typing.get_args(member.model_fields["type"].annotation)
        found.add(name)
    return found


def test_responses_knows_every_event_of_the_openai_sdk() -> None:
    from openai.types.responses import ResponseStreamEvent

    sdk = _sdk_types(ResponseStreamEvent)
    assert len(sdk) > 40 and "response.web_search_call.searching" in sdk  # the union was read, not skipped
    assert sdk - ResponsesChecker.types == set()


def test_messages_knows_every_event_of_the_anthropic_sdk() -> None:
    from anthropic.types import RawMessageStreamEvent
    from anthropic.types.beta import BetaRawMessageStreamEvent

    sdk = _sdk_types(RawMessageStreamEvent) | _sdk_types(BetaRawMessageStreamEvent)
    assert "content_block_delta" in sdk
    # ping and error are documented in the streaming reference; the SDK handles them before its union
    assert sdk | {"ping", "error"} <= MessagesChecker.types


WEB_SEARCH = {"id": "ws0", "type": "web_search_call", "status": "in_progress"}
SEARCHING = [
    {"type": "response.created", "response": R},
    {"type": "response.output_item.added", "output_index": 0, "item": WEB_SEARCH},
    {"type": "response.web_search_call.in_progress", "output_index": 0, "item_id": "ws0"},
    {"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws0"},
    {"type": "response.web_search_call.completed", "output_index": 0, "item_id": "ws0"},
    {"type": "response.output_item.done", "output_index": 0, "item": {**WEB_SEARCH, "status": "completed"}},
    {"type": "response.mcp_call_arguments.delta", "output_index": 0, "item_id": "ws0", "delta": "{}"},
]


def test_documented_tool_events_are_not_unknown() -> None:
    # the web_search_call events of a real OpenAI stream: none is unknown; the late mcp event is
    # known too, and what the grammar says of it (after its item's done) still holds
    assert codes(responses_body([*SEARCHING[:6], GOOD_R[7]]), "responses") == []
    assert codes(responses_body([*SEARCHING, GOOD_R[7]]), "responses") == ["delta-after-done"]


@pytest.mark.parametrize("kind", ["response.made_up.delta", "response.output_text.deltas", "message_start"])
def test_undefined_types_stay_unknown(kind: str) -> None:
    body = responses_body([*GOOD_R[:7], {"type": kind, "output_index": 0}, GOOD_R[7]])
    assert codes(body, "responses") == ["unknown-event"]


def test_messages_undefined_type_stays_unknown() -> None:
    body = messages_body([*GOOD_M[:2], {"type": "response.created"}, *GOOD_M[2:]])
    assert codes(body, "messages") == ["unknown-event"]


# issue 25, point 10: a trailing data: [DONE] is a warning of its own, not invalid JSON


@pytest.mark.parametrize("done", [b"data: [DONE]\n\n", b"event: done\ndata: [DONE]\n\n"])
def test_responses_trailing_done_is_a_warning(done: bytes) -> None:
    found = check_stream(responses_body(GOOD_R) + done, api="responses")
    assert [(f.code, f.severity) for f in found] == [("done-sentinel", "warning")]
    assert found[0].offset == len(responses_body(GOOD_R))


def test_messages_trailing_done_is_a_warning() -> None:
    found = check_stream(messages_body(GOOD_M) + b"data: [DONE]\n\n", api="messages")
    assert [(f.code, f.severity) for f in found] == [("done-sentinel", "warning")]


def test_done_that_is_not_alone_is_still_invalid_json() -> None:
    body = responses_body(GOOD_R) + b"data: [DONE] now\n\n"
    assert codes(body, "responses") == ["invalid-json"]


def test_recorded_streams_have_no_unknown_event() -> None:
    # real OpenAI streams with web_search, file_search and code_interpreter calls, Anthropic streams
    # with server tools: every event they carry is in the API reference. OpenRouter ends its
    # Responses streams with data: [DONE] (r18).
    from _formats_helpers import recorded_dir

    folder = recorded_dir()
    seen = 0
    for api in ("responses", "messages"):
        for path in sorted((folder / api).glob("*.sse")):
            found = {f.code for f in check_stream(path.read_bytes(), api=api)}
            assert not found & {"unknown-event", "invalid-json"}, path.name
            assert ("done-sentinel" in found) == (path.stem == "r18-openrouter-data-only-reasoning-text")
            seen += 1
    assert seen >= 40


@pytest.mark.parametrize(
    ("api", "stream"),
    [("chat", "a chat stream"), ("responses", "a Responses stream"), ("messages", "a Messages stream")],
)
def test_a_stray_field_is_named_in_the_streams_own_api(api: str, stream: str) -> None:
    # The framing rules are shared, but a finding speaks of the stream it was found in: a
    # Responses stream's id: line was reported as a field "in a chat stream".
    lint = checker(api)
    lint.feed(b'id: 7\ndata: {"x":1}\n\n')
    lint.close()
    [message] = [f.message for f in lint.findings if f.code == "non-data-field"]
    assert message.startswith(f"a 'id' field in {stream} (")

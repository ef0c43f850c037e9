"""The 48 recorded Responses and Messages streams (../shared/recorded/formats) translated to chat
and back, on both backends: the chat stream is lint-clean when the recording was whole, carries
what the upstream fold holds (text, reasoning, tool calls, usage), ends with [DONE] only when the
recording did, and any chunking gives the same bytes."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

import fastsse._backend
import fastsse.translate
from _formats_helpers import recorded_dir, shared_dir
from fastsse import check_stream, get_backend
from fastsse.translate import translator


def _streams() -> list[dict[str, Any]]:
    found = shared_dir()
    if found is None:
        return []
    with open(found / "recorded" / "formats" / "manifest.json", encoding="utf-8") as f:
        streams: list[dict[str, Any]] = json.load(f)["streams"]
    return streams


STREAMS = _streams()
_SKIP = "the recorded corpus (../shared/recorded/formats, or FASTSSE_SHARED) is not beside this checkout"
CASES = [pytest.param(s, id=s["id"]) for s in STREAMS] or [
    pytest.param({}, marks=pytest.mark.skip(reason=_SKIP))
]


@pytest.fixture
def tb(backend: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.setattr(fastsse._backend, "current", backend)
    return backend


def run(t: Any, body: bytes, size: int = 0) -> bytes:
    if size <= 0:
        return t.write(body) + t.close()
    return b"".join(t.write(body[i : i + size]) for i in range(0, len(body), size)) + t.close()


def chat_fold(body: bytes) -> dict[str, Any]:
    agg = get_backend("python").ChatAggregator()
    decoder = get_backend("python").Decoder()
    for e in decoder.feed(body) + decoder.close():
        agg.feed_event(e)
    return agg.result()


def expected_from_messages(fold: dict[str, Any]) -> dict[str, Any]:
    text = "".join(b.get("text", "") for b in fold["content"] if b.get("type") == "text")
    thinking = "".join(b.get("thinking", "") for b in fold["content"] if b.get("type") == "thinking")
    calls = [
        (b.get("id"), b.get("name"), b.get("input"))
        for b in fold["content"]
        if b.get("type") in ("tool_use", "server_tool_use") and b.get("name")
    ]
    return {"content": text or None, "reasoning": thinking or None, "calls": calls}


def expected_from_responses(fold: dict[str, Any]) -> dict[str, Any]:
    text, refusal, reasoning, calls = [], [], [], []
    for item in fold.get("output") or []:
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    text.append(part.get("text", ""))
                elif part.get("type") == "refusal":
                    refusal.append(part.get("refusal", ""))
        elif item.get("type") == "reasoning":
            reasoning += [s.get("text", "") for s in item.get("summary") or []]
            reasoning += [c.get("text", "") for c in item.get("content") or []]
        elif item.get("type") == "function_call" and item.get("name"):
            calls.append((item.get("call_id"), item.get("name"), item.get("arguments")))
    return {
        "content": "".join(text) or None,
        "refusal": "".join(refusal) or None,
        "reasoning": "".join(reasoning) or None,
        "calls": calls,
    }


@pytest.mark.parametrize("meta", CASES)
def test_recorded_to_chat(tb: SimpleNamespace, meta: dict[str, Any]) -> None:
    body = (recorded_dir() / meta["file"]).read_bytes()
    api = "responses" if meta["file"].startswith("responses/") else "messages"
    t = translator(api, "chat", created=0)
    out = run(t, body)
    for size in (1, 7, 64):
        assert run(translator(api, "chat", created=0), body, size) == out
    upstream = t.result()
    verdict = upstream.pop("verdict")
    findings = {f.code for f in check_stream(out)}
    # a response.incomplete is complete (a limit ended it): chat says finish_reason "length"
    if verdict["complete"]:
        assert out.endswith(b"data: [DONE]\n\n")
        assert findings == set(), findings
    elif verdict["error"]:
        assert b"data: [DONE]" not in out
        assert "error-object" in findings
    else:
        assert b"data: [DONE]" not in out
        assert "missing-done" in findings
    message = chat_fold(out)["choices"][0]["message"] if out else {}
    got_calls = [
        (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []
    ]
    if api == "messages":
        want = expected_from_messages(upstream)
        # text and thinking are carried exactly; tool input is carried as its JSON pieces
        assert (message.get("content"), message.get("reasoning_content")) == (
            want["content"],
            want["reasoning"],
        )
        # a thinking block's signature and a redacted block reach chat as reasoning_details
        signed = [
            (b.get("thinking", ""), b["signature"])
            for b in upstream["content"]
            if b.get("type") == "thinking" and b.get("signature")
        ]
        redacted = [b["data"] for b in upstream["content"] if b.get("type") == "redacted_thinking"]
        details = message.get("reasoning_details") or []
        assert [(d["text"], d["signature"]) for d in details if d["type"] == "reasoning.text"] == signed
        assert [d["data"] for d in details if d["type"] == "reasoning.encrypted"] == redacted
        if verdict["complete"]:
            assert [(i, n, json.loads(a) if a else {}) for i, n, a in got_calls] == want["calls"]
            urls = [
                c.get("url")
                for b in upstream["content"]
                if b.get("type") == "text"
                for c in b.get("citations") or []
                if c.get("type") == "web_search_result_location"
            ]
            notes = message.get("annotations") or []
            assert [a["url_citation"]["url"] for a in notes] == urls
            content = message.get("content") or ""
            for a in notes:  # each span is the cited block's text within the content
                span = a["url_citation"]
                assert 0 <= span["start_index"] < span["end_index"] <= len(content)
    else:
        want = expected_from_responses(upstream)
        assert (message.get("content"), message.get("refusal"), message.get("reasoning_content")) == (
            want["content"],
            want["refusal"],
            want["reasoning"],
        )
        if verdict["complete"]:
            assert got_calls == want["calls"]
            urls = [
                a.get("url")
                for item in upstream.get("output") or []
                for part in item.get("content") or []
                for a in part.get("annotations") or []
                if a.get("type") == "url_citation"
            ]
            assert [a["url_citation"]["url"] for a in message.get("annotations") or []] == urls


@pytest.mark.parametrize("meta", CASES)
def test_recorded_round_trip_is_lint_clean(tb: SimpleNamespace, meta: dict[str, Any]) -> None:
    body = (recorded_dir() / meta["file"]).read_bytes()
    api = "responses" if meta["file"].startswith("responses/") else "messages"
    t = translator(api, "chat", created=0)
    chat = run(t, body)
    verdict = t.result()["verdict"]
    allowed = set()
    if not verdict["usage"]:
        allowed |= {"zero-usage", "missing-usage"}  # the recording has no usage (a docs excerpt)
    if verdict["terminal"] == "response.incomplete":
        allowed.add("tool-input-invalid")  # max_output_tokens cut the arguments: they are not JSON
    back = run(translator("chat", api), chat, 13)
    other = "messages" if api == "responses" else "responses"
    across = run(translator(api, other), body, 29)
    if t.complete:  # type: ignore[attr-defined]
        assert {f.code for f in check_stream(back, api=api)} <= allowed
        assert {f.code for f in check_stream(across, api=other)} <= allowed
    else:  # a truncated or failed recording stays so, in every format
        codes = {f.code for f in check_stream(back, api=api)} | {
            f.code for f in check_stream(across, api=other)
        }
        if t.error is None:  # type: ignore[attr-defined]
            assert {"missing-terminal", "missing-message-stop"} <= codes
        else:
            assert "error-object" in codes

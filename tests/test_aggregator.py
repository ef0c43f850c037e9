"""ChatAggregator on both backends: the hand-written vectors in every feeding form, then the API
edges (input types, hostile payloads, error events, partial results, state isolation)."""

from __future__ import annotations

import contextlib
import copy
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from _chat_helpers import CHAT_VECTORS, bare, load_chat_vector, payload_text, verdict_subset
from fastsse import SSEError


def _feed(agg: Any, backend: SimpleNamespace, vector: dict[str, Any], form: str) -> None:
    for item, text in zip(vector["payloads"], vector["texts"], strict=True):
        if form == "str":
            agg.feed_data(text)
        elif form == "bytes":
            agg.feed_data(text.encode())
        elif form == "event":
            agg.feed_event(backend.Event(text))
        elif form == "dict" and isinstance(item, dict):
            agg.feed(item)
        else:
            agg.feed_data(text)


@pytest.mark.parametrize("form", ["str", "bytes", "event", "dict"])
@pytest.mark.parametrize("path", CHAT_VECTORS, ids=lambda p: p.stem)
def test_vector(backend: SimpleNamespace, path: Path, form: str) -> None:
    vector = load_chat_vector(path)
    agg = backend.ChatAggregator()
    _feed(agg, backend, vector, form)
    assert bare(agg.result()) == vector["result"]
    assert verdict_subset(agg.verdict, vector["verdict"]) == vector["verdict"]
    assert agg.error == vector["result"].get("error")
    assert agg.done == agg.verdict.done
    if "complete" in vector["verdict"]:
        # The end of the byte stream completes a stream without [DONE] whose choices all finished;
        # a cut one never is, unless [DONE] had already ended the answer (Verdict, rule 4).
        agg.close()
        closed = vector.get("complete_once_closed", vector["verdict"]["complete"])
        assert agg.verdict.complete is closed
        agg.close(truncated=True)
        assert agg.verdict.complete is (closed and agg.done)
        assert agg.verdict.truncated is True


@pytest.mark.parametrize("path", CHAT_VECTORS, ids=lambda p: p.stem)
def test_vector_partial_results_do_not_disturb(backend: SimpleNamespace, path: Path) -> None:
    """result() after every payload, and mutating what it returns, changes nothing later."""
    vector = load_chat_vector(path)
    agg = backend.ChatAggregator()
    for text in vector["texts"]:
        agg.feed_data(text)
        partial = agg.result()
        _vandalise(partial)
    assert bare(agg.result()) == vector["result"]
    assert bare(agg.result()) == vector["result"]


def _vandalise(result: dict[str, Any]) -> None:
    """Mutate every container result() builds (values carried whole from chunks are shared)."""
    result["vandal"] = True
    for choice in result["choices"]:
        choice["vandal"] = True
        message = choice.get("message", {})
        message["vandal"] = True
        for call in message.get("tool_calls", []):
            call["vandal"] = True
            call["function"]["vandal"] = True
        message.get("tool_calls", []).append("vandal")
        message.get("function_call", {})["vandal"] = True
        message.get("audio", {})["vandal"] = True
        logprobs = choice["logprobs"] or {}
        for value in logprobs.values():
            if isinstance(value, list):
                value.append("vandal")
        logprobs["vandal"] = True
    result["choices"].append("vandal")


def test_chunks_fed_are_not_mutated(backend: SimpleNamespace) -> None:
    """The fold keeps its own lists: the caller's chunks (which on_chunk may keep) stay as sent."""
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "a"}, "logprobs": {"content": [{"t": 1}]}}]},
        {"choices": [{"index": 0, "delta": {"content": "b"}, "logprobs": {"content": [{"t": 2}]}}]},
        {"choices": [{"index": 0, "delta": {"audio": {"data": "x"}}}]},
        {"choices": [{"index": 0, "delta": {"audio": {"data": "y"}}}]},
    ]
    before = copy.deepcopy(chunks)
    agg = backend.ChatAggregator()
    for chunk in chunks:
        agg.feed(chunk)
    result = agg.result()
    assert result["choices"][0]["logprobs"] == {"content": [{"t": 1}, {"t": 2}]}
    assert result["choices"][0]["message"]["audio"] == {"data": "xy"}
    assert chunks == before


def test_result_key_order(backend: SimpleNamespace) -> None:
    agg = backend.ChatAggregator()
    agg.feed(
        {"zeta": 1, "usage": {"t": 1}, "model": "m", "alpha": 2, "choices": [{"index": 0, "delta": {"x": 1}}]}
    )
    agg.feed({"error": {"message": "boom"}})
    result = agg.result()
    assert list(result) == [
        "id",
        "object",
        "created",
        "model",
        "choices",
        "usage",
        "system_fingerprint",
        "service_tier",
        "zeta",
        "alpha",
        "error",
        "verdict",
    ]
    assert list(result["choices"][0]) == ["index", "message", "finish_reason", "logprobs"]
    assert list(result["choices"][0]["message"]) == ["role", "content", "refusal", "x"]


def test_unknown_delta_field_last_non_null_wins(backend: SimpleNamespace) -> None:
    agg = backend.ChatAggregator()
    for value in ("a", None, "b", None):
        agg.feed({"choices": [{"index": 0, "delta": {"provider_field": value}, "stop_reason": value}]})
    choice = agg.result()["choices"][0]
    assert choice["message"]["provider_field"] == "b"
    assert choice["stop_reason"] == "b"


def test_extras_never_shadow_the_standard_keys(backend: SimpleNamespace) -> None:
    """A choice field named like a result key (a server putting ``message`` and ``delta`` in
    one choice) cannot replace the folded value."""
    agg = backend.ChatAggregator()
    agg.feed({"choices": [{"index": 0, "delta": {"content": "a"}, "message": {"content": "b"}}]})
    assert agg.result()["choices"][0]["message"]["content"] == "ab"


# feed_data: input types and return values


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, str])
def test_feed_data_input_types(backend: SimpleNamespace, kind: type) -> None:
    agg = backend.ChatAggregator()
    text = '{"choices":[{"index":0,"delta":{"content":"é"}}]}'
    payload = text if kind is str else kind(text.encode())
    assert agg.feed_data(payload) is True
    assert agg.feed_data(b"[DONE]" if kind is not str else "[DONE]") is False
    assert agg.done
    assert agg.result()["choices"][0]["message"]["content"] == "é"


@pytest.mark.parametrize("payload", [None, 5, 1.5, ["x"], {"a": 1}])
def test_feed_data_rejects_other_types(backend: SimpleNamespace, payload: object) -> None:
    agg = backend.ChatAggregator()
    with pytest.raises(TypeError, match="feed_data"):
        agg.feed_data(payload)
    assert agg.skipped == 0
    assert agg.feed_data(b"{}") is True


def test_feed_data_says_whether_it_folded_a_chunk(backend: SimpleNamespace) -> None:
    agg = backend.ChatAggregator()
    assert agg.feed_data(b'{"id":"a"}') is True
    assert agg.feed_data(b"nope") is False
    assert agg.feed_data(b"[1]") is False
    assert agg.skipped == 2
    assert agg.feed_data(b'{"error":{"message":"x"}}') is True
    assert agg.error == {"message": "x"}
    assert agg.feed_data(b'{"id":"b"}') is False
    assert agg.ignored == 1
    assert agg.result()["id"] == "a"


def test_feed_non_dict_is_skipped(backend: SimpleNamespace) -> None:
    agg = backend.ChatAggregator()
    for chunk in (None, [], "x", 3, ({"choices": []},)):
        agg.feed(chunk)
    assert agg.skipped == 5
    assert agg.result()["choices"] == []


@pytest.mark.parametrize(
    "payload",
    [
        b"[" * 100_000,
        b'{"a":' * 100_000,
        b"[" * 2000 + b"]" * 2000,
        b'{"choices":' + b"[" * 5000 + b"]" * 5000 + b"}",
        b"\xff\xfe{}",
        b'"\\ud800"',
        b"\x00",
        b"{" + b" " * 100_000,
        "\ud800",
        '{"id": "\udfff"}',
    ],
    ids=lambda p: repr(p[:12]),
)
def test_hostile_payloads_are_skipped(backend: SimpleNamespace, payload: bytes | str) -> None:
    agg = backend.ChatAggregator()
    assert agg.feed_data(payload) is False
    assert agg.skipped == 1
    agg.feed_data(b'{"choices":[{"index":0,"delta":{"content":"still fine"},"finish_reason":"stop"}]}')
    agg.feed_data(b"[DONE]")
    assert agg.verdict.complete


def _content_of(*texts: str) -> bytes:
    return b"".join(b'{"choices":[{"index":0,"delta":{"content":"%s"}}]}\n' % t.encode() for t in texts)


@pytest.mark.parametrize(
    ("fragments", "content"),
    [
        # an emoji cut in UTF-16 units across two chunks, as a server slicing JS strings sends it
        ((r"a\ud83d", r"\ude00b"), "a\ufffd\ufffdb"),
        ((r"\ud83d\ude00\ud83d",), "\U0001f600\ufffd"),  # a pair, then a lone high half
        ((r"\ud83d\u0041",), "\ufffdA"),  # a high half before another escape
        ((r"\ud83d\ud83d\ude00",), "\ufffd\U0001f600"),  # two high halves, the second paired
        ((r"\ude00\ud83d",), "\ufffd\ufffd"),  # a low half before a high half is no pair
        ((r"\\ud83d\ud83d",), "\\ud83d\ufffd"),  # an escaped backslash, then text, then a lone half
        ((r"\u00e9\udbff\udfff\udc00",), "\u00e9\U0010ffff\ufffd"),  # a pair kept, the low half after it lone
    ],
)
def test_lone_surrogate_escapes_become_replacement_characters(
    backend: SimpleNamespace, fragments: tuple[str, ...], content: str
) -> None:
    """orjson refuses a lone surrogate escape; like invalid UTF-8, it costs a U+FFFD, not the chunk."""
    for form in (bytes, str):
        agg = backend.ChatAggregator()
        agg.feed_data(b'{"choices":[{"index":0,"delta":{"role":"assistant"}}]}')
        for line in _content_of(*fragments).splitlines():
            assert agg.feed_data(line if form is bytes else line.decode()) is True
        assert agg.skipped == 0
        assert agg.result()["choices"][0]["message"]["content"] == content


def test_invalid_utf8_in_bytes_becomes_replacement_characters(backend: SimpleNamespace) -> None:
    """As the decoder does (spec: invalid UTF-8 decodes to U+FFFD): a CESU-8 surrogate and a
    character a server split across two events each cost U+FFFDs, not the whole chunk."""
    agg = backend.ChatAggregator()
    assert agg.feed_data(b'{"id":"\xed\xa0\x80"}') is True
    assert agg.result()["id"] == "\ufffd\ufffd\ufffd"
    agg.feed_data(b'{"choices":[{"index":0,"delta":{"content":"caf\xc3"},"finish_reason":null}]}')
    agg.feed_data(b'{"choices":[{"index":0,"delta":{"content":"\xa9!"},"finish_reason":"stop"}]}')
    assert agg.result()["choices"][0]["message"]["content"] == "caf\ufffd\ufffd!"
    assert agg.result()["choices"][0]["finish_reason"] == "stop"
    assert agg.skipped == 0


def test_deeply_nested_valid_values_fold(backend: SimpleNamespace) -> None:
    """Nesting that orjson accepts passes through untouched (the fold never recurses)."""
    deep = b'{"usage":' + b'{"a":' * 200 + b"1" + b"}" * 200 + b"}"
    agg = backend.ChatAggregator()
    agg.feed_data(deep)
    assert agg.result()["usage"] == orjson.loads(deep)["usage"]


def test_large_fragments_and_many_fragments(backend: SimpleNamespace) -> None:
    agg = backend.ChatAggregator()
    big = "x" * (4 << 20)
    agg.feed(
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": big}}]}}]}
    )
    for _ in range(50_000):
        agg.feed(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": "y", "tool_calls": [{"index": 0, "function": {"name": "n"}}]},
                    }
                ]
            }
        )
    msg = agg.result()["choices"][0]["message"]
    assert msg["content"] == "y" * 50_000
    # a name resent whole is not doubled, so 50,000 "n" fragments stay "n"
    assert msg["tool_calls"][0]["function"] == {"name": "n", "arguments": big}


def test_huge_index_values(backend: SimpleNamespace) -> None:
    agg = backend.ChatAggregator()
    agg.feed({"choices": [{"index": 10**30, "delta": {"content": "a"}}]})
    agg.feed(
        {
            "choices": [
                {
                    "index": -1,
                    "delta": {"tool_calls": [{"index": 2**70, "id": "x", "function": {"name": "f"}}]},
                }
            ]
        }
    )
    agg.feed({"choices": [{"index": -1, "delta": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]})
    agg.feed({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 2**70, "id": "y"}]}}]})
    # indexes run from 0 to 127: each entry outside is dropped whole and counted, none raises
    assert agg.result()["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": None, "refusal": None},
            "finish_reason": None,
            "logprobs": None,
        }
    ]
    assert agg.malformed == 4


def test_nothing_raises_but_sse_error(backend: SimpleNamespace) -> None:
    """A few shapes that crash other folds (peers.md 1b) go through without an exception."""
    shapes: list[Any] = [
        {"choices": [{"index": 0, "delta": {"annotations": [{"type": "url"}]}}]},
        {"choices": [{"index": 0, "delta": {"annotations": [{"type": "url"}]}}]},
        {"choices": [{"index": 1, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"arguments": 7}}]}}]},
        {"choices": [{"index": 0, "delta": {"foo": 1}}, {"index": 0, "delta": {"foo": 1}}]},
        {1: 2, (1, 2): "tuple key", "choices": [{5: "int key", "delta": {7: 8}}]},
    ]
    agg = backend.ChatAggregator()
    for shape in shapes:
        with contextlib.suppress(SSEError):  # allowed by the contract, not expected
            agg.feed(shape)
    result = agg.result()
    assert result["choices"][0]["message"]["annotations"] == [{"type": "url"}]
    assert result["choices"][0]["message"]["foo"] == 1
    assert result[1] == 2


# feed_event and error events


def test_feed_event_message(backend: SimpleNamespace) -> None:
    agg = backend.ChatAggregator()
    assert agg.feed_event(backend.Event('{"id":"z"}')) is True
    assert agg.feed_event(backend.Event("[DONE]")) is False
    assert agg.done
    assert agg.result()["id"] == "z"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            '{"error":{"message":"overloaded","type":"overloaded_error"}}',
            {"message": "overloaded", "type": "overloaded_error"},
        ),
        ('{"message":"overloaded"}', {"message": "overloaded"}),
        ('"rate limited"', "rate limited"),
        ("upstream went away", "upstream went away"),
        ("null", "null"),
        ("", ""),
        ('{"error":null,"message":"m"}', {"error": None, "message": "m"}),
    ],
)
def test_feed_event_error_type(backend: SimpleNamespace, data: str, error: object) -> None:
    """``event: error`` always ends the stream; its data becomes the error value."""
    agg = backend.ChatAggregator()
    agg.feed_data('{"choices":[{"index":0,"delta":{"content":"a"}}]}')
    assert agg.feed_event(backend.Event(data, "error")) is True
    assert agg.error == error
    assert agg.result()["error"] == error
    assert agg.verdict.error and not agg.verdict.complete
    assert agg.feed_data('{"choices":[{"index":0,"delta":{"content":"b"}}]}') is False
    assert agg.result()["choices"][0]["message"]["content"] == "a"


def test_error_value_forms(backend: SimpleNamespace) -> None:
    for value, is_error in [("text", True), ({}, True), (0, True), (False, True), (None, False)]:
        agg = backend.ChatAggregator()
        agg.feed({"error": value})
        assert (agg.error is not None) is is_error
        assert ("error" in agg.result()) is is_error


def test_verdict_is_shared_type(backend: SimpleNamespace) -> None:
    from fastsse import ChatVerdict, Verdict

    agg = backend.ChatAggregator()
    verdict = agg.verdict
    assert type(verdict) is ChatVerdict and isinstance(verdict, Verdict)
    assert verdict == ChatVerdict(
        complete=False, why="no choice arrived", done=False, finish_reasons=(), usage=False, error=False
    )
    with pytest.raises(AttributeError):
        verdict.done = True  # type: ignore[misc]


def test_counters_after_done(backend: SimpleNamespace) -> None:
    agg = backend.ChatAggregator()
    agg.feed_data("[DONE]")
    agg.feed_data("[DONE]")
    agg.feed({"id": "x"})
    agg.feed_event(backend.Event("x", "error"))
    assert (agg.skipped, agg.ignored, agg.malformed) == (0, 3, 0)
    assert agg.error is None


# The two backends are one API


@pytest.mark.c_extension
def test_docstrings_match() -> None:
    import fastsse

    c_cls = fastsse.get_backend("cython").ChatAggregator
    py_cls = fastsse.get_backend("python").ChatAggregator
    assert inspect.getdoc(c_cls) == inspect.getdoc(py_cls)
    for name in (
        "feed",
        "feed_data",
        "feed_event",
        "result",
        "done",
        "error",
        "verdict",
        "skipped",
        "ignored",
        "malformed",
    ):
        assert inspect.getdoc(getattr(c_cls, name)) == inspect.getdoc(getattr(py_cls, name)), name


@pytest.mark.c_extension
def test_signatures_match() -> None:
    import fastsse

    c_cls = fastsse.get_backend("cython").ChatAggregator
    py_cls = fastsse.get_backend("python").ChatAggregator

    def bare(cls: object) -> list[tuple[str, object, object]]:  # the compiled one has no annotations
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]  # type: ignore[arg-type]

    assert bare(c_cls) == bare(py_cls) == [("keep_text", inspect.Parameter.KEYWORD_ONLY, True)]
    for name in ("feed", "feed_data", "feed_event", "result"):
        assert inspect.signature(getattr(c_cls, name)) == inspect.signature(getattr(py_cls, name)), name


def test_payload_text_helper() -> None:
    assert payload_text({"a": "é"}) == '{"a":"é"}'
    assert payload_text("[DONE]") == "[DONE]"
    assert [load_chat_vector(p)["description"] for p in CHAT_VECTORS]


@pytest.mark.parametrize(
    "fragments",
    [
        ["a", "é", "b"],
        ["a", "Ā", "é", "🌊", "z"],
        ["🌊", "a", "é", "Ā"],
        ["é" * 100, "Ā" * 100, "x" * 100, "🌊" * 100],
        ["", "", "a", ""],
        ["\ud83c", "\udf0a", "x"],
        ["\x00", "\uffff", "\U0010ffff"],
    ],
)
def test_text_fields_across_string_kinds(backend: SimpleNamespace, fragments: list[str]) -> None:
    """Fragments of 1-, 2- and 4-byte string kinds, in any order, join exactly."""
    agg = backend.ChatAggregator()
    for i, fragment in enumerate(fragments):
        agg.feed(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "content": fragment,
                            "tool_calls": [{"index": 0, "function": {"arguments": fragment}}],
                        },
                    }
                ]
            }
        )
        assert agg.result()["choices"][0]["message"]["content"] == "".join(fragments[: i + 1])
    message = agg.result()["choices"][0]["message"]
    assert message["content"] == "".join(fragments)
    assert message["tool_calls"][0]["function"]["arguments"] == "".join(fragments)


def test_provider_lists_nested_past_every_limit_never_raise(backend: SimpleNamespace) -> None:
    """annotations and reasoning_details entries nested 1000 deep (orjson reads them, cannot
    write them back, and Python's == recurses past its limit) are kept, not compared to death."""
    deep = "[" * 1000 + "]" * 1000
    annotations = '{"choices":[{"index":0,"delta":{"annotations":[' + deep + "]}}]}"
    details = '{"choices":[{"index":0,"delta":{"reasoning_details":[{"index":0,"x":' + deep + "}]}}]}"
    agg = backend.ChatAggregator()
    for payload in (annotations, annotations, details, details):
        assert agg.feed_data(payload) is True
    message = agg.result()["choices"][0]["message"]
    assert len(message["annotations"]) == 2
    assert len(message["reasoning_details"]) == 1

"""Properties of the chat fold: well-formed streams equal a naive fold written here, both backends
agree on anything at all (results and counters), and nothing a server sends raises."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsse
from _chat_helpers import bare

BACKENDS = [pytest.param("cython", marks=pytest.mark.c_extension), "python"]

# Well-formed streams: what a compliant server sends, in any interleaving of choices.

FRAGMENT = st.text(max_size=6)
TEXT_KEYS = ("content", "reasoning_content", "reasoning", "refusal")


@st.composite
def well_formed_stream(draw: st.DrawFn) -> list[dict[str, Any]]:
    indexes = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True))
    scripts: dict[int, list[dict[str, Any]]] = {}
    for ci in indexes:
        deltas: list[dict[str, Any]] = [{"role": "assistant"}] if draw(st.booleans()) else []
        opened: set[int] = set()
        for _ in range(draw(st.integers(0, 8))):
            kind = draw(st.sampled_from((*TEXT_KEYS, "tool")))
            if kind == "tool":
                ti = draw(st.integers(0, 2))
                fn: dict[str, Any] = {"arguments": draw(FRAGMENT)}
                call: dict[str, Any] = {"index": ti, "function": fn}
                if ti not in opened:  # id, type and name come with a call's first fragment only
                    opened.add(ti)
                    call["id"] = f"call_{ci}_{ti}"
                    call["type"] = "function"
                    fn["name"] = draw(st.sampled_from(("f", "get_weather", "ü")))
                deltas.append({"tool_calls": [call]})
            else:
                deltas.append({kind: draw(FRAGMENT)})
        finish = draw(st.sampled_from((None, "stop", "length", "tool_calls")))
        choices = [{"index": ci, "delta": d, "finish_reason": None} for d in deltas]
        if finish is not None:
            choices.append({"index": ci, "delta": {}, "finish_reason": finish})
        scripts[ci] = choices
    chunks: list[dict[str, Any]] = []
    pending = {ci: list(s) for ci, s in scripts.items() if s}
    while pending:
        ci = draw(st.sampled_from(sorted(pending)))
        chunk: dict[str, Any] = {"id": "chatcmpl-h", "object": "chat.completion.chunk", "model": "m"}
        chunk["choices"] = [pending[ci].pop(0)]
        if not pending[ci]:
            del pending[ci]
        chunks.append(chunk)
    if draw(st.booleans()):
        chunks.append({"id": "chatcmpl-h", "choices": [], "usage": {"total_tokens": len(chunks)}})
    return chunks


def naive_fold(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The seed's rules, the slow and obvious way, for well-formed input only."""
    top: dict[str, Any] = {}
    choices: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for key, value in chunk.items():
            if value is not None and key not in ("choices", "object"):
                top[key] = value
        for choice in chunk["choices"]:
            c = choices.setdefault(
                choice["index"],
                {"role": None, "finish_reason": None, "calls": {}, **dict.fromkeys(TEXT_KEYS)},
            )
            delta = choice["delta"]
            for key in TEXT_KEYS:
                if key in delta:
                    c[key] = (c[key] or "") + delta[key]
            if delta.get("role"):
                c["role"] = delta["role"]
            if choice["finish_reason"]:
                c["finish_reason"] = choice["finish_reason"]
            for call in delta.get("tool_calls", []):
                held = c["calls"].setdefault(
                    call["index"], {"id": None, "type": None, "name": "", "arguments": ""}
                )
                held["id"] = call.get("id") or held["id"]
                held["type"] = call.get("type") or held["type"]
                held["name"] += call["function"].get("name", "")
                held["arguments"] += call["function"].get("arguments", "")
    out_choices = []
    for index in sorted(choices):
        c = choices[index]
        message: dict[str, Any] = {
            "role": c["role"] or "assistant",
            "content": c["content"],
            "refusal": c["refusal"],
        }
        for key in ("reasoning_content", "reasoning"):
            if c[key] is not None:
                message[key] = c[key]
        if c["calls"]:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": call["type"] or "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
                for _, call in sorted(c["calls"].items())
            ]
        out_choices.append(
            {"index": index, "message": message, "finish_reason": c["finish_reason"], "logprobs": None}
        )
    return {
        "id": top.get("id"),
        "object": "chat.completion",
        "created": None,
        "model": top.get("model"),
        "choices": out_choices,
        "usage": top.get("usage"),
        "system_fingerprint": None,
        "service_tier": None,
    }


@pytest.mark.parametrize("name", BACKENDS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=well_formed_stream(), as_bytes=st.booleans())
def test_well_formed_equals_naive_fold(name: str, chunks: list[dict[str, Any]], as_bytes: bool) -> None:
    agg = fastsse.get_backend(name).ChatAggregator()
    for chunk in chunks:
        payload = orjson.dumps(chunk)
        agg.feed_data(payload if as_bytes else payload.decode())
    agg.feed_data(b"[DONE]")
    expected = naive_fold(chunks)
    assert bare(agg.result()) == expected
    verdict = agg.verdict
    assert verdict.finish_reasons == tuple(c["finish_reason"] for c in expected["choices"])
    assert verdict.complete == (bool(verdict.finish_reasons) and None not in verdict.finish_reasons)
    assert (verdict.skipped, verdict.ignored, verdict.malformed) == (0, 0, 0)


# Anything at all: JSON-ish trees whose keys are the fold's own, so every branch sees wrong types.

KEYS = st.sampled_from(
    (
        "id", "object", "choices", "index", "delta", "message", "content", "role", "tool_calls",
        "function", "name", "arguments", "type", "finish_reason", "logprobs", "text", "usage",
        "error", "annotations", "audio", "data", "transcript", "refusal", "reasoning",
        "reasoning_content", "function_call", "obfuscation", "other",
    )
)  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(("", "f", "text_completion", "stop", "call_1", "call_2"))
    | st.text(max_size=4)
)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=30,
)
LOOSE_CHUNK = st.dictionaries(KEYS, JSONISH, max_size=5)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the right type, sometimes anything."""
    return st.one_of(strategy, strategy, strategy, JSONISH)


_NAMES = st.sampled_from(("", "f", "g", "fg"))
_IDS = st.sampled_from(("", "a", "b"))
_FUNCTION = st.fixed_dictionaries(
    {}, optional={"name": _maybe(_NAMES), "arguments": _maybe(FRAGMENT), "other": SCALARS}
)
_TOOL_CALL = st.fixed_dictionaries(
    {},
    optional={
        "index": _maybe(st.integers(-1, 3)),
        "id": _maybe(_IDS),
        "type": _maybe(st.sampled_from(("", "function", "custom"))),
        "function": _maybe(_FUNCTION),
        "other": SCALARS,
    },
)
_DETAIL = st.fixed_dictionaries(
    {},
    optional={
        "type": _maybe(st.sampled_from(("reasoning.text", "reasoning.summary", "reasoning.encrypted"))),
        "index": _maybe(st.integers(-1, 2)),
        "text": _maybe(FRAGMENT),
        "summary": _maybe(FRAGMENT),
        "signature": _maybe(st.sampled_from(("", "sig"))),
        "data": SCALARS,
    },
)
_TEXT_PART = st.fixed_dictionaries({"type": st.just("text")}, optional={"text": _maybe(FRAGMENT)})
_PART = _maybe(
    _TEXT_PART
    | st.fixed_dictionaries(
        {"type": st.just("thinking")}, optional={"thinking": _maybe(st.lists(_maybe(_TEXT_PART), max_size=2))}
    )
)
_DELTA = st.fixed_dictionaries(
    {},
    optional={
        "role": _maybe(st.sampled_from(("", "assistant", "tool"))),
        "content": _maybe(FRAGMENT) | st.lists(_PART, max_size=3),
        "reasoning_details": _maybe(st.lists(_maybe(_DETAIL), max_size=3)),
        "reasoning_content": _maybe(FRAGMENT),
        "reasoning": _maybe(FRAGMENT),
        "refusal": _maybe(FRAGMENT),
        "tool_calls": _maybe(st.lists(_maybe(_TOOL_CALL), max_size=3)),
        "function_call": _maybe(_FUNCTION),
        "annotations": _maybe(st.lists(SCALARS, max_size=2)),
        "audio": _maybe(
            st.fixed_dictionaries(
                {}, optional={"id": _IDS, "data": _maybe(FRAGMENT), "transcript": _maybe(FRAGMENT)}
            )
        ),
        "other": SCALARS,
    },
)
_CHOICE = st.fixed_dictionaries(
    {},
    optional={
        "index": _maybe(st.integers(0, 3)),
        "delta": _maybe(_DELTA),
        "message": _maybe(_DELTA),
        "text": _maybe(FRAGMENT),
        "finish_reason": _maybe(st.sampled_from(("", "stop", "length"))),
        "logprobs": _maybe(
            st.dictionaries(st.sampled_from(("content", "refusal", "tokens", "x")), JSONISH, max_size=3)
        ),
        "other": SCALARS,
    },
)
SHAPED_CHUNK = st.fixed_dictionaries(
    {},
    optional={
        "id": _maybe(_IDS),
        "object": _maybe(st.sampled_from(("chat.completion.chunk", "text_completion"))),
        "model": SCALARS,
        "choices": _maybe(st.lists(_maybe(_CHOICE), max_size=3)),
        "usage": SCALARS | st.dictionaries(st.sampled_from(("total_tokens", "x")), SCALARS, max_size=2),
        "obfuscation": SCALARS,
        "x_groq": _maybe(st.fixed_dictionaries({}, optional={"id": _IDS, "usage": _maybe(SCALARS)})),
        "other": SCALARS,
    },
)
CHUNKS = st.lists(SHAPED_CHUNK | LOOSE_CHUNK | st.just({"error": {"message": "e"}}) | JSONISH, max_size=10)


def _observe(agg: Any) -> tuple[Any, ...]:
    return (agg.result(), agg.verdict, agg.error, agg.done)


@pytest.mark.c_extension
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=CHUNKS)
def test_backends_agree_on_anything(chunks: list[Any]) -> None:
    c_agg = fastsse.get_backend("cython").ChatAggregator()
    py_agg = fastsse.get_backend("python").ChatAggregator()
    c_fed = fastsse.get_backend("cython").ChatAggregator()
    py_fed = fastsse.get_backend("python").ChatAggregator()
    for chunk in chunks:
        payload = orjson.dumps(chunk)
        assert c_agg.feed_data(payload) == py_agg.feed_data(payload)
        assert _observe(c_agg) == _observe(py_agg)
        c_fed.feed(chunk)
        py_fed.feed(chunk)
    assert _observe(c_fed) == _observe(py_fed) == _observe(c_agg)


@pytest.mark.parametrize("name", BACKENDS)
@settings(max_examples=300, deadline=None)
@given(payloads=st.lists(st.binary(max_size=40) | st.text(max_size=40), max_size=6))
def test_random_payloads_never_raise(name: str, payloads: list[bytes | str]) -> None:
    agg = fastsse.get_backend(name).ChatAggregator()
    for payload in payloads:
        agg.feed_data(payload)
    agg.result()
    assert agg.skipped + agg.ignored <= len(payloads)

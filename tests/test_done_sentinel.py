"""``[DONE]`` is recognised on the payload's bytes before any JSON parsing (issue 28): orjson is
never asked to parse it (it would raise twice per stream), on both backends and in the relay."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import fastsse
import fastsse.chat._fold_py as fold_py
import fastsse.relay._core as relay_core

CHUNK = b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}'


@pytest.mark.parametrize(
    "done",
    [b"[DONE]", b" [DONE]", b"[DONE] ", b"\t[DONE]\r", b" " * 70 + b"[DONE]"],
    ids=["bare", "space-before", "space-after", "tab-cr", "long-blanks"],
)
def test_done_with_blanks_ends_the_stream(backend: SimpleNamespace, done: bytes) -> None:
    stream = backend.ChatStream()
    data = b"data: " + CHUNK + b"\n\n"
    # a data line keeps the blanks after "data: " but the one space; an event of its own
    stream.write(data + b"data:" + done.replace(b"\r", b"") + b"\n\n" + data)
    stream.close()
    verdict = stream.verdict
    assert verdict.done and verdict.complete
    assert verdict.ignored == 1  # the chunk after [DONE]
    assert verdict.skipped == 0


@pytest.mark.parametrize("payload", [b"[DONE", b"[DONE]]", b"[done]", b"[ DONE]"])
def test_near_misses_are_skipped_not_done(backend: SimpleNamespace, payload: bytes) -> None:
    agg = backend.ChatAggregator()
    agg.feed_data(payload)
    assert not agg.done
    assert agg.skipped == 1


def test_done_as_an_error_event_is_an_error(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    stream.write(b"event: error\ndata: [DONE]\n\n")
    stream.close()
    assert stream.result()["error"] == "[DONE]"
    assert stream.verdict.error and not stream.verdict.done


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[bytes]:
    seen: list[bytes] = []
    real = getattr(module, name)

    def loads(payload: Any) -> Any:
        seen.append(bytes(payload) if not isinstance(payload, str) else payload.encode())
        return real(payload)

    monkeypatch.setattr(module, name, loads)
    return seen


def test_the_pure_fold_never_parses_done(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counting(monkeypatch, fold_py, "_loads")
    agg = fold_py.ChatAggregator()
    agg.feed_data(CHUNK)
    agg.feed_data(b" [DONE] ")
    assert agg.done
    assert seen == [CHUNK]


def test_the_relay_never_parses_done(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    module = relay_core.orjson
    real = module.loads

    class Spy:
        JSONDecodeError = module.JSONDecodeError

        def __getattr__(self, name: str) -> Any:
            return getattr(module, name)

        @staticmethod
        def loads(payload: Any) -> Any:
            seen.append(bytes(payload))
            return real(payload)

    monkeypatch.setattr(relay_core, "orjson", Spy())
    relay = fastsse.get_backend("python").Relay()
    out = relay.write(b"data: " + CHUNK + b"\n\ndata: [DONE]\n\n")
    assert out.endswith(b"data: [DONE]\n\n")
    assert relay.verdict.done
    assert b"[DONE]" not in b"".join(seen)

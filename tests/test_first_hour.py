"""What a new user trips over in the library (issue 16): Event's shape, the async iterators, error
messages that name the call the user made, and one result shape for every fold. Both backends.

Expected messages are written here from the rule "name the call, say what it takes", not printed
by the code under test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

import fastsse
from fastsse import ChatVerdict as Verdict

# with the library's default retries (conftest.default_retries)
pytestmark = pytest.mark.default_retries

SSE = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
# fastsse.Verdict's fields (every API's), then chat's own
VERDICT_KEYS = [
    "complete",
    "why",
    "usage",
    "error",
    "aborted",
    "too_large",
    "truncated",
    "skipped",
    "ignored",
    "malformed",
    "stop_reason",
    "done",
    "finish_reasons",
    "unknown_parts",
]


async def agen(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


# point 2: Event(data, event, id, retry), read by attribute


def test_event_positional_order_is_data_event_id_retry(backend: SimpleNamespace) -> None:
    ev = backend.Event("payload", "add", "7", 3000)
    assert (ev.data, ev.event, ev.id, ev.retry) == ("payload", "add", "7", 3000)
    assert repr(ev) == "Event(data='payload', event='add', id='7', retry=3000)"
    assert backend.Event() == backend.Event("", "message", "", None)


def test_event_is_not_a_tuple(backend: SimpleNamespace) -> None:
    ev = backend.Decoder().feed(b"event: add\ndata: 1\n\n")[0]
    with pytest.raises(TypeError):
        _data, _event, _id, _retry = ev  # type: ignore[misc]
    with pytest.raises(TypeError):
        ev[0]  # type: ignore[index]


def test_event_match_by_position(backend: SimpleNamespace) -> None:
    Event = backend.Event
    got = []
    for ev in backend.Decoder().feed(b"data: a\n\nevent: error\ndata: b\n\n"):
        match ev:
            case Event(data, "error"):
                got.append(("error", data))
            case Event(data):
                got.append(("message", data))
    assert got == [("message", "a"), ("error", "b")]


# point 3: the async forms, and the sync ones pointing at them


def test_aiter_events_and_aiter_chunks(stream_backend: SimpleNamespace) -> None:
    async def run() -> tuple[list[str], dict[str, Any]]:
        datas = [ev.data async for ev in fastsse.aiter_events(agen(SSE[:20], SSE[20:]))]
        chunks = fastsse.aiter_chunks(agen(SSE))
        seen = [chunk async for chunk in chunks]
        assert len(seen) == 1
        return datas, chunks.result()

    datas, result = asyncio.run(run())
    assert datas[-1] == "[DONE]" and len(datas) == 2
    assert result["choices"][0]["message"]["content"] == "Hi" and result["verdict"]["complete"]


@pytest.mark.parametrize(
    ("call", "other"),
    [(fastsse.iter_events, "aiter_events"), (fastsse.iter_chunks, "aiter_chunks")],
)
def test_sync_iterators_name_the_async_form(call: Any, other: str) -> None:
    source = agen(SSE)
    with pytest.raises(TypeError) as info:
        call(source)
    name = other[1:]
    assert str(info.value) == (
        f"{name}() takes an iterable of byte chunks; for an async one (async_generator) use {other}()"
    )
    asyncio.run(source.aclose())


@pytest.mark.parametrize(
    ("call", "other"),
    [(fastsse.aiter_events, "iter_events"), (fastsse.aiter_chunks, "iter_chunks")],
)
def test_async_iterators_name_the_sync_form(call: Any, other: str) -> None:
    with pytest.raises(TypeError) as info:
        call([SSE])
    assert (
        str(info.value)
        == f"a{other}() takes an async iterable of byte chunks; for a sync one (list) use {other}()"
    )


# point 4: messages that name the call the user made, the same on both backends


@pytest.mark.parametrize("call", [fastsse.iter_events, fastsse.iter_chunks])
@pytest.mark.parametrize("data", [SSE, bytearray(SSE), SSE.decode()])
def test_iterators_refuse_one_buffer(stream_backend: SimpleNamespace, call: Any, data: Any) -> None:
    with pytest.raises(TypeError) as info:
        call(data)
    assert str(info.value) == (
        f"{call.__name__}() takes an iterable of byte chunks (such as response.iter_bytes()), "
        f"not {type(data).__name__}; for one piece already in memory pass [data]"
    )


def test_iterators_name_a_bad_chunk(stream_backend: SimpleNamespace) -> None:
    events = fastsse.iter_events([b"data: 1\n\n", "data: 2\n\n"])
    assert next(events).data == "1"
    with pytest.raises(TypeError) as info:
        next(events)
    assert str(info.value) == (
        "iter_events() needs chunks of bytes, bytearray or memoryview; the source gave str "
        "(iterate the response's bytes, e.g. iter_bytes(), not its text)"
    )
    with pytest.raises(
        TypeError,
        match=r"^iter_chunks\(\) needs chunks of bytes, bytearray or memoryview; the source gave int$",
    ):
        list(fastsse.iter_chunks([7]))


def test_chat_stream_write_names_write(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    with pytest.raises(TypeError) as info:
        stream.write("data: x\n\n")
    assert str(info.value) == (
        "ChatStream.write() takes bytes, bytearray or memoryview, not str (encode text first: text.encode())"
    )
    assert stream.write(SSE) is None and stream.result()["verdict"]["complete"]  # still usable


def test_decoder_feed_names_feed(backend: SimpleNamespace) -> None:
    with pytest.raises(TypeError) as info:
        backend.Decoder().feed(5)
    assert str(info.value) == "Decoder.feed() takes bytes, bytearray or memoryview, not int"


@pytest.mark.parametrize(
    ("value", "error", "shown"),
    [
        ("10", TypeError, "str"),
        (1.5, TypeError, "float"),
        (True, TypeError, "bool"),
        (0, fastsse.InvalidRequest, "0"),
        (-3, fastsse.InvalidRequest, "-3"),
    ],
)
def test_max_event_bytes_messages(backend: SimpleNamespace, value: Any, error: type, shown: str) -> None:
    for cls in (backend.Decoder, backend.ChatStream):
        with pytest.raises(error) as info:
            cls(max_event_bytes=value)
        assert type(info.value) is error
        assert (
            str(info.value)
            == f"{cls.__name__}(max_event_bytes=...) takes a positive int or None, not {shown}"
        )


def test_max_event_bytes_named_by_the_transport() -> None:
    with pytest.raises(
        TypeError, match=r"^iter_events\(max_event_bytes=\.\.\.\) takes a positive int or None, not str$"
    ):
        fastsse.iter_events([SSE], max_event_bytes="10")  # type: ignore[arg-type]
    with pytest.raises(
        fastsse.InvalidRequest,
        match=r"^create_stream\(max_event_bytes=\.\.\.\) takes a positive int or None, not 0$",
    ):
        fastsse.create_stream({}, base_url="http://127.0.0.1:9", max_event_bytes=0)


# point 9: one result shape: result() is a dict with "verdict" as a dict; .verdict is the object


def _check_shape(result: dict[str, Any], verdict: Verdict | None) -> None:
    assert result["object"] == "chat.completion"
    # the answer's own fields, then fastsse's: the verdict, and from a client the transfer's facts
    assert list(result)[-2:] == ["verdict", "http"] if "http" in result else list(result)[-1] == "verdict"
    if "http" in result:
        assert result["http"]["status"] == 200 and result["http"]["error"] is None
    assert list(result["verdict"]) == VERDICT_KEYS
    if verdict is not None:
        assert type(verdict) is Verdict
        assert result["verdict"] == {**vars_of(verdict), "finish_reasons": list(verdict.finish_reasons)}


def vars_of(verdict: Verdict) -> dict[str, Any]:
    return {key: getattr(verdict, key) for key in VERDICT_KEYS}


def test_every_fold_has_the_same_result_shape(stream_backend: SimpleNamespace, server: Any) -> None:
    agg = stream_backend.ChatAggregator()
    for event in stream_backend.Decoder().feed(SSE):
        agg.feed_event(event)
    _check_shape(agg.result(), agg.verdict)
    assert agg.result()["verdict"]["complete"] is True

    stream = stream_backend.ChatStream()
    stream.write(SSE)
    _check_shape(stream.result(), stream.verdict)

    chunks = fastsse.iter_chunks([SSE])
    list(chunks)
    _check_shape(chunks.result(), None)

    request = {"model": "plain", "messages": [{"role": "user", "content": "Hi"}]}
    result = fastsse.create_stream(request, base_url=server.base_url, api_key="sk-test", timeout=20)
    _check_shape(result, None)
    assert result["verdict"]["complete"] is True

    # the four agree on the same bytes
    assert agg.result() == stream.result() == chunks.result()


# issue 32, point 6: the openai SDK's stream is parsed already; its raw bytes are one call away

SDK_HINT = (
    "takes the response's bytes, not the openai SDK's {kind} (it has parsed them already): use "
    "client.chat.completions.with_streaming_response.create(..., stream=True) and pass its "
    "response.iter_bytes()"
)
HI = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize("call", [fastsse.iter_events, fastsse.iter_chunks])
def test_an_sdk_stream_is_refused_with_the_way_to_its_bytes(server: Any, call: Any) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    with (
        client.chat.completions.create(model="plain", messages=HI, stream=True) as stream,
        pytest.raises(TypeError) as info,
    ):
        call(stream)
    assert str(info.value) == f"{call.__name__}() " + SDK_HINT.format(kind="Stream")
    client.close()


@pytest.mark.parametrize("call", [fastsse.aiter_events, fastsse.aiter_chunks])
def test_an_async_sdk_stream_is_refused_the_same_way(server: Any, call: Any) -> None:
    openai = pytest.importorskip("openai")

    async def run() -> str:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test") as client:
            stream = await client.chat.completions.create(model="plain", messages=HI, stream=True)
            async with stream:
                with pytest.raises(TypeError) as info:
                    call(stream)
        return str(info.value)

    assert asyncio.run(run()) == f"{call.__name__}() " + SDK_HINT.format(kind="AsyncStream")


def test_the_sdks_raw_bytes_fold_on_both_backends(stream_backend: SimpleNamespace, server: Any) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    with client.chat.completions.with_streaming_response.create(
        model="plain", messages=HI, stream=True, stream_options={"include_usage": True}
    ) as response:
        chunks = fastsse.iter_chunks(response.iter_bytes())
        texts = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    result = chunks.result()
    assert result["verdict"]["complete"] and result["usage"] is not None
    assert "".join(texts) == result["choices"][0]["message"]["content"] != ""
    client.close()


def test_this_module_runs_with_the_librarys_default_retries() -> None:
    # the default_retries marker reached the client: 2 retries, the library's default
    with fastsse.Client() as client:
        assert client._engine.defaults.max_retries == 2

"""The one options table (``client/_options.py``): the three ``create_stream`` signatures, the two
client constructors, the checks and the docs all come from it, and the clients mirror each other."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import typing
from typing import Any

import pytest

import fastsse
from fastsse.client import _options
from fastsse.client._options import OPTIONS, CallOptions, ClientOptions, RequestOptions

REQUEST = {"model": "plain", "messages": [{"role": "user", "content": "Hi"}]}


def _keywords(signature: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values() if p.name != "self"]


def test_the_three_create_stream_signatures_match() -> None:
    top = inspect.signature(fastsse.create_stream)
    with fastsse.Client() as client:
        sync = inspect.signature(client.create_stream)
    aio = inspect.signature(fastsse.AsyncClient.create_stream)
    assert _keywords(top) == _keywords(sync) == _keywords(aio)
    params = list(top.parameters.values())
    # the data positional-only, on_chunk second, every option keyword-only, in the table's order
    assert (params[0].name, params[0].kind) == ("input", inspect.Parameter.POSITIONAL_ONLY)
    assert params[1].name == "on_chunk"
    names = [p.name for p in params[2:]]
    assert names == [o.name for o in OPTIONS if o.where != "client"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:])
    assert {"http2", "driver", "raise_for_status", "format", "curl", "timing"} <= set(names)


def test_the_client_constructors_match_and_differ_only_by_the_call_options() -> None:
    sync = _keywords(inspect.signature(fastsse.Client))
    aio = _keywords(inspect.signature(fastsse.AsyncClient))
    assert sync == aio
    call = {name for name, _, _ in _keywords(inspect.signature(fastsse.create_stream))} - {
        "input",
        "on_chunk",
    }
    client = {name for name, _, _ in sync}
    assert client - call == {"max_connections"} and call - client == {"format", "curl"}


def test_the_typed_dicts_and_the_request_fields_follow_the_table() -> None:
    call_names = [o.name for o in OPTIONS if o.where != "client"]
    client_names = [o.name for o in OPTIONS if o.where != "call"]
    assert list(typing.get_type_hints(CallOptions)) == call_names
    assert list(typing.get_type_hints(ClientOptions)) == client_names
    fields = [f.name for f in dataclasses.fields(RequestOptions)]
    assert set(fields) <= set(call_names) & set(client_names)
    for field in dataclasses.fields(RequestOptions):  # one default, the table's
        assert field.default == _options.BY_NAME[field.name].default, field.name
    for option in OPTIONS:  # the docs are made from the same rows
        where = "call" if option.where != "client" else "client"
        assert f"``{option.name}``" in _options.options_doc(where)
        assert f"``{option.name}``" in (
            fastsse.create_stream.__doc__ if where == "call" else fastsse.Client.__doc__
        )


def test_the_clients_mirror_each_other_name_for_name() -> None:
    def public(cls: type) -> set[str]:
        return {name for name in dir(cls) if not name.startswith("_")}

    assert public(fastsse.Client) == public(fastsse.AsyncClient)
    assert public(fastsse.Client) >= {"create_stream", "stream", "as_completed", "run", "close"}
    for name in ("create_stream", "run", "close"):
        assert inspect.iscoroutinefunction(getattr(fastsse.AsyncClient, name)), name
        assert not inspect.iscoroutinefunction(getattr(fastsse.Client, name)), name
    assert inspect.isasyncgenfunction(fastsse.AsyncClient.as_completed)
    assert public(fastsse.ChunkStream) - {"close"} == public(fastsse.AsyncChunkStream) - {"aclose"}


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"timing": "yes"}, TypeError, "timing must be True or False"),
        ({"http2": 1}, TypeError, "http2 must be True or False"),
        ({"raise_for_status": None}, TypeError, "raise_for_status"),
        ({"api": "completions"}, fastsse.InvalidRequest, "api must be one of"),
        ({"driver": "libuv"}, fastsse.InvalidRequest, "driver must be one of"),
        ({"max_event_bytes": 0}, fastsse.InvalidRequest, "max_event_bytes"),
        ({"max_connections": 0}, TypeError, "unexpected keyword argument 'max_connections'"),
        ({"stream": True}, TypeError, "unexpected keyword argument 'stream'"),
        ({"format": "messages"}, fastsse.InvalidRequest, "a chat answer is folded by its own format"),
        ({"format": "to-chat"}, fastsse.InvalidRequest, "is 'chat' already"),
        ({"format": "jsonl"}, fastsse.InvalidRequest, "unknown format"),
        ({"api": "messages", "format": "relay"}, fastsse.InvalidRequest, "repairs chat streams"),
        ({"api": "responses", "format": "chat"}, fastsse.InvalidRequest, "use format='to-chat'"),
        ({"timeout": 0}, fastsse.InvalidRequest, "timeout must be a finite number"),
        ({"base_url": "ftp://h/v1"}, fastsse.InvalidRequest, "http:// or https://"),
    ],
)
def test_every_create_stream_checks_the_same_way_before_sending(
    options: dict[str, Any], error: type[BaseException], words: str
) -> None:
    # nothing listens on port 9: an option that got through would fail differently
    base = {"base_url": "http://127.0.0.1:9/v1", "api_key": "x", **options}
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        fastsse.create_stream(REQUEST, **base)
    with (
        fastsse.Client() as client,
        pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")),
    ):
        client.create_stream(REQUEST, **base)

    async def main() -> None:
        async with fastsse.AsyncClient() as client:
            await client.create_stream(REQUEST, **base)

    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        asyncio.run(main())


def test_a_client_checks_its_own_options_when_it_is_made() -> None:
    with pytest.raises(TypeError, match="Client\\(\\) got an unexpected keyword argument 'format'"):
        fastsse.Client(format="relay")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="max_connections must be an int"):
        fastsse.AsyncClient(max_connections="8")  # type: ignore[typeddict-item]
    with pytest.raises(fastsse.InvalidRequest, match="max_connections must be at least 1"):
        fastsse.Client(max_connections=0)


def test_the_driver_is_the_clients(server: Any) -> None:
    with fastsse.Client(driver="pycurl", base_url=server.base_url) as client:
        assert client.create_stream(REQUEST, driver="pycurl")["verdict"]["complete"]
        with pytest.raises(fastsse.InvalidRequest, match="the driver is the client's"):
            client.create_stream(REQUEST, driver="compiled")
    # create_stream makes its own client, so it takes any driver
    assert fastsse.create_stream(REQUEST, base_url=server.base_url, driver="pycurl")["verdict"]["complete"]


def test_default_means_the_clients_value(server: Any) -> None:
    # DEFAULT (not given) keeps the client's option; an explicit value overrides it for one call
    with fastsse.Client(base_url=server.base_url, timing=False) as client:
        assert "timing" not in client.create_stream(REQUEST, timeout=fastsse.DEFAULT)
        assert "timing" in client.create_stream(REQUEST, timing=True)
    assert repr(fastsse.DEFAULT) == "fastsse.DEFAULT"


def test_timeouts_set_the_four_timeouts_at_once(server: Any) -> None:
    # fastsse.Timeouts, as httpx.Timeout: one value for timeout=, on a client and on a call
    with fastsse.Client(timeout=fastsse.Timeouts(30, connect=2, idle=5)) as client:
        d = client._engine.defaults
        assert (d.timeout, d.connect_timeout, d.first_byte_timeout, d.idle_timeout) == (30, 2, None, 5)
        result = client.create_stream(
            {"model": "plain", "messages": []},
            base_url=server.base_url,
            timeout=fastsse.Timeouts(20, first_byte=10),
        )
        assert result["verdict"]["complete"]
    with pytest.raises(fastsse.InvalidRequest, match=r"Timeouts\(idle=...\) takes a positive number"):
        fastsse.Timeouts(idle=0)
    with pytest.raises(fastsse.InvalidRequest, match="connect_timeout= beside timeout=Timeouts"):
        fastsse.Client(timeout=fastsse.Timeouts(connect=1), connect_timeout=2)
    with pytest.raises(TypeError, match="first_byte_timeout"):
        fastsse.EventSource(server.base_url + "/x", timeout=fastsse.Timeouts(first_byte=1))


def test_a_request_is_prepared_from_its_options_object() -> None:
    # One options path: the request setup takes the RequestOptions whole, not a keyword per option
    # (a list that had to be kept beside the table), and the defaults are the table's rows.
    import inspect

    from fastsse.client._request import _prepare

    assert list(inspect.signature(_prepare).parameters) == ["input", "options", "environ"]
    assert RequestOptions().max_retries == {o.name: o for o in OPTIONS}["max_retries"].default == 2


@pytest.mark.parametrize("name", [field.name for field in dataclasses.fields(RequestOptions)])
def test_replace_lays_a_request_s_option_on_a_copy(name: str) -> None:
    client = RequestOptions(base_url="http://127.0.0.1:1/v1", api_key="k", headers={"X-A": "b"}, timeout=2.0)
    value = object()
    request = client.replace({name: value})
    assert request == dataclasses.replace(client, **{name: value})
    assert getattr(request, name) is value
    assert client == RequestOptions(
        base_url="http://127.0.0.1:1/v1", api_key="k", headers={"X-A": "b"}, timeout=2.0
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.timing = False  # type: ignore[misc]


def test_replace_refuses_an_unknown_option_and_keeps_itself_for_none() -> None:
    client = RequestOptions()
    assert client.replace({}) is client
    with pytest.raises(TypeError, match="unknown request option 'format'"):
        client.replace({"timing": False, "format": "relay"})

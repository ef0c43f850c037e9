"""client._request, _curlopts and _response, the request setup shared by create_stream and the
many-streams engine: what ``prepare`` builds, how ``Response`` classifies an answer, and ``apply``/``reset`` on a real handle.

The classification tests drive ``Response``'s callbacks with the header lines and body pieces curl
would hand them (the raw-server tests in test_transport_hardening.py do it over sockets)."""

from __future__ import annotations

import time
from email.utils import formatdate
from typing import Any

import pycurl
import pytest

import fastsse
from _chat_helpers import not_a_stream
from _raw_server import RawServer
from fastsse.client._curlopts import apply, reset
from fastsse.client._options import REQUEST_FIELDS, RequestOptions
from fastsse.client._request import (
    SPEC_CACHE,
    Preparer,
    RequestSpec,
    _prepare,
    environment,
    prepare,
    prepare_get,
    redact,
)
from fastsse.client._response import Response
from fastsse.client._streams import EventsStream

REQUEST = {"model": "m", "messages": []}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_prepare_builds_the_request() -> None:
    spec = prepare(
        REQUEST,
        base_url="http://127.0.0.1:1/v1/",
        api_key="sk-1",
        headers={"X-A": " b "},
        timeout=2.5,
        connect_timeout=0.0001,
        idle_timeout=3,
    )
    assert spec.url == "http://127.0.0.1:1/v1/chat/completions"
    assert spec.body == b'{"model":"m","messages":[],"stream":true}'
    assert spec.headers == (
        "Content-Type: application/json",
        "Accept: text/event-stream",
        "Expect:",
        "Authorization: Bearer sk-1",
        "X-A: b",
    )
    assert (spec.timeout_ms, spec.connect_timeout_ms, spec.idle_timeout) == (2500, 1, 3.0)
    assert prepare(REQUEST, timeout=1.0001).timeout_ms == 1001  # rounded up, never down
    assert prepare(REQUEST).url == "https://api.openai.com/v1/chat/completions"
    assert prepare({**REQUEST, "stream": False}).body.endswith(b'"stream":true}')


# one value per option, none its default: what a request may set beside its client's options
_SET = {
    "api": "messages",
    "base_url": "http://127.0.0.1:2/v2",
    "api_key": "sk-2",
    "path": "/other",
    "headers": {"X-B": "c"},
    "timeout": 9.5,
    "connect_timeout": 1.5,
    "idle_timeout": 4.0,
    "first_byte_timeout": 2.0,
    "proxy": "",
    "ca_bundle": "ca.pem",
    "client_cert": "cert.pem",
    "max_event_bytes": 4096,
    "max_retries": 0,
    "first_chunk_gate": True,
    "fallbacks": (("http://127.0.0.1:3/v1", None),),
    "resume": False,
    "raise_for_status": True,
    "http2": True,
    "timing": False,
    "keep_text": False,
}
_CLIENT = RequestOptions(base_url="http://127.0.0.1:1/v1", api_key="sk-1", headers={"X-A": "b"}, timeout=1)


@pytest.mark.parametrize("name", REQUEST_FIELDS)
def test_a_client_s_preparer_reads_each_option_a_request_sets(name: str) -> None:
    # the Preparer reuses the client's spec when no option a spec is made from changed: one that
    # is missing from its list would be dropped here
    request = _CLIENT.replace({name: _SET[name]})
    assert Preparer(_CLIENT)(REQUEST, request) == _prepare(REQUEST, request, environ=environment())


def test_a_request_s_option_equal_to_the_client_s_is_still_checked() -> None:
    with pytest.raises(TypeError, match="timeout"):
        Preparer(_CLIENT)(REQUEST, _CLIENT.replace({"timeout": True}))  # True == 1, and no number


def test_a_preparer_keeps_the_spec_of_a_request_s_own_options() -> None:
    preparer, headers = Preparer(_CLIENT), {"X-B": "c", "anthropic-version": "1"}
    requests = [
        {"headers": headers},
        {"headers": dict(headers)},  # another dict, the same items: the kept spec
        {"headers": {"anthropic-version": "1", "X-B": "c"}},  # another order: another spec
        {"headers": headers, "path": "/completions"},
        {"path": "/completions"},
        {"timeout": 2.5, "api": "messages"},
        {"headers": ["X-B: c"]},  # lines: built each time
    ]
    for options in requests * 2:
        request = _CLIENT.replace(options)
        assert preparer(REQUEST, request) == _prepare(REQUEST, request, environ=environment())
    headers["X-B"] = "d"  # the same dict, changed: its spec follows
    spec = preparer(REQUEST, _CLIENT.replace({"headers": headers}))
    assert "X-B: d" in spec.headers and "X-B: c" not in spec.headers


def test_a_preparer_keeps_no_spec_of_options_that_fail() -> None:
    preparer = Preparer(_CLIENT)
    for _ in range(2):
        with pytest.raises(fastsse.InvalidRequest, match="header"):
            preparer(REQUEST, _CLIENT.replace({"headers": {"X-B": "c\r\nX-C: d"}}))
    assert preparer(REQUEST, _CLIENT.replace({"timeout": 1.0})).timeout_ms == 1000
    with pytest.raises(TypeError, match="timeout"):
        preparer(REQUEST, _CLIENT.replace({"timeout": True}))  # equal to 1.0, and no number
    with pytest.raises(TypeError, match="input must be a mapping"):
        preparer([], _CLIENT.replace({"timeout": True}))  # the body's type is checked first, as prepare's


def test_a_preparer_keeps_a_bounded_number_of_specs() -> None:
    preparer = Preparer(_CLIENT)
    for n in range(SPEC_CACHE + 8):
        request = _CLIENT.replace({"headers": {"X-N": str(n)}})
        assert f"X-N: {n}" in preparer(REQUEST, request).headers
    assert len(preparer._specs) == SPEC_CACHE


def test_a_preparer_keeps_the_merge_of_plain_options_only() -> None:
    preparer = Preparer(_CLIENT)
    once = preparer.merged(_CLIENT, {"timing": False, "max_retries": 0})
    assert once == _CLIENT.replace({"timing": False, "max_retries": 0})
    assert preparer.merged(_CLIENT, {"timing": False, "max_retries": 0}) is once  # kept
    # True is 1 to a dict, not here: each gets its own merge, and the bad one still raises
    one, true = preparer.merged(_CLIENT, {"timeout": 1}), preparer.merged(_CLIENT, {"timeout": True})
    assert one.timeout == 1 and type(one.timeout) is int and true.timeout is True
    with pytest.raises(TypeError, match="timeout"):
        preparer(REQUEST, preparer.merged(_CLIENT, {"timeout": True}))
    headers = {"X-B": "c"}
    merged = preparer.merged(_CLIENT, {"headers": headers})
    headers["X-B"] = "d"  # the caller's dict, changed: a merge with it is never handed out again
    assert preparer.merged(_CLIENT, {"headers": {"X-B": "c"}}).headers == {"X-B": "c"}
    assert merged.headers is headers
    other = RequestOptions(base_url="http://127.0.0.1:2/v1")  # another client's: not kept here
    assert preparer.merged(other, {"timing": False}).base_url == "http://127.0.0.1:2/v1"
    assert all(kept.base_url == _CLIENT.base_url for kept in preparer._merged.values())
    for n in range(SPEC_CACHE + 8):
        assert preparer.merged(_CLIENT, {"max_retries": n}).max_retries == n
    assert len(preparer._merged) == SPEC_CACHE


def test_a_given_header_replaces_the_default_of_its_name() -> None:
    chat = prepare({}, base_url="http://127.0.0.1:9/v1", headers={"accept": "application/json"})
    assert [h for h in chat.headers if h.lower().startswith("accept:")] == ["accept: application/json"]
    messages = prepare(
        {},
        api="messages",
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        headers=["anthropic-version: 2024-01-01"],
    )
    assert [h for h in messages.headers if h.lower().startswith("anthropic-version:")] == [
        "anthropic-version: 2024-01-01"
    ]
    assert "x-api-key: k" in messages.headers and "Content-Type: application/json" in messages.headers


def test_spec_is_immutable_and_never_prints_the_key() -> None:
    spec = prepare(REQUEST, base_url="https://u:pw@h.test/v1", api_key="sk-secret")
    assert "sk-secret" not in repr(spec) and "pw" not in repr(spec)
    assert spec.display_url == "https://***@h.test/v1/chat/completions"
    with pytest.raises(AttributeError):
        spec.url = "http://other/"  # type: ignore[misc]


def test_redact() -> None:
    assert redact("http://a:b@h:1/p?q") == "http://***@h:1/p?q"
    assert redact("http://h/p") == "http://h/p"


def test_an_empty_api_key_sends_none() -> None:
    assert not any(h.startswith("Authorization") for h in prepare(REQUEST, api_key="").headers)
    spec = prepare(REQUEST, api_key="", headers={"Authorization": "Basic x"})
    assert [h for h in spec.headers if h.startswith("Authorization")] == ["Authorization: Basic x"]


def test_api_key_charset() -> None:
    for bad in ("sk-é", "  "):
        with pytest.raises(ValueError, match="api_key"):
            prepare(REQUEST, api_key=bad)
    with pytest.raises(TypeError, match="api_key"):
        prepare(REQUEST, api_key=b"sk")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [{"X-A": "é"}, {"X-A": 1}, "X-A: b", [b"X-A: b"]])
def test_header_types_and_charset(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        prepare(REQUEST, headers=bad)


def response(backend: Any, *header_lines: bytes) -> Response:
    spec = prepare(REQUEST, base_url="http://u:pw@h.test/v1")
    resp = Response(spec, backend.ChatStream())
    for line in header_lines:
        resp.header(line + b"\r\n")
    return resp


def test_last_header_block_wins(backend: Any) -> None:
    resp = response(
        backend,
        b"HTTP/1.1 100 Continue",
        b"",
        b"HTTP/2 429",
        b"Retry-After: 3",
        b"content-type: APPLICATION/JSON",
    )
    assert (resp.status, resp.content_type, resp.headers["retry-after"]) == (429, "application/json", "3")
    assert resp.retry_after() == 3.0
    resp.write(b'{"error": {"message": "m"}}')
    assert not_a_stream(resp.finish()) == {"error": {"message": "m"}, "status": 429, "retry_after": 3.0}


def test_a_field_is_recorded_as_its_header_line(backend: Any) -> None:
    # the loop's parser hands a line split (field), libcurl whole (header): one record
    fields = [
        (b"Content-Type", b" Text/Event-Stream; charset=utf-8 "),
        (b"X-Seen", b"a"),
        (b"x-seen", b"b\t"),
        (b" Cache-Control", b"no-cache"),
        (b"X-Colon", b"a: b"),
        (b"X-Empty", b""),
    ]
    lines = response(backend, b"HTTP/1.1 200 OK", *(name + b": " + value for name, value in fields))
    split = response(backend, b"HTTP/1.1 200 OK")
    for name, value in fields:
        assert split.field(name, value) is None
    assert (split.headers, split.content_type) == (lines.headers, lines.content_type)
    assert split.headers["x-seen"] == "a, b" and split.content_type == "text/event-stream; charset=utf-8"


def test_retry_after_forms(backend: Any) -> None:
    soon = formatdate(time.time() + 30, usegmt=True).encode()
    for value, want in ((b"0", 0.0), (b"120", 120.0), (b"soon", None), (b"-1", None), (b"\xc2\xb2", None)):
        resp = response(backend, b"HTTP/1.1 503 Busy", b"Retry-After: " + value)
        assert resp.finish()["http"]["retry_after"] == want
    dated = response(backend, b"HTTP/1.1 503 Busy", b"Retry-After: " + soon).finish()["http"]["retry_after"]
    assert 20 <= dated <= 31
    past = formatdate(time.time() - 3600, usegmt=True).encode()
    assert (
        response(backend, b"HTTP/1.1 503 Busy", b"Retry-After: " + past).finish()["http"]["retry_after"]
        == 0.0
    )
    # retry-after-ms (the openai and anthropic SDKs read it first) wins over Retry-After
    both = response(backend, b"HTTP/1.1 429 Slow", b"Retry-After: 9", b"retry-after-ms: 250").finish()
    assert both["http"]["retry_after"] == 0.25
    bad_ms = response(backend, b"HTTP/1.1 429 Slow", b"Retry-After: 9", b"retry-after-ms: nan").finish()
    assert bad_ms["http"]["retry_after"] == 9.0


def test_redirect_and_no_content(backend: Any) -> None:
    moved = response(
        backend, b"HTTP/1.1 308 Permanent", b"Location: https://h.test/v1/chat/completions"
    ).finish()
    assert (
        moved["http"]["status"] == 308 and moved["http"]["location"] == "https://h.test/v1/chat/completions"
    )
    assert "pw" not in moved["http"]["error"] and "***@h.test" in moved["http"]["error"]
    assert not_a_stream(moved)["status"] == 308
    empty = response(backend, b"HTTP/1.1 204 No Content").finish()
    assert not_a_stream(empty)["status"] == 204 and empty["choices"] == []


def test_transport_error_is_redacted_and_partial(backend: Any) -> None:
    resp = response(backend, b"HTTP/1.1 200 OK", b"Content-Type: text/event-stream")
    resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\ndata: {')
    with pytest.raises(fastsse.TransportError) as info:
        resp.finish(pycurl.E_PARTIAL_FILE, "transfer closed for http://u:pw@h.test/v1/chat/completions")
    assert "pw" not in str(info.value) and info.value.code == pycurl.E_PARTIAL_FILE
    assert info.value.result["choices"][0]["message"]["content"] == "Hi"


def test_a_stop_on_purpose_is_no_error(backend: Any) -> None:
    spec = prepare(REQUEST)
    resp = Response(spec, backend.ChatStream(lambda chunk: False))
    resp.header(b"HTTP/1.1 200 OK\r\n")
    resp.header(b"Content-Type: text/event-stream\r\n")
    assert resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n') == 0
    result = resp.finish(pycurl.E_WRITE_ERROR, "Failure writing output")
    assert result["choices"][0]["message"]["content"] == "Hi" and result["verdict"]["aborted"] is True


def test_apply_and_reset_on_a_real_handle(backend: Any) -> None:
    def ok(conn: Any) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n")

    with RawServer(ok) as raw:
        spec = prepare(REQUEST, base_url=raw.base_url, api_key="sk-secret", headers={"X-T": "1"}, timeout=5)
        curl = pycurl.Curl()
        try:
            resp = Response(spec, backend.ChatStream())
            apply(curl, spec, resp)
            curl.perform()
            assert resp.finish()["choices"] == []
            reset(curl, spec)
            curl.setopt(pycurl.URL, raw.base_url + "/models")
            curl.setopt(pycurl.WRITEFUNCTION, lambda data: None)
            curl.perform()
        finally:
            curl.close()
    first, second = raw.requests
    assert first.startswith(b"POST /v1/chat/completions ") and b"Bearer sk-secret" in first
    assert b"X-T: 1" in first and b"Accept-Encoding: identity" in first
    assert second.startswith(b"GET /v1/models ")
    assert b"sk-secret" not in second and b"X-T" not in second and b"Accept-Encoding" not in second


def test_spec_type_is_exported_for_the_engine() -> None:
    assert isinstance(prepare(REQUEST), RequestSpec)


def test_prepare_get_builds_an_event_stream_request() -> None:
    spec = prepare_get(
        "https://u:pw@h.test/feed?x=1", headers={"Authorization": "Bearer k"}, last_event_id="41", timeout=2
    )
    assert (spec.method, spec.body, spec.api, spec.raise_for_status) == ("GET", b"", "events", True)
    assert spec.headers == (
        "Accept: text/event-stream",
        "Cache-Control: no-cache",
        "Authorization: Bearer k",
        "Last-Event-ID: 41",
    )
    assert spec.timeout_ms == 2000 and "pw" not in repr(spec) and repr(spec).startswith("RequestSpec(GET ")
    assert prepare_get("http://h.test/", last_event_id="").headers[-1] == "Cache-Control: no-cache"
    assert (
        prepare_get("http://h.test/", last_event_id="\u00e9").headers[-1] == "Last-Event-ID: \u00e9".encode()
    )
    mine = prepare_get("http://h.test/", headers=["accept: text/event-stream;v=2"]).headers
    assert mine == ("Cache-Control: no-cache", "accept: text/event-stream;v=2")
    assert spec.transport != prepare(REQUEST, base_url="https://u:pw@h.test/feed?x=1").transport
    for bad, words in (
        ({"last_event_id": "a\nb"}, "CR, LF or NUL"),
        ({"headers": {"last-event-id": "3"}}, "last_event_id="),
        ({"timeout": -1}, "timeout"),
    ):
        with pytest.raises(fastsse.InvalidRequest, match=words):
            prepare_get("http://h.test/", **bad)
    with pytest.raises(fastsse.InvalidRequest, match="http:// or https://"):
        prepare_get("ftp://h.test/")


def test_an_event_stream_get_reads_only_a_200_of_text_event_stream(backend: Any) -> None:
    def answer(*lines: bytes, body: bytes = b"") -> Any:
        resp = Response(prepare_get("http://h.test/"), EventsStream(decoder=backend.Decoder()))
        for line in lines:
            resp.header(line + b"\r\n")
        if body:
            resp.write(body)
        return resp

    ok = answer(b"HTTP/1.1 200 OK", b"Content-Type: text/event-stream; charset=utf-8", body=b"data: 1\n\n")
    assert ok.finish() == {"events": 1, "verdict": ok.stream.result()["verdict"], "http": ok.http()}
    for lines, body, words in (
        ((b"HTTP/1.1 200 OK", b"Content-Type: text/html"), b"<html>", "not text/event-stream"),
        ((b"HTTP/1.1 200 OK",), b"data: 1\n\n", "not text/event-stream"),  # no sniffing
        ((b"HTTP/1.1 200 OK", b"Content-Type: application/json"), b'{"a": 1}', "not text/event-stream"),
        ((b"HTTP/1.1 200 OK", b"Content-Type: text/event-streams"), b"", "not text/event-stream"),
        ((b"HTTP/1.1 201 Created", b"Content-Type: text/event-stream"), b"data: 1\n\n", "comes with a 200"),
        ((b"HTTP/1.1 404 No", b"Content-Type: text/plain"), b"gone", "HTTP 404: gone"),
        ((b"HTTP/1.1 204 No Content",), b"", "HTTP 204"),
    ):
        resp = answer(*lines, body=body)
        with pytest.raises(fastsse.HTTPStatusError, match=words) as info:
            resp.finish()
        assert info.value.body == body
        assert "/v1" not in str(info.value)  # no base_url hint for a whole URL


def test_the_events_format_reads_a_post_too(backend: Any) -> None:
    # format="events" on any request: on_chunk gets each Event, the result counts them
    seen: list[Any] = []
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    with RawServer(lambda conn: conn.sendall(head + b"id: 1\ndata: a\n\nevent: x\ndata: {}\n\n")) as raw:
        result = fastsse.create_stream(REQUEST, seen.append, base_url=raw.base_url, format="events")
    assert [(e.id, e.event, e.data) for e in seen] == [("1", "message", "a"), ("1", "x", "{}")]
    assert result["events"] == 2 and result["verdict"]["complete"]
    assert raw.requests[0].startswith(b"POST /v1/chat/completions ")

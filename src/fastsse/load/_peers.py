"""Other HTTP clients streaming the same chat requests, for comparison runs (``load --client``, benchmarks).

Each peer sends the request bodies it is given (``stream`` forced on) with at most ``concurrency``
in flight, and records for every chunk it hands to user code: the receive stamp
(``time.monotonic_ns()`` when the client's own loop delivered the chunk, as a benchmark built on
that client would take it), the chunk's send stamp from the scripted server
(``fastsse_sent_ns``, or the field ``open_peer`` is given; 0 when absent) and the tokens it
carries (the usage delta when the chunk has usage with ``completion_tokens``, else its
``logprobs.content`` entries, else 1 when it has non-empty ``content`` or
``reasoning_content``/``reasoning``, else 0). Role-only, finish and usage-only chunks are recorded
with 0 tokens.

- ``aiohttp-vllm``: aiohttp, each read decoded and split at blank lines, ``data: `` removed, the
  stamp taken, stdlib ``json.loads``: the framing of vLLM's ``bench serve`` (its chat request
  function, 2026).
- ``openai``: the openai SDK's ``AsyncOpenAI``, ``async for chunk in stream``.
- ``httpx-sse``: ``httpx.AsyncClient`` with ``httpx_sse.aconnect_sse``, ``orjson.loads`` per event.
- ``fastsse-aiohttp``: aiohttp's byte stream through ``fastsse.aiter_chunks``.
- ``fastsse-threads``: ``fastsse.create_stream`` (pycurl) with an ``on_chunk``, one thread per stream.

``run_peer(name, base_url, bodies, *, concurrency, headers=None, use_uvloop=False) -> list[PeerRecord]``
runs them (results in the order of ``bodies``); it raises ``Unavailable`` when the peer's package
is missing and ValueError for an unknown name. ``open_peer(name, base_url, ...)`` gives the peer
itself, an async context manager whose ``await peer.one(body)`` streams one request, for a caller
with its own schedule (``python -m fastsse load --client``). Written for fastsse; none of it is taken from those
projects.
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import importlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import orjson

from .._errors import InvalidRequest

STAMP: Final = "fastsse_sent_ns"


class Unavailable(Exception):
    """The peer's package is not installed."""


@dataclasses.dataclass
class PeerRecord:
    """One stream as a peer client saw it (monotonic ns; ``status`` 0 when no response came)."""

    start_ns: int = 0
    end_ns: int = 0
    status: int = 0
    done: bool = False  # the stream ended as it should ([DONE], or the client's own end of stream)
    error: str | None = None
    recv_ns: list[int] = dataclasses.field(default_factory=list)
    sent_ns: list[int] = dataclasses.field(default_factory=list)
    tokens: list[int] = dataclasses.field(default_factory=list)
    reasoning: list[bool] = dataclasses.field(default_factory=list)  # the chunk's tokens are reasoning
    usage_tokens: int = 0  # the last completion_tokens the stream reported, 0 if none
    stamp: str = dataclasses.field(default=STAMP, repr=False)  # the send stamp's field

    def add(self, chunk: dict[str, Any], now: int) -> None:
        """Record one parsed chunk (a dict) received at ``now``."""
        sent = chunk.get(self.stamp)
        self.recv_ns.append(now)
        self.sent_ns.append(sent if type(sent) is int else 0)
        usage = chunk.get("usage")
        choices = chunk.get("choices") or []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        delta = first.get("delta") or {}
        text = delta.get("content")
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        counted = usage.get("completion_tokens") if isinstance(usage, dict) else None
        tokens = 0
        if not text and not thought:
            pass  # a role, finish or usage-only chunk carries no tokens
        elif isinstance(counted, int):
            tokens = max(0, counted - self.usage_tokens)
        else:
            logprobs = first.get("logprobs")
            entries = logprobs.get("content") if isinstance(logprobs, dict) else None
            tokens = len(entries) if isinstance(entries, list) and entries else 1
        if isinstance(counted, int):
            self.usage_tokens = counted
        reasoning = bool(thought) and not text
        self.tokens.append(tokens)
        self.reasoning.append(reasoning)


def _need(module: str, dist: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise Unavailable(f"{dist} is not installed (pip install {dist})") from None


def _url(base_url: str) -> str:
    return base_url.rstrip("/") + "/chat/completions"


def _body(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "stream": True}


class Peer:
    """A comparison client: ``async with peer: await peer.one(body) -> PeerRecord``."""

    def __init__(self, base_url: str, headers: dict[str, str], concurrency: int, timeout: float) -> None:
        self.base_url = base_url
        self.url = _url(base_url)
        self.headers = headers
        self.concurrency = concurrency
        self.timeout = timeout
        self.stamp = STAMP  # the field of the server's send stamp in each chunk

    async def __aenter__(self) -> Peer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def one(self, body: dict[str, Any]) -> PeerRecord:
        raise NotImplementedError


class _AiohttpVllm(Peer):
    """aiohttp as vLLM's ``bench serve`` frames a stream: every read decoded, split at blank lines,
    ``data: `` removed, stamped, then ``json.loads``."""

    async def __aenter__(self) -> Peer:
        aiohttp = _need("aiohttp", "aiohttp")
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout), connector=aiohttp.TCPConnector(limit=0)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()

    async def one(self, body: dict[str, Any]) -> PeerRecord:
        rec = PeerRecord(start_ns=time.monotonic_ns(), stamp=self.stamp)
        try:
            async with self.session.post(self.url, json=_body(body), headers=self.headers) as response:
                rec.status = response.status
                if response.status != 200:
                    rec.error = f"http {response.status}"
                    await response.read()
                    return rec
                decoder = codecs.getincrementaldecoder("utf-8")()
                pending = ""
                async for raw in response.content.iter_any():
                    pending += decoder.decode(raw)
                    *events, pending = pending.split("\n\n")
                    for event in events:
                        event = event.strip()
                        if not event or event.startswith(":"):
                            continue
                        text = event.removeprefix("data: ")
                        if text == "[DONE]":
                            rec.done = True
                            continue
                        now = time.monotonic_ns()  # taken per message, before parsing, as vLLM does
                        data = json.loads(text)
                        rec.add(data, now)
                        if isinstance(data, dict) and "error" in data:
                            rec.error = "stream error"
        except Exception as exc:  # a peer's failure is recorded, the run goes on
            rec.error = f"{type(exc).__name__}: {exc}"
        finally:
            rec.end_ns = time.monotonic_ns()
        return rec


class _OpenAI(Peer):
    """The openai SDK's ``AsyncOpenAI``, ``async for chunk in stream``."""

    async def __aenter__(self) -> Peer:
        self.openai = _need("openai", "openai")
        httpx = _need("httpx", "httpx")
        room = self.concurrency + 8
        limits = httpx.Limits(max_connections=room, max_keepalive_connections=room)
        self.client = self.openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key="x",
            max_retries=0,
            default_headers=self.headers or None,
            http_client=self.openai.DefaultAsyncHttpxClient(limits=limits, timeout=self.timeout),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    async def one(self, body: dict[str, Any]) -> PeerRecord:
        rec = PeerRecord(start_ns=time.monotonic_ns(), stamp=self.stamp)
        rest = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
        try:
            stream = await self.client.chat.completions.create(
                model=body["model"], messages=body.get("messages", []), stream=True, extra_body=rest
            )
            rec.status = 200
            async for chunk in stream:
                now = time.monotonic_ns()
                rec.add(_openai_dict(chunk, self.stamp), now)
            rec.done = True  # the SDK ends its iterator at [DONE] and at the end of the body alike
        except self.openai.APIStatusError as exc:
            rec.status = exc.status_code
            rec.error = f"http {exc.status_code}"
        except Exception as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
        finally:
            rec.end_ns = time.monotonic_ns()
        return rec


def _openai_dict(chunk: Any, stamp: str = STAMP) -> dict[str, Any]:
    # the few fields PeerRecord.add reads, from the SDK's objects (no model_dump: that is not what
    # a benchmark on the SDK pays per chunk)
    extra = chunk.model_extra or {}
    out: dict[str, Any] = {stamp: extra.get(stamp)}
    if chunk.usage is not None:
        out["usage"] = {"completion_tokens": chunk.usage.completion_tokens}
    if chunk.choices:
        choice = chunk.choices[0]
        delta = choice.delta
        d: dict[str, Any] = {"content": delta.content}
        d["reasoning_content"] = (delta.model_extra or {}).get("reasoning_content")
        logprobs = choice.logprobs
        content = logprobs.content if logprobs is not None else None
        out["choices"] = [{"delta": d, "logprobs": {"content": content} if content else None}]
    return out


class _HttpxSse(Peer):
    """``httpx.AsyncClient`` with ``httpx_sse.aconnect_sse``, ``orjson.loads`` per event."""

    async def __aenter__(self) -> Peer:
        httpx = _need("httpx", "httpx")
        self.httpx_sse = _need("httpx_sse", "httpx-sse")
        room = self.concurrency + 8
        limits = httpx.Limits(max_connections=room, max_keepalive_connections=room)
        self.client = httpx.AsyncClient(limits=limits, timeout=self.timeout, headers=self.headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()

    async def one(self, body: dict[str, Any]) -> PeerRecord:
        rec = PeerRecord(start_ns=time.monotonic_ns(), stamp=self.stamp)
        try:
            async with self.httpx_sse.aconnect_sse(self.client, "POST", self.url, json=_body(body)) as source:
                rec.status = source.response.status_code
                if rec.status != 200:
                    rec.error = f"http {rec.status}"
                    return rec
                async for event in source.aiter_sse():
                    if event.data == "[DONE]":
                        rec.done = True
                        continue
                    rec.add(orjson.loads(event.data), time.monotonic_ns())
        except Exception as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
        finally:
            rec.end_ns = time.monotonic_ns()
        return rec


class _FastsseAiohttp(_AiohttpVllm):
    """aiohttp's byte stream through ``fastsse.aiter_chunks``."""

    async def one(self, body: dict[str, Any]) -> PeerRecord:
        from .. import aiter_chunks

        rec = PeerRecord(start_ns=time.monotonic_ns(), stamp=self.stamp)
        try:
            async with self.session.post(self.url, json=_body(body), headers=self.headers) as response:
                rec.status = response.status
                if response.status != 200:
                    rec.error = f"http {response.status}"
                    await response.read()
                    return rec
                chunks = aiter_chunks(response.content.iter_any())
                async for chunk in chunks:
                    rec.add(chunk, time.monotonic_ns())
                verdict = chunks.result().get("verdict") or {}
                rec.done = bool(verdict.get("complete"))
                if verdict.get("error"):
                    rec.error = "stream error"
        except Exception as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
        finally:
            rec.end_ns = time.monotonic_ns()
        return rec


class _FastsseThreads(Peer):
    """``fastsse.create_stream`` with an ``on_chunk``, one thread per stream in flight."""

    async def __aenter__(self) -> Peer:
        _need("pycurl", "pycurl")
        threading.stack_size(256 * 1024)  # a thousand threads, little stack each
        try:
            self.pool = ThreadPoolExecutor(max_workers=self.concurrency)
        finally:
            threading.stack_size(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True)

    async def one(self, body: dict[str, Any]) -> PeerRecord:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.blocking, body)

    def blocking(self, body: dict[str, Any]) -> PeerRecord:
        from .. import create_stream

        rec = PeerRecord(start_ns=time.monotonic_ns(), stamp=self.stamp)

        def on_chunk(chunk: dict[str, Any]) -> None:
            rec.add(chunk, time.monotonic_ns())

        try:
            result = create_stream(
                body,
                on_chunk,
                base_url=self.base_url,
                api_key="x",
                headers=self.headers or None,
                timeout=self.timeout,
            )
            http = result.get("http") or {}
            rec.status = int(http.get("status") or 200)
            verdict = result.get("verdict") or {}
            rec.done = bool(verdict.get("complete"))
            if http.get("error") is not None or verdict.get("error"):
                rec.error = f"http {rec.status}" if rec.status >= 400 else "stream error"
        except Exception as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
        finally:
            rec.end_ns = time.monotonic_ns()
        return rec


PEERS: Final[dict[str, tuple[str, type[Peer]]]] = {
    "aiohttp-vllm": ("aiohttp + vLLM bench-serve framing", _AiohttpVllm),
    "openai": ("openai SDK AsyncOpenAI", _OpenAI),
    "httpx-sse": ("httpx + httpx-sse", _HttpxSse),
    "fastsse-aiohttp": ("fastsse.aiter_chunks over aiohttp", _FastsseAiohttp),
    "fastsse-threads": ("fastsse.create_stream, one thread per stream", _FastsseThreads),
}


def open_peer(
    name: str,
    base_url: str,
    /,
    *,
    concurrency: int,
    headers: dict[str, str] | None = None,
    timeout: float = 6 * 3600,
    stamp: str = STAMP,
) -> Peer:
    """``open_peer(name, base_url, /, *, concurrency, headers=None, timeout=21600, stamp=STAMP) -> Peer``

    The peer client ``name``, to be entered (``async with``) on the loop that will use it; sized for
    ``concurrency`` streams at once, reading each chunk's send stamp from its field ``stamp``. It
    raises InvalidRequest for an unknown name or a concurrency below 1; entering it raises
    ``Unavailable`` when the peer's package is missing.
    """
    if name not in PEERS:
        raise InvalidRequest(f"unknown peer {name!r}; known: {', '.join(PEERS)}")
    if concurrency < 1:
        raise InvalidRequest(f"concurrency must be >= 1, not {concurrency}")
    peer = PEERS[name][1](base_url, dict(headers or {}), concurrency, timeout)
    peer.stamp = stamp
    return peer


async def _run_all(peer: Peer, bodies: list[dict[str, Any]], concurrency: int) -> list[PeerRecord]:
    slots = asyncio.Semaphore(concurrency)

    async def limited(body: dict[str, Any]) -> PeerRecord:
        async with slots:
            return await peer.one(body)

    async with peer:
        return list(await asyncio.gather(*(limited(b) for b in bodies)))


def run_peer(
    name: str,
    base_url: str,
    bodies: list[dict[str, Any]],
    /,
    *,
    concurrency: int,
    headers: dict[str, str] | None = None,
    use_uvloop: bool = False,
) -> list[PeerRecord]:
    """``run_peer(name, base_url, bodies, /, *, concurrency, headers=None, use_uvloop=False) -> list[PeerRecord]``

    Stream every body through peer ``name`` with at most ``concurrency`` at once; the records come
    back in the order of ``bodies``. It raises InvalidRequest for an unknown peer and ``Unavailable``
    when its package is missing.
    """
    peer = open_peer(name, base_url, concurrency=concurrency, headers=headers)
    coroutine = _run_all(peer, bodies, concurrency)
    if use_uvloop:
        uvloop = _need("uvloop", "uvloop")
        loop = uvloop.new_event_loop()
        try:
            records: list[PeerRecord] = loop.run_until_complete(coroutine)
            return records
        finally:
            loop.close()
    return asyncio.run(coroutine)

"""Other HTTP clients streaming the same chat requests, for comparison runs (``load --client``, benchmarks).

Each peer sends the request bodies it is given (``stream`` forced on) with at most ``concurrency``
in flight, and records for every chunk it hands to user code: the receive stamp
(``time.monotonic_ns()`` when the client's own loop delivered the chunk, as a benchmark built on
that client would take it), the chunk's send stamp from the scripted server
(``fastsse_sent_ns``, 0 when absent) and the tokens it carries (the usage delta when the chunk has
usage with ``completion_tokens``, else its ``logprobs.content`` entries, else 1 when it has
non-empty ``content`` or ``reasoning_content``/``reasoning``, else 0). Role-only, finish and
usage-only chunks are recorded with 0 tokens.

- ``aiohttp-vllm``: aiohttp, the response read line by line, ``data: `` removed, stdlib
  ``json.loads``, the stamp taken after parsing: the framing vLLM's ``bench serve`` uses.
- ``openai``: the openai SDK's ``AsyncOpenAI``, ``async for chunk in stream``.
- ``httpx-sse``: ``httpx.AsyncClient`` with ``httpx_sse.aconnect_sse``, ``orjson.loads`` per event.
- ``fastsse-aiohttp``: aiohttp's byte stream through ``fastsse.aiter_chunks``.
- ``fastsse-threads``: ``fastsse.create_stream`` (pycurl) with an ``on_chunk``, one thread per stream.

``run_peer(name, base_url, bodies, *, concurrency, headers=None, use_uvloop=False) -> list[PeerRecord]``
runs them (results in the order of ``bodies``); it raises ``Unavailable`` when the peer's package
is missing and ValueError for an unknown name. Written for fastsse; none of it is taken from those
projects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import orjson

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

    def add(self, chunk: dict[str, Any], now: int) -> None:
        """Record one parsed chunk (a dict) received at ``now``."""
        sent = chunk.get(STAMP)
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


# aiohttp + vLLM bench-serve framing


async def _aiohttp_vllm(
    base_url: str, bodies: list[dict[str, Any]], concurrency: int, headers: dict[str, str]
) -> list[PeerRecord]:
    aiohttp = _need("aiohttp", "aiohttp")
    url = _url(base_url)
    timeout = aiohttp.ClientTimeout(total=6 * 3600)
    connector = aiohttp.TCPConnector(limit=0)

    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

        async def one(body: dict[str, Any]) -> PeerRecord:
            rec = PeerRecord(start_ns=time.monotonic_ns())
            try:
                async with session.post(url, json=_body(body), headers=headers) as response:
                    rec.status = response.status
                    if response.status != 200:
                        rec.error = f"http {response.status}"
                        await response.read()
                        return rec
                    async for line in response.content:
                        line = line.strip()
                        if not line:
                            continue
                        text = line.decode("utf-8").removeprefix("data: ")
                        if text == "[DONE]":
                            rec.done = True
                            continue
                        if text.startswith(":"):
                            continue
                        data = json.loads(text)
                        rec.add(data, time.monotonic_ns())  # after parsing, as vLLM stamps
                        if isinstance(data, dict) and "error" in data:
                            rec.error = "stream error"
            except Exception as exc:
                rec.error = f"{type(exc).__name__}: {exc}"
            finally:
                rec.end_ns = time.monotonic_ns()
            return rec

        return await _gather(one, bodies, concurrency)


# the openai SDK


async def _openai(
    base_url: str, bodies: list[dict[str, Any]], concurrency: int, headers: dict[str, str]
) -> list[PeerRecord]:
    openai = _need("openai", "openai")
    httpx = _need("httpx", "httpx")
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="x",
        max_retries=0,
        default_headers=headers or None,
        http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=6 * 3600),
    )

    async def one(body: dict[str, Any]) -> PeerRecord:
        rec = PeerRecord(start_ns=time.monotonic_ns())
        rest = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
        try:
            stream = await client.chat.completions.create(
                model=body["model"], messages=body.get("messages", []), stream=True, extra_body=rest
            )
            rec.status = 200
            async for chunk in stream:
                now = time.monotonic_ns()
                rec.add(_openai_dict(chunk), now)
            rec.done = True  # the SDK ends its iterator at [DONE] or at the end of the body alike
        except openai.APIStatusError as exc:
            rec.status = exc.status_code
            rec.error = f"http {exc.status_code}"
        except Exception as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
        finally:
            rec.end_ns = time.monotonic_ns()
        return rec

    try:
        return await _gather(one, bodies, concurrency)
    finally:
        await client.close()


def _openai_dict(chunk: Any) -> dict[str, Any]:
    # the few fields PeerRecord.add reads, from the SDK's objects (no model_dump: that is not what
    # a benchmark on the SDK pays per chunk)
    extra = chunk.model_extra or {}
    out: dict[str, Any] = {STAMP: extra.get(STAMP)}
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


# httpx + httpx-sse


async def _httpx_sse(
    base_url: str, bodies: list[dict[str, Any]], concurrency: int, headers: dict[str, str]
) -> list[PeerRecord]:
    httpx = _need("httpx", "httpx")
    httpx_sse = _need("httpx_sse", "httpx-sse")
    url = _url(base_url)
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
    async with httpx.AsyncClient(limits=limits, timeout=6 * 3600, headers=headers) as client:

        async def one(body: dict[str, Any]) -> PeerRecord:
            rec = PeerRecord(start_ns=time.monotonic_ns())
            try:
                async with httpx_sse.aconnect_sse(client, "POST", url, json=_body(body)) as source:
                    rec.status = source.response.status_code
                    if rec.status != 200:
                        rec.error = f"http {rec.status}"
                        return rec
                    async for event in source.aiter_sse():
                        if event.data == "[DONE]":
                            rec.done = True
                            continue
                        data = orjson.loads(event.data)
                        rec.add(data, time.monotonic_ns())
            except Exception as exc:
                rec.error = f"{type(exc).__name__}: {exc}"
            finally:
                rec.end_ns = time.monotonic_ns()
            return rec

        return await _gather(one, bodies, concurrency)


# fastsse's iterator over aiohttp's bytes


async def _fastsse_aiohttp(
    base_url: str, bodies: list[dict[str, Any]], concurrency: int, headers: dict[str, str]
) -> list[PeerRecord]:
    aiohttp = _need("aiohttp", "aiohttp")
    from .. import SSEError, aiter_chunks

    url = _url(base_url)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=6 * 3600), connector=connector
    ) as session:

        async def one(body: dict[str, Any]) -> PeerRecord:
            rec = PeerRecord(start_ns=time.monotonic_ns())
            try:
                async with session.post(url, json=_body(body), headers=headers) as response:
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
            except (Exception, SSEError) as exc:
                rec.error = f"{type(exc).__name__}: {exc}"
            finally:
                rec.end_ns = time.monotonic_ns()
            return rec

        return await _gather(one, bodies, concurrency)


async def _gather(
    one: Callable[[dict[str, Any]], Awaitable[PeerRecord]], bodies: list[dict[str, Any]], concurrency: int
) -> list[PeerRecord]:
    slots = asyncio.Semaphore(concurrency)

    async def limited(body: dict[str, Any]) -> PeerRecord:
        async with slots:
            return await one(body)

    return list(await asyncio.gather(*(limited(b) for b in bodies)))


# fastsse.create_stream, one thread per stream


def _fastsse_threads(
    base_url: str, bodies: list[dict[str, Any]], concurrency: int, headers: dict[str, str]
) -> list[PeerRecord]:
    _need("pycurl", "pycurl")
    from .. import create_stream

    def one(body: dict[str, Any]) -> PeerRecord:
        rec = PeerRecord(start_ns=time.monotonic_ns())

        def on_chunk(chunk: dict[str, Any]) -> None:
            rec.add(chunk, time.monotonic_ns())

        try:
            result = create_stream(body, on_chunk, base_url=base_url, api_key="x", headers=headers or None)
            rec.status = int(result.get("status") or 200)
            verdict = result.get("verdict") or {}
            rec.done = bool(verdict.get("complete"))
            if "error" in result and result["error"] is not None:
                rec.error = f"http {rec.status}" if rec.status >= 400 else "stream error"
        except Exception as exc:
            rec.error = f"{type(exc).__name__}: {exc}"
        finally:
            rec.end_ns = time.monotonic_ns()
        return rec

    threading.stack_size(256 * 1024)  # a thousand threads, little stack each
    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return list(pool.map(one, bodies))
    finally:
        threading.stack_size(0)


AsyncPeer = Callable[[str, list[dict[str, Any]], int, dict[str, str]], Coroutine[Any, Any, list[PeerRecord]]]
PEERS: Final[dict[str, tuple[str, AsyncPeer | None]]] = {
    "aiohttp-vllm": ("aiohttp + vLLM bench-serve framing", _aiohttp_vllm),
    "openai": ("openai SDK AsyncOpenAI", _openai),
    "httpx-sse": ("httpx + httpx-sse", _httpx_sse),
    "fastsse-aiohttp": ("fastsse.aiter_chunks over aiohttp", _fastsse_aiohttp),
    "fastsse-threads": ("fastsse.create_stream, one thread per stream", None),
}


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
    back in the order of ``bodies``. It raises ValueError for an unknown peer and ``Unavailable``
    when its package is missing.
    """
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; known: {', '.join(PEERS)}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, not {concurrency}")
    hdrs = dict(headers or {})
    if name == "fastsse-threads":
        return _fastsse_threads(base_url, bodies, concurrency, hdrs)
    runner = PEERS[name][1]
    assert runner is not None
    coroutine = runner(base_url, bodies, concurrency, hdrs)
    if use_uvloop:
        uvloop = _need("uvloop", "uvloop")
        loop = uvloop.new_event_loop()
        try:
            records: list[PeerRecord] = loop.run_until_complete(coroutine)
            return records
        finally:
            loop.close()
    return asyncio.run(coroutine)

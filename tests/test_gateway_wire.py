"""The gateway's direct write path: once an answer's head is out, each piece the transfer hands on
goes from the sink (``WireSink``: C with the compiled backend) to the caller's transport, framed
as an HTTP/1.1 chunk, with no ASGI message and no loop callback, and the transport's fill and
drain (its protocol's ``pause_writing`` / ``resume_writing``) hold and release the upstream.

``Downstream(..., wire=(protocol, cycle))`` is driven here with a fake protocol, transport and
uvicorn-like cycle on both backends: the bytes the transport got are de-chunked and compared with
the pieces, in order, whatever held them. The command's own connection (uvicorn's httptools
protocol with the gateway's hooks) is exercised end to end in ``test_gateway_wire_http.py``.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from fastsse.gateway._asgi import SSE_HEADERS, Downstream


def dechunk(data: bytes) -> tuple[list[bytes], bool]:
    """The chunks of an HTTP/1.1 chunked body (a strict reader: a bad size or CRLF fails), and
    whether its terminator came."""
    chunks, at = [], 0
    while at < len(data):
        end = data.index(b"\r\n", at)
        size = int(data[at:end], 16)
        if size == 0:
            assert data[end : end + 4] == b"\r\n\r\n"
            return chunks, True
        start = end + 2
        chunks.append(data[start : start + size])
        assert data[start + size : start + size + 2] == b"\r\n"
        at = start + size + 2
    return chunks, False


class Transport:
    """Records what is written; past ``high`` buffered bytes it pauses its protocol (as asyncio's
    and uvloop's transports do, from inside ``write``) until ``drain()``."""

    def __init__(self, high: int = 1 << 30) -> None:
        self.head = b""
        self.body = bytearray()
        self.buffered = 0
        self.high = high
        self.paused = False
        self.protocol: Any = None
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            raise RuntimeError("unable to perform operation: the handler is closed")
        self.body += data
        self.buffered += len(data)
        if self.buffered > self.high and not self.paused:
            self.paused = True
            self.protocol.pause_writing()

    def drain(self) -> None:
        self.buffered = 0
        if self.paused:
            self.paused = False
            self.protocol.resume_writing()


class Protocol:
    """The two hooks of the command's protocol (``cli/gateway.py``) and its ``fastsse_down``."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        transport.protocol = self
        self.fastsse_down: Any = None
        self.write_paused = False

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.fastsse_down is not None:
            self.fastsse_down.paused()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.fastsse_down is not None:
            self.fastsse_down.resumed()


class Cycle:
    """uvicorn's RequestResponseCycle as far as the direct path reads it, and its ``send``: the
    head sets ``chunked_encoding``; a body message is one chunk; a send while the protocol is
    paused waits for its resume (as uvicorn's ``flow.drain()``)."""

    def __init__(self, protocol: Protocol, method: str = "POST", length: bool = False) -> None:
        self.protocol = protocol
        self.scope = {"method": method}
        self.chunked_encoding: bool | None = None
        self.response_complete = False
        self.length = length
        self.messages: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        while self.protocol.write_paused:
            await asyncio.sleep(0)
        self.messages.append(message)
        transport = self.protocol.transport
        if message["type"] == "http.response.start":
            self.chunked_encoding = not self.length
            transport.head = b"HTTP/1.1 200 OK\r\n\r\n"
            return
        body = message.get("body", b"")
        if self.chunked_encoding:
            out = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
            if not message.get("more_body", False):
                out += b"0\r\n\r\n"
                self.response_complete = True
        else:
            out = body
        transport.write(out)


def wired(
    method: str = "POST", high: int = 1 << 30, length: bool = False
) -> tuple[Transport, Protocol, Cycle]:
    transport = Transport(high)
    protocol = Protocol(transport)
    return transport, protocol, Cycle(protocol, method, length)


def turn() -> Any:
    return asyncio.sleep(0)


def run(body: Any) -> None:
    asyncio.run(body())


def pieces(n: int, size: int = 40) -> list[bytes]:
    return [(b'data: {"n": %d, "pad": "' % i) + b"x" * size + b'"}\n\n' for i in range(n)]


def test_after_the_head_each_piece_is_one_chunk_written_at_once(stream_backend: SimpleNamespace) -> None:
    async def body() -> None:
        transport, protocol, cycle = wired()
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        sent = pieces(50)
        assert down.on_chunk(sent[0]) is None  # the head goes with the first, at the turn's end
        assert transport.body == b""
        await turn()
        assert transport.head and dechunk(bytes(transport.body))[0] == [sent[0]]
        for i, piece in enumerate(sent[1:], 1):
            assert down.on_chunk(piece) is None
            assert dechunk(bytes(transport.body))[0] == sent[: i + 1]  # written before it returned
        assert len(cycle.messages) == 2  # the start and the first piece: the rest went direct
        assert down.relayed == sum(map(len, sent))
        assert down.first_ns and down.last_ns >= down.first_ns
        assert sum(down.gaps) == len(sent) - 1
        await down.finish()
        chunks, ended = dechunk(bytes(transport.body))
        assert chunks == sent and ended
        assert protocol.fastsse_down is None  # the connection is let go at the end

    run(body)


def test_a_full_socket_holds_the_upstream_and_keeps_the_order(stream_backend: SimpleNamespace) -> None:
    async def body() -> None:
        transport, protocol, cycle = wired(high=1000)
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        sent = pieces(200)
        got: list[Any] = []
        i = 0
        holds = 0
        while i < len(sent):
            answer = down.on_chunk(sent[i])  # one upstream read per turn of the loop, as curl's
            i += 1
            if answer is None:
                await turn()
                continue
            assert asyncio.isfuture(answer) and not answer.done()
            holds += 1
            # the caller reads: the transport drains, what was held goes, the upstream goes on
            await turn()
            transport.drain()
            await asyncio.wait_for(answer, 1)
            got.append(answer)
        assert holds >= 5
        assert len(cycle.messages) < len(sent) // 2  # between the holds, the pieces went direct
        await down.finish()
        chunks, ended = dechunk(bytes(transport.body))
        assert b"".join(chunks) == b"".join(sent) and ended
        assert down.relayed == sum(map(len, sent))

    run(body)


def test_while_paused_nothing_more_is_written(stream_backend: SimpleNamespace) -> None:
    async def body() -> None:
        transport, protocol, cycle = wired(high=100)
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        sent = pieces(5, 200)
        down.on_chunk(sent[0])
        await turn()
        assert transport.paused  # the first piece filled it
        size = len(transport.body)
        assert down.on_chunk(sent[1]) is None  # one more read is kept for the turn's send...
        await turn()  # ...which waits for room
        holds = [down.on_chunk(piece) for piece in sent[2:]]
        assert all(asyncio.isfuture(h) and not h.done() for h in holds)  # the upstream is held
        assert len(transport.body) == size  # nothing written while paused
        for _ in range(10):  # the caller reads on (each send may fill it again)
            transport.drain()
            await turn()
        assert all(h.done() for h in holds)
        await down.finish()
        assert b"".join(dechunk(bytes(transport.body))[0]) == b"".join(sent)

    run(body)


def test_a_transport_that_raises_stops_the_transfer(stream_backend: SimpleNamespace) -> None:
    async def body() -> None:
        transport, protocol, cycle = wired()
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        down.on_chunk(b"data: 1\n\n")
        await turn()
        transport.closed = True
        assert down.on_chunk(b"data: 2\n\n") is False
        assert down.gone and down.dropped
        assert down.on_chunk(b"data: 3\n\n") is False
        assert down.relayed == len(b"data: 1\n\n")

    run(body)


def test_a_caller_that_left_gets_nothing_more(stream_backend: SimpleNamespace) -> None:
    async def body() -> None:
        transport, protocol, cycle = wired()
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        down.on_chunk(b"data: 1\n\n")
        await turn()
        first = down.first_ns
        down.leave()
        size = len(transport.body)
        assert down.on_chunk(b"data: 2\n\n") is False
        assert len(transport.body) == size and down.first_ns == first
        assert protocol.fastsse_down is None

    run(body)


@pytest.mark.parametrize("method, length", [("HEAD", False), ("POST", True)])
def test_no_direct_writes_without_a_chunked_body(
    stream_backend: SimpleNamespace, method: str, length: bool
) -> None:
    async def body() -> None:
        _transport, protocol, cycle = wired(method, length=length)
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        for piece in pieces(3):
            down.on_chunk(piece)
            await turn()
        assert len(cycle.messages) == 4  # the start and every piece through send
        assert not down.sink.direct

    run(body)


def test_one_answer_at_a_time_writes_to_a_connection(stream_backend: SimpleNamespace) -> None:
    """A pipelined request's answer starts only once the one before has ended (uvicorn's rule);
    should two Downstreams meet on one connection anyway, only the first writes directly."""

    async def body() -> None:
        _transport, protocol, cycle = wired()
        first = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        second = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        assert protocol.fastsse_down is first
        first.on_chunk(b"data: a\n\n")
        await turn()
        await first.finish()
        assert protocol.fastsse_down is None
        assert second.sink.write is None

    run(body)


def test_the_first_content_hook_is_called_until_it_says_yes(stream_backend: SimpleNamespace) -> None:
    async def body() -> None:
        _transport, protocol, cycle = wired()
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        seen: list[bytes] = []

        def first(data: bytes) -> bool:
            seen.append(data)
            return len(seen) == 2

        down.sink.first = first
        for piece in pieces(5):
            down.on_chunk(piece)
            await turn()
        assert seen == pieces(5)[:2]

    run(body)


def test_the_sink_frames_any_size(stream_backend: SimpleNamespace) -> None:
    from fastsse.client._streams import new_sink

    out: list[bytes] = []
    sink = new_sink(lambda data: "slow")
    assert sink(b"abc") == "slow" and out == []  # not direct: the owner's path
    sink.write = out.append
    sink.direct = True
    sizes = [1, 15, 16, 255, 256, 4095, 4096, 65535, 65536, 1 << 20]
    for size in sizes:
        assert sink(b"z" * size) is None
    assert dechunk(b"".join(out))[0] == [b"z" * size for size in sizes]
    assert sink.relayed == sum(sizes)
    writes = len(out)
    assert sink(b"") is None and len(out) == writes  # nothing to frame, nothing written


def test_an_answer_that_ends_while_the_socket_is_full_still_finishes(stream_backend: SimpleNamespace) -> None:
    """The last direct write fills the caller's socket and the upstream ends right there: the
    end must go out once the caller reads on. (The wait for room must not hang on a notice the
    connection no longer sends once the answer let it go.)"""

    async def body() -> None:
        transport, protocol, cycle = wired(high=200)
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        sent = pieces(3, 200)
        down.on_chunk(sent[0])
        await turn()
        transport.drain()
        assert down.sink.direct
        assert down.on_chunk(sent[1]) is None  # written directly; it filled the socket
        assert transport.paused
        down.on_chunk(sent[2])  # the relay's tail, at close: held or kept for the turn, not sent
        assert b"".join(dechunk(bytes(transport.body))[0]) == b"".join(sent[:2])
        finishing = asyncio.ensure_future(down.finish())
        await asyncio.sleep(0.01)
        for _ in range(10):  # the caller reads on
            transport.drain()
            await turn()
        await asyncio.wait_for(finishing, 1)
        chunks, ended = dechunk(bytes(transport.body))
        assert b"".join(chunks) == b"".join(sent) and ended

    run(body)


def test_a_relay_stream_reaches_the_wire_as_the_relay_wrote_it(stream_backend: SimpleNamespace) -> None:
    """The relay's stream with the sink as its ``on_chunk`` (the compiled BytesStream over the
    compiled Relay frames the relay's output in the relay, one copy): the transport gets each
    piece a lone Relay returns as one chunk, while ``direct`` is set, after the ``first``
    detector has seen its pieces, and whatever the piece's size; ``slow`` gets the others as
    they are; the stamps and counts are the sink's own; the bytes before an oversized event
    still go out."""
    from fastsse import ChatChunkEncoder
    from fastsse._errors import EventTooLarge
    from fastsse.client._streams import new_sink, new_stream

    enc = ChatChunkEncoder(id="chatcmpl-1", model="m", created=1)
    reads = [enc.role(), b": keep-alive\n\n", enc.content("a")]
    reads += [enc.content(word * size) for word, size in (("b", 1), ("c", 300), ("d", 5000), ("e", 70000))]
    whole = enc.content("f") + enc.content("g")
    reads += [whole[:9], whole[9:40], whole[40:], enc.content("y") + b"data: " + b"h" * 200_000 + b"\n\n"]
    reference = stream_backend.Relay(max_event_bytes=100_000)
    expected = [reference.write(read) for read in reads[:-1]]
    slow: list[bytes] = []
    out: list[bytes] = []
    seen: list[bytes] = []
    sink = new_sink(lambda piece: slow.append(piece))
    sink.write = out.append
    stream = new_stream("relay", sink, api="chat", max_event_bytes=100_000, timing=False, direct=True)
    stream.write(reads[0])  # not direct yet: the owner's path
    sink.direct = True
    sink.first = lambda piece: seen.append(piece) or len(seen) == 2
    for read in reads[1:-1]:
        stream.write(read)
    with pytest.raises(EventTooLarge):
        stream.write(reads[-1])
    sent = [piece for piece in expected if piece]
    assert slow == sent[:1]
    assert seen == sent[1:3]
    chunks, ended = dechunk(b"".join(out))
    assert chunks == [*sent[1:], reads[-1][: reads[-1].index(b"\n\n") + 2]] and not ended
    assert sink.relayed == sum(map(len, chunks))
    assert sum(sink.gaps) == len(sent) and sink.first_ns <= sink.last_ns


def test_a_relay_stream_whose_sink_turns_slow_or_fails(stream_backend: SimpleNamespace) -> None:
    """A sink that stops being direct, is gone, or whose transport raises while a relay writes
    to it: the piece goes to ``slow`` (unframed) or ``lost()`` says what the transfer does."""
    from fastsse import ChatChunkEncoder
    from fastsse.client._streams import new_sink, new_stream

    enc = ChatChunkEncoder(id="chatcmpl-1", model="m", created=1)
    role, a, b, c = enc.role(), enc.content("a"), enc.content("b"), enc.content("c")
    slow: list[bytes] = []
    out: list[bytes] = []
    sink = new_sink(lambda piece: slow.append(piece))
    sink.write = out.append
    sink.direct = True
    stream = new_stream("relay", sink, api="chat", max_event_bytes=None, timing=False, direct=True)
    stream.write(role)
    sink.direct = False
    stream.write(a)
    sink.direct = True
    sink.gone = True
    stream.write(b)
    assert dechunk(b"".join(out))[0] == [role]
    assert slow == [a, b]
    sink.gone = False

    def refuse(data: bytes) -> None:
        raise RuntimeError("unable to perform operation: the handler is closed")

    sink.write = refuse
    sink.lost = lambda: False
    assert stream.write(c) == 0  # lost() said stop: the transfer stops
    assert not sink.direct


def test_end_now_ends_the_body_on_this_stack_once(stream_backend: SimpleNamespace) -> None:
    """``end_now()`` (what the gateway calls from the loop callback that read the upstream's whole
    answer end) writes the terminator before it returns, after every piece; ``finish()`` then
    sends nothing more."""

    async def body() -> None:
        transport, protocol, cycle = wired()
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        sent = pieces(3)
        assert down.end_now() is False  # nothing started: the end waits for finish()
        for piece in sent:
            down.on_chunk(piece)
        assert down.end_now() is False  # the first piece waits for this turn's flush
        await turn()
        assert down.end_now() is True
        chunks, ended = dechunk(bytes(transport.body))
        assert b"".join(chunks) == b"".join(sent) and ended and cycle.response_complete
        assert protocol.fastsse_down is None  # let go, as finish() lets it go
        written = bytes(transport.body)
        assert down.end_now() is True  # the end went out already: nothing more is written
        assert bytes(transport.body) == written
        messages = len(cycle.messages)
        await down.finish()
        assert len(cycle.messages) == messages  # no second end

    run(body)


@pytest.mark.parametrize("why", ["paused", "gone", "complete"])
def test_end_now_leaves_the_end_to_finish_where_it_would_wait(
    stream_backend: SimpleNamespace, why: str
) -> None:
    async def body() -> None:
        transport, protocol, cycle = wired()
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        down.on_chunk(pieces(1)[0])
        await turn()
        if why == "paused":
            protocol.pause_writing()  # the caller's socket is full: the end would wait
        elif why == "gone":
            down.leave()
        else:
            cycle.response_complete = True
        written = bytes(transport.body)
        assert down.end_now() is False
        assert bytes(transport.body) == written and protocol.fastsse_down is (down if why != "gone" else None)
        if why == "paused":
            protocol.resume_writing()
            await down.finish()
            assert dechunk(bytes(transport.body))[1]

    run(body)


class OwnCycle(Cycle):
    """The command's own server's exchange as far as the direct path reads it: the start and the
    first piece in one write (``begin``), and ``end_written`` (the sink wrote the body's end)."""

    def __init__(self, protocol: Protocol) -> None:
        super().__init__(protocol)
        self.ends_written = 0

    def begin(self, status: int, headers: Any, body: bytes, end: bool = False) -> bool:
        self.chunked_encoding = True
        self.protocol.transport.head = b"HTTP/1.1 200 OK\r\n\r\n"
        self.protocol.transport.write(b"%x\r\n%b\r\n%b" % (len(body), body, b"0\r\n\r\n" if end else b""))
        if end:
            self.end_written()
        return True

    def end_written(self) -> None:
        self.ends_written += 1  # every report counted: the tests expect exactly one
        if self.response_complete:  # as the server's own: told again, nothing to do
            return
        self.response_complete = True


@pytest.mark.parametrize("server", ["own", "uvicorn"])
def test_the_piece_that_completes_a_relayed_answer_carries_the_end(
    stream_backend: SimpleNamespace, server: str
) -> None:
    """On the command's own server the relay's ``[DONE]`` of a complete answer and the chunked
    terminator go in one write (the sink's ``ends``), the server is told (``end_written``), and
    ``on_complete`` then finds the end out (``end_now()`` true, writing nothing). On uvicorn's,
    which writes its own end, the piece goes alone and ``end_now()`` ends the body."""
    from fastsse import ChatChunkEncoder
    from fastsse.client._streams import new_stream

    enc = ChatChunkEncoder(id="chatcmpl-1", model="m", created=1)
    first, text, stop = enc.role() + enc.content("Hi"), enc.content(" there"), enc.finish("stop")

    async def body() -> None:
        transport = Transport()
        protocol = Protocol(transport)
        cycle = OwnCycle(protocol) if server == "own" else Cycle(protocol)
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        writes: list[bytes] = []
        write = transport.write

        def counted(data: bytes) -> None:
            writes.append(data)
            write(data)

        down.sink.write = counted
        told: list[tuple[bool, bool]] = []
        stream = new_stream(
            "relay", down.on_chunk, api="chat", max_event_bytes=None, timing=False, direct=True
        )
        stream.on_complete = lambda: told.append((down.end_now(), cycle.response_complete))
        stream.write(first)
        await turn()  # the start and the first piece (own: begin; uvicorn: this turn's flush)
        down.sink.first = None  # the first content was seen (the gateway's detector lets go)
        stream.write(text)
        assert told == []
        before = len(writes)
        stream.write(stop + b"data: [DONE]\n\n")
        assert told == [(True, True)]
        chunks, ended = dechunk(bytes(transport.body))
        assert ended and chunks[-1].endswith(b"data: [DONE]\n\n")
        if server == "own":
            assert len(writes) == before + 1 and writes[-1].endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
            assert cycle.ends_written == 1
        else:
            assert len(writes) == before + 1 and not writes[-1].endswith(
                b"0\r\n\r\n"
            )  # the end: uvicorn's send
        written = bytes(transport.body)
        await down.finish()
        stream.write(b"data: late\n\n")
        assert bytes(transport.body) == written  # one end, nothing after it

    run(body)


def test_an_answer_complete_in_its_first_piece_ends_with_the_start(stream_backend: SimpleNamespace) -> None:
    """A whole answer in one upstream read goes out through the response's start (``begin``): on
    the command's own server the end goes in that write too (the sink hands the piece over as
    ``slow(piece, True)``), and ``on_complete`` finds the end out."""
    from fastsse import ChatChunkEncoder
    from fastsse.client._streams import new_stream

    enc = ChatChunkEncoder(id="chatcmpl-1", model="m", created=1)
    whole = enc.role() + enc.content("Hi") + enc.finish("stop") + b"data: [DONE]\n\n"

    async def body() -> None:
        transport = Transport()
        protocol = Protocol(transport)
        cycle = OwnCycle(protocol)
        down = Downstream(cycle.send, list(SSE_HEADERS), wire=(protocol, cycle))
        writes: list[bytes] = []
        write = transport.write
        transport.write = lambda data: writes.append(data) or write(data)  # type: ignore[method-assign]
        told: list[tuple[bool, bool]] = []
        stream = new_stream(
            "relay", down.on_chunk, api="chat", max_event_bytes=None, timing=False, direct=True
        )
        stream.on_complete = lambda: told.append((down.end_now(), cycle.response_complete))
        stream.write(whole)
        assert told == [(True, True)] and cycle.ends_written == 1
        assert len(writes) == 1 and writes[0].endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
        await down.finish()
        assert len(writes) == 1  # one end

    run(body)

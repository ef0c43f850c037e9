"""A small driver for valgrind memcheck over the compiled Decoder and ChatStream.

It walks every path that touches the C buffers: BOM held byte by byte, CR at a chunk end with LF at
the next start, lines held across chunks, buffers grown past the 1 MiB keep-threshold and freed,
overflow of a held line, of a completed line and of event data, recovery at the next blank line,
close() mid-event, bytearray / memoryview / non-contiguous input, the TypeError path, long retry
values, and ChatStream's fold with abort, on_chunk raising, EventTooLarge and error payloads.

    PYTHONMALLOC=malloc valgrind --leak-check=full --errors-for-leak-kinds=definite \\
        --error-exitcode=99 python fuzz/memcheck.py

See fuzz/README.md for the recorded outcome.
"""

from __future__ import annotations

import contextlib
import gc

import fastsse

C = fastsse.get_backend("cython")


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def decoder_paths() -> int:
    events = 0
    stream = (
        b"\xef\xbb\xbfid: 1\r\nretry: 250\r\nevent: e\r\ndata: a\r\ndata: b\r\n\r\n"
        b": comment\rdata: c\r\r"
        b"retry: " + b"0" * 5000 + b"7\ndata: \xff\xfe\n\n"
        b"retry: " + b"9" * 5000 + b"\nid: x\x00y\ndata\n\n"
    )
    for chunks in ([stream], bytewise(stream), [stream[:5], stream[5:77], stream[77:]]):
        d = C.Decoder()
        for chunk in chunks:
            events += len(d.feed(chunk))
        d.close()
    # Buffers grown past the keep-threshold (1 MiB), then freed after their event.
    d = C.Decoder()
    big = (
        b"data: " + b"x" * (3 << 20) + b"\n" + b"data: " + b"y" * (2 << 20) + b"\nevent: " + b"t" * (2 << 20)
    )
    for i in range(0, len(big), 65536):
        d.feed(big[i : i + 65536])
    events += len(d.feed(b"\n\n"))
    events += len(d.feed(b"data: small\n\n"))
    # Overflows: held line, completed line, event data; recovery; close mid-event and mid-discard.
    for limit in (1, 7, 64, 4096):
        d = C.Decoder(max_event_bytes=limit)
        for chunk in (
            b"data: ok\n\n",
            b"data: " + b"z" * 5000,
            b"z" * 100,
            b"\n\n",
            b"data: after\n\n",
            b"data: 1234\ndata: 5678\ndata: " + b"w" * 300 + b"\n\ndata: x\r",
            b"\n\r\n",
            b"x" * 9000 + b"\r\n\r\ndata: tail",
        ):
            try:
                events += len(d.feed(chunk))
            except fastsse.EventTooLarge as exc:
                events += len(exc.events)
        d.close()
        with contextlib.suppress(fastsse.EventTooLarge):
            d.feed(b"data: " + b"q" * 10000)
        d.close()
    # Input kinds and the error path.
    d = C.Decoder()
    store = bytearray(b"data: from a bytearray\n\n")
    events += len(d.feed(store))
    events += len(d.feed(memoryview(store)))
    events += len(d.feed(memoryview(b"dxaxtxax:x xsxtxrxixdxex\n\n")[::2]))
    for bad in ("text", 5, None):
        with contextlib.suppress(TypeError):
            d.feed(bad)  # type: ignore[arg-type]
    return events


CHAT = (
    b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"Hel\xc3\xa9"}}]}\r\n\r\n'
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}\n\n'
    b'data: {"choices": 5}\n\ndata: not json\n\n'
    b'data: {"choices":[{"index":1,"delta":{"reasoning_content":"r"},"logprobs":{"content":[{"token":"x"}]}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"total_tokens":3}}\n\n'
    b"data: [DONE]\n\n"
)


def chat_paths() -> int:
    seen = []
    for chunks in ([CHAT], bytewise(CHAT)):
        s = C.ChatStream(seen.append)
        for chunk in chunks:
            s.write(chunk)
        s.close()
        s.result()
    # Abort, on_chunk raising, EventTooLarge, error payload, writes after the stop.
    s = C.ChatStream(lambda chunk: False)
    s.write(CHAT)
    s.write(CHAT)

    def boom(chunk):
        raise KeyError("boom")

    s = C.ChatStream(boom)
    with contextlib.suppress(KeyError):
        s.write(CHAT)
    s = C.ChatStream(max_event_bytes=64)
    with contextlib.suppress(fastsse.EventTooLarge):
        s.write(CHAT)
    s.write(CHAT)
    s = C.ChatStream()
    s.write(b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\nevent: error\ndata: oops\n\n' + CHAT)
    s.close()
    s.result()
    agg = C.ChatAggregator()
    for line in CHAT.split(b"\n\n"):
        agg.feed_data(line[6:])
    agg.result()
    return len(seen)


def main() -> None:
    total = 0
    for _ in range(3):
        total += decoder_paths() + chat_paths()
    gc.collect()
    print(f"memcheck driver done: {total} events and chunks")


if __name__ == "__main__":
    main()

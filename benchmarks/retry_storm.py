"""1,000 streams failing at once: when do their retries arrive? ``python benchmarks/retry_storm.py
[N]`` starts a threaded raw server on 127.0.0.1 that answers every request 500 (no Retry-After),
sends N requests at once through one ``AsyncClient`` with ``max_retries=1``, and prints the
histogram of the second wave's arrivals (100 ms buckets after the first retry): full jitter
spreads them over the first half second instead of one burst."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time

import fastsse

ANSWER = b'HTTP/1.1 500 X\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{"error":1}'


def serve(sock: socket.socket, arrivals: list[float], stop: threading.Event) -> None:
    def handle(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                more = conn.recv(65536)
                if not more:
                    return
                data += more
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length:
                body += conn.recv(65536)
            arrivals.append(time.monotonic())
            conn.sendall(ANSWER)

    sock.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def main(n: int) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(n)
    arrivals: list[float] = []
    stop = threading.Event()
    threading.Thread(target=serve, args=(sock, arrivals, stop), daemon=True).start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    body = {"model": "m", "messages": []}

    async def run() -> list[object]:
        async with fastsse.AsyncClient(base_url=url, api_key="x", max_connections=n, max_retries=1) as client:
            return await asyncio.gather(
                *(client.create_stream(body, timing=True) for _ in range(n)), return_exceptions=True
            )

    started = time.monotonic()
    outcomes = asyncio.run(run())
    stop.set()
    arrivals.sort()
    first, second = arrivals[:n], arrivals[n:]
    print(
        f"{n} streams, {len(arrivals)} requests in {time.monotonic() - started:.2f} s; "
        f"first wave over {(first[-1] - first[0]) * 1000:.0f} ms, "
        f"retries over {(second[-1] - second[0]) * 1000:.0f} ms"
    )
    assert all(isinstance(o, dict) and o.get("status") == 500 for o in outcomes)
    print("the server's arrivals, 100 ms buckets from the first (first and second attempts together):")
    _histogram([t - arrivals[0] for t in arrivals], 0.1)
    print("each stream's wait before its retry (timing retry_wait), 50 ms buckets:")
    _histogram([o["timing"]["retry_wait"] / 1e9 for o in outcomes if isinstance(o, dict)], 0.05)


def _histogram(values: list[float], width: float) -> None:
    top = max(values)
    buckets = [0] * (int(top / width) + 1)
    for v in values:
        buckets[int(v / width)] += 1
    for i, count in enumerate(buckets):
        lo = i * width * 1000
        print(f"  {lo:6.0f}-{lo + width * 1000:<6.0f} ms {count:5d}  {'#' * (count * 50 // max(buckets))}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)

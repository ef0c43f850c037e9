"""``python -m fastsse load`` against the scripted server: what it measures is what the script says.

The server runs in its own process (as in a real run, so its timing is not disturbed by the
client's); expected values come from the script (``fastsse.load._server``): token chunk ``k``
is sent ``ttft_ms + k * itl_ms`` after the server read the request, never earlier.

What a loaded machine cannot change is held exactly: token counts, which chunks are tokens,
outcomes, receive >= send for every chunk, no token chunk read before the script sends it, and the
summary's TTFT, TPOT and ITL being docs/load.md's definitions applied to the stamps recorded. What
it can change (a stamp's lateness: on a busy two-core box chunks sent 10 ms apart are read back to
back, so "the ITL median is 10 +- 3 ms" failed there) is held only to a bound with that slack.
"""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from fastsse import load
from fastsse.cli import load as load_cli
from fastsse.load import _run as _load_run
from fastsse.testing import spawn_scripted_server

# How late a loaded two-core machine may make a stream of a fraction of a second: a bound, not a
# measurement (the figures themselves are what the load command is for).
LOADED_MS = 2000.0


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with spawn_scripted_server(ttft_ms=50, itl_ms=10, chunks=12, loop="asyncio") as srv:
        yield srv


def run(server: Any, *, model: str = "m", client: str = "fastsse", **options: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {"concurrency": 4, "requests": 8, "loop": "asyncio", "client": client}
    settings.update(options)
    return load.run(load.Config(url=server.base_url, model=model, **settings))


def completes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc["requests"] if r["outcome"] == "complete"]


def follows_the_script(
    doc: dict[str, Any], *, ttft_ms: float = 50.0, itl_ms: float = 10.0, chunks: int = 12
) -> None:
    """Every token chunk read no earlier than the script sends it and not later than a loaded machine
    explains; the summary's TTFT, TPOT and ITL are docs/load.md's definitions of the stamps."""
    ttft, tpot, itl = [], [], []
    for r in completes(doc):
        times = [r["reads"][i] for i in r["token_reads"]]
        assert len(times) == chunks
        early = [k for k, at in enumerate(times) if at - r["started"] < (ttft_ms + k * itl_ms) * 1e6]
        assert early == []
        assert times[-1] - r["started"] <= (ttft_ms + (chunks - 1) * itl_ms + LOADED_MS) * 1e6
        ttft.append((r["first_token"] - r["started"]) / 1e6)
        tpot.append((r["last_token"] - r["first_token"]) / 1e6 / (sum(r["tokens"]) - 1))
        # a token chunk after the first, g after the one before, with n tokens: n values of g / n
        for k in range(1, len(times)):
            itl += [(times[k] - times[k - 1]) / 1e6 / r["tokens"][k]] * r["tokens"][k]
    s = doc["summary"]
    for key, values in (("ttft_ms", ttft), ("tpot_ms", tpot), ("itl_ms", itl)):
        assert s[key]["n"] == len(values), key
        assert s[key]["p50"] == pytest.approx(load.percentile(values, 50)), key
    assert ttft_ms <= s["ttft_ms"]["p50"] <= ttft_ms + LOADED_MS


def test_ttft_and_itl_match_the_script(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = run(server)
    s = doc["summary"]
    assert s["outcomes"] == {"complete": 8}
    follows_the_script(doc)
    # 12 single-token chunks: 11 gaps per request, every one measured
    assert s["itl_ms"]["n"] == 8 * 11
    assert s["output_tokens"] == 8 * 12
    # the server stamps every chunk just before writing it: nothing is received before it was sent
    lags = [lag for r in doc["requests"] for lag in r["lags"]]
    assert len(lags) == 8 * 12
    assert min(lags) >= 0


def test_role_finish_and_usage_chunks_are_never_tokens(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = run(server, requests=2, extra_body='{"stream_options": {"include_usage": true}}')
    for r in completes(doc):
        assert list(r["tokens"]) == [1] * 12
        assert list(r["token_kinds"]) == [1] * 12
        assert r["completion_tokens"] == 12
        # the role chunk arrives at once, the first token ttft later: the first byte is not a token
        assert r["first_byte"] < r["first_token"]
        assert r["first_token"] - r["started"] >= 50_000_000  # the server is never early
        # the finish, usage and [DONE] come with the last token's write: no token after it
        assert r["last_token"] == r["reads"][r["token_reads"][-1]]


@pytest.mark.parametrize(
    ("extra", "label"),
    [
        ('{"stream_options": {"include_usage": true, "continuous_usage_stats": true}}', "continuous usage"),
        ('{"logprobs": true}', "logprobs"),
    ],
)
def test_multi_token_chunks_give_the_per_token_itl(
    server: Any, stream_backend: SimpleNamespace, extra: str, label: str
) -> None:
    doc = run(server, model="tokens_per_chunk=4,itl_ms=20", extra_body=extra, requests=4)
    s = doc["summary"]
    assert s["outcomes"] == {"complete": 4}, label
    for r in doc["requests"]:
        assert list(r["tokens"]) == [4] * 12, label
    # each gap between chunks of 4 tokens (20 ms on an idle machine) is 4 token gaps of a quarter
    follows_the_script(doc, itl_ms=20.0)
    assert s["itl_ms"]["n"] == 4 * 11 * 4
    assert s["output_tokens"] == 4 * 48
    # every token countable (a busy machine may add its own warning about the client's loop)
    assert [w for w in s["warnings"] if "countable" in w] == []


def test_multi_token_chunks_without_counts_warn(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = run(server, model="tokens_per_chunk=4", requests=2)  # final usage only: 48 reported, 12 countable
    s = doc["summary"]
    assert s["output_tokens"] == 2 * 48  # throughput trusts usage
    assert any("countable" in w for w in s["warnings"])


def test_reasoning_first_token_is_timed_apart(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = run(server, model="reasoning_chunks=5", requests=2)
    for r in completes(doc):
        assert list(r["token_kinds"]) == [2] * 5 + [1] * 7
        assert r["first_token"] == r["first_reasoning"]
        assert r["first_reasoning"] - r["started"] >= 50_000_000  # never early: chunk 0 at 50 ms
        assert r["first_content"] - r["started"] >= 100_000_000  # chunk 5 at 50 + 5 x 10 ms
    s = doc["summary"]
    assert s["ttft_reasoning_ms"]["n"] == 2 and s["ttft_content_ms"]["n"] == 2
    assert s["ttft_content_ms"]["p50"] >= s["ttft_reasoning_ms"]["p50"]  # late reads may share a moment


def test_truncated_stream_is_incomplete_never_a_success(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = run(server, model="truncate_after=3", requests=3, concurrency=3)
    s = doc["summary"]
    assert s["outcomes"] == {"incomplete": 3}
    assert s["ttft_ms"]["n"] == 0 and s["output_tokens"] == 0  # a cut stream adds nothing to the figures
    assert s["requests_per_s"] == 0
    for r in doc["requests"]:
        assert list(r["tokens"]) == [1, 1, 1]
        assert r["cause"] == "cut mid-stream (curl 18)"


def test_errors_are_counted_by_cause(server: Any, stream_backend: SimpleNamespace) -> None:
    body = '{"fastsse_script": {"error_after": 2}}'
    errors = run(server, requests=2, extra_body=body)["summary"]
    assert errors["outcomes"] == {"error": 2}
    assert errors["failures_by_cause"] == {"error: error payload in the stream": 2}
    http = run(server, model="status=503", requests=2)["summary"]
    assert http["outcomes"] == {"http": 2}
    assert http["failures_by_cause"] == {"http: http 503": 2}


def test_refused_connection_is_failed(stream_backend: SimpleNamespace) -> None:
    doc = load.run(
        load.Config(url="http://127.0.0.1:9/v1", model="m", requests=2, concurrency=1, loop="asyncio")
    )
    assert doc["summary"]["outcomes"] == {"failed": 2}
    assert doc["summary"]["failures_by_cause"] == {"failed: connection refused (curl 7)": 2}


def test_own_authorization_header_is_sent_instead_of_the_key(stream_backend: SimpleNamespace) -> None:
    from fastsse.testing import serve_in_thread

    with serve_in_thread(api_key="sekrit") as loopback:
        config = load.Config(
            url=loopback.base_url, model="plain", requests=1, loop="asyncio", api_key="wrong"
        )
        assert load.run(config)["summary"]["outcomes"] == {"http": 1}
        mine = dataclasses.replace(config, headers=(("Authorization", "Bearer sekrit"),))
        assert load.run(mine)["summary"]["outcomes"] == {"complete": 1}


def test_rate_arrivals_record_queue_time(server: Any, stream_backend: SimpleNamespace) -> None:
    # 6 requests arriving at 200/s, one slot: each waits for the ~170 ms answer before it
    doc = run(server, rate=200.0, arrival="constant", concurrency=1, requests=6)
    queue = doc["summary"]["queue_ms"]
    assert queue["n"] == 6
    assert queue["max"] > 500  # the last one waited for about five answers
    starts = sorted(r["started"] for r in doc["requests"])
    assert all(b - a >= 150_000_000 for a, b in itertools.pairwise(starts))  # one at a time


def test_warmup_requests_are_left_out(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = run(server, requests=3, warmup=2)
    assert doc["summary"]["requests"] == 3
    assert doc["summary"]["warmup_requests"] == 2
    assert sum(r["warmup"] for r in doc["requests"]) == 2


@pytest.mark.parametrize("client", ["aiohttp-vllm", "openai"])
def test_peer_clients_give_the_same_figures(server: Any, client: str) -> None:
    pytest.importorskip("aiohttp")
    doc = run(server, client=client, requests=4)
    s = doc["summary"]
    assert s["outcomes"] == {"complete": 4}
    follows_the_script(doc)
    assert s["output_tokens"] == 4 * 12


def test_dataset_rows_are_sent_as_they_are(server: Any, stream_backend: SimpleNamespace) -> None:
    rows = (
        orjson.dumps(
            {"messages": [{"role": "user", "content": "a"}], "fastsse_script": {"chunks": 3}}
        ).decode(),
        orjson.dumps({"prompt": "b", "max_tokens": 5}).decode(),
    )
    doc = run(server, model="chunks=none", dataset=rows, requests=4, concurrency=2)
    assert [sum(r["tokens"]) for r in doc["requests"]] == [3, 5, 3, 5]
    # a whole body goes as it is (no usage asked for it); a prompt line gets include_usage
    assert [r["completion_tokens"] for r in doc["requests"]] == [None, 5, None, 5]
    body = load.bodies(load.Config(url="u", model="m", dataset=rows, max_tokens=7))
    assert body(0) == {**orjson.loads(rows[0]), "model": "m", "stream": True, "max_tokens": 7}


def test_bad_dataset_line_is_a_value_error(server: Any) -> None:
    with pytest.raises(ValueError, match="dataset line 1"):
        run(server, dataset=("[1, 2]",))


def test_two_workers_merge_onto_one_clock(server: Any) -> None:
    doc = run(server, requests=8, concurrency=4, workers=2)
    assert doc["summary"]["outcomes"] == {"complete": 8}
    assert sorted(r["index"] for r in doc["requests"]) == list(range(8))
    assert {r["worker"] for r in doc["requests"]} == {0, 1}
    assert len({w["pid"] for w in doc["workers"]}) == 2
    # both workers started at the agreed moment: their first requests began within a few ms
    firsts = [min(r["started"] for r in doc["requests"] if r["worker"] == w) for w in (0, 1)]
    assert abs(firsts[0] - firsts[1]) < 400_000_000


def test_merge_of_two_documents_shifts_by_their_origins(server: Any, stream_backend: SimpleNamespace) -> None:
    a = run(server, requests=2)
    b = run(server, requests=2)
    merged = load.merge([a, b])
    assert merged["summary"]["requests"] == 4
    shift = b["origin_epoch_ns"] - a["origin_epoch_ns"]
    assert merged["requests"][2]["started"] == b["requests"][0]["started"] + shift
    with pytest.raises(ValueError):
        load.merge([{"schema": "other"}])


def test_percentile_interpolates_like_numpy() -> None:
    assert load.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert load.percentile([10.0], 99) == 10.0
    assert load.percentile([0.0, 10.0], 90) == 9.0


def test_itl_values_spread_a_chunk_gap_over_its_tokens() -> None:
    record = {"reads": [0, 100, 400, 400], "token_reads": [1, 2, 3], "tokens": [2, 3, 1]}
    # the first chunk's tokens are TTFT's; then 300 over 3 tokens, then 0 (same read) for 1
    assert load.itl_values(record) == [100.0, 100.0, 100.0, 0.0]


def test_command_line_json_and_exit_status(server: Any, tmp_path: Any) -> None:
    out = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "fastsse", "load", server.base_url, "--model", "m", "--requests", "3"]
    done = subprocess.run(
        [*cmd, "--json", str(out), "--concurrency", "3"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "TTFT" in done.stdout and "ITL (token-weighted)" in done.stdout
    assert done.stderr == ""  # not a terminal: no progress display
    doc = orjson.loads(out.read_bytes())
    assert doc["schema"] == "fastsse.load/2"
    assert len(doc["requests"]) == 3
    cut = subprocess.run(
        [*cmd[:5], "--model", "truncate_after=1", "--requests", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cut.returncode == 1  # not every request completed
    bad = subprocess.run([*cmd, "--concurrency", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--concurrency" in bad.stderr


def test_plot_writes_a_png(server: Any, tmp_path: Any, stream_backend: SimpleNamespace) -> None:
    pytest.importorskip("matplotlib")
    doc = run(server, requests=2)
    path = tmp_path / "load.png"
    load.plot(doc, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_merge_command_line(server: Any, tmp_path: Any, stream_backend: SimpleNamespace, capsys: Any) -> None:
    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.json"
        path.write_bytes(load.dumps(run(server, requests=2)))
        paths.append(str(path))
    out = tmp_path / "all.json"
    assert load_cli.main(["merge", *paths, "--json", str(out)]) == 0
    assert "4 requests" in capsys.readouterr().out
    assert len(orjson.loads(out.read_bytes())["requests"]) == 4
    (tmp_path / "bad.json").write_bytes(b'{"schema": "x"}')
    assert load_cli.main(["merge", str(tmp_path / "bad.json")]) == 2


def test_a_late_event_loop_is_warned_about() -> None:
    worker = {"cpu_s": 0.1, "wall_s": 1.0, "loop_delays_ns": [40_000_000] * 100, "preempted": 500}
    summary = load.summarize([], [worker])
    assert summary["client_loop_delay_ms"]["p99"] == 40.0
    assert summary["client_preempted"] == 500
    assert any("event loop" in w and "other processes" in w for w in summary["warnings"])
    busy = load.summarize([], [{**worker, "cpu_s": 0.9}])
    assert any("event loop" in w and "was busy" in w for w in busy["warnings"])
    quiet = load.summarize([], [{**worker, "loop_delays_ns": [100_000] * 100}])
    assert not quiet["warnings"]


def test_run_reports_its_event_loop_delay(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = run(server, requests=4)
    delay = doc["summary"]["client_loop_delay_ms"]
    assert delay["n"] >= 10  # 12 x 10 ms chunks + 50 ms: at least ~17 probe wake-ups
    assert delay["min"] >= 0


def test_duration_stops_sending_and_lets_requests_finish(
    server: Any, stream_backend: SimpleNamespace
) -> None:
    # closed loop, 2 users, 0.3 s: each request takes ~170 ms, so each user sends 2 and both finish
    doc = run(server, requests=None, duration=0.3, concurrency=2)
    starts = [r["started"] for r in doc["requests"]]
    assert 2 <= len(starts) <= 6
    assert max(starts) - min(starts) < 300_000_000 + 50_000_000
    assert doc["summary"]["outcomes"] == {"complete": len(starts)}


def test_poisson_arrivals_follow_the_seed(server: Any, stream_backend: SimpleNamespace) -> None:
    a = run(server, rate=50.0, concurrency=None, requests=5, seed=7)
    b = run(server, rate=50.0, concurrency=None, requests=5, seed=7)

    def gaps(doc: dict[str, Any]) -> list[int]:
        queued = sorted(r["queued"] for r in doc["requests"])
        return [y - x for x, y in itertools.pairwise(queued)]

    # the same seed draws the same arrival schedule; a late dispatch is queue time, not a moved arrival
    assert gaps(a) == gaps(b)
    assert all(r["started"] >= r["queued"] for r in a["requests"])
    assert a["summary"]["outcomes"] == {"complete": 5}


@pytest.mark.parametrize(
    ("model", "outcome", "tokens"),
    [
        ("plain", "complete", 15),  # written in 1-11 byte pieces: events split across reads
        ("crlf", "complete", 15),  # CRLF line endings and a ": ping" comment first
        ("slow-2", "complete", 15),  # ": ping" comments between the tokens
        ("plain:bulk", "complete", 15),  # the whole stream in one write: tokens share a read
        ("disconnect", "incomplete", 6),  # half an event, then the connection closes
        ("error", "error", 6),
    ],
)
def test_framing_that_broke_other_suites(
    stream_backend: SimpleNamespace, model: str, outcome: str, tokens: int
) -> None:
    from fastsse.testing import serve_in_thread

    with serve_in_thread(pause=0) as loopback:
        doc = load.run(
            load.Config(url=loopback.base_url, model=model, requests=2, concurrency=2, loop="asyncio")
        )
    assert doc["summary"]["outcomes"] == {outcome: 2}
    for r in doc["requests"]:
        assert sum(r["tokens"]) == tokens
        if model == "plain:bulk":
            assert len(set(r["token_reads"])) < len(r["token_reads"])  # marked as sharing a read


@pytest.fixture(scope="module")
def h2_url() -> Iterator[tuple[str, list[Any]]]:
    """A streaming ASGI app under hypercorn, which answers HTTP/2 to a client that opens with its preface."""
    pytest.importorskip("hypercorn")
    import asyncio
    import socket
    import threading
    import time

    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from fastsse.chat.encode import ChatChunkEncoder

    seen: list[Any] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen.append((scope["client"], scope["http_version"]))
        enc = ChatChunkEncoder(id="h2", model="m", created=1)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for event in [enc.role(), *(enc.content(f" t{i}") for i in range(4)), enc.finish("stop"), enc.done()]:
            await send({"type": "http.response.body", "body": event, "more_body": True})
            await asyncio.sleep(0.005)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = config.errorlog = None
    stop: list[Any] = []

    async def main() -> None:
        event = asyncio.Event()
        stop.append((asyncio.get_running_loop(), event))
        await serve(app, config, shutdown_trigger=event.wait)  # type: ignore[arg-type]

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1", seen
    loop, event = stop[0]
    loop.call_soon_threadsafe(event.set)
    thread.join(10)


def test_http2_streams_share_one_connection(
    h2_url: tuple[str, list[Any]], stream_backend: SimpleNamespace
) -> None:
    url, seen = h2_url
    del seen[:]
    doc = load.run(load.Config(url=url, model="m", requests=10, concurrency=10, loop="asyncio", http2=True))
    assert doc["summary"]["outcomes"] == {"complete": 10}
    assert doc["summary"]["output_tokens"] == 40
    assert {version for _, version in seen} == {"2"}
    assert len({client for client, _ in seen}) == 1  # ten streams, one connection


def test_http2_is_refused_for_a_peer() -> None:
    args = load_cli._parser().parse_args(["http://x/v1", "--model", "m", "--http2", "--client", "openai"])
    with pytest.raises(ValueError, match="--http2"):
        load_cli.config_from_args(args)


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_responses_and_messages_are_timed_like_chat(
    server: Any, stream_backend: SimpleNamespace, api: str
) -> None:
    # the scripted server serves the same script translated; its events end with the send stamp
    doc = run(server, api=api, model="reasoning_chunks=4", requests=4)
    s = doc["summary"]
    assert s["outcomes"] == {"complete": 4}
    follows_the_script(doc)
    assert s["itl_ms"]["n"] == 4 * 11
    assert s["output_tokens"] == 4 * 12  # from the API's own usage (output_tokens)
    for r in doc["requests"]:
        assert list(r["token_kinds"]) == [2] * 4 + [1] * 8  # thinking / reasoning summary, then text
        assert r["first_content"] - r["started"] >= 90_000_000  # chunk 4 at 50 + 4 x 10 ms
        assert len(r["lags"]) == 12 and min(r["lags"]) >= 0
    assert doc["config"]["api"] == api


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_a_cut_or_failed_format_stream_is_never_a_success(
    server: Any, stream_backend: SimpleNamespace, api: str
) -> None:
    cut = run(server, api=api, model="truncate_after=3", requests=2)["summary"]
    assert cut["outcomes"] == {"incomplete": 2}
    failed = run(server, api=api, model="error_after=2", requests=2)["summary"]
    assert failed["outcomes"] == {"error": 2}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_an_answer_ended_by_its_limit_is_complete(
    server: Any, stream_backend: SimpleNamespace, api: str
) -> None:
    # Without a chunk count the script stops at the limit: 5 tokens end the answer as each API ends one a
    # limit stopped (finish_reason "length", response.incomplete, stop_reason "max_tokens"): whole.
    doc = run(server, api=api, model="ttft_ms=0,itl_ms=0,chunks=none", requests=2, max_tokens=5)
    assert doc["summary"]["outcomes"] == {"complete": 2}
    assert [r["completion_tokens"] for r in doc["requests"]] == [5, 5]
    cut = {"verdict": {"complete": False, "terminal": None, "why": "no message_stop"}}
    assert (_load_run._from_result(0, cut, [], 0, None).cause) == "no message_stop"


def test_other_apis_are_refused_for_a_peer(capsys: Any) -> None:
    assert (
        load_cli.main(["http://127.0.0.1:9/v1", "--model", "m", "--api", "messages", "--client", "openai"])
        == 2
    )
    assert "--api messages needs --client fastsse" in capsys.readouterr().err


# issue 32, point 6: a run that reached no server failed (2); a short run is not called busy; a 404


def test_a_run_no_request_of_which_got_an_answer_exits_2(capsys: Any, tmp_path: Any) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    out = tmp_path / "run.json"
    code = load_cli.main([url, "--model", "m", "--requests", "2", "--quiet", "--json", str(out)])
    printed = capsys.readouterr()
    assert (code, printed.out) == (2, "")  # nothing measured: no summary
    assert printed.err == (
        f"fastsse load: no request got an answer from {url}/chat/completions: 2 x connection refused (curl 7)\n"
    )
    assert orjson.loads(out.read_bytes())["summary"]["outcomes"] == {"failed": 2}  # the records, all the same


def test_the_busy_warning_needs_a_run_long_enough_to_mean_it() -> None:
    # a run that ends at once spends its few milliseconds on setup, all of them on the CPU
    instant = load.summarize([], [{"cpu_s": 0.004, "wall_s": 0.004}])
    assert instant["client_busy"] == 1.0 and not instant["warnings"]
    long = load.summarize([], [{"cpu_s": 1.9, "wall_s": 2.0}])
    assert [w for w in long["warnings"] if w.startswith("the client was busy 95% of a core")]


def test_a_404_says_which_url_was_tried_and_hints_at_v1(capsys: Any, stream_backend: SimpleNamespace) -> None:
    from fastsse.testing import serve_in_thread

    with serve_in_thread() as srv:
        root = srv.base_url.removesuffix("/v1")
        code = load_cli.main([root, "--model", "plain", "--requests", "2", "--quiet"])
    assert code == 1  # an answer, if an HTTP error: the run measured it
    lines = capsys.readouterr().out.splitlines()
    assert "    2 x http: http 404" in lines
    assert lines[-1] == (
        f"  hint: 2 request(s) got HTTP 404 from {root}/chat/completions; "
        f"the base URL usually ends in /v1 ({root}/v1)"
    )


# issue 35: load, round 2


def test_records_keep_their_arrays_and_json_writes_them_as_lists(
    server: Any, stream_backend: SimpleNamespace
) -> None:
    from array import array

    doc = run(server, requests=2)
    record = doc["requests"][0]
    for key in ("reads", "token_reads", "tokens", "token_kinds", "lags"):
        assert isinstance(record[key], array), key
    # the document's records are the workers' records, not copies: the JSON is written from them
    back = orjson.loads(load.dumps(doc))
    assert back["requests"][0]["tokens"] == [1] * 12
    assert back["requests"][0]["reads"] == list(record["reads"])
    assert back["summary"] == orjson.loads(orjson.dumps(doc["summary"]))
    with pytest.raises(TypeError):
        load.dumps({"bad": object()})


@pytest.mark.parametrize("kind", ["list", "array"])
def test_itl_and_sharing_of_reads_out_of_a_row(kind: str) -> None:
    from array import array

    def record(reads: list[int], token_reads: list[int]) -> dict[str, Any]:
        out = load.Record(index=0, outcome="complete", started=0).to_json()
        if kind == "array":
            out.update(reads=array("q", reads), token_reads=array("i", token_reads))
            out["tokens"] = array("i", [1] * len(token_reads))
        else:
            out.update(reads=reads, token_reads=token_reads, tokens=[1] * len(token_reads))
        return out

    # token chunks in reads 0, 0 and 2 (read 1 carried none): not the reads 0..2 in a row
    shared = record([0, 100, 400], [0, 0, 2])
    assert load.itl_values(shared) == [0.0, 400.0]
    assert load.summarize([shared], [])["token_chunks_sharing_a_read"] == 1
    assert load.itl_values(record([0, 100, 300, 600], [1, 2, 3])) == [200.0, 300.0]


def test_the_summary_of_arrays_is_the_summary_of_lists(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = run(server, requests=4, model="tokens_per_chunk=2", extra_body='{"logprobs": true}')
    as_lists = orjson.loads(load.dumps(doc))
    for records in (doc["requests"], as_lists["requests"]):
        again = load.summarize(records, doc["workers"])
        assert again["itl_ms"] == doc["summary"]["itl_ms"]
        assert again["lag_ms"] == doc["summary"]["lag_ms"]
    # a multi-token chunk spreads its gap over its tokens (the slow path), the same either way
    assert doc["summary"]["itl_ms"]["n"] == 4 * 11 * 2


def test_a_prompt_row_with_more_fields_is_sent_without_crashing(
    server: Any, stream_backend: SimpleNamespace
) -> None:
    # it crashed every run with KeyError: 'messages' (in conversation, even without --turns)
    row = orjson.dumps({"prompt": "hi", "max_tokens": 5, "ttft_ms": 50}).decode()
    body = load.bodies(load.Config(url="u", model="chunks=none", dataset=(row,)))(0)
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert (body["max_tokens"], body["ttft_ms"], body["stream_options"]) == (5, 50, {"include_usage": True})
    doc = run(server, model="chunks=none", dataset=(row,), requests=2)
    assert doc["summary"]["outcomes"] == {"complete": 2}
    assert [sum(r["tokens"]) for r in doc["requests"]] == [5, 5]


def test_a_whole_body_without_messages_goes_as_it_is_even_with_turns(
    server: Any, stream_backend: SimpleNamespace
) -> None:
    row = orjson.dumps({"max_tokens": 3, "temperature": 0}).decode()
    body = load.bodies(load.Config(url="u", model="m", dataset=(row,)))(0)
    assert body == {"max_tokens": 3, "temperature": 0, "model": "m", "stream": True}
    doc = run(server, model="chunks=none", dataset=(row,), requests=2, turns=2)
    assert doc["summary"]["outcomes"] == {"complete": 4}  # the second turn carries the first answer


def _interrupted(server: Any, tmp_path: Any, *extra: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    """Run the command, Ctrl-C it once 3 requests have ended, and read its --json."""
    import os
    import signal
    import time

    out = tmp_path / "partial.json"
    cmd = [sys.executable, "-m", "fastsse", "load", server.base_url, "--model", "m", "--requests", "500"]
    proc = subprocess.Popen(
        [*cmd, "--concurrency", "2", "--json", str(out), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while True:
        stats = server.stats()
        if stats["streams_total"] - stats["streams_active"] >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return done, orjson.loads(out.read_bytes()) if out.exists() else None


@pytest.mark.usefixtures("default_sigint")
@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_writes_the_partial_json_and_exits_130(tmp_path: Any, workers: str) -> None:
    with spawn_scripted_server(ttft_ms=20, itl_ms=10, chunks=12, loop="asyncio") as srv:
        done, doc = _interrupted(srv, tmp_path, "--workers", workers)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr and "Task was destroyed" not in done.stderr, done.stderr
    assert "interrupted: the summary and" in done.stderr
    assert "interrupted (Ctrl-C)" in done.stdout  # the summary of what had ended
    assert doc is not None and doc["interrupted"] is True
    assert 1 <= len(doc["requests"]) < 500
    assert {r["outcome"] for r in doc["requests"]} == {"complete"}  # the cancelled ones are not in it
    assert len(doc["workers"]) == int(workers)


def test_an_interrupt_before_the_start_ends_the_worker_at_once() -> None:
    config = load.Config(url="http://127.0.0.1:9/v1", model="m", requests=5, loop="asyncio")
    share = _load_run.shares(config)[0]
    interrupt = _load_run.Interrupt()
    interrupt.request()  # before the loop: the worker sends nothing
    import time

    start = time.time_ns() + 5_000_000_000
    result = _load_run.run_share(config, share, start, _load_run.Counters([0] * 4, 0), "inline", interrupt)
    assert result.interrupted and result.records == []
    assert time.time_ns() < start  # it did not wait for the start


@pytest.fixture(scope="module")
def epoch_stamps() -> Iterator[Any]:
    """A server whose chunks carry their own send stamp, ``server_ns``: epoch ns (time.time_ns())."""
    import time

    from _raw_server import RawServer

    def script(conn: Any) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        for k in range(4):
            chunk = {"choices": [{"index": 0, "delta": {"content": f" w{k}"}}], "server_ns": time.time_ns()}
            conn.sendall(b"data: " + orjson.dumps(chunk) + b"\n\n")
            time.sleep(0.002)
        finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        conn.sendall(b"data: " + orjson.dumps(finish) + b"\n\ndata: [DONE]\n\n")

    with RawServer(script) as srv:
        yield srv


@pytest.mark.parametrize("client", ["fastsse", "aiohttp-vllm"])
def test_lag_reads_the_servers_own_stamp_field(epoch_stamps: Any, client: str) -> None:
    if client != "fastsse":
        pytest.importorskip("aiohttp")
    config = load.Config(url=epoch_stamps.base_url, model="m", requests=2, loop="asyncio", client=client)
    ignored = load.run(config)  # the default field is not in these chunks: no lag
    assert ignored["summary"]["outcomes"] == {"complete": 2}
    assert ignored["summary"]["lag_ms"]["n"] == 0
    doc = load.run(dataclasses.replace(config, lag_field="server_ns"))
    lag = doc["summary"]["lag_ms"]
    assert lag["n"] == 8
    # epoch stamps moved onto the client's clock: a loopback write is seen within milliseconds
    assert lag["min"] >= -1.0 and lag["max"] < 200.0
    assert doc["config"]["lag_field"] == "server_ns"


def test_lag_field_is_on_the_command_line() -> None:
    args = load_cli._parser().parse_args(["http://x/v1", "--model", "m", "--lag-field", "sent_at_ns"])
    assert load_cli.config_from_args(args).lag_field == "sent_at_ns"
    assert load_cli.config_from_args(
        load_cli._parser().parse_args(["http://x/v1", "--model", "m"])
    ).lag_field == ("fastsse_sent_ns")


def test_completions_streams_are_timed_like_chat(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = run(server, api="completions", requests=4)
    s = doc["summary"]
    assert s["outcomes"] == {"complete": 4}
    follows_the_script(doc, itl_ms=10.0)
    assert s["itl_ms"]["n"] == 4 * 11 and s["output_tokens"] == 4 * 12
    for r in doc["requests"]:
        assert list(r["token_kinds"]) == [1] * 12
        assert len(r["lags"]) == 12 and min(r["lags"]) >= 0
    assert "completions requests to" in load.format_summary(doc)
    cut = run(server, api="completions", model="truncate_after=3", requests=2)["summary"]
    assert cut["outcomes"] == {"incomplete": 2}


def test_a_completions_body_has_a_prompt() -> None:
    config = load.Config(url="u", model="m", api="completions", max_tokens=7, prefix="p q")
    assert load.bodies(config)(0) == {
        "prompt": "p q " + load.Config(url="u", model="m").prompt,
        "max_tokens": 7,
        "stream_options": {"include_usage": True},
        "model": "m",
        "stream": True,
    }
    rows = ('{"prompt": "hi", "max_tokens": 3, "temperature": 0}', '{"prompt": [1, 2, 3], "max_tokens": 2}')
    body = load.bodies(load.Config(url="u", model="m", api="completions", dataset=rows))
    assert body(0)["prompt"] == "hi" and body(0)["temperature"] == 0
    assert body(1) == {"prompt": [1, 2, 3], "max_tokens": 2, "model": "m", "stream": True}  # token ids


def test_completions_are_refused_for_a_peer_and_for_turns() -> None:
    parse = load_cli._parser().parse_args
    with pytest.raises(ValueError, match="--api completions needs --client fastsse"):
        load_cli.config_from_args(
            parse(["http://x/v1", "--model", "m", "--api", "completions", "--client", "openai"])
        )
    with pytest.raises(ValueError, match="--turns"):
        load_cli.config_from_args(
            parse(["http://x/v1", "--model", "m", "--api", "completions", "--turns", "2"])
        )


def test_retries_only_when_asked_and_counted(capsys: Any, tmp_path: Any, monkeypatch: Any) -> None:
    from fastsse.testing import serve_in_thread

    monkeypatch.delenv("FASTSSE_MAX_RETRIES", raising=False)  # load's own default, not the suite's
    with serve_in_thread() as server:
        plain = tmp_path / "plain.json"
        load_cli.main(
            [server.base_url, "--model", "http-500", "--requests", "2", "--quiet", "--json", str(plain)]
        )
        retried = tmp_path / "retried.json"
        args = [
            server.base_url,
            "--model",
            "http-500",
            "--requests",
            "2",
            "--retries",
            "1",
            "--json",
            str(retried),
        ]
        load_cli.main(args)
        got = [path for method, path in server.requested if method == "POST"]
    printed = capsys.readouterr().out
    before, after = (orjson.loads(p.read_bytes()) for p in (plain, retried))
    assert before["summary"]["attempts"] == 2 and before["summary"]["retried_requests"] == 0
    assert after["summary"]["attempts"] == 4 and after["summary"]["retried_requests"] == 2
    assert [r["attempts"] for r in after["requests"]] == [2, 2]
    assert len(got) == 2 + 4 and "retried: 2 requests, 4 attempts in all" in printed


def test_the_plots_token_rate_counts_tokens_not_chunks(server: Any, stream_backend: SimpleNamespace) -> None:
    # 3 tokens a chunk (the script), usage on: the panel's bars add up to the tokens the usage
    # counted, three times the chunks the client read
    doc = run(server, model="ttft_ms=0,itl_ms=5,chunks=6,tokens_per_chunk=3", requests=4)
    records = [r for r in doc["requests"] if r["outcome"] == "complete"]
    assert [r["completion_tokens"] for r in records] == [18] * 4
    chunks = sum(sum(r["tokens"]) for r in records)
    starts, rates, width = load.token_rate(records, min(r["started"] for r in records))
    assert starts and min(starts) >= 0 and width > 0
    assert sum(rate * width for rate in rates) == pytest.approx(72)
    assert chunks < 72


def test_the_json_documents_follow_the_shipped_schema(server: Any, stream_backend: SimpleNamespace) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = load.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    one = orjson.loads(load.dumps(run(server, requests=3)))
    config = load.Config(url=server.base_url, model="m", requests=2, concurrency=2, loop="asyncio")
    repeated = orjson.loads(load.dumps(load.repeat(config, 2)))
    for doc in (one, repeated):
        jsonschema.validate(doc, schema)
    broken = dict(one, summary={**one["summary"], "ttft_ms": {"mean": 1.0}})  # no n, min, max
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)

"""``load --trace`` (``fastsse.load._trace``): Mooncake and Azure traces replayed at their times.

The expected values come from the trace files the tests write: request ``i`` is due at its
timestamp (divided by ``--trace-speed``) after the first, with a prompt of its input length in
words (the scripted server counts words, so its ``usage.prompt_tokens`` is exact) and its output
length as ``max_tokens``; two requests whose ``hash_ids`` start alike share that many blocks.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from fastsse import load
from fastsse.cli import load as load_cli
from fastsse.load import _plan as _load_plan
from fastsse.load import _trace as _load_trace
from fastsse.testing import spawn_scripted_server


def mooncake(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return str(path)


def test_a_mooncake_trace_is_read_in_arrival_order(tmp_path: Path) -> None:
    path = mooncake(
        tmp_path / "t.jsonl",
        [
            {"timestamp": 1000, "input_length": 600, "output_length": 10, "hash_ids": [7, 8]},
            {"timestamp": 500, "input_length": 40, "output_length": 3, "hash_ids": [7]},
            {"timestamp": 1000.5, "input_length": 9, "output_length": 1},
        ],
    )
    rows = _load_trace.read_trace(path)
    assert rows == (
        _load_trace.TraceRow(0, 40, 3, (7,)),
        _load_trace.TraceRow(500_000_000, 600, 10, (7, 8)),
        _load_trace.TraceRow(500_500_000, 9, 1, ()),
    )


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("[1]", "a JSON object"),
        ('{"timestamp": 1, "input_length": 2}', "no output_length"),
        ('{"timestamp": "x", "input_length": 2, "output_length": 1}', "timestamp"),
        ('{"timestamp": 1, "input_length": -2, "output_length": 1}', "input_length"),
        ('{"timestamp": 1, "input_length": 2, "output_length": 1, "hash_ids": ["a"]}', "hash_ids"),
    ],
)
def test_a_bad_mooncake_line_says_which(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 1, "output_length": 1}\n' + line + "\n")
    with pytest.raises(ValueError, match=f"line 2: .*{says}"):
        _load_trace.read_trace(str(path))


def test_an_azure_trace_is_read_with_its_seven_digit_fractions(tmp_path: Path) -> None:
    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
        "2023-11-16 18:15:46.6805901,12,3\n"
    )
    rows = _load_trace.read_trace(str(path))
    lengths = [(r.input_length, r.output_length, r.hash_ids) for r in rows]
    assert lengths == [(374, 44, ()), (12, 3, ()), (396, 109, ())]
    assert [r.offset_ns for r in rows[:2]] == [0, 100]
    assert rows[2].offset_ns == pytest.approx(4_314_579_000, abs=1_000)
    seconds = tmp_path / "seconds.csv"
    seconds.write_text("timestamp,contexttokens,generatedtokens\n10.5,1,1\n12,2,2\n")
    assert [r.offset_ns for r in _load_trace.read_trace(str(seconds))] == [0, 1_500_000_000]
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="neither a Mooncake trace"):
        _load_trace.read_trace(str(other))


def test_prompts_have_the_input_length_and_share_the_prefix_blocks() -> None:
    prompts = _load_trace.Prompts(0, _load_plan._WORDS)
    row = _load_trace.TraceRow
    a = prompts(row(0, 1100, 1, (1, 2, 3)), 0).split()
    b = prompts(row(0, 700, 1, (1, 2)), 1).split()
    c = prompts(row(0, 700, 1, (1, 9)), 2).split()
    assert (len(a), len(b), len(c)) == (1100, 700, 700)
    block = _load_trace.BLOCK
    assert a[:700] == b  # blocks 1 and 2 (the second cut at 700 words) are the same text
    assert a[:block] == c[:block] and a[block] != c[block]  # block 1 shared, then 2 against 9
    # past its blocks a request has words of its own; without blocks (Azure) all of them
    d, e = prompts(row(0, 1500, 1, (1,)), 3).split(), prompts(row(0, 1500, 1, (1,)), 4).split()
    assert d[:block] == e[:block] and d[block:] != e[block:]
    assert prompts(row(0, 3, 1), 5) != prompts(row(0, 3, 1), 6)
    assert prompts(row(0, 70_000, 1), 7).count(" ") == 69_999  # longer than the tape of words
    again = _load_trace.Prompts(0, _load_plan._WORDS)  # the same seed: the same blocks
    assert again(row(0, 50, 1, (4,)), 0) == prompts(row(0, 50, 1, (4,)), 9)


def test_the_schedule_is_the_traces_scaled_by_the_speed(tmp_path: Path) -> None:
    rows = [{"timestamp": t, "input_length": 5, "output_length": 2} for t in (0, 100, 300, 600, 1000)]
    trace = _load_trace.read_trace(mooncake(tmp_path / "t.jsonl", rows))
    config = load.Config(url="u", model="m", trace="t.jsonl", trace_rows=trace, trace_speed=2.0)
    assert config.open_loop
    (share,) = _load_plan.shares(config)
    assert share.arrivals == [(0, 0), (1, 50_000_000), (2, 150_000_000), (3, 300_000_000), (4, 500_000_000)]
    # the first rows warm up at their own times; the measured ones count from the first of them
    two = _load_plan.shares(dataclasses.replace(config, warmup=2, requests=2, workers=2))
    assert two[0].warmup_arrivals == [(0, 0)] and two[1].warmup_arrivals == [(1, 50_000_000)]
    assert two[0].arrivals == [(2, 0)] and two[1].arrivals == [(3, 150_000_000)]
    short = _load_plan.shares(dataclasses.replace(config, trace_speed=1.0, duration=0.65))
    assert [i for i, _ in short[0].arrivals] == [0, 1, 2, 3]
    body = load.bodies(config)(1)
    assert body["max_tokens"] == 2 and body["ignore_eos"] is True
    assert len(body["messages"][0]["content"].split()) == 5


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with spawn_scripted_server(ttft_ms=20, itl_ms=5, loop="asyncio") as srv:
        yield srv


def test_a_trace_is_replayed_on_time_at_100_requests_a_second(server: Any, tmp_path: Path) -> None:
    rows = [
        {"timestamp": 10 * i, "input_length": 300 + i, "output_length": 1 + i % 4, "hash_ids": [1, 2 + i % 3]}
        for i in range(100)
    ]
    out = tmp_path / "replay.json"
    argv = [server.base_url, "--model", "chunks=none", "--trace", mooncake(tmp_path / "t.jsonl", rows)]
    assert load_cli.main([*argv, "--loop", "asyncio", "--quiet", "--json", str(out)]) == 0
    doc = orjson.loads(out.read_bytes())
    records = doc["requests"]
    assert doc["summary"]["outcomes"] == {"complete": 100}
    assert doc["config"]["trace_rows"] == 100 and doc["config"]["concurrency"] is None
    first = min(r["queued"] for r in records)
    # each request is due at its timestamp: 10 ms apart, exactly, on the run's clock
    assert [r["queued"] - first for r in records] == [10_000_000 * i for i in range(100)]
    # and it went out when it was due: never before, and late by under a millisecond on a quiet
    # machine (the median's bound has the slack of a shared one, whose event loop waits its turn)
    late_ms = [(r["started"] - r["queued"]) / 1e6 for r in records]
    assert min(late_ms) >= 0 and statistics.median(late_ms) < 10.0
    assert [r["prompt_tokens"] for r in records] == [300 + i for i in range(100)]
    assert [r["completion_tokens"] for r in records] == [1 + i % 4 for i in range(100)]


def test_trace_arguments_are_checked(tmp_path: Path) -> None:
    path = mooncake(tmp_path / "t.jsonl", [{"timestamp": 0, "input_length": 5, "output_length": 2}])
    parse = load_cli._parser().parse_args
    base = ["http://x/v1", "--model", "m", "--trace", path]
    for extra, says in (
        (["--rate", "5"], "--rate"),
        (["--max-tokens", "5"], "--max-tokens"),
        (["--random-input-len", "5"], "--random-input-len"),
        (["--trace-speed", "0"], "--trace-speed must be > 0"),
    ):
        with pytest.raises(ValueError, match=says):
            load_cli.config_from_args(parse([*base, *extra]))
    with pytest.raises(ValueError, match="--trace-speed goes with --trace"):
        load_cli.config_from_args(parse(["http://x/v1", "--model", "m", "--trace-speed", "2"]))
    config = load_cli.config_from_args(parse(base))
    assert (config.requests, config.concurrency, len(config.trace_rows)) == (None, None, 1)

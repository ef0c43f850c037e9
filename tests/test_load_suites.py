"""What the suites' users ask of ``python -m fastsse load``: goodput, bursts, ramps, synthetic and
ShareGPT data, shared prefixes, multi-turn conversations, sweeps, chosen percentiles, old files.

Expected values come from the definitions (docs/load.md, vLLM's and AIPerf's) and from the scripted
server's script (``fastsse.load._server``): its ``usage.prompt_tokens`` is the number of
whitespace-separated words in the messages' text, its ``completion_tokens`` the ``max_tokens`` asked
for (model ``chunks=none`` lets max_tokens set the length), token chunk ``k`` is due
``ttft_ms + k * itl_ms`` after the request was read and the answer of ``n`` tokens is `` w0 ... w<n-1>``.
The arrival schedules are checked from the generator alone: thousands of arrivals, no request sent.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from fastsse import load
from fastsse.cli import load as load_cli
from fastsse.load import _plan as _load_plan
from fastsse.testing import spawn_scripted_server

VECTORS = Path(__file__).parent / "vectors"


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with spawn_scripted_server(ttft_ms=50, itl_ms=20, loop="asyncio") as srv:
        yield srv


ANCHOR_NS = 40_000_000  # two processes' clocks, each mapped onto the run's through one anchor pair
LOADED_NS = 2_000_000_000  # how late a loaded two-core machine may wake a worker


def config(server: Any, **options: Any) -> load.Config:
    settings: dict[str, Any] = {"concurrency": 4, "requests": 8, "loop": "asyncio", "model": "chunks=5"}
    settings.update(options)
    return load.Config(url=server.base_url, **settings)


# Goodput: a request is good when it completed and met every SLO given (vLLM's --goodput keys, ms).


@pytest.mark.parametrize(
    ("slos", "share"),
    [
        ((("ttft", 30.0),), 0.0),  # the script's TTFT is 50 ms: never under 30
        ((("ttft", 200.0),), 1.0),
        ((("tpot", 10.0),), 0.0),  # 20 ms between tokens: never under 10
        ((("tpot", 100.0), ("e2el", 2000.0)), 1.0),
        ((("ttft", 200.0), ("tpot", 10.0)), 0.0),  # every SLO must hold
    ],
)
def test_goodput_counts_the_requests_meeting_every_slo(
    server: Any, stream_backend: SimpleNamespace, slos: tuple[tuple[str, float], ...], share: float
) -> None:
    doc = load.run(config(server, goodput=slos))
    s = doc["summary"]
    assert s["outcomes"] == {"complete": 8}
    good = s["goodput"]
    assert good["slo_ms"] == dict(slos)
    assert good["share"] == share
    assert good["good_requests"] == 8 * share
    assert good["requests_per_s"] == pytest.approx(8 * share / s["duration_s"])
    assert doc["config"]["goodput"] == dict(slos)
    text = load.format_summary(doc)
    assert f"({share:.0%}) met" in text


def test_a_failed_request_is_never_good(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = load.run(config(server, model="truncate_after=2", requests=2, goodput=(("ttft", 10_000.0),)))
    assert doc["summary"]["goodput"]["share"] == 0.0


def test_goodput_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="--goodput"):
        load_cli._goodput(["ttft=30"])
    with pytest.raises(ValueError, match="--goodput"):
        load_cli._goodput(["itl:30"])  # not one of vLLM's keys
    assert load_cli._goodput(["ttft:30", "e2el:1.5e3"]) == (("ttft", 30.0), ("e2el", 1500.0))


# Arrivals: gamma gaps of shape F and mean 1/rate have a coefficient of variation of 1/sqrt(F).


@pytest.mark.parametrize("shape", [0.5, 1.0, 4.0])
def test_burstiness_gives_gamma_gaps(shape: float) -> None:
    rate, n = 20.0, 5000
    cfg = load.Config(url="u", model="m", rate=rate, burstiness=shape, seed=3)
    times = [0, *load.arrivals(cfg, n, None)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == n
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    assert abs(cv - 1 / math.sqrt(shape)) <= 0.1 / math.sqrt(shape)
    assert abs(n / (times[-1] / 1e9) - rate) <= 0.05 * rate


def test_constant_arrivals_are_evenly_spaced() -> None:
    cfg = load.Config(url="u", model="m", rate=8.0, arrival="constant")
    assert load.arrivals(cfg, 4, None) == [125_000_000, 250_000_000, 375_000_000, 500_000_000]
    # with a duration instead of a count: every arrival before it, none at or after
    assert load.arrivals(cfg, None, 0.5) == [125_000_000, 250_000_000, 375_000_000]


@pytest.mark.parametrize("ramp", ["linear", "exponential"])
def test_a_ramp_moves_the_rate_with_the_requests_place(ramp: str) -> None:
    start, end, n = 5.0, 50.0, 4000
    cfg = load.Config(url="u", model="m", ramp=ramp, ramp_start_rps=start, ramp_end_rps=end, seed=1)
    times = [0, *load.arrivals(cfg, n, None)]

    def rate(i: int) -> float:  # vLLM's ramp: request i of n at progress i / (n - 1)
        p = i / (n - 1)
        return start + (end - start) * p if ramp == "linear" else start * (end / start) ** p

    # over each fifth of the requests, the mean gap is the mean of 1 / rate (within 10%)
    for k in range(5):
        part = range(k * n // 5, (k + 1) * n // 5)
        measured = statistics.fmean((times[i + 1] - times[i]) / 1e9 for i in part)
        expected = statistics.fmean(1 / rate(i) for i in part)
        assert abs(measured - expected) <= 0.1 * expected, (k, measured, expected)


def test_the_schedule_is_drawn_once_and_dealt_out() -> None:
    cfg = load.Config(url="u", model="m", rate=30.0, requests=10, warmup=3, workers=3, seed=9)
    stream = load.arrivals(cfg, 10, None)
    parts = _load_plan.shares(cfg)
    dealt = sorted(a for p in parts for a in p.arrivals or ())
    # one stream: the K workers' arrivals together are the single schedule, indexes after the warm-up
    assert dealt == [(3 + i, t) for i, t in enumerate(stream)]
    assert [len(p.arrivals or ()) for p in parts] == [4, 3, 3]
    assert sorted(i for p in parts for i, _ in p.warmup_arrivals or ()) == [0, 1, 2]


def test_worker_processes_send_the_one_schedule(server: Any) -> None:
    # constant arrivals at 20/s dealt to two processes: request i is due (i + 1) x 50 ms after the
    # agreed start on the run's one clock, whichever process sent it (before, each process ran its
    # own stream at R/K: two constant streams in step, so requests came in pairs)
    cfg = config(server, rate=20.0, arrival="constant", concurrency=None, requests=6, workers=2)
    due = {i: (i + 1) * 50_000_000 for i in range(6)}
    dealt = _load_plan.shares(_load_plan.prepare(cfg))
    assert [s.arrivals for s in dealt] == [[(i, due[i]) for i in range(w, 6, 2)] for w in (0, 1)]
    doc = load.run(cfg)
    assert doc["summary"]["outcomes"] == {"complete": 6}
    assert [w["runner"] for w in doc["workers"]] == ["process", "process"]
    for r in doc["requests"]:
        assert r["worker"] == r["index"] % 2
        # never early (but for the anchors that map each worker's clock onto the run's), late only
        # as far as a loaded machine explains: the schedule itself is the one dealt out above
        assert -ANCHOR_NS <= r["queued"] - due[r["index"]] <= LOADED_NS, r["index"]


def test_arrival_arguments_are_checked() -> None:
    base = ["http://127.0.0.1:9/v1", "--model", "m"]
    for extra, word in [
        (["--burstiness", "0"], "--burstiness"),
        (["--rate", "5", "--arrival", "constant", "--burstiness", "2"], "--arrival constant"),
        (["--ramp-up", "linear", "--ramp-start-rps", "1"], "--ramp-end-rps"),
        (["--ramp-up", "linear", "--rate", "3", "--ramp-start-rps", "1", "--ramp-end-rps", "2"], "--rate"),
        (["--ramp-start-rps", "1"], "--ramp-up"),
        (["--random-range-ratio", "1"], "--random-range-ratio"),
        (["--sweep", "--rate", "3"], "--sweep"),
        (["--turns", "2", "--api", "messages"], "--turns"),
        (["--percentiles", "50,100"], "--percentiles"),
    ]:
        args = load_cli._parser().parse_args(base + extra)
        with pytest.raises(ValueError, match=word):
            load_cli.config_from_args(args)


# Synthetic data: lengths uniform in [floor(N(1-R)), ceil(N(1+R))], as vLLM draws them.


def test_random_prompts_fall_in_the_range_asked(server: Any, stream_backend: SimpleNamespace) -> None:
    cfg = config(
        server,
        model="chunks=none",
        requests=12,
        random_input_len=20,
        random_output_len=6,
        random_range_ratio=0.5,
    )
    doc = load.run(cfg)
    s = doc["summary"]
    assert s["outcomes"] == {"complete": 12}
    prompts = [r["prompt_tokens"] for r in doc["requests"]]
    outputs = [r["completion_tokens"] for r in doc["requests"]]
    assert all(10 <= p <= 30 for p in prompts), prompts
    assert all(3 <= o <= 9 for o in outputs), outputs
    assert len(set(prompts)) > 1 and len(set(outputs)) > 1  # drawn, not fixed
    assert s["input_tokens"] == sum(prompts)
    # max_tokens and ignore_eos come from the output length
    body = load.bodies(_load_plan.prepare(cfg))(0)
    assert body["ignore_eos"] is True and 3 <= body["max_tokens"] <= 9


def test_a_shared_prefix_starts_every_prompt(server: Any, stream_backend: SimpleNamespace) -> None:
    cfg = config(server, requests=4, random_input_len=10, prefix_len=7)
    prepared = _load_plan.prepare(cfg)
    body = load.bodies(prepared)
    texts = [body(i)["messages"][0]["content"] for i in range(4)]
    prefix = texts[0].split()[:7]
    assert all(t.split()[:7] == prefix for t in texts)
    assert len({t for t in texts}) == 4  # the rest differs
    doc = load.run(cfg)
    assert [r["prompt_tokens"] for r in doc["requests"]] == [17] * 4


def test_a_tokenizer_counts_the_prompts_exactly(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    # a word-level vocabulary of the synthetic words: one token each, so N tokens are N words
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(_load_plan._WORDS)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.decoder = tokenizers.decoders.WordPiece()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    counter = _load_plan.Tokenizer(str(tmp_path))
    assert counter.count("time year people") == 3
    cfg = load.Config(
        url="u", model="m", requests=20, random_input_len=12, random_range_ratio=0.25, tokenizer=str(path)
    )
    rows = [orjson.loads(r) for r in _load_plan.prepare(cfg).dataset]
    assert all(9 <= counter.count(r["prompt"]) <= 15 for r in rows)
    assert counter.cut("time year people way day", 2) == "time year"


def test_synthetic_lengths_and_prompts_are_bounded() -> None:
    with pytest.raises(ValueError, match="bound"):
        _load_plan.prepare(load.Config(url="u", model="m", random_input_len=1 << 21))
    # an open count (or a huge one) draws at most RANDOM_POOL distinct prompts, used in turn
    many = _load_plan.prepare(load.Config(url="u", model="m", requests=10**9, random_input_len=2))
    assert len(many.dataset) == _load_plan.RANDOM_POOL


def test_a_tokenizer_that_cannot_load_says_how(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pip install tokenizers"):
        _load_plan.Tokenizer(str(tmp_path / "nothing-here"))


# ShareGPT: the first human turn is the prompt, the answer after it sets the output length.

SHAREGPT = [
    {
        "id": "a",
        "conversations": [
            {"from": "human", "value": "tell me about the sea"},
            {"from": "gpt", "value": "the sea is wide and deep"},
            {"from": "human", "value": "and the sky?"},
            {"from": "gpt", "value": "blue"},
        ],
    },
    {"id": "b", "conversations": [{"from": "human", "value": "only a question"}]},  # no answer: skipped
    {
        "id": "c",
        "conversations": [
            {"from": "system", "value": "be brief"},
            {"from": "human", "value": "two words"},
            {"from": "gpt", "value": "two words back"},
        ],
    },
]


def test_sharegpt_folds_into_prompts_and_output_lengths(
    server: Any, stream_backend: SimpleNamespace, tmp_path: Path
) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_bytes(orjson.dumps(SHAREGPT))
    rows = [orjson.loads(r) for r in _load_plan.read_dataset(str(path))]
    assert rows == [
        {"prompt": "tell me about the sea", "max_tokens": 6},
        {"prompt": "two words", "max_tokens": 3},
    ]
    # the same conversations as JSONL read the same
    lines = tmp_path / "sharegpt.jsonl"
    lines.write_bytes(b"\n".join(orjson.dumps(c) for c in SHAREGPT))
    assert [orjson.loads(r) for r in _load_plan.read_dataset(str(lines))] == rows
    args = load_cli._parser().parse_args([server.base_url, "--model", "chunks=none", "--dataset", str(path)])
    cfg = dataclasses.replace(load_cli.config_from_args(args), requests=4, concurrency=2, loop="asyncio")
    doc = load.run(cfg)
    assert [r["prompt_tokens"] for r in doc["requests"]] == [5, 2, 5, 2]
    assert [r["completion_tokens"] for r in doc["requests"]] == [6, 3, 6, 3]
    empty = tmp_path / "empty.json"
    empty.write_bytes(orjson.dumps([SHAREGPT[1]]))
    with pytest.raises(ValueError, match="no conversation"):
        _load_plan.read_dataset(str(empty))


# Multi-turn: each turn carries the earlier turns and answers; TTFT is reported per turn.


def test_turns_carry_the_answers_and_time_each_turn(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = load.run(config(server, model="chunks=4", requests=2, concurrency=2, turns=3, prompt="a b c"))
    s = doc["summary"]
    assert s["requests"] == 6 and s["outcomes"] == {"complete": 6}
    records = {(r["conversation"], r["turn"]): r for r in doc["requests"]}
    assert set(records) == {(c, t) for c in range(2) for t in range(3)}
    for (c, t), r in records.items():
        assert r["index"] == 3 * c + t
        # the prompt of 3 words per user turn, plus the 4-word answer of every earlier turn
        assert r["prompt_tokens"] == 3 * (t + 1) + 4 * t
        if t:
            assert r["started"] >= records[(c, t - 1)]["end"]  # the next turn waits for the answer
    assert len(s["ttft_by_turn_ms"]) == 3
    assert all(st["n"] == 2 and st["p50"] >= 50.0 for st in s["ttft_by_turn_ms"])
    assert "turn 3" in load.format_summary(doc)


# Sweeps: the closed-loop maximum, then K rates up to it; rows in order of offered load.


def test_a_sweep_of_three_points_is_monotone_in_offered_load(
    server: Any, stream_backend: SimpleNamespace
) -> None:
    # constant arrivals: the achieved rate depends on the offered one, not on the draw
    cfg = config(server, requests=10, concurrency=4, arrival="constant", goodput=(("ttft", 500.0),))
    doc = load.sweep(cfg, 3)
    assert doc["schema"] == "fastsse.load/2" and doc["kind"] == "sweep"
    rows = doc["rows"]
    assert len(rows) == 4 and rows[0]["offered_rps"] is None
    peak = rows[0]["requests_per_s"]
    offered = [r["offered_rps"] for r in rows[1:]]
    assert offered == pytest.approx([peak / 3, 2 * peak / 3, peak])
    achieved = [r["requests_per_s"] for r in rows[1:]]
    assert achieved == sorted(achieved) and achieved[0] < achieved[-1]
    for row, run in zip(rows, doc["runs"], strict=True):
        assert row["complete"] == row["requests"] == 10
        assert row["goodput_share"] == 1.0
        assert run["config"]["rate"] == row["offered_rps"]
    table = load.format_sweep(doc)
    assert len(table.splitlines()) == 2 + 4 and "TTFT p99" in table


def test_a_sweep_plot_is_written(server: Any, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    doc = load.sweep(config(server, requests=4, arrival="constant"), 2)
    path = tmp_path / "sweep.png"
    load.plot_sweep(doc, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_optional_packages_stop_before_the_first_request(
    monkeypatch: pytest.MonkeyPatch, capsys: Any, tmp_path: Path
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("matplotlib", "ray") else real(name, *a),
    )
    # a refused port: had a request gone out, the line would say that none got an answer
    base = ["http://127.0.0.1:9/v1", "--model", "m", "--requests", "1", "--quiet"]
    assert load_cli.main([*base, "--plot", str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().err.startswith("fastsse load: --plot needs matplotlib")
    assert load_cli.main([*base, "--ray", "local"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'fastsse-cython[ray]'" in err and "no request got an answer" not in err
    assert not (tmp_path / "x.png").exists()


# Percentiles and the JSON schema.


def test_chosen_percentiles_are_reported(server: Any, stream_backend: SimpleNamespace) -> None:
    doc = load.run(config(server, requests=4, percentiles=(50.0, 99.9)))
    ttft = doc["summary"]["ttft_ms"]
    assert {"p50", "p90", "p99", "p99.9"} <= set(ttft)
    assert ttft["p50"] <= ttft["p99.9"] <= ttft["max"]
    header = next(line for line in load.format_summary(doc).splitlines() if "(ms)" in line)
    assert header.split() == ["(ms)", "mean", "p50", "p99.9", "n"]


def test_merge_reads_a_version_1_document(tmp_path: Path, capsys: Any) -> None:
    # a fastsse.load/1 file as an earlier fastsse wrote it (tests/vectors/load_v1.json, by hand):
    # request 0 began at 0, first token at 50 ms, last at 90 ms, ended at 100 ms; request 1 began
    # at 20 ms, first token at 80 ms, last at 120 ms, ended at 140 ms; three one-token chunks each
    v1 = orjson.loads((VECTORS / "load_v1.json").read_bytes())
    assert v1["schema"] == "fastsse.load/1"
    merged = load.merge([v1])
    s = merged["summary"]
    assert merged["schema"] == "fastsse.load/2"
    assert s["requests"] == 2 and s["outcomes"] == {"complete": 2}
    assert s["ttft_ms"]["p50"] == pytest.approx(55.0)
    assert s["tpot_ms"]["mean"] == pytest.approx(20.0)
    assert s["e2e_ms"]["mean"] == pytest.approx(110.0)  # (100 + 120) / 2
    assert s["requests_per_s"] == pytest.approx(2 / 0.14)
    assert s["goodput"] is None and s["ttft_by_turn_ms"] == []
    assert all(r["turn"] is None for r in merged["requests"])
    # the command line reads it, and a later document beside it, onto one clock
    later = {**v1, "schema": "fastsse.load/2", "origin_epoch_ns": v1["origin_epoch_ns"] + 1_000_000_000}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(orjson.dumps(v1))
    b.write_bytes(orjson.dumps(later))
    out = tmp_path / "all.json"
    assert load_cli.main(["merge", str(a), str(b), "--json", str(out)]) == 0
    assert "4 requests" in capsys.readouterr().out
    both = orjson.loads(out.read_bytes())
    assert [r["started"] for r in both["requests"]] == [0, 20_000_000, 1_000_000_000, 1_020_000_000]


def test_a_sweep_is_not_merged(server: Any) -> None:
    with pytest.raises(ValueError, match="sweep"):
        load.merge([{"schema": "fastsse.load/2", "kind": "sweep", "origin_epoch_ns": 0}])


def test_every_option_is_in_the_docs() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "load.md").read_text(encoding="utf-8")
    options = [o for a in load_cli._parser()._actions for o in a.option_strings if o.startswith("--")]
    assert len(options) > 30
    assert [o for o in options if f"`{o}" not in docs and o != "--help"] == []

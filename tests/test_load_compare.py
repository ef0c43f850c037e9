"""``load compare`` and ``load --repeat`` (``fastsse.load._compare``) against the scripted server.

Two runs whose scripts differ only in ITL (10 ms against 20) must be told apart on ITL, TPOT and
E2E with ratios near 2; a run compared with itself differs nowhere (p = 1). ``--repeat 3`` gives,
for every metric, the mean of the three runs' values inside an interval that holds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import fastsse
from fastsse import load
from fastsse.cli import load as load_cli
from fastsse.load import _compare as _load_compare
from fastsse.testing import spawn_scripted_server


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with spawn_scripted_server(ttft_ms=30, itl_ms=10, chunks=8, loop="asyncio") as srv:
        yield srv


@pytest.fixture(scope="module")
def runs(server: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("compare")
    paths = []
    for name, model in (("fast", "m"), ("slow", "itl_ms=20")):
        config = load.Config(url=server.base_url, model=model, requests=24, concurrency=6, loop="asyncio")
        path = folder / f"{name}.json"
        path.write_bytes(load.dumps(load.run(config)))
        paths.append(path)
    return paths[0], paths[1]


def rows(comparison: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in comparison["rows"]}


def test_compare_flags_a_different_itl(runs: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    fast, slow = runs
    out = tmp_path / "comparison.json"
    assert load_cli.main(["compare", str(fast), str(slow), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ITL, token-weighted (ms)" in text and "B/A" in text
    comparison = orjson.loads(out.read_bytes())
    assert comparison["schema"] == "fastsse.load-compare/1"
    by_key = rows(comparison)
    for key in ("itl_ms.p50", "tpot_ms.mean"):
        assert by_key[key]["ratios"][1] == pytest.approx(2.0, abs=0.3), key
        test = by_key[key]["tests"][1]
        assert test["test"] == "mann-whitney" and test["significant"] is True and test["p"] < 1e-3, key
    assert by_key["e2e_ms.mean"]["tests"][1]["significant"] is True
    # counts and rates of one run each have no spread to test against
    assert by_key["requests_per_s"]["tests"][1] is None
    assert by_key["requests"]["values"] == [24.0, 24.0]


def test_a_run_compared_with_itself_differs_nowhere(runs: tuple[Path, Path]) -> None:
    doc = orjson.loads(runs[0].read_bytes())
    comparison = _load_compare.compare([doc, doc], ["a", "a"])
    for row in comparison["rows"]:
        if row["values"][0]:
            assert row["ratios"][1] == 1.0, row["key"]
        test = row["tests"][1]
        assert test is None or (test["p"] == 1.0 and not test["significant"]), row["key"]


def test_compare_refuses_what_it_cannot_compare(runs: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    sweep = tmp_path / "sweep.json"
    sweep.write_bytes(orjson.dumps({"schema": "fastsse.load/2", "kind": "sweep"}))
    assert load_cli.main(["compare", str(runs[0]), str(sweep)]) == 2
    assert "a sweep cannot be compared" in capsys.readouterr().err
    assert load_cli.main(["compare", str(runs[0])]) == 2
    assert load_cli.main(["compare", str(runs[0]), str(tmp_path / "missing.json")]) == 2


def test_compare_plots_the_overlaid_cdfs(runs: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "compare.png"
    assert load_cli.main(["compare", *map(str, runs), "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_repeat_gives_an_interval_for_every_metric(server: Any, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "repeat.json"
    argv = [server.base_url, "--model", "m", "--requests", "8", "--concurrency", "4", "--loop", "asyncio"]
    assert load_cli.main([*argv, "--repeat", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "3 runs of 8 requests" in text and "95% confidence interval" in text
    doc = orjson.loads(out.read_bytes())
    assert doc["kind"] == "repeat" and len(doc["runs"]) == 3 and doc["config"]["repeat"] == 3
    metrics = doc["summary"]["metrics"]
    assert set(metrics) == set(_load_compare.metric_rows(doc["runs"][0]["summary"]))
    for key in ("ttft_ms.p50", "itl_ms.mean", "requests_per_s", "e2e_ms.p99"):
        row = metrics[key]
        values = [r for r in row["values"] if r is not None]
        assert len(values) == 3, key
        assert row["mean"] == pytest.approx(sum(values) / 3), key
        assert row["low"] <= row["mean"] <= row["high"], key
    # every run's TTFT p50 is at least the server's scripted 30 ms; the interval's low end is a
    # statistic of three runs (t with 2 degrees of freedom), which one noisy run takes below it
    ttft = metrics["ttft_ms.p50"]
    assert min(ttft["values"]) >= 30.0 and ttft["low"] <= ttft["mean"] <= ttft["high"]
    # two repeats are compared run by run (Welch), each row on its own
    comparison = _load_compare.compare([doc, doc], ["a", "b"])
    assert rows(comparison)["requests_per_s"]["tests"][1]["test"] == "welch"


def test_repeat_is_checked() -> None:
    parse = load_cli._parser().parse_args
    with pytest.raises(ValueError, match="--repeat"):
        load_cli.config_from_args(parse(["http://x/v1", "--model", "m", "--repeat", "0"]))
    with pytest.raises(ValueError, match="--sweep"):
        load_cli.config_from_args(parse(["http://x/v1", "--model", "m", "--repeat", "2", "--sweep"]))


def test_a_difference_below_the_minimum_effect_is_not_flagged(
    runs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every test says p = 1e-6 here: only the minimum effect decides. A run against itself moves
    # no row (ratio 1); against the run with twice the ITL, the ITL rows move far past 5%.
    monkeypatch.setattr(_load_compare._stats, "mann_whitney", lambda a, b: (0.0, 1e-6))
    same = orjson.loads(runs[0].read_bytes())
    slow = orjson.loads(runs[1].read_bytes())
    flat = rows(_load_compare.compare([same, same], ["a", "a"]))
    assert [k for k, r in flat.items() if (r["tests"][1] or {}).get("significant")] == []
    moved = rows(_load_compare.compare([same, slow], ["a", "b"]))
    assert moved["itl_ms.mean"]["tests"][1]["significant"] is True
    # a latency also needs 1 ms: a run against itself flags nothing even with no relative minimum
    bare = rows(_load_compare.compare([same, same], ["a", "a"], min_effect=0.0))
    assert [k for k, r in bare.items() if (r["tests"][1] or {}).get("significant")] == []
    with pytest.raises(fastsse.InvalidRequest, match="min_effect"):
        _load_compare.compare([same, same], ["a", "a"], min_effect=-1)


def test_two_runs_of_one_plan_on_a_steady_server_say_no(server: Any) -> None:
    config = load.Config(url=server.base_url, model="m", requests=24, concurrency=6, loop="asyncio")
    first, second = load.run(config), load.run(config)
    comparison = rows(load.compare([first, second], ["first", "second"]))
    # the centre of each latency: a steady scripted server moves it by far less than 5%
    centre = [k for k in comparison if k.endswith((".p50", ".mean")) and comparison[k]["tests"][1]]
    assert centre
    assert [k for k in centre if comparison[k]["tests"][1]["significant"]] == []


def test_a_repeats_plot_is_titled_for_a_repeat(
    server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    pytest.importorskip("matplotlib")
    seen: dict[str, Any] = {}

    def plotted(documents: Any, names: list[str], path: str, *, title: str = "") -> None:
        seen.update(names=names, title=title)

    monkeypatch.setattr(load, "plot_comparison", plotted)
    argv = [server.base_url, "--model", "m", "--requests", "4", "--concurrency", "2", "--loop", "asyncio"]
    assert load_cli.main([*argv, "--repeat", "2", "--quiet", "--plot", str(tmp_path / "r.png")]) == 0
    assert seen["names"] == ["run 1", "run 2"]
    assert seen["title"].startswith("fastsse load --repeat: 2 runs of one plan against http://127.0.0.1:")

"""``python -m fastsse bench``: the table, the progress bar, the plot switch; on tiny corpora."""

from __future__ import annotations

import io
import sys

import pytest

from fastsse import bench as _contenders
from fastsse.cli import bench


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(bench, "QUICK_SCALE", 0.002)
    monkeypatch.setattr(bench, "QUICK_GROUPS", ("decode:chat:1KiB", "aggregate:chat:str"))
    monkeypatch.setattr(bench, "_time", lambda run, args, repeats, min_seconds: (run(*args), 1e-3)[1])


def test_run_cases_checks_every_contender(tiny):
    rows, skipped = bench.run_cases(quick=True, progress_out=io.StringIO())
    decode = [r for r in rows if r.group == "decode:chat:1KiB"]
    assert {r.name for r in decode} | {w.split()[1] for w in skipped if w.startswith("decode")} == set(
        _contenders.DECODERS
    )
    assert all(r.correct for r in rows)


def test_table_has_ratios_and_flags_wrong_output():
    rows = [
        bench.Row("decode:chat:1KiB", "fastsse-cython", "fastsse cython", 1.0, 1000, 300_000, True),
        bench.Row("decode:chat:1KiB", "openai", "openai SSEDecoder", 30.0, 1000, 300_000, False),
        bench.Row("decode:chat:1KiB", "floor", "floor: one str per event", 0.5, 1000, 300_000, True),
    ]
    table = bench.format_table(rows)
    openai = next(line for line in table.splitlines() if line.startswith("openai"))
    assert "30.00" in openai and "60.00" in openai and "WRONG OUTPUT" in openai
    assert "1,000,000" in next(line for line in table.splitlines() if line.startswith("fastsse"))


def test_progress_plain_lines_when_not_a_tty():
    out = io.StringIO()
    progress = bench.Progress(2, out)
    progress.step("a")
    progress.step("b")
    progress.finish()
    assert out.getvalue() == "[  1/2] a\n[  2/2] b\n"


def test_plot_without_matplotlib_exits_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert bench.main(["--quick", "--plot", "x.png"]) == 2
    assert "matplotlib" in capsys.readouterr().err


def test_main_prints_table_and_plot(tiny, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    assert bench.main(["--quick", "--plot", str(path)]) == 0
    out = capsys.readouterr().out
    assert "decode:chat:1KiB" in out and "ns/event" in out
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_speaks_to_a_reader():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    rows = [
        bench.Row("decode:chat:1KiB", "fastsse-cython", "fastsse cython", 1.0, 1000, 300_000, True),
        bench.Row("decode:chat:1KiB", "fastsse-python", "fastsse python", 30.0, 1000, 300_000, True),
        bench.Row("decode:chat:1KiB", "httpx-sse", "httpx-sse", 15.0, 1000, 300_000, True),
        bench.Row("decode:chat:1KiB", "floor", "floor: one str per event", 0.5, 1000, 300_000, True),
        bench.Row("aggregate:chat:str", "fastsse-cython", "fastsse cython", 1.0, 1000, 300_000, True),
        bench.Row("aggregate:chat:str", "floor", "floor: orjson.loads", 3.0, 1000, 300_000, True),
    ]
    fig = bench.figure(rows)
    try:
        titles = [ax.get_title(loc="left") for ax in fig.axes]
        assert titles == [
            "Decode SSE into events: a chat stream, read 1 KiB at a time",
            "Fold chat payloads into one response: a chat stream, payloads given as str",
        ]
        legend = [text.get_text() for text in fig.legends[0].get_texts()]
        assert legend == [
            "fastsse, compiled backend",
            "fastsse, pure-Python backend",
            "other Python libraries",
            "floor: a reference cost (see the note below)",
        ]
        notes = [text.get_text() for text in fig.texts]
        assert any(note.startswith("floor: a reference cost, not a library.") for note in notes)
        # each bar has its library's colour
        bars = {p.get_y(): p.get_facecolor() for p in fig.axes[0].patches}
        assert len(set(bars.values())) == 4
    finally:
        plt.close(fig)

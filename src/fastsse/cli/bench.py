"""``python -m fastsse bench [--quick] [--plot FILE.png]``: a compact run of the benchmark suite.

It times the same contenders on the same seeded corpora as ``benchmarks/`` (pytest-benchmark),
on smaller corpora and fewer groups, so it finishes in about a minute (``--quick``: seconds), and
prints ns/event, events/s, MB/s and each contender's time as a multiple of fastsse's compiled
backend. Peers that are not installed are listed as skipped (``pip install 'fastsse-cython[bench]'``).
"""

from __future__ import annotations

import gc
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from .. import BACKEND, __version__
from .. import bench as kit
from ._common import Parser, command, require

SCALE, QUICK_SCALE = 0.25, 0.05
PEERS = ("openai", "httpx-sse", "sseclient-py", "orjson")

# (group, factory, contender names, corpus, chunking)
Case = tuple[str, Callable[[str], kit.Contender], tuple[str, ...], str, str]
CASES: tuple[Case, ...] = (
    *(
        (f"decode:chat:{how}", kit.decoder, kit.DECODERS, "chat", how)
        for how in ("64B", "1KiB", "16KiB", "event")
    ),
    ("decode:large:16KiB", kit.decoder, kit.DECODERS, "large", "16KiB"),
    ("aggregate:chat:str", kit.aggregator, kit.AGGREGATORS, "chat", "str"),
    ("stream:chat:1KiB", kit.stream, kit.STREAMERS, "chat", "1KiB"),
)
QUICK_GROUPS = ("decode:chat:1KiB", "decode:large:16KiB", "aggregate:chat:str", "stream:chat:1KiB")


@dataclass
class Row:
    group: str
    name: str
    label: str
    seconds: float  # median time of one run over the corpus
    events: int
    nbytes: int
    correct: bool

    @property
    def ns_per_event(self) -> float:
        return self.seconds * 1e9 / self.events


class Progress:
    """A one-line progress bar on stderr (a line per step when stderr is not a terminal)."""

    def __init__(self, total: int, out: TextIO = sys.stderr) -> None:
        self.total, self.done, self.out = total, 0, out
        self.tty = out.isatty()

    def step(self, text: str) -> None:
        self.done += 1
        if self.tty:
            width = 30
            filled = width * self.done // self.total
            bar = "#" * filled + "." * (width - filled)
            self.out.write(f"\r[{bar}] {self.done:>3}/{self.total} {text:<48.48}")
        else:
            self.out.write(f"[{self.done:>3}/{self.total}] {text}\n")
        self.out.flush()

    def finish(self) -> None:
        if self.tty:
            self.out.write("\r" + " " * 90 + "\r")
            self.out.flush()


def _time(run: Callable[..., Any], args: tuple[Any, ...], repeats: int, min_seconds: float) -> float:
    """Median seconds of one call, over ``repeats`` batches each lasting at least ``min_seconds``."""
    start = time.perf_counter()
    run(*args)
    once = max(time.perf_counter() - start, 1e-9)
    loops = max(1, int(min_seconds / once))
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(loops):
                run(*args)
            samples.append((time.perf_counter() - start) / loops)
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(samples)


def _correct(k: kit.Contender, args: tuple[Any, ...], corpus: kit.Corpus, group: str) -> bool:
    if k.kind == "floor":
        return True
    got = k.check(*args)
    if group.startswith("decode:"):
        return bool(got == kit.expected_events(corpus))
    return bool(got == kit.expected_summary(corpus))


def run_cases(quick: bool, progress_out: TextIO = sys.stderr) -> tuple[list[Row], dict[str, str]]:
    """Time every case; return the rows and ``{contender: why it was skipped}``."""
    scale = QUICK_SCALE if quick else SCALE
    repeats, min_seconds = (3, 0.02) if quick else (7, 0.1)
    cases = [c for c in CASES if not quick or c[0] in QUICK_GROUPS]
    corpora: dict[str, kit.Corpus] = {}
    rows: list[Row] = []
    skipped: dict[str, str] = {}
    progress = Progress(sum(len(c[2]) for c in cases), progress_out)
    for group, factory, names, corpus_name, chunking in cases:
        if corpus_name not in corpora:
            corpora[corpus_name] = kit.build(corpus_name, scale)
        corpus = corpora[corpus_name]
        for name in names:
            progress.step(f"{group} {name}")
            try:
                k = factory(name)
            except kit.Unavailable as exc:
                skipped.setdefault(f"{group.split(':')[0]} {name}", str(exc))
                continue
            args = k.prepare(corpus, chunking)
            correct = _correct(k, args, corpus, group)
            seconds = _time(k.run, args, repeats, min_seconds)
            rows.append(Row(group, name, k.label, seconds, corpus.nevents, corpus.nbytes, correct))
    progress.finish()
    return rows, skipped


def format_table(rows: list[Row]) -> str:
    """One block per group: ns/event, events/s, MB/s, and the time as a multiple of fastsse cython's
    and of the group's floor (the least any contender can do)."""
    lines = []
    header = f"{'contender':<36} {'ns/event':>10} {'events/s':>12} {'MB/s':>9} {'x cython':>9} {'x floor':>8}"
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    for group, members in groups.items():
        base = next((r.seconds for r in members if r.name == "fastsse-cython"), None)
        floor = next((r.seconds for r in members if r.name == "floor"), None)
        lines += ["", group, header, "-" * len(header)]
        for r in sorted(members, key=lambda r: r.seconds):
            ratio = f"{r.seconds / base:.2f}" if base else "-"
            over_floor = f"{r.seconds / floor:.2f}" if floor else "-"
            mbps = r.nbytes / r.seconds / 1e6 if r.group.startswith(("decode", "stream")) else None
            mb = f"{mbps:,.0f}" if mbps is not None and r.name != "floor" else "-"
            flag = "" if r.correct else "  WRONG OUTPUT"
            lines.append(
                f"{r.label:<36} {r.ns_per_event:>10,.0f} {1e9 / r.ns_per_event:>12,.0f} {mb:>9} {ratio:>9} "
                f"{over_floor:>8}{flag}"
            )
    return "\n".join(lines)


def _header(quick: bool) -> str:
    versions = ", ".join(f"{dist} {kit.version(dist)}" for dist in PEERS)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"fastsse {__version__} (default backend: {BACKEND}); Python {platform.python_version()} "
        f"on {platform.machine()} {platform.system()}, {os.cpu_count()} CPUs, load {load:.2f}\n"
        f"peers: {versions}\n"
        f"corpora at {QUICK_SCALE if quick else SCALE:.0%} of the full benchmark size "
        "(see benchmarks/README.md); median of repeated runs, GC off while timing"
    )


# What each group times, in words, for the chart (the table keeps the short keys)
_WHAT = {
    "decode": "Decode SSE into events",
    "aggregate": "Fold chat payloads into one response",
    "stream": "Scan, parse and fold a chat stream in one pass",
}
_CORPUS = {"chat": "a chat stream", "large": "large events (~16 KB each)"}
_READS = {"event": "one event per read", "str": "payloads given as str"}

# colour, legend text; in legend order
_KINDS = {
    "fastsse-cython": ("tab:red", "fastsse, compiled backend"),
    "fastsse-python": ("lightsalmon", "fastsse, pure-Python backend"),
    "peer": ("tab:gray", "other Python libraries"),
    "floor": ("tab:blue", "floor: a reference cost (see the note below)"),
}
FLOOR_NOTE = (
    "floor: a reference cost, not a library.\n"
    "For decoding: creating one Python str per event, the least a decoder that hands out str must do.\n"
    "For folding: orjson.loads of each payload alone, what a fold that parses every payload pays before "
    "folding anything\n(fastsse's compiled fold reads most chunks without building them, so it can beat it)."
)


def group_title(group: str) -> str:
    """``decode:chat:1KiB`` -> ``Decode SSE into events: a chat stream, read 1 KiB at a time``."""
    what, corpus, reads = [*group.split(":"), "", ""][:3]
    size = re.fullmatch(r"(\d+)(KiB|B)", reads)
    how = f"read {size[1]} {size[2]} at a time" if size else _READS.get(reads, reads)
    return f"{_WHAT.get(what, what)}: {_CORPUS.get(corpus, corpus)}, {how}"


def _kind(name: str) -> str:
    if name == "floor" or name.startswith("fastsse"):
        return name if name in _KINDS else "fastsse-cython"
    return "peer"


def plot(rows: list[Row], path: str) -> None:
    """Write ``figure(rows)`` to ``path`` (PNG)."""
    import matplotlib.pyplot as plt

    fig = figure(rows)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def figure(rows: list[Row]) -> Any:
    """A bar chart of ns/event (log scale), one panel per group titled in words, a legend for the
    colours and a note on what the floor is."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    height = 2.6 + 0.42 * len(rows) + 0.55 * len(groups)
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, height), squeeze=False)
    for ax, (group, members) in zip(axes[:, 0], groups.items(), strict=True):
        members = sorted(members, key=lambda r: r.seconds, reverse=True)
        values = [r.ns_per_event for r in members]
        ax.barh([r.label for r in members], values, color=[_KINDS[_kind(r.name)][0] for r in members])
        ax.set_xscale("log")
        ax.set_xlim(min(values) / 3, max(values) * 6)
        ax.set_title(group_title(group), loc="left", fontsize=10, fontweight="bold")
        ax.tick_params(labelsize=8)
        base = next((r.ns_per_event for r in members if r.name == "fastsse-cython"), None)
        for y, r in enumerate(members):
            ratio = f"  ({r.ns_per_event / base:.1f}x)" if base and r.name != "fastsse-cython" else ""
            ax.text(r.ns_per_event, y, f" {r.ns_per_event:,.0f} ns{ratio}", va="center", fontsize=7)
    axes[-1, 0].set_xlabel(
        "nanoseconds per event, log scale: shorter is faster; (Nx) = time over fastsse compiled"
    )
    kinds = {_kind(r.name) for r in rows}
    handles = [Patch(color=color, label=text) for kind, (color, text) in _KINDS.items() if kind in kinds]
    top, bottom = 0.5 / height, 0.75 / height  # inches kept for the title and legend, and for the note
    fig.suptitle(
        f"fastsse {__version__} against other Python SSE libraries (python -m fastsse bench)",
        fontsize=11,
        y=1 - 0.08 / height,
    )
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=len(handles),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 1 - 0.35 / height),
    )
    fig.text(0.01, 0.08 / height, FLOOR_NOTE, fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, bottom, 1, 1 - top))
    return fig


@command("bench")
def main(argv: list[str] | None = None) -> int:
    parser = Parser(
        "bench",
        "Compare fastsse (both backends) with the openai SDK, httpx-sse and sseclient-py on seeded\n"
        "corpora. Each group also times a floor: the least any decoder must do (create one str\n"
        "per event), or for the fold, orjson.loads of every payload alone. Times are medians;\n"
        "x cython is a contender's time over fastsse's compiled backend, x floor over the floor.",
    )
    parser.add_argument("--quick", action="store_true", help="smaller corpora, fewer groups and repeats")
    parser.add_argument("--plot", metavar="FILE.png", help="also write a bar chart (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.plot:
        require("matplotlib", "bench --plot")
    print(_header(args.quick))
    rows, skipped = run_cases(args.quick)
    print(format_table(rows))
    if skipped:
        print("\nskipped:")
        for what, why in skipped.items():
            print(f"  {what}: {why}")
    wrong = [f"{r.group} {r.name}" for r in rows if not r.correct]
    if wrong:
        print("\nWRONG OUTPUT (the corpus was not decoded as the spec says): " + ", ".join(wrong))
    if args.plot:
        plot(rows, args.plot)
        print(f"\nchart written to {args.plot}")
    return 0

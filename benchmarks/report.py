"""Turn a pytest-benchmark JSON file into the README's tables and the target verdicts.

    python -m pytest benchmarks --benchmark-only --benchmark-json=bench.json
    python benchmarks/report.py bench.json            # markdown on stdout

Every figure is a median of the same run; ratios divide medians of the same group.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from typing import Any

CHUNKINGS = ("64B", "1KiB", "16KiB", "random", "event")


def load(path: str) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, Any]]:
    """``{group: {contender: {"median": s, "extra": {...}}}}`` and the machine info."""
    with open(path) as f:
        doc = json.load(f)
    groups: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for b in doc["benchmarks"]:
        extra = b.get("extra_info", {})
        groups[b["group"]][extra.get("contender", b["name"])] = {
            "median": b["stats"]["median"],
            "extra": extra,
        }
    info = doc.get("machine_info", {})
    info["datetime"] = doc.get("datetime")
    info["commit"] = doc.get("commit_info", {}).get("id", "")[:10]
    return groups, info


def _ns(entry: dict[str, Any]) -> float:
    return entry["median"] * 1e9 / entry["extra"]["events"]


def _ratio(group: dict[str, Any], a: str, b: str) -> float | None:
    if a in group and b in group:
        return group[a]["median"] / group[b]["median"]
    return None


def _fmt(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def decode_table(groups: dict[str, Any]) -> list[str]:
    lines = [
        "| corpus:chunking | cython ns/event | cython MB/s | openai ÷ cython | httpx-sse ÷ cython "
        "| sseclient-py ÷ cython | python ÷ cython | cython ÷ floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in sorted(g for g in groups if g.startswith("decode:")):
        g = groups[name]
        c = g.get("fastsse-cython")
        mbps = c["extra"]["bytes"] / c["median"] / 1e6 if c else None
        lines.append(
            f"| {name.removeprefix('decode:')} | {_fmt(_ns(c) if c else None, 0)} | {_fmt(mbps, 0)} "
            f"| {_fmt(_ratio(g, 'openai', 'fastsse-cython'))} | {_fmt(_ratio(g, 'httpx-sse', 'fastsse-cython'))} "
            f"| {_fmt(_ratio(g, 'sseclient-py', 'fastsse-cython'))} "
            f"| {_fmt(_ratio(g, 'fastsse-python', 'fastsse-cython'))} "
            f"| {_fmt(_ratio(g, 'fastsse-cython', 'floor'), 2)} |"
        )
    return lines


def fold_table(groups: dict[str, Any], prefix: str, names: tuple[str, ...]) -> list[str]:
    head = " | ".join(f"{n} ns/event" for n in names)
    lines = [f"| group | {head} | cython ÷ floor | openai ÷ cython |", "|---|" + "---:|" * (len(names) + 2)]
    for name in sorted(g for g in groups if g.startswith(prefix)):
        g = groups[name]
        cells = " | ".join(_fmt(_ns(g[n]) if n in g else None, 0) for n in names)
        lines.append(
            f"| {name.removeprefix(prefix)} | {cells} | {_fmt(_ratio(g, 'fastsse-cython', 'floor'), 2)} "
            f"| {_fmt(_ratio(g, 'openai', 'fastsse-cython'))} |"
        )
    return lines


def e2e_table(groups: dict[str, Any]) -> list[str]:
    lines = ["| write mode | client | wall ms per stream | client CPU ns per chunk |", "|---|---|---:|---:|"]
    for name in sorted(g for g in groups if g.startswith("e2e:")):
        for who, e in sorted(groups[name].items(), key=lambda kv: kv[1]["median"]):
            cpu = e["extra"].get("client_cpu_ns_per_chunk")
            lines.append(
                f"| {name.removeprefix('e2e:')} | {who} | {e['median'] * 1e3:,.0f} | {_fmt(cpu, 0)} |"
            )
    return lines


def targets(groups: dict[str, Any]) -> list[str]:
    def chat(peer: str) -> list[float]:
        out = []
        for how in CHUNKINGS:
            r = _ratio(groups.get(f"decode:chat:{how}", {}), peer, "fastsse-cython")
            if r is not None:
                out.append(r)
        return out

    rows: list[tuple[str, float | None, str, bool | None]] = []

    def add(label: str, value: float | None, goal: str, ok: bool | None) -> None:
        rows.append((label, value, goal, ok))

    gm = _geomean(chat("openai"))
    add("decode chat: openai ÷ cython, geomean of 5 chunkings", gm, "≥ 15", None if gm is None else gm >= 15)
    at1k = groups.get("decode:chat:1KiB", {})
    for peer, goal in (("openai", 20), ("httpx-sse", 6), ("fastsse-python", 8)):
        r = _ratio(at1k, peer, "fastsse-cython")
        add(f"decode chat 1KiB: {peer} ÷ cython", r, f"≥ {goal}", None if r is None else r >= goal)
    gm_py = _geomean(chat("fastsse-python"))
    add("decode chat: python ÷ cython, geomean", gm_py, "≥ 8", None if gm_py is None else gm_py >= 8)
    floors = [
        r
        for how in CHUNKINGS
        if (r := _ratio(groups.get(f"decode:chat:{how}", {}), "fastsse-cython", "floor"))
    ]
    worst = max(floors) if floors else None
    add(
        "decode chat: cython ÷ str floor, worst chunking", worst, "≤ 2", None if worst is None else worst <= 2
    )
    for how in CHUNKINGS:
        r = _ratio(groups.get(f"decode:chat:{how}", {}), "fastsse-cython", "floor")
        add(f"decode chat {how}: cython ÷ str floor", r, "≤ 2", None if r is None else r <= 2)
    big = groups.get("decode:large:16KiB", {}).get("fastsse-cython")
    gbps = big["extra"]["bytes"] / big["median"] / 1e9 if big else None
    add("decode large 16KiB: cython GB/s", gbps, "≥ 2", None if gbps is None else gbps >= 2)
    for corpus in ("chat", "tools"):
        for form in ("str", "bytes"):
            r = _ratio(groups.get(f"aggregate:{corpus}:{form}", {}), "fastsse-cython", "floor")
            label = f"aggregate {corpus} ({form} payloads): feed_data ÷ orjson.loads"
            add(label, r, "≤ 1.3", None if r is None else r <= 1.3)
    for corpus in ("chat", "tools", "crlf"):
        rs = [
            r
            for how in CHUNKINGS
            if (r := _ratio(groups.get(f"stream:{corpus}:{how}", {}), "fastsse-cython", "floor"))
        ]
        worst = max(rs) if rs else None
        add(
            f"stream {corpus}: ChatStream.write ÷ orjson.loads, worst chunking",
            worst,
            "≤ 1.5",
            None if worst is None else worst <= 1.5,
        )
    lines = ["| target | measured | goal | verdict |", "|---|---:|---|---|"]
    for label, value, goal, ok in rows:
        verdict = "not measured" if ok is None else ("holds" if ok else "**missed**")
        lines.append(f"| {label} | {_fmt(value, 2)} | {goal} | {verdict} |")
    return lines


def _load(info: dict[str, Any]) -> str:
    start, end = info.get("loadavg_start"), info.get("loadavg_end") or info.get("loadavg")
    parts = []
    if start:
        parts.append(f"{start[0]:.2f} before")
    if end:
        parts.append(f"{end[0]:.2f} after")
    return " and ".join(parts) or "?"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    groups, info = load(argv[0])
    cpu = info.get("cpu", {}).get("brand_raw", "?")
    peers = ", ".join(f"{k} {v}" for k, v in info.get("peers", {}).items())
    fastsse = info.get("fastsse", {})
    out = [
        f"Run {info.get('datetime', '?')} at commit {info.get('commit', '?')}: {cpu}, "
        f"{info.get('cpu_count', '?')} CPUs, 1-minute load average {_load(info)}; "
        f"{info.get('python_implementation', '')} {info.get('python_version', '')}; "
        f"fastsse {fastsse.get('version', '?')}; {peers}.",
        "",
        "### Targets",
        "",
        *targets(groups),
        "",
        "### Decoding (ns per dispatched event; ratios are times, higher = fastsse faster)",
        "",
        *decode_table(groups),
        "",
        "### Aggregation (payloads, str or bytes -> chat.completion)",
        "",
        *fold_table(groups, "aggregate:", ("fastsse-cython", "fastsse-python", "openai", "floor")),
        "",
        "### Fused ChatStream.write (raw reads -> chat.completion)",
        "",
        *fold_table(
            groups,
            "stream:",
            ("fastsse-cython", "fastsse-on-chunk", "fastsse-python", "fastsse-unfused", "openai", "floor"),
        ),
        "",
        "### End to end (loopback server, 20,000 chunks)",
        "",
        *e2e_table(groups),
    ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

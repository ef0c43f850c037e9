"""``load --trace FILE``: request traces replayed at their own times.

Two public formats are read, told apart by their first line:

- **Mooncake** (JSONL, one request a line; FAST'25 "Mooncake" traces, also what AIPerf and vLLM
  replay): ``{"timestamp": ms since the trace's start, "input_length": tokens, "output_length":
  tokens, "hash_ids": [int, ...]}``; each hash id names a block of ``BLOCK`` prompt tokens, and
  two requests whose ``hash_ids`` start alike share that prefix.
- **Azure LLM inference traces** (CSV, Azure Public Dataset 2023/2024):
  ``TIMESTAMP,ContextTokens,GeneratedTokens``, the timestamp a date and time
  (``2023-11-16 18:15:46.6805900``) or a number of seconds; no prefixes.

``read_trace(path) -> tuple[TraceRow, ...]`` gives the requests in arrival order, offsets from the
first; ``prompt(row, index, seed)`` makes a prompt of ``row.input_length`` words from its blocks.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import random
from typing import Final, NamedTuple

import orjson

from .._errors import InvalidRequest

BLOCK: Final = 512  # the tokens a Mooncake hash id stands for
_TAPE: Final = 1 << 16  # the words a block's text is cut from


class TraceRow(NamedTuple):
    """One request of a trace: its arrival (ns after the first), its lengths, its prefix blocks."""

    offset_ns: int
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()


def _count(value: object, what: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise InvalidRequest(f"{where}: {what} must be a whole number >= 0, not {value!r}")
    return int(value)


def _mooncake(lines: list[str], source: str) -> list[TraceRow]:
    rows = []
    for number, line in enumerate(lines, 1):
        where = f"{source} line {number}"
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InvalidRequest(f"{where}: not JSON: {exc}") from None
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where}: a JSON object is needed")
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in item]
        if missing:
            raise InvalidRequest(
                f"{where}: no {', '.join(missing)} (a Mooncake trace line has timestamp, input_length, "
                "output_length and hash_ids)"
            )
        stamp = item["timestamp"]
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
            raise InvalidRequest(f"{where}: timestamp must be a number of ms, not {stamp!r}")
        hashes = item.get("hash_ids") or []
        if not isinstance(hashes, list) or not all(type(h) is int for h in hashes):
            raise InvalidRequest(f"{where}: hash_ids must be a list of integers")
        rows.append(
            TraceRow(
                round(stamp * 1e6),
                _count(item["input_length"], "input_length", where),
                _count(item["output_length"], "output_length", where),
                tuple(hashes),
            )
        )
    return rows


def _ns(text: str, where: str) -> int:
    # exact to the ns: a float of epoch seconds keeps only about 0.2 us
    try:
        return int(decimal.Decimal(text.strip()) * 1_000_000_000)
    except (decimal.InvalidOperation, ValueError):  # a date, or NaN
        pass
    # 2023-11-16 18:15:46.6805900: seven digits of fraction, more than strptime's %f takes
    whole, _, fraction = text.strip().partition(".")
    try:
        moment = datetime.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
        if fraction and not fraction.isdigit():
            raise InvalidRequest(fraction)
    except ValueError:
        raise InvalidRequest(
            f"{where}: TIMESTAMP {text!r} is neither seconds nor YYYY-MM-DD HH:MM:SS[.fraction]"
        ) from None
    seconds = int(moment.replace(tzinfo=datetime.timezone.utc).timestamp())
    return seconds * 1_000_000_000 + int((fraction + "0" * 9)[:9])


def _azure(text: str, source: str) -> list[TraceRow]:
    reader = csv.DictReader(io.StringIO(text))
    names = {name.strip().lower(): name for name in reader.fieldnames or ()}
    need = ("timestamp", "contexttokens", "generatedtokens")
    if not all(n in names for n in need):
        raise InvalidRequest(
            f"{source}: neither a Mooncake trace (JSON lines) nor an Azure trace "
            "(a CSV with TIMESTAMP,ContextTokens,GeneratedTokens)"
        )
    rows = []
    for number, item in enumerate(reader, 2):
        where = f"{source} line {number}"

        def field(name: str, item: dict[str, str] = item) -> str:
            return (item.get(names[name]) or "").strip()

        try:
            context, generated = int(field("contexttokens")), int(field("generatedtokens"))
        except ValueError:
            raise InvalidRequest(
                f"{where}: ContextTokens and GeneratedTokens must be whole numbers"
            ) from None
        rows.append(TraceRow(_ns(field("timestamp"), where), context, generated))
    return rows


def read_trace(path: str) -> tuple[TraceRow, ...]:
    """``read_trace(path) -> rows``: a Mooncake JSONL or Azure CSV trace, in arrival order, each
    ``offset_ns`` after the first arrival.

    It raises OSError if the file cannot be read and ValueError if it is neither format or holds
    no request.
    """
    with open(path, "rb") as f:
        text = f.read().decode("utf-8-sig")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise InvalidRequest(f"--trace {path} has no requests")
    source = f"--trace {path}"
    rows = _mooncake(lines, source) if lines[0].lstrip().startswith("{") else _azure(text, source)
    if not rows:
        raise InvalidRequest(f"--trace {path} has no requests")
    rows.sort(key=lambda r: r.offset_ns)  # stable: requests stamped alike keep their order
    first = rows[0].offset_ns
    return tuple(r._replace(offset_ns=r.offset_ns - first) for r in rows)


class Prompts:
    """``Prompts(seed, vocabulary)(row, index) -> str``: a prompt of ``row.input_length`` words. Each hash id
    is a block of ``BLOCK`` words, the same text wherever it appears (so prefixes the trace shares
    are shared here), starting with the id itself so that no two blocks are alike; the words of a
    block are a slice of one tape of words drawn from ``seed``, where the id says. A request
    without hash ids (an Azure trace, or the words past the last block) gets words of its own."""

    def __init__(self, seed: int, vocabulary: tuple[str, ...]) -> None:
        rng = random.Random(seed * 104_729 + 3)
        self._tape = [rng.choice(vocabulary) for _ in range(_TAPE)]

    def _words(self, key: int, count: int) -> list[str]:
        # ``count`` words of the tape from where ``key`` says, round the end if need be
        out: list[str] = []
        start = (key * 2_654_435_761) % _TAPE
        while len(out) < count:
            take = min(count - len(out), _TAPE - start)
            out += self._tape[start : start + take]
            start = 0
        return out

    def __call__(self, row: TraceRow, index: int) -> str:
        out: list[str] = []
        for h in row.hash_ids:
            if len(out) >= row.input_length:
                break
            out.append(f"b{h}")
            out += self._words(h, BLOCK - 1)
        if len(out) < row.input_length:  # past the blocks: this request's own words
            rest = row.input_length - len(out)
            out.append(f"r{index}")
            out += self._words(-(index + 1), rest - 1) if rest > 1 else []
        return " ".join(out[: row.input_length])

"""What a load run sends and when: its configuration, the arrival schedule, the datasets, the bodies.

Everything here is decided before the first request, in the process that started the run, and
shipped to the workers (processes or Ray actors) as plain data: the arrival times of an open-loop
run are drawn once, centrally, so that K workers sharing one Poisson (or gamma) stream still make
one stream; synthetic prompts are generated once, so every worker sends the same text for the same
request index. The definitions beside vLLM's and AIPerf's are in ``docs/load.md``.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import math
import random
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlsplit

import orjson

from .._errors import InvalidRequest
from ..apis import APIS as API_ROWS
from ..apis import NAMES
from . import _peers
from ._trace import Prompts, TraceRow

SCHEMA: Final = "fastsse.load/2"
OLD_SCHEMAS: Final = ("fastsse.load/1",)  # still read by ``load merge``
STAMP: Final = "fastsse_sent_ns"  # the scripted server's send stamp: the default --lag-field
# A send stamp at least this large is epoch ns (time.time_ns(): 1e18 was September 2001); below it,
# the server's CLOCK_MONOTONIC, which would need 31 years of uptime to get there.
EPOCH_STAMP_NS: Final = 10**18
CLIENTS: Final = ("fastsse", *_peers.PEERS)
DEFAULT_PROMPT: Final = "Write a long story about a lighthouse keeper and the sea."
MESSAGES_MAX_TOKENS: Final = 1024  # the Messages API requires max_tokens; this without --max-tokens
APIS: Final = (*NAMES, "completions")  # and the legacy completions stream, read as chat
# The legacy /v1/completions stream is read by the client's chat API (its fold takes a choice's
# text as chat's content) at this path: no API of its own in fastsse._formats.
COMPLETIONS_PATH: Final = "/completions"
RAMPS: Final = ("linear", "exponential")
SLOS: Final = ("ttft", "tpot", "e2el")  # vLLM's --goodput keys, in ms
DEFAULT_PERCENTILES: Final = (50.0, 90.0, 99.0)
RANDOM_POOL: Final = 4096  # distinct synthetic prompts at most (used in turn): memory stays bounded
MAX_LENGTH: Final = 1 << 20  # the longest synthetic prompt, prefix or output (--random-*-len, --prefix-len)

# what each outcome means (docs/load.md, "Outcomes")
COMPLETE, INCOMPLETE, STREAM_ERROR, HTTP_ERROR, FAILED = "complete", "incomplete", "error", "http", "failed"


def endpoint(base_url: str, api: str = "chat") -> str:
    """``endpoint(base_url, api="chat") -> str``: the URL a request of ``api`` goes to under
    ``base_url`` (its path joined as the client joins it), with any ``user:password@`` hidden.

    It raises InvalidRequest for an unknown ``api``.
    """
    from .._formats import api_format
    from ..client import redact

    # the legacy completions stream has no API of its own: load reads it with chat's fold
    path = "/completions" if api == "completions" else api_format(api).path
    return redact(base_url.rstrip("/") + path)


def not_found(base_url: str) -> str:
    """``not_found(base_url) -> str``: what to add after an HTTP 404 under ``base_url``: the hint
    that a base URL usually ends in ``/v1`` (the OpenAI-compatible servers, the loopback one
    included, serve their API under it), or "" when its path already holds a ``v1``."""
    try:
        path = urlsplit(base_url).path
    except ValueError:
        return ""
    if "v1" in path.split("/"):
        return ""
    return f"; the base URL usually ends in /v1 ({base_url.rstrip('/')}/v1)"


@dataclasses.dataclass(frozen=True)
class Config:
    """One load run, as the workers receive it (picklable, plain data); ``docs/load.md`` has each option."""

    url: str
    model: str
    api_key: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    concurrency: int | None = None
    rate: float | None = None
    arrival: str = "poisson"
    requests: int | None = None
    duration: float | None = None
    warmup: int = 0
    max_tokens: int | None = None
    prompt: str = DEFAULT_PROMPT
    dataset: tuple[str, ...] = ()  # the dataset's rows, JSON text each
    trace: str | None = None  # --trace: the file the rows below came from
    trace_speed: float = 1.0  # its arrivals' times divided by this
    trace_rows: tuple[TraceRow, ...] = ()  # its requests, in arrival order (_trace)
    extra_body: str | None = None  # JSON object merged into every body
    usage: bool = True
    seed: int = 0
    client: str = "fastsse"
    timeout: float = 600.0
    retries: int = 0  # max_retries of the fastsse client (peers never retry)
    lag: bool = True
    lag_field: str = STAMP  # fastsse.load/2: the send stamp's field (--lag-field)
    metrics_url: str | None = None  # the server's Prometheus page, read before and after (--metrics-url)
    loop: str = "auto"
    workers: int = 1
    http2: bool = False
    api: str = "chat"
    # fastsse.load/2
    burstiness: float = 1.0
    ramp: str | None = None
    ramp_start_rps: float | None = None
    ramp_end_rps: float | None = None
    random_input_len: int | None = None
    random_output_len: int | None = None
    random_range_ratio: float = 0.0
    tokenizer: str | None = None
    prefix_len: int = 0
    prefix: str = ""  # the shared prefix's text (filled in by ``prepare``)
    turns: int = 1
    goodput: tuple[tuple[str, float], ...] = ()
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    ray: str | None = None

    @property
    def open_loop(self) -> bool:
        """True when requests arrive on a schedule (``--rate``, a ramp, a trace), not when a user is free."""
        return self.rate is not None or self.ramp is not None or bool(self.trace_rows)


# The arrival schedule.


def gap(rate: float, config: Config, rng: random.Random) -> float:
    """One gap between arrivals (s) at ``rate``: constant, or gamma-distributed with shape
    ``burstiness`` and mean ``1/rate`` (shape 1 is the exponential gap of a Poisson process)."""
    if config.arrival == "constant":
        return 1.0 / rate
    if config.burstiness == 1.0:
        return rng.expovariate(rate)
    return rng.gammavariate(config.burstiness, 1.0 / (rate * config.burstiness))


def rate_at(config: Config, progress: float) -> float:
    """The arrival rate at ``progress`` (0 to 1) through a ramp, else ``config.rate``."""
    if config.ramp is None:
        assert config.rate is not None
        return config.rate
    start, end = config.ramp_start_rps, config.ramp_end_rps
    assert start is not None and end is not None
    if config.ramp == "linear":
        return start + (end - start) * progress
    return float(start * (end / start) ** progress)


def arrivals(config: Config, count: int | None, duration: float | None, salt: int = 0) -> list[int]:
    """``arrivals(config, count, duration, salt=0) -> [ns]``: the arrival offsets of an open-loop phase.

    ``count`` arrivals, or as many as fall before ``duration`` seconds (one bound is needed). A ramp
    moves the rate with the request's place in the phase (``i / (count - 1)``, as vLLM does) or, with
    only a duration, with the time elapsed. The same seed and salt draw the same schedule.
    It raises InvalidRequest without a bound.
    """
    if count is None and duration is None:
        raise InvalidRequest("an open-loop schedule needs a request count or a duration")
    rng = random.Random(config.seed * 1_000_003 + salt)
    out: list[int] = []
    t = 0.0
    while count is None or len(out) < count:
        if count is not None:
            progress = len(out) / max(count - 1, 1)
        else:
            assert duration is not None
            progress = min(t / duration, 1.0)
        t += gap(rate_at(config, progress), config, rng)
        if duration is not None and t >= duration:
            break
        out.append(int(t * 1e9))
    return out


@dataclasses.dataclass
class Share:
    """What one worker runs. Open loop: its arrivals, ``(index, offset ns)`` each, from the central
    schedule (every K-th). Closed loop: request indexes ``worker, worker + workers, ...``."""

    worker: int
    workers: int
    concurrency: int | None
    requests: int | None
    warmup: int
    arrivals: list[tuple[int, int]] | None = None
    warmup_arrivals: list[tuple[int, int]] | None = None


def shares(config: Config) -> list[Share]:
    """Split the run among ``config.workers``: the concurrency, the requests, the arrival schedule."""
    k = config.workers

    def part(total: int | None, w: int) -> int | None:
        return None if total is None else total // k + (1 if w < total % k else 0)

    schedule = warm = None
    if config.trace_rows:
        warm, schedule = _trace_schedule(config)
    elif config.open_loop:
        # warm-up conversations take indexes 0..W-1, the measured ones follow; one stream, dealt out
        warm = list(enumerate(arrivals(config, config.warmup, None, salt=1))) if config.warmup else []
        measured = arrivals(config, config.requests, config.duration)
        schedule = [(config.warmup + i, t) for i, t in enumerate(measured)]
    return [
        Share(
            worker=w,
            workers=k,
            concurrency=part(config.concurrency, w),
            requests=part(config.requests, w),
            warmup=part(config.warmup, w) or 0,
            arrivals=None if schedule is None else schedule[w::k],
            warmup_arrivals=None if warm is None else warm[w::k],
        )
        for w in range(k)
    ]


def _trace_schedule(config: Config) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """A trace's warm-up and measured arrivals, ``(index, offset ns)``: the first ``warmup`` rows,
    then up to ``requests`` rows (all without it) arriving before ``duration``, each phase's offsets
    from its first arrival, the trace's times divided by ``trace_speed``. Row ``i`` is request ``i``."""
    rows, speed, w = config.trace_rows, config.trace_speed, config.warmup

    def at(row: TraceRow) -> int:
        return round(row.offset_ns / speed)

    warm = [(i, at(r) - at(rows[0])) for i, r in enumerate(rows[:w])]
    rest = rows[w:] if config.requests is None else rows[w : w + config.requests]
    start = at(rest[0]) if rest else 0
    limit = None if config.duration is None else config.duration * 1e9
    measured = [(w + i, at(r) - start) for i, r in enumerate(rest) if limit is None or at(r) - start < limit]
    return warm, measured


# Datasets.

# Common English words, each one token (with its leading space) in the usual BPE vocabularies:
# a synthetic prompt of N words is about N tokens before a tokenizer says exactly.
_WORDS: Final = (
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "name",
    "team",
    "minute",
    "idea",
    "body",
    "back",
    "parent",
    "face",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "order",
)


class Tokenizer:
    """A local tokenizer for exact prompt lengths: ``tokenizers`` (a ``tokenizer.json`` file or a
    folder holding one) or ``transformers`` (``AutoTokenizer``, local files only, never a download).

    It raises InvalidRequest if neither package is installed or the files are not there.
    """

    def __init__(self, name: str) -> None:
        import os

        self.name = name
        path = os.path.join(name, "tokenizer.json") if os.path.isdir(name) else name
        self._encode: Callable[[str], list[int]]
        self._decode: Callable[[list[int]], str]
        problems = []
        if os.path.isfile(path):
            try:
                fast = importlib.import_module("tokenizers").Tokenizer.from_file(path)
                self._encode = lambda text: list(fast.encode(text, add_special_tokens=False).ids)
                self._decode = lambda ids: str(fast.decode(ids))
                return
            except ImportError:
                problems.append("the tokenizers package is not installed")
            except Exception as exc:
                problems.append(f"tokenizers could not read {path}: {exc}")
        try:
            auto = importlib.import_module("transformers").AutoTokenizer.from_pretrained(
                name, local_files_only=True
            )
            self._encode = lambda text: list(auto.encode(text, add_special_tokens=False))
            self._decode = lambda ids: str(auto.decode(ids))
            return
        except ImportError:
            problems.append("the transformers package is not installed")
        except Exception as exc:
            problems.append(f"transformers found no local tokenizer {name!r}: {type(exc).__name__}")
        raise InvalidRequest(
            f"--tokenizer {name}: {'; '.join(problems)} (pip install tokenizers, and give a local "
            "tokenizer.json or a folder holding one)"
        )

    def count(self, text: str) -> int:
        """The tokens of ``text`` (no special tokens)."""
        return len(self._encode(text))

    def cut(self, text: str, tokens: int) -> str:
        """``text`` re-cut to ``tokens`` tokens: encode, keep the first ``tokens``, decode, and again
        until decoding and re-encoding agree (they may not at once, merges differ at the cut)."""
        for _ in range(10):
            ids = self._encode(text)
            if len(ids) == tokens:
                return text
            if len(ids) < tokens:
                text += " " + " ".join(_WORDS[i % len(_WORDS)] for i in range(tokens - len(ids)))
            else:
                text = self._decode(ids[:tokens])
        return text


def words(count: int, rng: random.Random) -> str:
    """``count`` words drawn from the synthetic vocabulary, separated by single spaces."""
    return " ".join(rng.choice(_WORDS) for _ in range(count))


def length_range(length: int, ratio: float) -> tuple[int, int]:
    """The lengths ``length * (1 -+ ratio)`` allows, rounded outwards, at least 1 (as vLLM draws them)."""
    return max(1, math.floor(length * (1 - ratio))), max(1, math.ceil(length * (1 + ratio)))


def random_rows(config: Config, count: int, tokenizer: Tokenizer | None) -> tuple[str, ...]:
    """``count`` synthetic rows ``{"prompt", "max_tokens", "ignore_eos"}``: input and output lengths
    uniform in ``length_range``, the prompt that many words (or tokens, with a tokenizer)."""
    rng = random.Random(config.seed * 7_919 + 17)
    rows = []
    for _ in range(count):
        row: dict[str, Any] = {}
        if config.random_input_len is not None:
            n = rng.randint(*length_range(config.random_input_len, config.random_range_ratio))
            text = words(n, rng)
            row["prompt"] = tokenizer.cut(text, n) if tokenizer is not None else text
        else:
            row["prompt"] = config.prompt
        if config.random_output_len is not None:
            row["max_tokens"] = rng.randint(
                *length_range(config.random_output_len, config.random_range_ratio)
            )
            row["ignore_eos"] = True
        rows.append(orjson.dumps(row).decode())
    return tuple(rows)


def sharegpt_rows(conversations: list[Any], tokenizer: Tokenizer | None, source: str) -> tuple[str, ...]:
    """The rows of a ShareGPT file: for each conversation, its first human turn as the prompt and the
    answer after it as the output length (its tokens with a tokenizer, else its words) in max_tokens.

    Conversations without a human turn followed by an answer are skipped. It raises InvalidRequest if
    none is left.
    """
    rows = []
    for entry in conversations:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            continue
        for first, second in itertools.pairwise(turns):
            if not (isinstance(first, dict) and isinstance(second, dict)):
                continue
            if first.get("from") in ("human", "user") and isinstance(first.get("value"), str):
                answer = second.get("value")
                if second.get("from") in ("gpt", "assistant", "chatgpt", "bard") and isinstance(answer, str):
                    length = tokenizer.count(answer) if tokenizer is not None else len(answer.split())
                    rows.append(
                        orjson.dumps({"prompt": first["value"], "max_tokens": max(1, length)}).decode()
                    )
                break
    if not rows:
        raise InvalidRequest(f"{source}: no conversation with a human turn followed by an answer")
    return tuple(rows)


def read_dataset(path: str, tokenizer: Tokenizer | None = None) -> tuple[str, ...]:
    """``read_dataset(path, tokenizer=None) -> rows``: a JSONL file (one request body or
    ``{"prompt", "max_tokens"}`` per line) or a ShareGPT JSON file (a list of ``{"conversations":
    [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}``).

    It raises OSError if the file cannot be read and ValueError if it holds no request.
    """
    with open(path, "rb") as f:
        data = f.read()
    head = data.lstrip()[:1]
    if head == b"[":
        try:
            whole = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InvalidRequest(f"--dataset {path}: not JSON: {exc}") from None
        return sharegpt_rows(whole, tokenizer, f"--dataset {path}")
    lines = tuple(line for line in data.decode("utf-8").splitlines() if line.strip())
    if not lines:
        raise InvalidRequest(f"--dataset {path} has no requests")
    if '"conversations"' in lines[0]:  # ShareGPT as JSONL
        return sharegpt_rows([orjson.loads(line) for line in lines], tokenizer, f"--dataset {path}")
    return lines


def prepare(config: Config) -> Config:
    """The config with its synthetic rows and shared prefix drawn (once, here, for every worker).

    It raises InvalidRequest for a tokenizer that cannot be loaded or a length over ``MAX_LENGTH``.
    """
    for name in ("random_input_len", "random_output_len", "prefix_len"):
        value = getattr(config, name)
        if value is not None and value * (1 + config.random_range_ratio) > MAX_LENGTH:
            raise InvalidRequest(f"--{name.replace('_', '-')} is over the bound of {MAX_LENGTH:,}")
    longest = max((r.input_length for r in config.trace_rows), default=0)
    if longest > MAX_LENGTH:
        raise InvalidRequest(
            f"--trace {config.trace}: an input of {longest:,} is over the bound, {MAX_LENGTH:,}"
        )
    tokenizer = Tokenizer(config.tokenizer) if config.tokenizer else None
    changes: dict[str, Any] = {}
    if (config.random_input_len or config.random_output_len) and not config.dataset:
        count = (
            (config.requests + config.warmup) * config.turns if config.requests is not None else RANDOM_POOL
        )
        changes["dataset"] = random_rows(config, min(max(count, 1), RANDOM_POOL), tokenizer)
    if config.prefix_len and not config.prefix:
        text = words(config.prefix_len, random.Random(config.seed * 31 + 5))
        changes["prefix"] = tokenizer.cut(text, config.prefix_len) if tokenizer is not None else text
    return dataclasses.replace(config, **changes) if changes else config


# Request bodies.

_PROMPT_ROW: Final = frozenset(("prompt", "max_tokens", "ignore_eos"))


def bodies(config: Config) -> Callable[..., dict[str, Any]]:
    """``body(i, history=()) -> dict``: request ``i``'s body (the dataset's row ``i mod len``, or the
    prompt; the shared prefix before the prompt), ``history`` (earlier turns) before its messages.

    A row with the API's messages (``input`` for Responses) is a whole body, sent as it is; a row
    with a string ``prompt`` instead is a prompt row: the prompt becomes the user message (the
    ``prompt`` itself for completions), ``max_tokens`` the API's limit, and its other fields go into
    the body as they are. For completions a row whose ``prompt`` is not a string (token ids) is a
    whole body.

    It raises InvalidRequest for a dataset row that is not a JSON object.
    """
    extra = orjson.loads(config.extra_body) if config.extra_body else {}
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(config.dataset, 1):
        row = orjson.loads(line)
        if not isinstance(row, dict):
            raise InvalidRequest(f"dataset line {number}: a JSON object is needed, not {type(row).__name__}")
        rows.append(row)

    # the output limit's name in each API; Messages requires one
    # (chat's max_tokens, not its newer max_completion_tokens: every server load meets reads it)
    limit_key = "max_tokens" if config.api in ("chat", "completions") else API_ROWS[config.api].limit_field
    messages_key = {"responses": "input", "completions": "prompt"}.get(config.api, "messages")
    legacy = config.api == "completions"  # a prompt string where the others have messages

    def ask(text: str) -> dict[str, Any]:
        return {messages_key: text if legacy else [{"role": "user", "content": text}]}

    prefix = config.prefix + " " if config.prefix else ""
    trace = config.trace_rows
    prompts = Prompts(config.seed, _WORDS) if trace else None

    def body(i: int, history: list[dict[str, Any]] | tuple[()] = ()) -> dict[str, Any]:
        whole = False
        limit = config.max_tokens
        ignore_eos = False
        if prompts is not None:  # a trace's request: its input length in words, its output length
            traced = trace[i % len(trace)]
            out = ask(prefix + prompts(traced, i))
            limit, ignore_eos = max(1, traced.output_length), True
        elif rows:
            row = rows[i % len(rows)]
            text = row.get("prompt")
            if legacy:  # a string prompt takes the prefix; token ids or a list go as they are
                whole = not isinstance(text, str) and ("prompt" in row or not set(row) <= _PROMPT_ROW)
            else:
                whole = messages_key in row or not (set(row) <= _PROMPT_ROW or isinstance(text, str))
            if whole:
                out = dict(row)  # a request body: sent as it is, unknown fields included
            else:  # a prompt row: the prompt becomes the user message, other fields go as they are
                out = ask(prefix + str(row.get("prompt", "")))
                out.update((k, v) for k, v in row.items() if k not in _PROMPT_ROW)
                if row.get("max_tokens") is not None:
                    limit = row["max_tokens"]
                ignore_eos = bool(row.get("ignore_eos"))
        else:
            out = ask(prefix + config.prompt)
        if history:
            out[messages_key] = [*history, *(out.get(messages_key) or ())]
        if config.api == "messages" and limit is None:
            limit = MESSAGES_MAX_TOKENS
        if limit is not None and limit_key not in out:
            out[limit_key] = limit
        if ignore_eos and config.api in ("chat", "completions"):  # vLLM's: generate exactly max_tokens
            out["ignore_eos"] = True
        # Responses and Messages always report usage; chat and completions when asked
        if config.usage and not whole and config.api in ("chat", "completions"):
            options = dict(out.get("stream_options") or {})
            options.setdefault("include_usage", True)
            out["stream_options"] = options
        out.update(extra)
        out["model"] = config.model
        out["stream"] = True
        return out

    return body

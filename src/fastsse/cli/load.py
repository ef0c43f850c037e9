"""``python -m fastsse load URL --model M``: a load generator for OpenAI-compatible streaming servers.

It sends chat requests at a concurrency and/or an arrival rate, records when every part of every
answer arrived (the many-streams engine's ``result["timing"]``: a stamp per read, taken before
parsing, and the tokens each chunk carried), and summarises TTFT, TPOT, ITL (token-weighted), E2E
latency, throughput, goodput against SLOs, failures by cause and the client's own CPU use. The
exact definitions, beside vLLM ``bench serve``'s and AIPerf's, are in ``docs/load.md``; so is the
``--json`` schema.

This module is the command line only: it parses the arguments into a ``fastsse.load.Config``,
calls ``fastsse.load`` (``run``, ``sweep``, ``repeat``, ``merge``, ``compare``) and prints. ``--client``
runs the same schedule through another HTTP client so that its figures can be set beside fastsse's
on the same server.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from typing import Final

import orjson

from .. import load as lib
from .._errors import InvalidRequest
from ..load import (
    APIS,
    CLIENTS,
    COMPLETE,
    DEFAULT_PROMPT,
    RAMPS,
    SCHEMA,
    SLOS,
    STAMP_FIELD,
    Config,
    Tokenizer,
    dumps,
    format_summary,
    format_sweep,
    merge,
    metrics_url,
    plot,
    plot_sweep,
    read_dataset,
    read_trace,
    repeat,
    run,
    sweep,
    unanswered,
)
from ._common import Parser, prog, say

__all__ = ["config_from_args", "main"]


# The command line.


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        "load",
        "Load an OpenAI-compatible streaming server and measure TTFT, TPOT, ITL, E2E, throughput and "
        "goodput with a client that is not the bottleneck (docs/load.md).",
        epilog=f"{prog('load merge')} A.json B.json --json ALL.json merges runs made at the same "
        f"time on several machines onto one clock; {prog('load compare')} A.json B.json sets runs "
        "side by side.",
    )
    p.add_argument("url", help="the API base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, help="the model name sent in every request")
    p.add_argument(
        "--api",
        choices=APIS,
        default="chat",
        help="request format: chat completions (default), responses, messages or the legacy "
        "completions (fastsse client only)",
    )
    load = p.add_argument_group("load")
    load.add_argument(
        "--concurrency", type=int, help="requests in flight at most (closed loop without --rate)"
    )
    load.add_argument("--rate", type=float, help="requests per second arriving (open loop)")
    load.add_argument(
        "--arrival",
        choices=("poisson", "constant"),
        help="arrival process for --rate: poisson (default) or constant; a sweep's rates default to constant",
    )
    load.add_argument(
        "--burstiness",
        type=float,
        default=1.0,
        help="gaps between arrivals are gamma-distributed with this shape and mean 1/rate, as vLLM's: "
        "1 is Poisson (default), below 1 burstier, above 1 steadier",
    )
    load.add_argument(
        "--ramp-up",
        choices=RAMPS,
        help="arrival rate moving from --ramp-start-rps to --ramp-end-rps (open loop)",
    )
    load.add_argument("--ramp-start-rps", type=float, help="the ramp's first rate (requests/s)")
    load.add_argument("--ramp-end-rps", type=float, help="the ramp's last rate (requests/s)")
    load.add_argument(
        "--requests",
        type=int,
        help="requests (conversations with --turns) to send; default 100 unless --duration",
    )
    load.add_argument(
        "--duration", type=float, help="seconds to keep sending (in-flight requests then finish)"
    )
    load.add_argument("--warmup", type=int, default=0, help="requests sent first and left out of the figures")
    load.add_argument("--seed", type=int, default=0, help="seed of the arrivals and the synthetic prompts")
    load.add_argument(
        "--trace",
        metavar="FILE",
        help="replay a request trace at its own times: Mooncake JSONL (timestamp ms, input_length, "
        "output_length, hash_ids) or Azure CSV (TIMESTAMP,ContextTokens,GeneratedTokens)",
    )
    load.add_argument(
        "--trace-speed",
        type=float,
        default=1.0,
        metavar="X",
        help="replay the trace X times as fast (its gaps divided by X; default 1)",
    )
    data = p.add_argument_group("what is sent")
    data.add_argument("--max-tokens", type=int, help="max_tokens of every request")
    data.add_argument("--prompt", default=DEFAULT_PROMPT, help="the user message (without --dataset)")
    data.add_argument(
        "--dataset",
        help="JSONL (a request body per line, sent as it is, or {prompt, max_tokens}) or ShareGPT JSON "
        "(the first human turn is the prompt, the answer's length max_tokens)",
    )
    data.add_argument(
        "--random-input-len",
        type=int,
        help="synthetic prompts of N words (tokens with --tokenizer); the server's usage.prompt_tokens counts",
    )
    data.add_argument(
        "--random-output-len", type=int, help="max_tokens of M (and ignore_eos) for synthetic requests"
    )
    data.add_argument(
        "--random-range-ratio",
        type=float,
        default=0.0,
        help="lengths drawn uniformly from N*(1-R) to N*(1+R) (0 <= R < 1; default 0)",
    )
    data.add_argument(
        "--tokenizer",
        metavar="NAME_OR_PATH",
        help="count synthetic and ShareGPT lengths in tokens: a local tokenizer.json (tokenizers) or "
        "model folder (transformers); nothing is downloaded",
    )
    data.add_argument(
        "--prefix-len", type=int, default=0, help="a fixed prefix of P words before every prompt"
    )
    data.add_argument(
        "--turns", type=int, default=1, help="conversations of T requests, each carrying the earlier answers"
    )
    data.add_argument("--extra-body", help="a JSON object merged into every request body")
    data.add_argument("--no-usage", action="store_true", help="do not ask for stream_options.include_usage")
    client = p.add_argument_group("client")
    client.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    client.add_argument(
        "--api-key", default=os.environ.get("OPENAI_API_KEY"), help="default: $OPENAI_API_KEY"
    )
    client.add_argument(
        "--timeout", type=float, default=600.0, help="seconds a request may take in all (default 600)"
    )
    client.add_argument(
        "--retries",
        type=int,
        default=0,
        metavar="N",
        help="retry a request that failed before its answer began, N times at most (the client's rules; "
        "default 0: a load run measures failures, it does not hide them)",
    )
    client.add_argument(
        "--client", choices=CLIENTS, default="fastsse", help="the HTTP client (peers: for comparisons)"
    )
    client.add_argument(
        "--no-lag", action="store_true", help="do not read the server's send stamps (no per-chunk dict)"
    )
    client.add_argument(
        "--lag-field",
        metavar="NAME",
        default=STAMP_FIELD,
        help=f"the chunks' field holding the server's send stamp in ns, on its monotonic clock or "
        f"epoch time (default {STAMP_FIELD}, the scripted server's)",
    )
    client.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="event loop (auto: uvloop if installed)",
    )
    client.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes (or Ray actors), each with its own client (default 1)",
    )
    client.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the --workers as Ray actors: a cluster's address, 'auto' (the cluster this machine "
        "is in) or 'local' (start one here); pip install 'fastsse-cython[ray]'",
    )
    client.add_argument(
        "--http2",
        action="store_true",
        help="speak HTTP/2, streams multiplexed on shared connections (fastsse only)",
    )
    report = p.add_argument_group("report")
    report.add_argument(
        "--goodput",
        nargs="+",
        metavar="KEY:MS",
        help="SLOs, as vLLM spells them (ttft:MS tpot:MS e2el:MS, any subset): requests/s and the share "
        "of requests meeting every one",
    )
    report.add_argument(
        "--percentiles",
        default="50,90,99",
        help="the percentile columns, e.g. 50,90,99,99.9 (default 50,90,99)",
    )
    report.add_argument(
        "--sweep",
        action="store_true",
        help="measure the closed-loop maximum at --concurrency, then --sweep-points rates up to it",
    )
    report.add_argument("--sweep-points", type=int, default=4, help="rates of a sweep (default 4)")
    report.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="N runs of the same plan: each metric's mean and 95%% confidence interval across them",
    )
    report.add_argument(
        "--json", metavar="FILE", help=f"write the summary and every request record ({SCHEMA})"
    )
    report.add_argument(
        "--plot",
        metavar="FILE.png",
        help="latency CDFs and throughput over time; with --sweep latency against throughput (matplotlib)",
    )
    report.add_argument(
        "--metrics-url",
        nargs="?",
        const="",
        metavar="URL",
        help="read the server's Prometheus metrics before and after the run and report what changed "
        "(alone: the server's own /metrics, next to the API's /v1); a histogram's quantiles come "
        "from the server's buckets, interpolated as Prometheus's histogram_quantile does",
    )
    report.add_argument("--quiet", action="store_true", help="no progress display")
    return p


def _goodput(items: list[str] | None) -> tuple[tuple[str, float], ...]:
    out: dict[str, float] = {}
    for item in items or ():
        key, sep, value = item.partition(":")
        try:
            ms = float(value)
        except ValueError:
            ms = -1.0
        if not sep or key not in SLOS or not ms >= 0:
            raise InvalidRequest(f"--goodput takes KEY:MS with KEY one of {', '.join(SLOS)}, not {item!r}")
        out[key] = ms
    return tuple(out.items())


def _percentiles(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or not all(0 < v < 100 for v in values):
        raise InvalidRequest(
            f"--percentiles takes numbers between 0 and 100 separated by commas, not {text!r}"
        )
    return values


def config_from_args(args: argparse.Namespace) -> Config:
    """The ``Config`` of parsed arguments; it raises InvalidRequest for inconsistent ones."""
    if args.concurrency is not None and args.concurrency < 1:
        raise InvalidRequest("--concurrency must be >= 1")
    if args.rate is not None and not args.rate > 0:
        raise InvalidRequest("--rate must be > 0")
    if args.workers < 1:
        raise InvalidRequest("--workers must be >= 1")
    if args.requests is not None and args.requests < 0:
        raise InvalidRequest("--requests must be >= 0")
    if args.http2 and args.client != "fastsse":
        raise InvalidRequest("--http2 needs --client fastsse (the peers speak HTTP/1.1 here)")
    if args.api != "chat" and args.client != "fastsse":
        raise InvalidRequest(
            f"--api {args.api} needs --client fastsse (the peers here speak chat completions)"
        )
    if args.concurrency is not None and args.concurrency < args.workers:
        raise InvalidRequest("--concurrency must be at least --workers (each worker needs a slot)")
    if not args.burstiness > 0:
        raise InvalidRequest("--burstiness must be > 0")
    if args.burstiness != 1.0 and (args.arrival == "constant" or (args.sweep and args.arrival is None)):
        raise InvalidRequest(
            "--burstiness shapes random gaps: it does not go with --arrival constant (a sweep's default: "
            "add --arrival poisson)"
        )
    if args.ramp_up is not None:
        if args.rate is not None:
            raise InvalidRequest(
                "--ramp-up sets the rate: give --ramp-start-rps and --ramp-end-rps, not --rate"
            )
        if args.ramp_start_rps is None or args.ramp_end_rps is None:
            raise InvalidRequest("--ramp-up needs --ramp-start-rps and --ramp-end-rps")
        if not (args.ramp_start_rps > 0 and args.ramp_end_rps > 0):
            raise InvalidRequest("--ramp-start-rps and --ramp-end-rps must be > 0")
    elif args.ramp_start_rps is not None or args.ramp_end_rps is not None:
        raise InvalidRequest("--ramp-start-rps and --ramp-end-rps go with --ramp-up linear|exponential")
    if not 0 <= args.random_range_ratio < 1:
        raise InvalidRequest("--random-range-ratio must be in [0, 1)")
    for name in ("random_input_len", "random_output_len"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise InvalidRequest(f"--{name.replace('_', '-')} must be >= 1")
    synthetic = args.random_input_len is not None or args.random_output_len is not None
    if synthetic and args.dataset:
        raise InvalidRequest("--random-input-len / --random-output-len replace --dataset: give one of them")
    if args.prefix_len < 0:
        raise InvalidRequest("--prefix-len must be >= 0")
    if args.turns < 1:
        raise InvalidRequest("--turns must be >= 1")
    if args.turns > 1 and (args.api != "chat" or args.client != "fastsse"):
        raise InvalidRequest(
            "--turns needs --api chat and --client fastsse (the answers become the next turn's history)"
        )
    if not args.trace_speed > 0:
        raise InvalidRequest("--trace-speed must be > 0")
    if args.trace is None and args.trace_speed != 1.0:
        raise InvalidRequest("--trace-speed goes with --trace")
    if args.trace is not None:
        others = {
            "--rate": args.rate is not None,
            "--ramp-up": args.ramp_up is not None,
            "--dataset": args.dataset is not None,
            "--random-input-len": args.random_input_len is not None,
            "--random-output-len": args.random_output_len is not None,
            "--max-tokens": args.max_tokens is not None,
            "--turns": args.turns > 1,
            "--sweep": args.sweep,
        }
        clash = [name for name, given in others.items() if given]
        if clash:
            raise InvalidRequest(
                f"--trace sets the arrivals, the prompts and their lengths: leave out {', '.join(clash)}"
            )
    if args.sweep and (args.rate is not None or args.ramp_up is not None):
        raise InvalidRequest("--sweep chooses the rates itself: leave out --rate and --ramp-up")
    if args.sweep_points < 1:
        raise InvalidRequest("--sweep-points must be >= 1")
    if args.repeat < 1:
        raise InvalidRequest("--repeat must be >= 1")
    if args.repeat > 1 and args.sweep:
        raise InvalidRequest("--repeat repeats one run: it does not go with --sweep")
    if not args.lag_field:
        raise InvalidRequest("--lag-field needs a field name")
    if args.ray is not None and args.client != "fastsse":
        raise InvalidRequest("--ray runs fastsse's client in each actor: it does not go with --client")
    headers = []
    for line in args.header:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise InvalidRequest(f"--header must be 'Name: value', not {line!r}")
        headers.append((name.strip(), value.strip()))
    tokenizer = Tokenizer(args.tokenizer) if args.tokenizer else None
    dataset = read_dataset(args.dataset, tokenizer) if args.dataset else ()
    trace_rows = read_trace(args.trace) if args.trace else ()
    if args.extra_body is not None and not isinstance(orjson.loads(args.extra_body), dict):
        raise InvalidRequest("--extra-body must be a JSON object")
    requests = args.requests
    if requests is None and args.duration is None and not trace_rows:  # a trace is sent whole
        requests = 100
    concurrency = args.concurrency
    if concurrency is None and args.rate is None and args.ramp_up is None and not trace_rows:
        concurrency = 1
    return Config(
        url=args.url,
        model=args.model,
        api_key=args.api_key,
        headers=tuple(headers),
        concurrency=concurrency,
        rate=args.rate,
        arrival=args.arrival or ("constant" if args.sweep else "poisson"),
        requests=requests,
        duration=args.duration,
        warmup=args.warmup,
        max_tokens=args.max_tokens,
        prompt=args.prompt,
        dataset=dataset,
        trace=args.trace,
        trace_speed=args.trace_speed,
        trace_rows=trace_rows,
        extra_body=args.extra_body,
        usage=not args.no_usage,
        seed=args.seed,
        client=args.client,
        timeout=args.timeout,
        retries=args.retries,
        lag=not args.no_lag,
        lag_field=args.lag_field,
        metrics_url=None if args.metrics_url is None else args.metrics_url or metrics_url(args.url),
        loop=args.loop,
        workers=args.workers,
        http2=args.http2,
        api=args.api,
        burstiness=args.burstiness,
        ramp=args.ramp_up,
        ramp_start_rps=args.ramp_start_rps,
        ramp_end_rps=args.ramp_end_rps,
        random_input_len=args.random_input_len,
        random_output_len=args.random_output_len,
        random_range_ratio=args.random_range_ratio,
        tokenizer=args.tokenizer,
        prefix_len=args.prefix_len,
        turns=args.turns,
        goodput=_goodput(args.goodput),
        percentiles=_percentiles(args.percentiles),
        ray=args.ray,
    )


def merge_main(argv: list[str]) -> int:
    """``python -m fastsse load merge A.json B.json ... [--json OUT] [--plot OUT.png]``."""
    p = Parser(
        "load merge",
        "Merge --json results of runs made at the same time (other machines, other processes) "
        "onto one clock and summarise them together.",
    )
    p.add_argument("files", nargs="+", help="--json documents of schema fastsse.load/2 (or /1)")
    p.add_argument("--json", metavar="FILE", help="write the merged document")
    p.add_argument("--plot", metavar="FILE.png", help="plot the merged run")
    args = p.parse_args(argv)
    try:
        docs = []
        for name in args.files:
            with open(name, "rb") as f:
                docs.append(orjson.loads(f.read()))
        doc = merge(docs)
    except (OSError, ValueError, KeyError) as exc:
        say("load merge", str(exc))
        return 2
    print(format_summary(doc))
    if args.json:
        with open(args.json, "wb") as f:
            f.write(dumps(doc))
    if args.plot:
        plot(doc, args.plot)
    return 0


PLOT_INSTALL: Final = "--plot needs matplotlib, which is not installed: pip install 'fastsse-cython[plot]'"


def compare_main(argv: list[str]) -> int:
    """``python -m fastsse load compare A.json B.json ... [--json OUT] [--plot OUT.png]``."""
    p = Parser(
        "load compare",
        "Set the metrics of --json results side by side: each against the first, with the ratio "
        'and whether the difference is significant (docs/load.md, "Comparing runs").',
    )
    p.add_argument(
        "files", nargs="+", help="--json documents of runs (or of --repeat), the first the baseline"
    )
    p.add_argument(
        "--min-effect",
        type=float,
        default=lib.MIN_EFFECT,
        metavar="R",
        help="the smallest relative difference a row is flagged for (default 0.05: 5%% of A's value)",
    )
    p.add_argument("--json", metavar="FILE", help=f"write the comparison ({lib.COMPARE_SCHEMA})")
    p.add_argument("--plot", metavar="FILE.png", help="overlay the CDFs of TTFT, ITL and E2E (matplotlib)")
    args = p.parse_args(argv)
    if len(args.files) < 2:
        say("load compare", "give two documents at least: the first is the baseline")
        return 2
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        say("load compare", PLOT_INSTALL)
        return 2
    try:
        docs = []
        for name in args.files:
            with open(name, "rb") as f:
                docs.append(orjson.loads(f.read()))
        comparison = lib.compare(docs, args.files, min_effect=args.min_effect)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        say("load compare", str(exc))
        return 2
    print(lib.format_comparison(comparison))
    if args.json:
        with open(args.json, "wb") as f:
            f.write(orjson.dumps(comparison))
    if args.plot:
        lib.plot_comparison(docs, args.files, args.plot)
    return 0


def _missing(args: argparse.Namespace) -> str | None:
    """What an optional dependency the arguments need lacks, checked before the first request."""
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        return PLOT_INSTALL
    if args.ray is not None and not lib.ray_available():
        return lib.RAY_INSTALL
    return None


def main(argv: list[str] | None = None) -> int:
    """``python -m fastsse load``: run the load, print the summary; 0 when every request completed,
    1 when some did not, 2 when none got an answer (or for bad arguments)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    if argv[:1] == ["compare"]:
        return compare_main(argv[1:])
    args = _parser().parse_args(argv)
    lacking = _missing(args)
    if lacking:
        say("load", lacking)
        return 2
    try:
        config = config_from_args(args)
    except (OSError, ValueError) as exc:
        say("load", str(exc))
        return 2
    if config.client == "fastsse" and not lib.engine_available():
        if config.api != "chat":
            say("load", f"--api {config.api} needs fastsse's AsyncClient, which this fastsse lacks")
            return 2
        say("load", "this fastsse has no AsyncClient; using create_stream in threads")
    show = not args.quiet and sys.stderr.isatty()
    started = time.monotonic()

    def progress(counts: list[int]) -> None:
        done, failed, flight, tokens = counts
        elapsed = time.monotonic() - started
        sys.stderr.write(
            f"\r  {done:,} done  {flight:,} in flight  {failed:,} failed  "
            f"{tokens / elapsed if elapsed else 0:,.0f} tokens/s   "
        )
        sys.stderr.flush()

    try:
        if args.sweep:
            doc = sweep(config, args.sweep_points, progress=progress if show else None)
        elif args.repeat > 1:
            doc = repeat(config, args.repeat, progress=progress if show else None)
        else:
            doc = run(config, progress=progress if show else None)
    except (RuntimeError, ValueError, lib.Unavailable, ImportError) as exc:
        if show:
            print(file=sys.stderr)  # end the progress line
        say("load", str(exc))
        return 2
    except KeyboardInterrupt:
        if show:
            print(file=sys.stderr)
        say("load", "interrupted")
        return 130
    finally:
        if config.ray is not None:
            lib.ray_shutdown()
    if show:
        sys.stderr.write("\n")
    runs = doc["runs"] if doc["kind"] != "run" else [doc]
    # a sweep with none stops at its maximum; a repeat at the run that had none
    silent = None if doc["kind"] == "sweep" else unanswered(runs[-1])
    ended = sum(len(d["requests"]) for d in runs)
    if silent is None and (ended or not doc["interrupted"]):
        text = {"sweep": format_sweep, "repeat": lib.format_repeat}.get(doc["kind"], format_summary)
        print(text(doc))
    if args.json:
        with open(args.json, "wb") as f:
            f.write(dumps(doc))
    if doc["interrupted"]:  # Ctrl-C: what had ended is above and in --json
        if ended:
            where = f" and {args.json}" if args.json else ""
            say("load", f"interrupted: the summary{where} hold the {ended:,} request(s) that had ended")
        else:
            where = f" ({args.json} says so)" if args.json else ""
            say("load", f"interrupted before any request ended{where}")
        return 130
    if silent is not None:  # nothing measured: no summary, no plot, the cause in one line
        say("load", silent)
        return 2
    if args.plot:
        if doc["kind"] == "repeat":  # each run's CDFs over the others': the spread, seen
            lib.plot_comparison(
                runs,
                [f"run {i + 1}" for i in range(len(runs))],
                args.plot,
                title=f"fastsse load --repeat: {len(runs)} runs of one plan against {doc['config']['url']}",
            )
        else:
            (plot_sweep if args.sweep else plot)(doc, args.plot)
    complete = all(d["summary"]["outcomes"].get(COMPLETE, 0) == d["summary"]["requests"] for d in runs)
    return 0 if complete else 1

"""The load generator: a measured load on an OpenAI-compatible streaming server, and its report.

``python -m fastsse load`` is its command line; from Python::

    from fastsse.load import Config, run, format_summary
    doc = run(Config(url="http://127.0.0.1:8000/v1", model="m", requests=200, concurrency=32))
    print(format_summary(doc))

``run`` returns the ``--json`` document (``docs/load.md`` gives its schema and the exact metric
definitions); ``sweep`` and ``repeat`` run a plan at several rates or several times. The work is
split by job: ``_plan`` (configuration, arrival schedule, datasets and bodies), ``_run`` (records,
drivers, worker processes, Ctrl-C), ``_ray`` (the workers as Ray actors), ``_report`` (summary,
goodput, JSON, text, plots), ``_compare`` and ``_stats`` (run against run), ``_trace`` (replayed
traces), ``_metrics`` (the server's Prometheus page), ``_peers`` (the same schedule through
another HTTP client) and ``_server`` (the scripted server, also re-exported by
``fastsse.testing``). ``import fastsse`` never imports this package.
"""

from __future__ import annotations

from .._errors import LoadError
from ._api import json_schema, repeat, run, sweep, unanswered
from ._compare import (
    COMPARE_SCHEMA,
    MIN_EFFECT,
    compare,
    format_comparison,
    format_repeat,
    intervals,
    plot_comparison,
)
from ._metrics import metrics_url
from ._peers import PEERS, PeerRecord, Unavailable, open_peer, run_peer
from ._plan import (
    APIS,
    CLIENTS,
    COMPLETE,
    DEFAULT_PROMPT,
    FAILED,
    RAMPS,
    SCHEMA,
    SLOS,
    Config,
    Tokenizer,
    arrivals,
    bodies,
    endpoint,
    not_found,
    read_dataset,
)
from ._ray import INSTALL as RAY_INSTALL
from ._ray import available as ray_available
from ._ray import shutdown as ray_shutdown
from ._report import (
    dumps,
    format_summary,
    format_sweep,
    itl_values,
    merge,
    percentile,
    plot,
    plot_sweep,
    summarize,
    token_rate,
)
from ._run import Record, engine_available
from ._server import (
    STAMP_FIELD,
    Script,
    ScriptedProcess,
    ScriptedServer,
    coerce_field,
    scripted_text,
    serve_scripted_in_thread,
    spawn_scripted_server,
)
from ._trace import read_trace

__all__ = [
    "APIS",
    "CLIENTS",
    "COMPARE_SCHEMA",
    "COMPLETE",
    "DEFAULT_PROMPT",
    "FAILED",
    "MIN_EFFECT",
    "PEERS",
    "RAMPS",
    "RAY_INSTALL",
    "SCHEMA",
    "SLOS",
    "STAMP_FIELD",
    "Config",
    "LoadError",
    "PeerRecord",
    "Record",
    "Script",
    "ScriptedProcess",
    "ScriptedServer",
    "Tokenizer",
    "Unavailable",
    "arrivals",
    "bodies",
    "coerce_field",
    "compare",
    "dumps",
    "endpoint",
    "engine_available",
    "format_comparison",
    "format_repeat",
    "format_summary",
    "format_sweep",
    "intervals",
    "itl_values",
    "json_schema",
    "merge",
    "metrics_url",
    "not_found",
    "open_peer",
    "percentile",
    "plot",
    "plot_comparison",
    "plot_sweep",
    "ray_available",
    "ray_shutdown",
    "read_dataset",
    "read_trace",
    "repeat",
    "run",
    "run_peer",
    "scripted_text",
    "serve_scripted_in_thread",
    "spawn_scripted_server",
    "summarize",
    "sweep",
    "token_rate",
    "unanswered",
]

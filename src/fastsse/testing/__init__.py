"""OpenAI-compatible streaming servers on 127.0.0.1 for your own tests (and fastsse's).

``serve_in_thread()`` starts the scenario server and returns a :class:`LoopbackServer` whose
``base_url`` a client points at; ``expected_completion(request)`` is the non-streamed answer a
correct fold must equal. ``serve_scripted_in_thread()`` / ``spawn_scripted_server()`` start the
scripted load-test server of ``fastsse.load`` (known TTFT, ITL and tokens per chunk, every chunk stamped with its send
time, thousands of streams on one core). ``import fastsse`` never imports this package.
"""

from __future__ import annotations

from ..load import STAMP_FIELD, Script, scripted_text, serve_scripted_in_thread, spawn_scripted_server
from .server import SCENARIOS, LoopbackServer, expected_completion, parse_model, serve_in_thread

__all__ = [
    "SCENARIOS",
    "STAMP_FIELD",
    "LoopbackServer",
    "Script",
    "expected_completion",
    "parse_model",
    "scripted_text",
    "serve_in_thread",
    "serve_scripted_in_thread",
    "spawn_scripted_server",
]

"""An OpenAI-compatible streaming server on 127.0.0.1 for your own tests (and fastsse's).

``serve_in_thread()`` starts one and returns a :class:`LoopbackServer` whose ``base_url`` a client
points at; ``expected_completion(request)`` is the non-streamed answer a correct fold must equal.
``import fastsse`` never imports this package.
"""

from __future__ import annotations

from .server import SCENARIOS, LoopbackServer, expected_completion, parse_model, serve_in_thread

__all__ = ["SCENARIOS", "LoopbackServer", "expected_completion", "parse_model", "serve_in_thread"]

"""The timing record of one stream: what ``result["timing"]`` holds, and its cold assembly.

The hot half (a stamp per read, a record per token-bearing chunk) lives in ``ChatStream`` twice
(``chat/_fold_c.pyx`` in C arrays, ``chat/_fold_py.py`` in lists); both hand their arrays to
``build_timing`` so the two backends cannot disagree about the record's shape.
"""

from __future__ import annotations

import time
from typing import Any, Final, TypedDict

CONTENT: Final = 1  # a token chunk's kind bits
REASONING: Final = 2


class Timing(TypedDict):
    """``result["timing"]``: when each part of one request happened. Plain data (JSON-ready).

    Every stamp is an integer of nanoseconds on the clock of ``time.monotonic_ns()``, or None when
    that moment did not happen (no token, a request that failed before it was sent). ``anchor``
    turns any of them into wall-clock time: ``epoch_ns = anchor[1] + (stamp - anchor[0])``; runs
    in several processes or on several machines line up through it.

    - ``queued``: the request was handed to the client (``create_stream`` / ``stream`` / ``run``).
    - ``started``: it got a connection slot (``max_connections``) and its transfer began;
      ``started - queued`` is the time it waited for a slot.
    - ``sent``: the request went out: ``started`` plus curl's pre-transfer time (connect, TLS
      and writing the request; microsecond precision). curl stamps it after the write returns,
      so on a busy machine the server may have read the request a little before ``sent``.
    - ``first_byte``: the first read of the response body (``reads[0]``).
    - ``first_content``: the read that brought the first content token (content, refusal, legacy
      ``text``, a tool call's name or arguments), i.e. the end of time to first token.
    - ``first_reasoning``: the read that brought the first reasoning token (``reasoning_content``
      or ``reasoning``).
    - ``last_token``: the read that brought the last token of either kind.
    - ``end``: the transfer ended (completed, failed or was cancelled).
    - ``anchor``: ``[monotonic_ns, epoch_ns]`` read together when the request was queued.
    - ``reads``: the arrival time of every read of the body, in order, taken as the bytes reached
      the stream and before any of them was parsed. A read is one call of the write callback: on
      the compiled driver one per socket read (it cuts the chunks of a chunked body out itself),
      on the pycurl driver one per HTTP chunk (libcurl decodes them) or per socket read of an
      unchunked body; events that came in one read share its stamp.
    - ``token_reads``: for each token-bearing chunk, in order, the index into ``reads`` of the read
      that completed it; several chunks from one read share an index.
    - ``tokens``: the token count of each of those chunks: the growth of
      ``usage.completion_tokens`` when the server sends usage on every chunk (continuous usage,
      detected when an earlier chunk carried usage too), else the number of ``logprobs.content``
      entries, else 1. A chunk whose usage did not grow falls back the same way.
    - ``token_kinds``: for each of those chunks, 1 for content, 2 for reasoning, 3 for both.

    Chunks that carry no text are not tokens: the role chunk, a usage-only chunk (``choices: []``),
    an empty ``content: ""``, a chunk with only a finish reason.

    - ``attempts``: the attempts the request took (1 without a retry or a resume; a stream's own
      record says 1), and ``retry_wait``: the ns spent waiting between them. The stamps above are
      those of the last attempt, except ``queued`` and the reads of a resumed stream, which span
      them all.
    """

    queued: int | None
    started: int | None
    sent: int | None
    first_byte: int | None
    first_content: int | None
    first_reasoning: int | None
    last_token: int | None
    end: int | None
    anchor: list[int]
    reads: list[int]
    token_reads: list[int]
    tokens: list[int]
    token_kinds: list[int]
    attempts: int
    retry_wait: int


def anchor_pair() -> list[int]:
    """One (monotonic ns, epoch ns) pair, read back to back."""
    return [time.monotonic_ns(), time.time_ns()]


def build_timing(
    reads: list[int],
    token_reads: list[int],
    tokens: list[int],
    token_kinds: list[int],
    anchor: list[int],
) -> Timing:
    """The record of a stream's own arrays; the client fills in the request's stamps."""
    first_content = first_reasoning = last_token = None
    for at, kind in zip(token_reads, token_kinds, strict=True):
        if kind & CONTENT and first_content is None:
            first_content = reads[at]
        if kind & REASONING and first_reasoning is None:
            first_reasoning = reads[at]
    if token_reads:
        last_token = reads[token_reads[-1]]
    return {
        "queued": None,
        "started": None,
        "sent": None,
        "first_byte": reads[0] if reads else None,
        "first_content": first_content,
        "first_reasoning": first_reasoning,
        "last_token": last_token,
        "end": None,
        "anchor": anchor,
        "reads": reads,
        "token_reads": token_reads,
        "tokens": tokens,
        "token_kinds": token_kinds,
        "attempts": 1,
        "retry_wait": 0,
    }


def _has_text(value: object) -> bool:
    return isinstance(value, str) and value != ""


def _call_text(call: object) -> bool:
    if not isinstance(call, dict):
        return False
    function = call.get("function")
    if isinstance(function, dict):
        return _has_text(function.get("arguments")) or _has_text(function.get("name"))
    return False


def chunk_marks(chunk: dict[str, Any]) -> tuple[int, int]:
    """``(kind bits, logprobs.content entries)`` of one parsed chunk, by the rules of ``Timing``.

    The Python backend's reference; the compiled one reads the same from the fast reader's plan,
    or walks the dict like this when the chunk went through orjson.
    """
    kind = 0
    entries = 0
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return 0, 0
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if _has_text(choice.get("text")):
            kind |= CONTENT
        delta = choice.get("delta")
        if delta is None:
            delta = choice.get("message")
        if isinstance(delta, dict):
            if _has_text(delta.get("content")) or _has_text(delta.get("refusal")):
                kind |= CONTENT
            if _has_text(delta.get("reasoning_content")) or _has_text(delta.get("reasoning")):
                kind |= REASONING
            calls = delta.get("tool_calls")
            if isinstance(calls, list) and any(_call_text(call) for call in calls):
                kind |= CONTENT
            if _call_text({"function": delta.get("function_call")}):
                kind |= CONTENT
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict):
            content = logprobs.get("content")
            if isinstance(content, list):
                entries += len(content)
    return kind, entries


def completion_tokens(usage: object) -> int:
    """``usage.completion_tokens`` as a non-negative int, or -1 when absent or not an integer."""
    if isinstance(usage, dict):
        value = usage.get("completion_tokens")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return -1

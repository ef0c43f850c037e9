"""The gateway's log lines (``gateway/_log.py``): ``JsonFormatter`` writes each record as one JSON
line, byte for byte as written here, and ``QuietCuts`` drops a server's line for a cut."""

from __future__ import annotations

import io
import logging
import sys
from typing import Any

import pytest

from fastsse.gateway import JsonFormatter, QuietCuts

MESSAGE = "%s %s %s model=%s status=%s %s%s"


def record(
    created: float, level: int = logging.INFO, answer: Any = None, exc_info: Any = None
) -> logging.LogRecord:
    args = ("r1", "chat->chat", "up", "m", 200, "complete", "")
    out = logging.LogRecord("fastsse.gateway", level, __file__, 1, MESSAGE, args, exc_info)
    out.created = created
    out.msecs = (created - int(created)) * 1000
    if answer is not None:
        out.answer = answer
    return out


def test_an_answer_s_record_is_one_json_line() -> None:
    answer = {"rid": "r1", "status": 200, "outcome": "complete", "ttft_ms": 1.5, "dropped": [], "key": None}
    line = JsonFormatter().format(record(1_700_000_000.25, answer=answer))
    assert line == (
        '{"ts":"2023-11-14T22:13:20.250Z","level":"info","logger":"fastsse.gateway",'
        '"msg":"r1 chat->chat up model=m status=200 complete","rid":"r1","status":200,"outcome":"complete",'
        '"ttft_ms":1.5,"dropped":[],"key":null}'
    )


def test_the_time_stamp_follows_each_record() -> None:
    formatter = JsonFormatter()
    stamps = [
        formatter.format(record(created))[7:31]
        for created in (1_700_000_000.999, 1_700_000_001.0, 1_700_000_001.5, 1_700_000_000.0, 1_800_000_000.5)
    ]
    assert stamps == [
        "2023-11-14T22:13:20.999Z",
        "2023-11-14T22:13:21.000Z",
        "2023-11-14T22:13:21.500Z",
        "2023-11-14T22:13:20.000Z",
        "2027-01-15T08:00:00.500Z",
    ]


def test_the_answer_s_keys_come_last_and_win() -> None:
    line = JsonFormatter().format(record(1_700_000_000.0, logging.WARNING, answer={"msg": "own", "x": 1}))
    assert line.startswith('{"ts":"2023-11-14T22:13:20.000Z","level":"warning",')
    assert line.endswith('"msg":"own","x":1}')
    assert '"answer"' not in line


def test_a_value_json_has_no_form_for_is_written_as_its_str() -> None:
    line = JsonFormatter().format(record(1_700_000_000.0, answer={"path": _Named()}))
    assert line.endswith('"path":"named"}')


def test_a_record_without_an_answer_and_with_a_traceback() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        info = sys.exc_info()
    line = JsonFormatter().format(
        record(1_700_000_000.0, logging.ERROR, answer=["not", "a", "dict"], exc_info=info)
    )
    assert line.startswith('{"ts":"2023-11-14T22:13:20.000Z","level":"error","logger":"fastsse.gateway",')
    assert '"exc":"Traceback (most recent call last):\\n' in line
    assert line.endswith('RuntimeError: boom"}')


@pytest.mark.parametrize(
    ("message", "kept"),
    [("ASGI callable returned without completing response.", False), ("something else", True)],
)
def test_quiet_cuts(message: str, kept: bool) -> None:
    line = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, message, None, None)
    assert QuietCuts().filter(line) is kept


class _Named:
    def __str__(self) -> str:
        return "named"


def test_quiet_cuts_formats_no_other_record() -> None:
    # an answer's record is formatted once, by the formatter: the filter compares the format string
    formatted: list[int] = []

    class Counted:
        def __str__(self) -> str:
            formatted.append(1)
            return "an answer"

    line = logging.LogRecord("fastsse.gateway", logging.INFO, __file__, 1, Counted(), None, None)
    assert QuietCuts().filter(line) is True
    assert formatted == []


class _Stream:
    """A text stream that records its calls."""

    def __init__(self, **kind: Any) -> None:
        self.calls: list[tuple[str, str]] = []
        self.__dict__.update(kind)

    def write(self, text: str) -> None:
        self.calls.append(("write", text))

    def flush(self) -> None:
        self.calls.append(("flush", ""))


@pytest.mark.parametrize(
    ("kind", "flushed"),
    [
        ({"line_buffering": True}, False),  # a terminal's stderr
        ({"write_through": True, "buffer": io.RawIOBase()}, False),  # stderr elsewhere: a raw file
        ({"write_through": True, "buffer": io.BytesIO()}, True),  # through to a buffer: flushed
        ({}, True),
    ],
)
def test_the_command_s_handler_writes_a_line_at_once_and_flushes_only_what_needs_it(
    kind: dict[str, Any], flushed: bool
) -> None:
    from fastsse.cli.gateway import _Lines

    stream = _Stream(**kind)
    handler = _Lines(stream)
    handler.setFormatter(JsonFormatter())
    handler.handle(record(1_700_000_000.0))
    line = (
        '{"ts":"2023-11-14T22:13:20.000Z","level":"info","logger":"fastsse.gateway",'
        '"msg":"r1 chat->chat up model=m status=200 complete"}\n'
    )
    if flushed:
        assert stream.calls == [("write", line), ("flush", "")]
    else:
        assert stream.calls == [("write", line)]

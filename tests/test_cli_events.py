"""``python -m fastsse events``: a captured stream in, one JSON object per event out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "fastsse", *args], input=stdin, capture_output=True, timeout=60
    )


def test_events_from_stdin_with_crlf_and_bom() -> None:
    proc = run(
        "events", "-", stdin=b"\xef\xbb\xbfid: 7\r\nevent: add\r\ndata: 1\r\ndata: 2\r\n\r\ndata: tail"
    )
    assert proc.returncode == 0
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines == [{"event": "add", "data": "1\n2", "id": "7", "retry": None}]
    assert b"ended inside an event" in proc.stderr


def test_events_from_the_shipped_sample() -> None:
    proc = run("events", str(ROOT / "examples" / "chat.sse"))
    assert proc.returncode == 0
    datas = [json.loads(line)["data"] for line in proc.stdout.splitlines()]
    assert len(datas) == 6 and datas[-1] == "[DONE]"
    assert json.loads(datas[1])["choices"][0]["delta"]["content"] == "Waves fold"


def test_events_oversized_event_exit_code() -> None:
    proc = run("events", "--max-event-bytes", "8", stdin=b"data: 1\n\ndata: 123456789\n\ndata: 2\n\n")
    assert proc.returncode == 1
    assert [json.loads(line)["data"] for line in proc.stdout.splitlines()] == ["1", "2"]
    assert b"max_event_bytes=8" in proc.stderr


def test_missing_file_and_unknown_command() -> None:
    assert run("events", "/nonexistent/stream.sse").returncode == 2
    assert run("frobnicate").returncode == 2


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_top_level_help(flag: str) -> None:
    proc = run(flag)
    assert proc.returncode == 0 and b"fastsse" in proc.stdout

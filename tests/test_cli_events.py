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


# issue 25, point 4: `| head` ends the command quietly, as Unix tools do


def _read_one_line_and_close(*args: str, head_bytes: int | None = None) -> tuple[int, bytes, bytes]:
    # head_bytes: read that much and leave, as `head -c N` does (else one line, as `head -1`)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastsse", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    with proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.read(head_bytes) if head_bytes else proc.stdout.readline()
        proc.stdout.close()  # what `head` does once it has what it wanted
        try:
            err = proc.stderr.read()
            code = proc.wait(timeout=60)
        finally:
            proc.kill()
    return code, first, err


def test_events_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    big = tmp_path / "big.sse"
    # far more than a pipe buffer holds, so the writes after the reader left must fail
    big.write_bytes(b"".join(b"data: %d %s\n\n" % (i, b"x" * 100) for i in range(20000)))
    code, first, err = _read_one_line_and_close("events", str(big))
    assert json.loads(first)["data"].startswith("0 x")
    assert err == b""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert code == 141  # 128 + SIGPIPE, the status a shell shows for `yes | head -1`


def test_demo_into_a_closed_pipe_exits_quietly() -> None:
    # `demo --model long-100000 | head -c 100`: the reader leaves while the tokens still stream
    # (550 kB of them, then the folded answer repeating them), so a write after it left must fail.
    # Reading a whole first line instead is racy: some runs' reads took in everything demo wrote.
    code, first, err = _read_one_line_and_close("demo", "--model", "long-100000", head_bytes=100)
    assert first  # the answer had started
    assert code == 141
    assert b"Traceback" not in err and b"Error" not in err
    assert err.startswith(b"fastsse demo (backend: ") and err.count(b"\n") == 2  # the banner only


def test_events_bounds_an_event_by_default(tmp_path: Path) -> None:
    # issue 32, point 6: 16 MiB unless told otherwise, so a runaway event cannot take the memory
    from fastsse.cli._common import MAX_EVENT_BYTES

    path = tmp_path / "big.sse"
    with path.open("wb") as f:
        f.write(b"data: 1\n\ndata: ")
        for _ in range((MAX_EVENT_BYTES >> 20) + 1):
            f.write(b"x" * (1 << 20))
        f.write(b"\n\ndata: 2\n\n")
    proc = run("events", str(path))
    assert proc.returncode == 1
    assert [json.loads(line)["data"] for line in proc.stdout.splitlines()] == ["1", "2"]
    assert proc.stderr.decode() == (
        f"fastsse events: an SSE line or event data exceeded max_event_bytes={MAX_EVENT_BYTES}; "
        "the event was dropped\n"
    )
    assert run("events", "--max-event-bytes", str(MAX_EVENT_BYTES * 2), str(path)).returncode == 0

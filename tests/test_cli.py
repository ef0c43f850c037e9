"""The command line as a new user meets it: one voice for errors, plain help, honest exit codes.

Expected lines are written from the issue's rules (one prefix ``fastsse COMMAND:``, one line per
failure, exit 2 for what stopped a request, 1 for an answer or input that is not right).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fastsse.__main__ import COMMANDS
from fastsse.__main__ import main as fastsse_main

ROOT = Path(__file__).resolve().parent.parent
PYCURL_HINT = "pip install 'fastsse-cython[curl]' (or pip install pycurl)"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = fastsse_main(list(argv))
    except SystemExit as exc:  # argparse's --help and usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def refused_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


# point 1: a missing optional dependency is one line and exit 2


def test_demo_without_pycurl_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pycurl", None)  # what `import pycurl` meets when it is not installed
    code, out, err = run(capsys, "demo")
    assert code == 2 and out == ""
    assert err == f"fastsse demo: demo needs pycurl, which is not installed: {PYCURL_HINT}\n"


def test_check_url_without_pycurl_is_the_same_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pycurl", None)
    code, out, err = run(capsys, "check", "--url", "http://127.0.0.1:9/v1")
    assert (code, out) == (2, "")
    assert err == f"fastsse check: check --url needs pycurl, which is not installed: {PYCURL_HINT}\n"


def test_dispatcher_turns_a_late_missing_pycurl_into_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a command that reaches create_stream without checking first still gets no traceback
    import fastsse.cli.demo

    monkeypatch.setattr(fastsse.cli.demo, "require", lambda *a: None)
    monkeypatch.setitem(sys.modules, "pycurl", None)
    code, _, err = run(capsys, "demo")
    assert code == 2
    assert err.splitlines()[-1] == f"fastsse demo: demo needs pycurl, which is not installed: {PYCURL_HINT}"
    assert "Traceback" not in err


# point 5: tool calls a person can read


def test_demo_tools_prints_whole_calls(
    capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace
) -> None:
    code, out, err = run(capsys, "demo", "--model", "tools")
    assert code == 0, err
    head = out.split("Final aggregated response:")[0]
    # the loopback "tools" scenario opens both calls, then interleaves their argument fragments
    assert head.strip().splitlines() == [
        "[tool call 0: get_weather ...]",
        "[tool call 1: get_time ...]",
        '[tool call 0] get_weather({"city": "Paris", "unit": "celsius"})',
        '[tool call 1] get_time({"tz": "Europe/Paris"})',
    ]


# point 8: exit non-zero when the answer is not complete; print only what happened


def test_demo_complete_answer_exits_0(
    capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace
) -> None:
    code, out, err = run(capsys, "demo")
    assert code == 0, err
    assert "Final aggregated response:" in out and '"complete": true' in out


def test_demo_error_in_stream_exits_1(
    capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace
) -> None:
    code, out, err = run(capsys, "demo", "--model", "error")
    assert code == 1
    assert "Final aggregated response" not in out
    assert "Partial response (the answer is incomplete):" in out
    assert err.splitlines()[-1] == (
        "fastsse demo: the answer is incomplete: the server sent an error in the stream: "
        "The server had an error while generating the response (simulated mid-stream failure)."
    )


def test_demo_refused_connection_is_one_line(
    capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace, refused_url: str
) -> None:
    code, out, err = run(capsys, "demo", "--url", refused_url)
    assert code == 2
    assert out == ""  # no empty chat.completion
    last = err.splitlines()[-1]
    assert last.startswith(f"fastsse demo: {refused_url}/chat/completions: ") and last.endswith(
        "(curl error 7)"
    )


def test_demo_http_401_is_not_a_response(
    capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace
) -> None:
    code, out, err = run(capsys, "demo", "--model", "http-401")
    assert code == 1
    assert out == ""
    assert err.splitlines()[-1].endswith(
        "/v1: HTTP 401: Simulated HTTP 401 from the fastsse loopback server. (invalid_request_error)"
    )


# point 6: input that is not an event stream


HTML = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>"
    + b"x" * 3000
    + b"</body></html>\n"
)
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (HTML, "it starts like an HTML or XML page: '<!DOCTYPE html>'"),
        (
            b'{"error": {"message": "model not found"}}',
            'it starts like a JSON document: \'{"error": {"message"',
        ),
        (BINARY, "it looks like binary data (byte 0x1a at offset 6): "),
    ],
)
def test_check_and_events_say_not_an_event_stream(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: bytes, why: str
) -> None:
    path = tmp_path / "answer.bin"
    path.write_bytes(body)
    code, out, err = run(capsys, "check", str(path))
    assert code == 1 and err == ""
    assert out.count("\n") == 1 and len(out) - len(str(path)) < 160
    assert out.startswith(f"{path}: not an event stream: {why}")
    assert out.endswith(f"({len(body)} bytes)\n")
    code, out, err = run(capsys, "events", str(path))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"fastsse events: {path}: not an event stream: {why}")


PROSE = (
    "\ufeff# fastsse\n\nServer-Sent Events, decoded.\n\n```sh\npip install .\n```\n\n"
    "Note: a colon in a sentence is no field.\n" * 40
).encode()


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_check_and_events_say_a_text_is_not_an_event_stream(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, api: str
) -> None:
    # issue 25, point 5: a README given by mistake is one line and exit 1, as a page or a document is
    path = tmp_path / "README.md"
    path.write_bytes(PROSE)
    code, out, err = run(capsys, "check", "--api", api, str(path))
    assert (code, err) == (1, "")
    assert out == (
        f"{path}: not an event stream: it is text with no SSE field (line 1: '# fastsse') ({len(PROSE)} bytes)\n"
    )
    code, out, err = run(capsys, "events", str(path))
    assert (code, out) == (1, "")
    assert (
        err
        == f"fastsse events: {path}: not an event stream: it is text with no SSE field (line 1: '# fastsse')\n"
    )


def test_text_with_a_field_is_linted_as_a_stream(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # a field makes it a (broken) stream: its findings are worth reading
    path = tmp_path / "half.sse"
    path.write_bytes(b"hello\ndata: {}\n")
    code, out, _ = run(capsys, "check", str(path))
    assert code == 1 and "not an event stream" not in out and "missing-final-blank-line" in out


def test_events_on_comments_only_says_no_event(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "pings.sse"
    path.write_bytes(b": ping\n\n: ping\n\n")
    assert run(capsys, "events", str(path)) == (0, "", f"fastsse events: {path}: no event in 16 bytes\n")


def test_check_cuts_long_values(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "long.sse"
    path.write_bytes(b"x" * 3000 + b": 1\n\ndata: [DONE]\n\n")
    code, out, _ = run(capsys, "check", str(path))
    assert code == 1  # missing-done
    line = out.splitlines()[0]
    assert "non-data-field" in line and "\u2026" in line and len(line) - len(str(path)) < 160


# point 7: one voice


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_is_plain_and_named_as_invoked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/site-packages/fastsse/__main__.py"])
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    assert out.startswith(f"usage: python -m fastsse {command} ")
    assert "`" not in out  # no reST markup
    monkeypatch.setattr(sys, "argv", ["/home/u/.venv/bin/fastsse"])  # the console script
    assert run(capsys, command, "--help")[1].startswith(f"usage: fastsse {command} ")


def test_top_level_help_names_the_console_script(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["/home/u/.venv/bin/fastsse"])
    code, out, _ = run(capsys, "--help")
    assert code == 0 and out.startswith("usage: fastsse COMMAND [ARGS]")
    assert "`" not in out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_usage_errors_share_one_prefix(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, err = run(capsys, command, "--no-such-option")
    assert code == 2 and out == ""
    last = err.splitlines()[-1]
    # a command with required arguments (load) names those first, in the same voice
    if command == "load":
        assert last == "fastsse load: the following arguments are required: url, --model"
    else:
        assert last == f"fastsse {command}: unrecognized arguments: --no-such-option"


def test_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "frobnicate")
    assert code == 2 and err.splitlines()[-1] == "fastsse: unknown command 'frobnicate'"


def test_file_errors_share_one_prefix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.sse"
    for command in ("check", "events"):
        code, _, err = run(capsys, command, str(missing))
        assert code == 2 and err.startswith(f"fastsse {command}: ") and err.count("\n") == 1


# issue 25, point 4: a reader that goes away ends the command quietly, on either backend


class _ClosedPipe:
    """A stdout whose reader left after ``room`` characters, as `| head -c N` leaves."""

    def __init__(self, room: int) -> None:
        self.room = room

    def write(self, text: str) -> int:
        self.room -= len(text)
        if self.room < 0:
            raise BrokenPipeError(32, "Broken pipe")
        return len(text)

    def flush(self) -> None:
        if self.room < 0:
            raise BrokenPipeError(32, "Broken pipe")

    def isatty(self) -> bool:
        return False


def test_demo_into_a_closed_pipe_is_quiet(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stream_backend: SimpleNamespace
) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe(100))  # the break comes inside on_chunk
    code, _, err = run(capsys, "demo", "--model", "long-3000")
    assert code == 141
    assert err.startswith("fastsse demo (backend: ") and err.count("\n") == 2  # the banner, nothing else


# issue 25, point 2: a cut stream exits 1 with the partial fold; nothing arrived is still exit 2


def test_demo_cut_stream_prints_the_partial_fold(
    capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace
) -> None:
    from fastsse.testing.server import PLAIN

    code, out, err = run(capsys, "demo", "--model", "disconnect")
    assert code == 1
    text, _, fold = out.partition("Partial response (the answer is incomplete):\n")
    assert text.strip() == "".join(PLAIN[:6])  # the six tokens sent before the cut
    result = json.loads(fold)
    assert result["choices"][0]["message"]["content"] == "".join(PLAIN[:6])
    assert result["verdict"]["complete"] is False and result["verdict"]["done"] is False
    last = err.splitlines()[-1]
    assert last.startswith("fastsse demo: the answer is incomplete: the transfer failed mid-stream: http://")
    assert last.endswith(
        "/v1/chat/completions: transfer closed with outstanding read data remaining (curl error 18)"
    )


# issue 25, point 7: every choice, the refusal text, a page cut to one line


def test_demo_prints_every_choice(
    capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace
) -> None:
    from fastsse.testing.server import PLAIN

    code, out, err = run(capsys, "demo", "--model", "n2")
    assert code == 0, err
    head = out.split("Final aggregated response:")[0]
    # n2 interleaves two choices token by token; choice 1's first token is marked "[1] "
    assert head.strip().splitlines() == [
        "[choice 0] " + "".join(PLAIN),
        "[choice 1] [1] " + "".join(PLAIN),
    ]


def test_demo_prints_the_refusal(capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace) -> None:
    from fastsse.testing.server import REFUSAL

    code, out, err = run(capsys, "demo", "--model", "refusal")
    assert code == 0, err
    assert out.split("Final aggregated response:")[0].strip() == "(refusal) " + "".join(REFUSAL)


def test_demo_page_is_one_short_line(
    capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace
) -> None:
    from fastsse.testing.server import HTML_PAGE

    code, out, err = run(capsys, "demo", "--model", "html")
    assert (code, out) == (1, "")
    last = err.splitlines()[-1]
    assert err.count("\n") == 3  # the banner, its blank line, this line
    assert last.endswith(
        "/v1: HTTP 200: not an event stream: it starts like an HTML or XML page: "
        f"'<!DOCTYPE html>' ({len(HTML_PAGE)} bytes)"
    )


# issue 32, point 6: what the first hour still met


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (("demo", "--url", "127.0.0.1:8000/v1"), "'127.0.0.1:8000/v1'"),  # no scheme
        (("demo", "--url", "ftp://127.0.0.1:8000/v1"), "'ftp://127.0.0.1:8000/v1'"),
        (("demo", "--timeout", "0"), "0.0"),
        (("check", "--url", "127.0.0.1:8000/v1"), "'127.0.0.1:8000/v1'"),
        (("load", "ftp://127.0.0.1:8000/v1", "--model", "m", "--quiet"), "'ftp://127.0.0.1:8000/v1'"),
    ],
)
def test_a_request_argument_the_client_refuses_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], value: str
) -> None:
    # the README's promise: one line on stderr, exit 2, for every command that sends a request
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1, err
    assert err.startswith(f"fastsse {argv[0]}: ") and err.rstrip().endswith(value)


def test_the_dispatcher_makes_any_commands_refused_argument_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the rule lives in the dispatcher, not in each command: one that does not catch still gets one line
    import fastsse
    import fastsse.cli.events

    def main(argv: list[str]) -> int:
        fastsse.create_stream({}, base_url="ftp://127.0.0.1:8000/v1")
        return 0

    monkeypatch.setattr(fastsse.cli.events, "main", main)
    code, out, err = run(capsys, "events")
    assert (code, out) == (2, "")
    assert (
        err == "fastsse events: base_url must be an http:// or https:// URL, not 'ftp://127.0.0.1:8000/v1'\n"
    )


def test_a_commands_own_type_error_keeps_its_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stream_backend: SimpleNamespace
) -> None:
    # only what the request setup refused is the user's to fix; a bug elsewhere is not hidden
    import fastsse.cli.demo

    def broken(self: object, chunk: dict[str, object]) -> bool:
        raise TypeError("a bug in the printer")

    monkeypatch.setattr(fastsse.cli.demo.Printer, "__call__", broken)
    with pytest.raises(TypeError, match="a bug in the printer"):
        fastsse_main(["demo"])


def test_demo_404_names_the_url_and_the_missing_v1(
    capsys: pytest.CaptureFixture[str], stream_backend: SimpleNamespace, server: object
) -> None:
    root = server.base_url.removesuffix("/v1")  # type: ignore[attr-defined]
    code, out, err = run(capsys, "demo", "--url", root)
    assert (code, out) == (1, "")
    assert err.splitlines()[-1] == (
        f"fastsse demo: {root}/chat/completions: HTTP 404: Unknown path /chat/completions "
        f"(invalid_request_error); the base URL usually ends in /v1 ({root}/v1)"
    )
    # with a /v1 already there, the URL tried is said and no /v1 is suggested
    code, _, err = run(capsys, "demo", "--url", root + "/v1/nowhere")
    assert code == 1
    assert err.splitlines()[-1].startswith(f"fastsse demo: {root}/v1/nowhere/chat/completions: HTTP 404: ")
    assert "/v1 (" not in err


@pytest.mark.parametrize("argv", [("serve",), ("serve", "--scripted")])
def test_a_port_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    # a socket refused 70000 with a traceback; asyncio's server quietly listened on 70000 - 65536
    code, out, err = run(capsys, *argv, "--port", "70000")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].endswith("argument --port: a TCP port is 0 to 65535, not 70000")


def test_check_expect_usage_with_another_api_speaks_in_the_one_voice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "check", "--api", "messages", "--expect-usage", "-")
    assert (code, out, err) == (2, "", "fastsse check: --expect-usage applies to chat streams only\n")

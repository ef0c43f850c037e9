"""The conformance linter: one capture per finding code, offsets, chunking invariance, framing == decoder, the CLI."""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsse import ChatChunkEncoder, StreamChecker, UsageError, check_stream
from fastsse.check import CODES, Finding
from fastsse.cli.check import main as check_main
from fastsse.sse.lint import _Framer

LINT = pathlib.Path(__file__).parent / "vectors" / "lint"
CASES: dict[str, dict] = json.loads((LINT / "cases.json").read_text(encoding="utf-8"))
ROOT = pathlib.Path(__file__).parent.parent


def resolve(data: bytes, spec: object) -> int:
    """An expected offset: an int, "end", or the start of the line holding a marker (first or last)."""
    if spec == "end":
        return len(data)
    if isinstance(spec, int):
        return spec
    assert isinstance(spec, dict)
    at = data.index(spec["line"].encode()) if "line" in spec else data.rindex(spec["last-line"].encode())
    return max(data.rfind(b"\n", 0, at), data.rfind(b"\r", 0, at)) + 1


def expected(name: str) -> list[tuple[str, int]]:
    data = (LINT / name).read_bytes()
    return sorted((code, resolve(data, spec)) for code, spec in CASES[name]["findings"])


def findings_of(
    data: bytes, *, expect_usage: bool = False, cut: int | None = None, max_event_bytes: int | None = None
) -> list[tuple[str, int | None]]:
    checker = StreamChecker(expect_usage=expect_usage, max_event_bytes=max_event_bytes)
    if cut is None:
        checker.feed(data)
    else:
        for k in range(0, len(data), cut):
            checker.feed(data[k : k + cut])
    checker.close()
    return sorted((f.code, f.offset) for f in checker.findings)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("cut", [None, 1, 7])
def test_capture(name: str, cut: int | None) -> None:
    data = (LINT / name).read_bytes()
    options = {key: CASES[name][key] for key in ("expect_usage", "max_event_bytes") if key in CASES[name]}
    assert findings_of(data, cut=cut, **options) == expected(name)


def test_every_code_has_a_capture_and_a_doc_row() -> None:
    captured = {code for case in CASES.values() for code, _ in case["findings"]}
    # content-type and transfer-cut are HTTP-level findings: test_cli_url_html and
    # test_cli_url_cut check them against the server
    http = {"content-type", "transfer-cut"}
    assert captured | http == set(CODES)
    for code in CODES:
        assert (LINT / f"{code}.sse").exists() or code in http, code
    doc = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    doc = doc.split("\n## Responses and Messages streams")[0]  # the other grammars: test_check_formats
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| (error|warning) \|", doc, re.M))
    assert rows == {code: info.severity for code, info in CODES.items()}


# The chat linter's names before the framing rules moved to fastsse.sse.lint (issue 44).
CHAT_LINT_NAMES = {"CODES", "ERROR", "SNIFF_BYTES", "WARNING", "CodeInfo", "Finding", "NoFieldText", "StreamChecker", "not_sse"}  # fmt: skip


def test_every_api_builds_on_the_sse_framing_rules() -> None:
    from fastsse.chat import lint as chat_lint
    from fastsse.check import FramingChecker, MessagesChecker, ResponsesChecker
    from fastsse.sse import lint as sse_lint

    assert sse_lint.FramingChecker is FramingChecker
    for cls in (StreamChecker, ResponsesChecker, MessagesChecker):
        assert issubclass(cls, FramingChecker), cls
    assert set(chat_lint.__all__) == CHAT_LINT_NAMES
    for name in CHAT_LINT_NAMES - {"CODES", "StreamChecker"}:
        assert getattr(chat_lint, name) is getattr(sse_lint, name), name
    assert sse_lint.CODES.items() <= CODES.items()  # chat's table holds the shared codes as they are


def test_each_checker_names_itself_when_misfed() -> None:
    from fastsse.check import checker

    for api, name in (
        ("chat", "StreamChecker"),
        ("responses", "ResponsesChecker"),
        ("messages", "MessagesChecker"),
    ):
        lint = checker(api)
        with pytest.raises(
            TypeError, match=rf"^{name}\.feed\(\) takes bytes, bytearray or memoryview, not str$"
        ):
            lint.feed("data: {}\n\n")  # type: ignore[arg-type]
        lint.close()
        with pytest.raises(UsageError, match=rf"^feed\(\) after close\(\): a {name} lints one stream$"):
            lint.feed(b"")


def test_localai_capture_findings_and_severities() -> None:
    data = (LINT / "localai-3.7.sse").read_bytes()
    findings = check_stream(data)
    assert [(f.code, f.severity) for f in findings] == [
        ("empty-initial-content", "warning"),
        ("empty-finish-reason", "error"),
        ("final-delta-not-empty", "warning"),
    ]
    assert all(isinstance(f, Finding) and f.message for f in findings)


def test_finding_fields() -> None:
    (finding,) = check_stream((LINT / "missing-done.sse").read_bytes())
    assert finding == Finding("missing-done", "error", finding.offset, finding.message)
    assert finding.as_dict() == {
        "code": "missing-done",
        "severity": "error",
        "offset": (LINT / "missing-done.sse").stat().st_size,
        "message": finding.message,
    }


def test_incremental_feed_returns_new_findings() -> None:
    data = (LINT / "localai-3.7.sse").read_bytes()
    first_event_end = data.index(b"\n\n") + 2
    checker = StreamChecker()
    assert [f.code for f in checker.feed(data[:first_event_end])] == [
        "empty-initial-content",
        "empty-finish-reason",
    ]
    assert [f.code for f in checker.feed(data[first_event_end:])] == ["final-delta-not-empty"]
    assert checker.close() == []
    assert checker.close() == []
    assert len(checker.findings) == 3
    assert checker.events == 6
    assert checker.size == len(data)
    with pytest.raises(UsageError, match="after close"):
        checker.feed(b"data: x\n\n")


def test_bad_input_type() -> None:
    with pytest.raises(TypeError, match="bytes"):
        check_stream("data: [DONE]\n\n")  # type: ignore[arg-type]
    assert check_stream(memoryview((LINT / "compliant.sse").read_bytes())) == []


def test_crlf_split_across_feeds_is_one_crlf() -> None:
    data = (LINT / "crlf-line-endings.sse").read_bytes()
    cr = data.index(b"\r")
    checker = StreamChecker()
    checker.feed(data[: cr + 1])
    checker.feed(data[cr + 1 :])
    checker.close()
    assert [f.code for f in checker.findings] == ["crlf-line-endings"]


def test_bom_arriving_byte_by_byte() -> None:
    assert findings_of((LINT / "bom.sse").read_bytes(), cut=1) == [("bom", 0)]
    assert findings_of(b"\xef\xbb") == [("empty-stream", 2), ("truncated", 0)]  # half a BOM, then EOF


def test_reported_once_per_cause() -> None:
    crlf = (LINT / "compliant.sse").read_bytes().replace(b"\n", b"\r\n")
    assert findings_of(crlf) == [("crlf-line-endings", 0)]
    every_chunk = (
        (LINT / "empty-finish-reason.sse")
        .read_bytes()
        .replace(b'"finish_reason":null', b'"finish_reason":""')
    )
    assert [c for c, _ in findings_of(every_chunk)] == ["empty-finish-reason"]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(CASES)), cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_any_chunking_gives_the_same_findings(name: str, cuts: list[int]) -> None:
    data = (LINT / name).read_bytes()
    options = {key: CASES[name][key] for key in ("expect_usage", "max_event_bytes") if key in CASES[name]}
    checker = StreamChecker(**options)
    last = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        checker.feed(data[last:cut])
        last = cut
    checker.feed(data[last:])
    checker.close()
    assert checker.findings == check_stream(data, **options)


class _Events(_Framer):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def on_event(self, offset: int, data: bytes, event_type: bytes | None) -> None:
        self.events.append(
            (data.decode("utf-8", "replace"), (event_type or b"message").decode("utf-8", "replace"))
        )


sse_pieces = st.sampled_from(
    [b"data: x", b"data:y", b"data", b"data:  z", b"event: e", b"event:", b"id: 1", b"retry: 5", b": c", b"\xef\xbb\xbf",
     b"\n", b"\r", b"\r\n", b"\n\n", b"\xc3", b"\xa9", b"\xff", b":", b" ", b"x"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(sse_pieces, max_size=40), cut=st.integers(1, 9))
def test_framing_matches_the_decoder(backend, pieces: list[bytes], cut: int) -> None:
    """The linter's own line scanner dispatches exactly the events fastsse.Decoder does."""
    stream = b"".join(pieces)
    framer = _Events()
    decoder = backend.Decoder()
    events = []
    for k in range(0, len(stream), cut):
        framer._feed_lines(stream[k : k + cut])
        events += decoder.feed(stream[k : k + cut])
    framer._close_lines()
    events += decoder.close()
    assert framer.events == [(ev.data, ev.event) for ev in events]


def test_encoder_stream_is_clean_whatever_the_chunking() -> None:
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    stream = enc.role() + enc.content("héllo 🌍") + enc.finish() + enc.usage({"total_tokens": 2}) + enc.done()
    for cut in (1, 2, 3, 5):
        assert findings_of(stream, expect_usage=True, cut=cut) == []


# CLI


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONUTF8": "1"}
    return subprocess.run(
        [sys.executable, "-m", "fastsse", "check", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        env=env,
    )


def test_cli_clean_file() -> None:
    result = run_cli(str(LINT / "compliant.sse"))
    assert result.returncode == 0, result.stderr
    size = (LINT / "compliant.sse").stat().st_size
    assert result.stdout.decode().endswith(f"compliant ({size} bytes, 5 event(s))\n")


def test_cli_localai_report() -> None:
    path = str(LINT / "localai-3.7.sse")
    result = run_cli(path)
    assert result.returncode == 1
    lines = result.stdout.decode().splitlines()
    assert (
        lines[0]
        == f'{path}:0: warning empty-initial-content: choice 0: the first chunk carries "content": ""'
    )
    assert lines[1].startswith(f"{path}:0: error empty-finish-reason:")
    assert re.match(rf"{re.escape(path)}:\d+: warning final-delta-not-empty:", lines[2])
    assert lines[3] == f"{path}: 1 error(s), 2 warning(s) in {os.path.getsize(path)} bytes, 6 event(s)"


def test_cli_warnings_only_exit_zero_and_stdin_json() -> None:
    data = (LINT / "crlf-line-endings.sse").read_bytes()
    result = run_cli("-", "--json", stdin=data)
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report == {
        "source": "<stdin>",
        "bytes": len(data),
        "events": 5,
        "errors": 0,
        "warnings": 1,
        "findings": [
            {
                "code": "crlf-line-endings",
                "severity": "warning",
                "offset": 0,
                "message": report["findings"][0]["message"],
            }
        ],
        "hint": None,  # the --api a stream of another API looks like
    }


def test_cli_expect_usage() -> None:
    assert run_cli(str(LINT / "compliant.sse"), "--expect-usage").returncode == 1
    assert run_cli(str(LINT / "compliant-tools.sse"), "--expect-usage").returncode == 0


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    assert check_main([]) == 2
    assert check_main([str(LINT / "compliant.sse"), "--url", "http://127.0.0.1:9/v1"]) == 2
    assert check_main([str(tmp_path / "missing.sse")]) == 2
    assert "missing.sse" in capsys.readouterr().err


def test_cli_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_main([str(LINT / "missing-done.sse")]) == 1
    assert "error missing-done" in capsys.readouterr().out
    from fastsse.__main__ import main as fastsse_main

    assert fastsse_main(["check", str(LINT / "compliant.sse")]) == 0


@pytest.fixture(scope="module")
def server():
    from fastsse.testing.server import serve_in_thread

    with serve_in_thread(api_key="sk-test", pause=0) as srv:
        yield srv


def test_cli_url_compliant(server, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--url", server.base_url, "--api-key", "sk-test", "--timeout", "20"]
    assert check_main([*args, "--model", "plain"]) == 0
    assert "compliant" in capsys.readouterr().out
    assert check_main([*args, "--model", "tools", "--expect-usage"]) == 0
    assert check_main([*args[:1], server.base_url + "/chat/completions", *args[2:], "--model", "crlf"]) == 0
    assert "crlf-line-endings" in capsys.readouterr().out


def test_cli_url_localai(server, capsys: pytest.CaptureFixture[str]) -> None:
    code = check_main(["--url", server.base_url, "--api-key", "sk-test", "--model", "localai", "--json"])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in report["findings"]] == [
        "empty-initial-content",
        "empty-finish-reason",
        "final-delta-not-empty",
    ]


def test_cli_url_html(server, capsys: pytest.CaptureFixture[str]) -> None:
    assert check_main(["--url", server.base_url, "--api-key", "sk-test", "--model", "html"]) == 1
    out = capsys.readouterr().out
    assert "error content-type: Content-Type is 'text/html; charset=utf-8'" in out
    assert "not an event stream: it starts like an HTML or XML page" in out


def test_cli_url_http_errors(server, capsys: pytest.CaptureFixture[str]) -> None:
    assert check_main(["--url", server.base_url, "--api-key", "wrong", "--model", "plain"]) == 2
    assert "HTTP 401" in capsys.readouterr().err
    assert check_main(["--url", server.base_url, "--api-key", "sk-test", "--model", "http-503"]) == 2
    assert "HTTP 503" in capsys.readouterr().err


def test_cli_url_transport_errors(server, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert check_main(["--url", f"http://127.0.0.1:{port}/v1", "--timeout", "5"]) == 2
    err = capsys.readouterr().err
    # the wording create_stream's TransportError uses, under the prefix every command uses
    assert err.startswith(f"fastsse check: http://127.0.0.1:{port}/v1/chat/completions: ")
    assert err.endswith("(curl error 7)\n") and err.count("\n") == 1


# issue 25, point 2: a cut after the answer began is linted, plus one finding for the cut


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        # "disconnect" sends the role and six content tokens (seven events), then stops inside an
        # event without the chunked terminator: curl error 18
        ("chat", ["truncated", "missing-finish-reason", "missing-done", "transfer-cut"]),
        ("responses", ["missing-terminal", "transfer-cut"]),
        ("messages", ["missing-message-stop", "transfer-cut"]),
    ],
)
def test_cli_url_cut(server, capsys: pytest.CaptureFixture[str], api: str, expected: list[str]) -> None:
    args = ["--url", server.base_url, "--api", api, "--api-key", "sk-test", "--model", "disconnect"]
    assert check_main([*args, "--timeout", "10", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in report["findings"]] == expected
    cut = report["findings"][-1]
    assert cut["severity"] == "error" and cut["offset"] == report["bytes"] > 0
    assert cut["message"] == (
        f"the transfer failed after {report['bytes']} bytes: "
        "transfer closed with outstanding read data remaining (curl error 18)"
    )
    if api == "chat":
        assert report["events"] == 7


# issue 25, point 5: a text with no event and no field is not an event stream, whatever the chunking


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_text_without_fields_is_one_not_sse_finding(api: str) -> None:
    from fastsse.check import checker

    text = b"Release notes\r\n\r\n- faster: the decoder\n- data loss fixed (see: #12)\n: not a comment\n" * 30
    whole = check_stream(text, api=api)
    assert [(f.code, f.offset) for f in whole] == [("not-sse", 0)]
    assert whole[0].message == "not an event stream: it is text with no SSE field (line 1: 'Release notes')"
    for size in (1, 3, 64):
        lint = checker(api)
        for i in range(0, len(text), size):
            lint.feed(text[i : i + size])
        assert lint.close()[-1:] == whole and lint.findings == whole


@pytest.mark.parametrize(
    ("body", "first"),
    [
        (b": ping\n\n: ping\n\n", "empty-stream"),  # a quiet stream, not a text
        (b"retry: 100\n\nhello\n", "non-data-field"),  # a field: linted as a stream
        (b"data\n", "missing-final-blank-line"),  # an empty data field is a field
    ],
)
def test_a_field_or_only_comments_keep_the_stream_rules(body: bytes, first: str) -> None:
    assert [f.code for f in check_stream(body)][:1] == [first]


# issue 32, point 6: a 404 says which URL was tried; a stream of another API says which --api fits


def test_cli_url_404_names_the_url_and_the_missing_v1(server, capsys: pytest.CaptureFixture[str]) -> None:
    root = server.base_url.removesuffix("/v1")
    assert check_main(["--url", root, "--api-key", "sk-test", "--timeout", "20"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"fastsse check: {root}/chat/completions: HTTP 404: ")
    assert err.endswith(f"; the base URL usually ends in /v1 ({root}/v1)\n")


MESSAGES_STREAM = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","type":"message",'
    b'"role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
RESPONSES_STREAM = (
    b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
    b'"response":{"id":"r1","object":"response","status":"in_progress","output":[]}}\n\n'
)


@pytest.mark.parametrize(
    ("body", "api", "hint"),
    [
        (
            (LINT / "compliant.sse").read_bytes(),
            "messages",
            'it looks like a chat completions stream ("object": "chat.completion.chunk"): try --api chat',
        ),
        (
            (LINT / "compliant.sse").read_bytes(),
            "responses",
            'it looks like a chat completions stream ("object": "chat.completion.chunk"): try --api chat',
        ),
        (
            b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}\n\n',
            "messages",
            'it looks like a chat completions stream (chunks with "choices"): try --api chat',
        ),
        (
            MESSAGES_STREAM,
            "chat",
            "it looks like a Messages stream (event: message_start): try --api messages",
        ),
        (
            MESSAGES_STREAM.replace(b"event: message_start\n", b""),  # no event: line, the payload's type
            "responses",
            'it looks like a Messages stream ("type": "message_start"): try --api messages',
        ),
        (
            RESPONSES_STREAM,
            "chat",
            "it looks like a Responses stream (event: response.created): try --api responses",
        ),
    ],
)
def test_cli_hints_at_the_api_the_stream_looks_like(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, body: bytes, api: str, hint: str
) -> None:
    path = tmp_path / "stream.sse"
    path.write_bytes(body)
    assert check_main(["--api", api, str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"{path}: hint: {hint}"
    assert lines[-2].startswith(f"{path}: ") and "error(s)" in lines[-2]
    assert check_main(["--api", api, "--json", str(path)]) == 1
    assert json.loads(capsys.readouterr().out)["hint"] == hint


@pytest.mark.parametrize(
    ("body", "api"),
    [
        ((LINT / "compliant.sse").read_bytes(), "chat"),  # compliant: nothing to explain
        ((LINT / "missing-done.sse").read_bytes(), "chat"),  # the right API with a fault of its own
        (MESSAGES_STREAM, "messages"),
        (b'data: {"x": 1}\n\n', "messages"),  # nothing tells which API it is
    ],
)
def test_cli_gives_no_hint_for_the_right_api(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, body: bytes, api: str
) -> None:
    path = tmp_path / "stream.sse"
    path.write_bytes(body)
    check_main(["--api", api, str(path)])
    assert ": hint: " not in capsys.readouterr().out
    check_main(["--api", api, "--json", str(path)])
    assert json.loads(capsys.readouterr().out)["hint"] is None


# issue 32, point 6: a huge event is one finding, and the linter's memory stays bounded


def _write_big_event(path: pathlib.Path, size: int) -> None:
    """A compliant chat stream whose second chunk carries ``size`` bytes of content, written in pieces."""
    head = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    with path.open("wb") as f:
        f.write(head + b'"delta":{"role":"assistant"},"finish_reason":null}]}\n\n')
        f.write(head + b'"delta":{"content":"')
        for _ in range(size >> 20):
            f.write(b"a" * (1 << 20))
        f.write(b'"},"finish_reason":null}]}\n\n')
        f.write(head + b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


def test_cli_max_event_bytes_reports_a_huge_event_in_bounded_memory(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    import tracemalloc

    from fastsse.cli._common import MAX_EVENT_BYTES

    path = tmp_path / "big.sse"
    _write_big_event(path, 24 << 20)
    tracemalloc.start()
    try:
        code = check_main([str(path)])  # the default bound
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    start = path.read_bytes().index(b"\n\n") + 2
    assert out[0] == (
        f"{path}:{start}: error event-too-large: an event passes max_event_bytes={MAX_EVENT_BYTES}; "
        "it was skipped unread, up to the next blank line"
    )
    assert out[-1] == f"{path}: 1 error(s), 0 warning(s) in {path.stat().st_size} bytes, 3 event(s)"
    # about the bound once (the line held so far), not the event several times over
    assert peak < MAX_EVENT_BYTES * 1.25, peak
    assert check_main([str(path), "--max-event-bytes", str(32 << 20)]) == 0  # a higher bound reads it
    capsys.readouterr()


def test_cli_max_event_bytes_takes_a_positive_number(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_main([str(LINT / "compliant.sse"), "--max-event-bytes", "0"]) == 2
    assert capsys.readouterr().err == "fastsse check: --max-event-bytes takes a positive number of bytes\n"


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_every_checker_bounds_an_event(api: str) -> None:
    from fastsse.check import checker

    data = b"data: " + b"x" * 100 + b"\n\nid: 1\ndata: " + b"y" * 60 + b"\ndata: " + b"z" * 60 + b"\n\n"
    findings = check_stream(data, api=api, max_event_bytes=100)
    assert [(f.code, f.offset) for f in findings if f.code == "event-too-large"] == [
        ("event-too-large", 0),  # one line past the bound
        ("event-too-large", 108),  # two lines within it whose data together pass it
    ]
    lint = checker(api, max_event_bytes=100)  # and a line longer than the bound fed byte by byte
    for byte in data:
        lint.feed(bytes([byte]))
    lint.close()
    assert lint.findings == findings
    with pytest.raises(ValueError, match=r"\(max_event_bytes=\.\.\.\) takes a positive int or None, not 0$"):
        checker(api, max_event_bytes=0)

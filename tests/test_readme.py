"""The README's examples run as written.

Every fenced ``python`` block is executed, in order and in one namespace (a later block may use
what an earlier one defined), once per backend in a fresh interpreter. Every ``console`` block's
``$ python -m fastsse ...`` commands are run and their output compared with the lines below them
(``serve --port N &`` starts the loopback server on a free port instead, and its URL stands for
``http://127.0.0.1:N`` in the commands and the output). A block that cannot run (it needs a real
API key, say) is marked by an HTML comment on the line before its fence,
``<!-- not-tested: why -->``, which the rendered README does not show. Other fence languages are
install recipes and illustrations (``sh``, ``text``); a new language must be added here on purpose.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

import fastsse

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RUN = {"python", "console"}
SHOWN = {"sh", "text", "toml", ""}  # recipes (pip install, nox), configs and illustrations: never executed
SKIP = re.compile(r"^<!--\s*not-tested:\s*(.+?)\s*-->$")


class Block(NamedTuple):
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    skip: str | None  # the reason given by a not-tested marker


def blocks(text: str) -> list[Block]:
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = SKIP.match(before)
        found.append(
            Block(i + 1, fence[1], "\n".join(lines[i + 1 : end]) + "\n", marker[1] if marker else None)
        )
        i = end + 1
    return found


BLOCKS = blocks(README.read_text(encoding="utf-8"))


def _env(backend: str) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(fastsse.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    env.pop("FASTSSE_NO_EXTENSIONS", None)
    env.pop("FASTSSE_MAX_RETRIES", None)  # the README describes the library's defaults
    if backend == "python":
        env["FASTSSE_NO_EXTENSIONS"] = "1"
    return env


def test_the_parser_sees_the_blocks_and_markers() -> None:
    sample = "a\n\n```python\nx = 1\n```\n<!-- not-tested: needs a key -->\n\n```console\n$ ls\n```\n"
    assert blocks(sample) == [
        Block(3, "python", "x = 1\n", None),
        Block(8, "console", "$ ls\n", "needs a key"),
    ]


def test_every_block_has_a_known_language() -> None:
    assert BLOCKS, "no fenced block found in README.md"
    unknown = [(b.line, b.lang) for b in BLOCKS if b.lang not in RUN | SHOWN]
    assert not unknown, f"README.md blocks in a language this test neither runs nor lists: {unknown}"
    assert all(b.skip for b in BLOCKS if b.skip is not None)  # a marker gives a reason


DRIVER = """
import json, sys
import fastsse
assert fastsse.BACKEND == sys.argv[1], fastsse.BACKEND
namespace = {"__name__": "__readme__"}
for line, text in json.load(sys.stdin):
    exec(compile(text, f"README.md, block at line {line}", "exec"), namespace)
"""


@pytest.mark.parametrize("backend", [pytest.param("cython", marks=pytest.mark.c_extension), "python"])
def test_python_blocks_run(backend: str) -> None:
    runnable = [(b.line, b.text) for b in BLOCKS if b.lang == "python" and b.skip is None]
    assert runnable
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, backend],
        input=json.dumps(runnable),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=_env(backend),
    )
    assert proc.returncode == 0, proc.stderr


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """``(command, expected output lines)`` for each ``$ `` line of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            out.append((line[2:].split("  #")[0].strip(), []))
        elif line.strip() and out:
            out[-1][1].append(line)
    return out


CONSOLE = [b for b in BLOCKS if b.lang == "console" and b.skip is None]


@pytest.mark.parametrize("block", CONSOLE, ids=lambda b: f"line{b.line}")
def test_console_blocks_print_what_they_show(block: Block) -> None:
    from fastsse.testing import serve_in_thread

    servers = []
    urls: dict[str, str] = {}
    try:
        for command, expected in _commands(block.text):
            serve = re.fullmatch(r"python -m fastsse serve --port (\d+) &", command)
            if serve:
                server = serve_in_thread(port=0)
                servers.append(server)
                urls[f"http://127.0.0.1:{serve[1]}"] = server.base_url.removesuffix("/v1")
                continue
            assert command.startswith("python -m fastsse "), f"README.md:{block.line}: cannot run {command!r}"
            for shown, real in urls.items():
                command = command.replace(shown, real)
            proc = subprocess.run(
                [sys.executable, *command.split()[1:]],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=ROOT,
                env=_env(fastsse.BACKEND),
            )
            got = proc.stdout
            for shown, real in urls.items():
                got = got.replace(real, shown)
            assert got.splitlines() == expected, f"README.md:{block.line}: {command}\n{proc.stderr}"
    finally:
        for server in servers:
            server.close()


# What the prose states, held to what the code does (issue 32, point 6)

_NUMBERS = {"both": 2, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
            "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}  # fmt: skip


def test_a_count_of_compiled_modules_is_the_builds() -> None:
    # Better no number at all (one more module and it rots); one that is written must be the count
    # of Cython sources a Linux build compiles.
    sources = len(list((ROOT / "src" / "fastsse").rglob("*.pyx")))
    text = README.read_text(encoding="utf-8")
    pattern = r"\b(\w+) (?:Cython |compiled |extension )?modules\b"
    stated = [m[1] for m in re.finditer(pattern, text) if m[1].lower() in _NUMBERS or m[1].isdigit()]
    assert all(_NUMBERS.get(word.lower()) == sources or word == str(sources) for word in stated), (
        stated,
        sources,
    )


def test_the_verdict_keys_are_all_named() -> None:
    stream = fastsse.ChatStream()
    stream.write(b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}\n\n')
    text = README.read_text(encoding="utf-8")
    missing = [key for key in stream.result()["verdict"] if f"`{key}`" not in text]
    assert not missing, f"README.md does not name the verdict keys {missing}"


def test_the_command_list_names_every_command() -> None:
    # the README's "Command line" block lists every command the dispatcher knows, and load's two
    # subcommands, so a new command cannot land unlisted
    from fastsse.__main__ import COMMANDS

    section = README.read_text(encoding="utf-8").split("## Command line", 1)[1].split("\n## ", 1)[0]
    listed = section.split("```", 2)[1]
    for name in COMMANDS:
        assert f"python -m fastsse {name} " in listed, name
    for sub in ("load compare", "load merge"):
        assert f"python -m fastsse {sub} " in listed, sub


def test_the_options_signature_in_the_readme_is_the_codes() -> None:
    import inspect
    import re

    import fastsse

    text = " ".join(README.read_text(encoding="utf-8").split())
    match = re.search(r"in the same order, `\(input, /, on_chunk=None, \*, ([a-z0-9_, ]+)\)`", text)
    assert match, "the README's create_stream signature"
    listed = [name.strip() for name in match.group(1).split(",")]
    params = list(inspect.signature(fastsse.create_stream).parameters)
    assert listed == params[params.index("on_chunk") + 1 :]

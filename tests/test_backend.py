"""Backend selection and parity: the compiled backend is what a normal install gets, the switch
forces Python, and both expose the same names and signatures."""

from __future__ import annotations

import importlib.machinery
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import fastsse
import fastsse._backend
import fastsse.translate


@pytest.mark.c_extension
@pytest.mark.skipif(fastsse._backend.NO_EXTENSIONS, reason="FASTSSE_NO_EXTENSIONS is set")
def test_compiled_backend_is_selected() -> None:
    assert fastsse.BACKEND == "cython"
    assert fastsse.Decoder is fastsse.get_backend("cython").Decoder


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_switch_forces_python(value: str) -> None:
    env = {**os.environ, "FASTSSE_NO_EXTENSIONS": value}
    out = subprocess.run(
        [sys.executable, "-c", "import fastsse; print(fastsse.BACKEND, fastsse.Decoder.__module__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert out == ["python", "fastsse.sse._decoder_py"]


@pytest.mark.c_extension
def test_switch_off_values_keep_cython() -> None:
    env = {**os.environ, "FASTSSE_NO_EXTENSIONS": "0"}
    out = subprocess.run(
        [sys.executable, "-c", "import fastsse; print(fastsse.BACKEND)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert out == "cython"


def test_unknown_backend_name() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        fastsse.get_backend("rust")


NAMESPACE = (
    "Decoder",
    "Event",
    "ChatAggregator",
    "ChatStream",
    "ResponsesAggregator",
    "ResponsesStream",
    "MessagesAggregator",
    "MessagesStream",
    "Relay",
    "ChatToMessages",
    "ChatToResponses",
    "MessagesToChat",
    "ResponsesToChat",
)


def test_a_backend_is_never_a_mix(backend: SimpleNamespace) -> None:
    suffix = "_c" if backend.name == "cython" else "_py"
    assert sorted(vars(backend)) == sorted(("name", *NAMESPACE))
    assert {name: getattr(backend, name).__module__.endswith(suffix) for name in NAMESPACE} == dict.fromkeys(
        NAMESPACE, True
    )


def test_the_selected_backend_is_what_fastsse_exports() -> None:
    selected = fastsse.get_backend(fastsse.BACKEND)
    for name in NAMESPACE[:9]:
        assert getattr(fastsse, name) is getattr(selected, name), name
    for name in NAMESPACE[9:]:
        assert getattr(fastsse.translate, name) is getattr(selected, name), name
    assert vars(fastsse._backend.current) == vars(selected)


@pytest.mark.c_extension
def test_a_build_missing_one_compiled_module_runs_pure_python(tmp_path: Path) -> None:
    # A partial build (one extension failed to compile) must not mix: the switch sees the missing
    # file and every domain takes its twin, the compiled ones that are there included.
    copy = tmp_path / "fastsse"
    shutil.copytree(Path(fastsse.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (lost,) = [
        p for suffix in importlib.machinery.EXTENSION_SUFFIXES for p in copy.glob(f"messages/_fold_c{suffix}")
    ]
    lost.unlink()
    code = (
        "import fastsse, fastsse.translate as t\n"
        f"print(fastsse.BACKEND, *sorted({{getattr(fastsse, n).__module__ for n in {NAMESPACE[:9]!r}}}"
        f" | {{getattr(t, n).__module__ for n in {NAMESPACE[9:]!r}}}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "FASTSSE_NO_EXTENSIONS": "0"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    backend, *where = out.stdout.split()
    assert backend == "python"
    assert [m for m in where if not m.endswith("_py")] == []


DONE_CHAT = (
    b'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)
AFTER = b'data: {"choices":[{"index":0,"delta":{"content":"b"}}]}\n\n'


@pytest.mark.parametrize("name", ["ChatStream", "ResponsesStream", "MessagesStream"])
def test_a_fused_streams_write_is_pycurls_protocol(backend: SimpleNamespace, name: str) -> None:
    # WRITEFUNCTION: None goes on, 0 (or a short count) stops; once closed, every write is 0, and
    # feed is write under the Decoder's name (events are folded, so it hands out none)
    stream = getattr(backend, name)()
    assert stream.write(b": a comment\n\n") is None
    assert stream.feed(b": another\n\n") == []
    stream.close()
    closed = stream.result()
    assert stream.write(AFTER) == 0
    assert stream.feed(AFTER) == []
    assert stream.result() == closed  # neither read the late bytes


@pytest.mark.parametrize("name", ["Relay", "ChatToMessages", "ChatToResponses"])
def test_a_relays_or_translators_write_returns_the_bytes_to_send(backend: SimpleNamespace, name: str) -> None:
    relay = getattr(backend, name)()
    sent = relay.write(DONE_CHAT)
    assert isinstance(sent, bytes) and sent
    assert isinstance(relay.close(), bytes)
    assert not hasattr(relay, "feed")  # bytes in, bytes out: no events to hand out


# Every compiled module, its Python twin, and the public classes both define by the same names
# (the compiled driver, client/_curl_c, has none: its twin is the pycurl driver). the tests
# below compare each pair's names and signatures from this one table.
TWINS = (
    ("fastsse.sse._decoder_c", "fastsse.sse._decoder_py", ("Decoder", "Event")),
    ("fastsse.chat._fold_c", "fastsse.chat._fold_py", ("ChatAggregator", "ChatStream")),
    ("fastsse.fold._stream_c", "fastsse.fold._stream_py", ("FoldCounters", "FoldStream")),
    ("fastsse.responses._fold_c", "fastsse.responses._fold_py", ("ResponsesAggregator", "ResponsesStream")),
    ("fastsse.messages._fold_c", "fastsse.messages._fold_py", ("MessagesAggregator", "MessagesStream")),
    ("fastsse.relay._relay_c", "fastsse.relay._relay_py", ("Relay",)),
    (
        "fastsse.translate._from_chat_c",
        "fastsse.translate._from_chat_py",
        ("ChatToMessages", "ChatToResponses"),
    ),
    ("fastsse.translate._to_chat_c", "fastsse.translate._to_chat_py", ("MessagesToChat", "ResponsesToChat")),
    ("fastsse.client._streams_c", "fastsse.client._streams_py", ("BytesStream", "PassThrough", "WireSink")),
)


# Where a pair's faces differ on purpose: (class, public name) -> why.
FACE_EXCEPTIONS = {
    ("FoldStream", "result"): "the Python base folds result() once; each compiled stream defines its own",
    (
        "BytesStream",
        "relay",
    ): "the compiled stream names its writer; the Python one leaves that to RelayStream",
    ("BytesStream", "translator"): "likewise, to TranslateStream",
    ("BytesStream", "()"): "the compiled stream takes relay=True where the Python one is RelayStream",
}


def _face(cls: type) -> dict[str, str]:
    """Public names with the names, kinds and defaults of their parameters (annotations differ in
    form between Cython and Python), and the constructor's where both sides can be read."""
    face = {}
    for name in dir(cls):
        if name.startswith("_") or (cls.__name__, name) in FACE_EXCEPTIONS:
            continue
        attr = getattr(cls, name)
        face[name] = _params(attr) if callable(attr) else "attribute"
    try:
        face["()"] = _params(cls)
    except (TypeError, ValueError):  # a compiled class with no readable signature
        face["()"] = "unreadable"
    if (cls.__name__, "()") in FACE_EXCEPTIONS:
        del face["()"]
    return face


def _params(obj: Any) -> str:
    params = inspect.signature(obj).parameters.values()
    return ", ".join(f"{p.name}:{p.kind.name}={p.default!r}" for p in params)


def _twin_cases() -> list[Any]:
    return [
        pytest.param(compiled, python, cls, id=cls) for compiled, python, classes in TWINS for cls in classes
    ]


@pytest.mark.c_extension
@pytest.mark.parametrize(("compiled", "python", "cls"), _twin_cases())
def test_every_twin_pair_has_one_face(compiled: str, python: str, cls: str) -> None:
    c_face = _face(getattr(importlib.import_module(compiled), cls))
    py_face = _face(getattr(importlib.import_module(python), cls))
    if c_face.get("()") == "unreadable":
        del c_face["()"], py_face["()"]
    assert c_face == py_face


def test_every_compiled_module_has_a_python_twin_named_like_it() -> None:
    root = Path(fastsse.__file__).parent
    compiled = {
        ".".join(("fastsse", *p.relative_to(root).with_suffix("").parts)) for p in root.rglob("*_c.pyx")
    }
    listed = {c for c, _, _ in TWINS}
    assert compiled - listed == {"fastsse.client._curl_c"}  # the driver: pycurl is its twin
    for c, py, classes in TWINS:
        assert py == c[: -len("_c")] + "_py", (c, py)
        assert (root / Path(*py.split(".")[1:])).with_suffix(".py").is_file(), py
        module = importlib.import_module(py)
        assert all(isinstance(getattr(module, name, None), type) for name in classes), py

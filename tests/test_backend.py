"""Backend selection and parity: the compiled backend is what a normal install gets, the switch
forces Python, and both expose the same names and signatures."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest

import fastsse


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


def _public(cls: type) -> dict[str, str]:
    names = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = getattr(cls, name)
        if not callable(attr):
            names[name] = "attribute"
            continue
        # names, kinds and defaults; annotations differ in form between Cython and Python
        params = inspect.signature(attr).parameters.values()
        names[name] = ", ".join(f"{p.name}:{p.kind.name}={p.default!r}" for p in params)
    return names


@pytest.mark.c_extension
@pytest.mark.parametrize("cls", ["Decoder", "Event", "ChatAggregator", "ChatStream"])
def test_same_public_api(cls: str) -> None:
    c_cls = getattr(fastsse.get_backend("cython"), cls)
    py_cls = getattr(fastsse.get_backend("python"), cls)
    assert _public(c_cls) == _public(py_cls)

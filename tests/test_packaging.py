"""What an installed fastsse carries: the typing marker, both compiled modules as real extension
modules, the free-threading declaration in every Cython source, and a GIL that stays off.

These run on every wheel cibuildwheel builds, so a wheel that lost a module or re-enables the GIL
on a free-threaded interpreter fails there, not on a user's machine.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.resources
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import fastsse
import fastsse._backend

COMPILED = (
    "sse._decoder_c",
    "chat._fold_c",
    "fold._stream_c",
    "responses._fold_c",
    "messages._fold_c",
    "relay._relay_c",
    "translate._to_chat_c",
    "translate._from_chat_c",
    "client._streams_c",
)
SOURCE_TREE = Path(__file__).resolve().parent.parent / "src" / "fastsse"


def test_the_compiled_list_is_the_builds() -> None:
    # the modules setup.py builds, where the source tree is beside: a new one missing here (or in
    # tools/check_dist.py, which must stay standard-library only) would go unchecked
    setup = SOURCE_TREE.parent.parent / "setup.py"
    if not setup.is_file():
        pytest.skip("no setup.py beside the tests")
    tree = ast.parse(setup.read_text(encoding="utf-8"))
    built = next(
        ast.literal_eval(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MODULES" for t in node.targets)
    )
    assert tuple(built) == COMPILED


def test_the_switch_looks_for_every_compiled_module() -> None:
    # fastsse._backend chooses the compiled backend only when every one of these is built
    assert fastsse._backend.COMPILED_MODULES == COMPILED


def test_py_typed_is_installed() -> None:
    assert (importlib.resources.files("fastsse") / "py.typed").is_file()


@pytest.mark.c_extension
@pytest.mark.parametrize("name", COMPILED)
def test_compiled_module_is_an_extension(name: str) -> None:
    module = importlib.import_module(f"fastsse.{name}")
    path = str(module.__file__)
    assert path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), path


@pytest.mark.c_extension
def test_the_libcurl_driver_is_built_on_linux() -> None:
    # setup.py's DRIVER_MODULES, required in Linux wheels by tools/check_dist.py
    if not sys.platform.startswith("linux"):
        pytest.skip("the libcurl driver is built on Linux only")
    module = importlib.import_module("fastsse.client._curl_c")
    assert str(module.__file__).endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


@pytest.mark.c_extension
def test_check_dist_says_whether_the_installed_build_loads() -> None:
    # the wheel job's first test step: the compiled modules run and, on glibc Linux, the driver
    # loads into pycurl's libcurl; the pure build fails it, saying which part does not load
    tool = SOURCE_TREE.parent.parent / "tools" / "check_dist.py"
    if not tool.is_file():
        pytest.skip("no tools/ beside the tests")
    env = {k: v for k, v in os.environ.items() if k not in ("FASTSSE_NO_EXTENSIONS", "FASTSSE_BACKEND")}
    ok = subprocess.run([sys.executable, str(tool), "--loads"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "compiled modules and driver load" in ok.stdout
    pure = subprocess.run(
        [sys.executable, str(tool), "--loads"],
        capture_output=True,
        text=True,
        env={**env, "FASTSSE_NO_EXTENSIONS": "1"},
    )
    assert pure.returncode == 1
    assert "the compiled modules do not load (backend 'python')" in pure.stderr


def _pyx_sources() -> dict[str, str]:
    # The wheel ships the .pyx next to the modules; a source checkout has them under src/.
    installed = importlib.resources.files("fastsse")
    found: dict[str, str] = {}
    for folder in {name.partition(".")[0] for name in COMPILED}:
        installed_dir = installed / folder
        if installed_dir.is_dir():
            for p in installed_dir.iterdir():
                if p.name.endswith(".pyx"):
                    found[f"{folder}.{p.name}"] = p.read_text(encoding="utf-8")
    if SOURCE_TREE.is_dir():
        for p in SOURCE_TREE.glob("*/*.pyx"):
            found[f"{p.parent.name}.{p.name}"] = p.read_text(encoding="utf-8")
    return found


def test_every_pyx_declares_freethreading_compatible() -> None:
    sources = _pyx_sources()
    assert {f"{name}.pyx" for name in COMPILED} <= set(sources)
    for name, text in sources.items():
        first = text.splitlines()[0]
        assert re.match(r"# cython:.*\bfreethreading_compatible=True\b", first), f"{name}: {first}"


@pytest.mark.c_extension
@pytest.mark.skipif(not sysconfig.get_config_var("Py_GIL_DISABLED"), reason="needs a free-threaded CPython")
def test_gil_stays_disabled_after_import() -> None:
    # An extension without the free-threading declaration makes CPython turn the GIL back on (with a
    # RuntimeWarning) when it is imported; a subprocess keeps that from leaking into this run.
    code = (
        f"import sys, fastsse, {', '.join(f'fastsse.{m}' for m in COMPILED)}\n"
        "fastsse.get_backend('cython')\n"
        "print(sys._is_gil_enabled())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_version_is_a_release_string() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+([abrc]+\d+|\.dev\d+|\.post\d+)?", fastsse.__version__)

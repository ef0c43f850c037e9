"""The C reference clients of the read-cost benchmark, compiled on demand and cached.

``reference/curl_floor.c`` (libcurl from C: ``curl_multi_socket_action`` + epoll + a C write
callback that counts event ends) and ``reference/raw_floor.c`` (sockets + epoll, no libcurl) are
built with the system C compiler the first time a benchmark asks for them, into a cache directory
keyed by the sources, the compiler and the libcurl, and reused after that.

``curl_floor`` links the libcurl the engine itself runs on: the copy pycurl's wheel bundles
(``pycurl.libs/libcurl-*.so*``, found beside the ``pycurl`` package, with an rpath to its folder),
else the system's ``libcurl``. ``FASTSSE_BENCH_LIBCURL=/path/to/libcurl.so`` picks another one.
Compiling needs libcurl's headers (``curl/curl.h``, any 7.x/8.x: the calls used are older than
both), from ``libcurl4-openssl-dev`` on Debian/Ubuntu or ``libcurl-devel`` on Fedora/RHEL;
``CFLAGS`` is passed to the compiler, so ``CFLAGS=-I/some/include`` works too.

``reference/curl_chatstream.pyx`` (the same libcurl loop feeding a real ``ChatStream``) is a
Cython extension: ``build_module("curl_chatstream")`` cythonizes and compiles it the same way
(it needs Cython too) and imports it.

``build_shared_floor() -> Path`` builds the second libcurl floor, written outside the project
(``shared/reference/floor/curl_multi_sse.c`` beside the checkout, or under ``$FASTSSE_SHARED``),
against the same libcurl; it is read where it lies, never copied into the project.

``build(name) -> Path`` returns the executable; it raises ``Unavailable`` (with the reason and
what to install) when there is no compiler, no headers or no libcurl, so a benchmark can skip.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "reference"
SOURCES = {
    "curl_floor": ("curl_floor.c", "events.h"),
    "raw_floor": ("raw_floor.c", "events.h"),
    "curl_chatstream": ("curl_chatstream.pyx", "events.h", "epoll.pxd"),
    "body_pump": ("body_pump.pyx", "epoll.pxd"),
}
# the fastsse .pxd a Cython reference cimports, and whether it links libcurl
CIMPORTS = {"curl_chatstream": ("chat/_fold_c.pxd", True), "body_pump": ("relay/_relay_c.pxd", False)}
HEADERS_HINT = (
    "libcurl's headers are missing: apt-get install libcurl4-openssl-dev (Debian/Ubuntu), "
    "dnf install libcurl-devel (Fedora/RHEL), or CFLAGS=-I<dir holding curl/curl.h>"
)


class Unavailable(Exception):
    """The reference cannot be built here; the message says why and what would fix it."""


def _sources(name: str) -> list[Path]:
    """The files reference ``name`` is built from. It raises ``Unavailable`` if one is missing (the
    sdist leaves out every .c file) and ``KeyError`` for an unknown name."""
    sources = [HERE / file for file in SOURCES[name]]
    missing = [path.name for path in sources if not path.is_file()]
    if missing:
        raise Unavailable(f"the reference's sources are not here ({', '.join(missing)}): run from a checkout")
    return sources


def _compiler() -> list[str]:
    configured = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    argv = shlex.split(configured)
    for name in (argv[0], "cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path, *argv[1:]] if name == argv[0] else [path]
    raise Unavailable("no C compiler found (CC, cc, gcc or clang)")


def libcurl() -> Path | None:
    """The libcurl ``curl_floor`` links: ``FASTSSE_BENCH_LIBCURL``, pycurl's bundled copy, or None
    for the system's (``-lcurl``)."""
    chosen = os.environ.get("FASTSSE_BENCH_LIBCURL")
    if chosen:
        return Path(chosen)
    try:
        files = importlib.metadata.files("pycurl") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    # auditwheel puts the bundled libraries in a "pycurl.libs" folder beside the package.
    bundled = sorted(f for f in files if f.parent.name == "pycurl.libs" and f.name.startswith("libcurl"))
    return Path(str(bundled[0].locate())).resolve() if bundled else None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        tempfile.gettempdir(), f"fastsse-bench-{getattr(os, 'getuid', lambda: 0)()}"
    )
    path = Path(base) / "fastsse-read-cost"
    path.mkdir(parents=True, exist_ok=True)
    return path


def build(name: str) -> Path:
    """``build(name) -> Path``: the compiled reference ``name`` ("curl_floor" or "raw_floor").

    It raises ``Unavailable`` if no compiler, libcurl headers or libcurl are found, and
    ``KeyError`` for an unknown name.
    """
    sources = _sources(name)
    cc = _compiler()
    flags = ["-O2", "-std=gnu11", *shlex.split(os.environ.get("CFLAGS", ""))]
    link = _link_curl() if name != "raw_floor" else []
    exe = _cache_dir() / f"{name}-{_key(sources, cc + flags + link)}"
    if not exe.exists():
        _compile(cc, [*flags, str(sources[0]), *link], exe, sources[0].name)
    return exe


def shared_floor_dir() -> Path:
    """The folder of the outside reference: ``$FASTSSE_SHARED/reference/floor`` or
    ``../shared/reference/floor`` beside the checkout. ``Unavailable`` when it is not there."""
    base = os.environ.get("FASTSSE_SHARED")
    root = Path(base) if base else HERE.parent.parent.parent / "shared"
    folder = root / "reference" / "floor"
    if not (folder / "curl_multi_sse.c").is_file():
        raise Unavailable(
            f"the outside libcurl floor is not beside this checkout ({folder}, or FASTSSE_SHARED)"
        )
    return folder


def build_shared_floor() -> Path:
    """``build_shared_floor() -> Path``: ``curl_multi_sse.c`` of the outside reference, compiled
    against the libcurl ``curl_floor`` links. ``Unavailable`` as ``build`` says."""
    folder = shared_floor_dir()
    sources = [folder / "curl_multi_sse.c", folder / "sse_scan.h"]
    cc = _compiler()
    flags = ["-O2", "-std=gnu11", f"-I{folder}", *shlex.split(os.environ.get("CFLAGS", ""))]
    link = _link_curl()
    exe = _cache_dir() / f"curl_multi_sse-{_key(sources, cc + flags + link)}"
    if not exe.exists():
        _compile(cc, [*flags, str(sources[0]), *link], exe, sources[0].name)
    return exe


def build_module(name: str) -> Any:
    """``build_module(name) -> module``: the Cython reference ``name`` ("curl_chatstream",
    "body_pump"), built
    on first use and imported. It raises ``Unavailable`` as ``build`` does, and when Cython is missing."""
    sources = _sources(name)
    cc = _compiler()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    includes = [f"-I{sysconfig.get_paths()['include']}", f"-I{HERE}"]
    package = _compiled_fastsse()  # the folder holding fastsse, whose .pxd files it cimports
    pxd, curl = CIMPORTS[name]
    sources = [*sources, package / "fastsse" / pxd]
    flags = ["-O2", "-fPIC", "-shared", *includes, *shlex.split(os.environ.get("CFLAGS", ""))]
    link = _link_curl() if curl else []
    folder = _cache_dir() / f"{name}-{_key(sources, cc + flags + link + [sys.version])}"
    lib = folder / f"{name}{suffix}"
    if not lib.exists():
        folder.mkdir(exist_ok=True)
        c_file = folder / f"{name}.c"
        argv = [sys.executable, "-m", "cython", "-3", "-I", str(package), "-o", str(c_file), str(sources[0])]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            if "no module named cython" in done.stderr.lower():
                raise Unavailable("Cython is not installed (pip install cython)")
            raise Unavailable(f"cythonizing {sources[0].name} failed: {done.stderr.strip()[-600:]}")
        _compile(cc, [*flags, str(c_file), *link], lib, sources[0].name)
    spec = importlib.util.spec_from_file_location(name, lib)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compiled_fastsse() -> Path:
    """The folder that holds the fastsse package (its .pxd files beside its compiled modules);
    ``Unavailable`` when fastsse runs without its compiled backend (nothing to cimport)."""
    import fastsse

    if fastsse.BACKEND != "cython":
        raise Unavailable("fastsse's compiled backend is not installed (the pure build)")
    return Path(fastsse.__file__).resolve().parent.parent


def _link_curl() -> list[str]:
    lib = libcurl()
    if lib is None:
        return ["-lcurl"]
    if not lib.exists():
        raise Unavailable(f"libcurl not found at {lib}")
    return [str(lib), f"-Wl,-rpath,{lib.parent}"]


def _key(sources: list[Path], argv: list[str]) -> str:
    key = hashlib.sha256()
    for part in [*(s.read_bytes() for s in sources), " ".join(argv).encode()]:
        key.update(part)
    return key.hexdigest()[:16]


def _compile(cc: list[str], args: list[str], out: Path, what: str) -> None:
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    done = subprocess.run([*cc, "-o", str(tmp), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        if "curl/curl.h" in done.stderr:
            raise Unavailable(HEADERS_HINT)
        if "-lcurl" in done.stderr or "cannot find -l" in done.stderr:
            raise Unavailable("no libcurl to link (pip install pycurl, or install the system's libcurl)")
        reason = done.stderr.strip()[-600:] or f"exit status {done.returncode}"
        raise Unavailable(f"compiling {what} with {cc[0]} failed: {reason}")
    tmp.replace(out)

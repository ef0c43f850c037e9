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

``build(name) -> Path`` returns the executable; it raises ``Unavailable`` (with the reason and
what to install) when there is no compiler, no headers or no libcurl, so a benchmark can skip.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "reference"
SOURCES = {"curl_floor": ("curl_floor.c", "events.h"), "raw_floor": ("raw_floor.c", "events.h")}
HEADERS_HINT = (
    "libcurl's headers are missing: apt-get install libcurl4-openssl-dev (Debian/Ubuntu), "
    "dnf install libcurl-devel (Fedora/RHEL), or CFLAGS=-I<dir holding curl/curl.h>"
)


class Unavailable(Exception):
    """The reference cannot be built here; the message says why and what would fix it."""


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
        tempfile.gettempdir(), f"fastsse-bench-{os.getuid()}"
    )
    path = Path(base) / "fastsse-read-cost"
    path.mkdir(parents=True, exist_ok=True)
    return path


def build(name: str) -> Path:
    """``build(name) -> Path``: the compiled reference ``name`` ("curl_floor" or "raw_floor").

    It raises ``Unavailable`` if no compiler, libcurl headers or libcurl are found, and
    ``KeyError`` for an unknown name.
    """
    sources = [HERE / file for file in SOURCES[name]]
    cc = _compiler()
    link: list[str] = []
    if name == "curl_floor":
        lib = libcurl()
        if lib is None:
            link = ["-lcurl"]
        elif not lib.exists():
            raise Unavailable(f"libcurl not found at {lib}")
        else:
            link = [str(lib), f"-Wl,-rpath,{lib.parent}"]
    flags = ["-O2", "-std=gnu11", *shlex.split(os.environ.get("CFLAGS", ""))]
    key = hashlib.sha256()
    for part in [*(s.read_bytes() for s in sources), " ".join(cc + flags + link).encode()]:
        key.update(part)
    exe = _cache_dir() / f"{name}-{key.hexdigest()[:16]}"
    if exe.exists():
        return exe
    tmp = exe.with_suffix(f".{os.getpid()}.tmp")
    argv = [*cc, *flags, "-o", str(tmp), str(sources[0]), *link]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        if "curl/curl.h" in done.stderr:
            raise Unavailable(HEADERS_HINT)
        if name == "curl_floor" and ("-lcurl" in done.stderr or "cannot find" in done.stderr):
            raise Unavailable("no libcurl to link (pip install pycurl, or install the system's libcurl)")
        reason = done.stderr.strip()[-600:] or f"exit status {done.returncode}"
        raise Unavailable(f"compiling {sources[0].name} with {cc[0]} failed: {reason}")
    tmp.replace(exe)
    return exe

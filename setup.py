"""Extension definitions and build switches; all metadata lives in pyproject.toml.

FASTSSE_NO_EXTENSIONS=1       build pure Python (no compiler needed)
FASTSSE_REQUIRE_EXTENSIONS=1  fail the build if an extension cannot be compiled (CIBUILDWHEEL=1 implies it)
FASTSSE_DEBUG_BUILD=1         -O0 -g, Cython bounds checks on
"""

import os
import platform
import sys

from setuptools import Extension, setup


def _flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on", "y")


NO_EXTENSIONS = _flag("FASTSSE_NO_EXTENSIONS") or platform.python_implementation() != "CPython"
STRICT = _flag("FASTSSE_REQUIRE_EXTENSIONS") or _flag("CIBUILDWHEEL")
DEBUG = _flag("FASTSSE_DEBUG_BUILD")
MODULES = ["_decoder_c", "_aggregator_c"]


def _extensions():
    from Cython.Build import cythonize

    if DEBUG:
        args = ["/Od", "/Zi"] if sys.platform == "win32" else ["-O0", "-g3", "-UNDEBUG"]
    else:
        args = ["/O2"] if sys.platform == "win32" else ["-O3"]
    exts = [
        Extension(
            f"fastsse.{name}", [f"src/fastsse/{name}.pyx"], extra_compile_args=args, optional=not STRICT
        )
        for name in MODULES
    ]
    return cythonize(
        exts,
        compiler_directives={
            "language_level": "3",
            "embedsignature": True,
            "binding": True,
            "boundscheck": DEBUG,
            "wraparound": DEBUG,
            "initializedcheck": DEBUG,
            "freethreading_compatible": True,
        },
    )


def _build():
    if NO_EXTENSIONS:
        print("*** fastsse: pure Python build (FASTSSE_NO_EXTENSIONS) ***", file=sys.stderr)
        return []
    try:
        return _extensions()
    except Exception as exc:  # Cython missing or a .pyx failed to translate
        if STRICT:
            raise
        print(
            f"*** WARNING fastsse: compiled backend unavailable ({exc}); pure Python build ***",
            file=sys.stderr,
        )
        return []


setup(ext_modules=_build())

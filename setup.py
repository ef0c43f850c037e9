"""Extension definitions and build switches; all metadata lives in pyproject.toml.

FASTSSE_NO_EXTENSIONS=1       build pure Python: a py3-none-any wheel, no compiler needed
FASTSSE_REQUIRE_EXTENSIONS=1  fail the build if an extension cannot be compiled (CIBUILDWHEEL=1 implies it)
FASTSSE_DEBUG_BUILD=1         -O0 -g, Cython bounds checks on

Without FASTSSE_REQUIRE_EXTENSIONS a failed compile (no compiler, no Python headers, no Cython) is not
fatal: the build prints one warning and the package installs with the pure-Python backend
(``fastsse.BACKEND == "python"``).
"""

import os
import platform
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on", "y")


NO_EXTENSIONS = _flag("FASTSSE_NO_EXTENSIONS") or platform.python_implementation() != "CPython"
STRICT = _flag("FASTSSE_REQUIRE_EXTENSIONS") or _flag("CIBUILDWHEEL")
DEBUG = _flag("FASTSSE_DEBUG_BUILD")
MODULES = (
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
# The compiled libcurl driver (client/_curl_c.pyx: dlopen, epoll): Linux only; elsewhere the engine
# runs on pycurl.
DRIVER_MODULES = ("client._curl_c",) if sys.platform.startswith("linux") else ()
DIRECTIVES = {
    "language_level": "3",
    "embedsignature": True,
    "binding": True,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "freethreading_compatible": True,
}

if DEBUG:
    COMPILE_ARGS = ["/Od", "/Zi"] if sys.platform == "win32" else ["-O0", "-g3", "-UNDEBUG"]
else:
    COMPILE_ARGS = ["/O2"] if sys.platform == "win32" else ["-O3"]

# GCC grants inlining a budget relative to the size of the translation unit, so a large
# ``cdef inline`` reader (``_native/reader.pxd``) silently stops being inlined into a fold's hot loop
# when the module around it shrinks (as the Messages fold did when its stream plumbing moved to
# ``fold/_stream_c``: about 15% slower on text deltas). A fixed budget keeps the fast path from
# depending on how much other code shares the unit.
GCC_ARGS = ["--param=inline-unit-growth=80"]


class BuildExt(build_ext):
    """Cythonize at build time and turn a failed optional extension into one warning.

    Translating here rather than at import of setup.py keeps generated C out of the sdist (the sdist
    command asks build_ext for its sources) and lets a machine without Cython still install.
    setuptools' own ``optional=True`` handling would log one easily missed line per extension.
    """

    def initialize_options(self):
        super().initialize_options()
        self._failed = []

    def build_extension(self, ext):
        try:
            from Cython.Build import cythonize

            # Generated C goes under build/ (per interpreter), never next to the .pyx.
            build_dir = os.path.join(self.build_temp, "cython")
            (translated,) = cythonize(
                [ext], compiler_directives=DIRECTIVES, build_dir=build_dir, force=self.force
            )
            ext.sources = translated.sources
            if self.compiler.compiler_type == "unix" and "gcc" in os.path.basename(
                self.compiler.compiler_so[0]
            ):
                ext.extra_compile_args = [*ext.extra_compile_args, *GCC_ARGS]
            super().build_extension(ext)
        except Exception as exc:
            if not ext.optional:
                raise
            reason = " ".join(str(exc).split()) or type(exc).__name__
            self._failed.append(f"{ext.name.rpartition('.')[2]}: {reason[:160]}")

    def run(self):
        super().run()
        if self._failed:
            print(
                "WARNING: fastsse: the compiled backend could not be built, so only the pure-Python"
                " backend (several times slower) is installed. To get it, install a C compiler and"
                " the Python headers, then reinstall; FASTSSE_REQUIRE_EXTENSIONS=1 makes this an error,"
                " FASTSSE_NO_EXTENSIONS=1 builds pure Python on purpose. Cause: " + "; ".join(self._failed),
                file=sys.stderr,
            )


def _extensions():
    if NO_EXTENSIONS:
        return []
    return [
        Extension(
            f"fastsse.{name}",
            [f"src/fastsse/{name.replace('.', '/')}.pyx"],
            extra_compile_args=COMPILE_ARGS,
            # dlopen lives in libdl before glibc 2.34 (manylinux2014); a stub after, and in musl
            libraries=["dl"] if name in DRIVER_MODULES else [],
            optional=not STRICT,  # setuptools then tolerates the missing module when it copies outputs
        )
        for name in MODULES + DRIVER_MODULES
    ]


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})

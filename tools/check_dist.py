"""Check what the sdist and the wheels carry; exit 1 on the first dist that is wrong.

    python tools/check_dist.py dist/*
    python tools/check_dist.py --loads      # the installed fastsse, in the wheel's test job

sdist: the .pyx/.pxd sources, tests and the Cython pin, never generated C or built modules.
binary wheel: both compiled modules and py.typed (a wheel that silently lost its extensions fails).
py3-none-any wheel: py.typed and no compiled module (it is the FASTSSE_NO_EXTENSIONS=1 build).
--loads: the installed fastsse runs its compiled modules (the selected backend is the compiled
one) and, on glibc Linux, loads the compiled driver into the libcurl pycurl brought (a wheel whose
driver is present but cannot load would otherwise fall back to pycurl in silence).
Used by the nox ``build`` session, by cibuildwheel's ``audit-command`` and ``test-command``, and
by wheels.yml.
Standard library only: it runs in cibuildwheel's bare audit environment.
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from pathlib import PurePosixPath

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
DRIVER = "client._curl_c"  # built on Linux only (dlopen and epoll): required in Linux wheels
PYX_HEADER = re.compile(r"^# cython:.*\bfreethreading_compatible=True\b")
EXTENSION = re.compile(r"\.(so|pyd)$")


def _compiled_modules(names: list[str]) -> set[str]:
    # fastsse/<folder>/<stem>.<abi>.so -> "<folder>.<stem>"
    found = set()
    for name in names:
        path = PurePosixPath(name)
        if len(path.parts) == 3 and path.parts[0] == "fastsse" and EXTENSION.search(path.name):
            found.add(f"{path.parts[1]}.{path.name.split('.', 1)[0]}")
    return found


def check_sdist(path: str) -> list[str]:
    with tarfile.open(path) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
        problems = [f"generated or built file {n}" for n in members if re.search(r"\.(c|html|so|pyd)$", n)]
        for required in [
            "pyproject.toml",
            "setup.py",
            "requirements/cython.txt",
            "src/fastsse/py.typed",
            "tests/conftest.py",
            *(f"src/fastsse/{m.replace('.', '/')}.pyx" for m in (*COMPILED, DRIVER)),
        ]:
            if required not in members:
                problems.append(f"missing {required}")
        for name, member in members.items():
            if name.endswith(".pyx"):
                source = tar.extractfile(member)
                first = source.readline().decode() if source else ""
                if not PYX_HEADER.match(first):
                    problems.append(f"{name}: first line lacks freethreading_compatible=True")
    return problems


def check_wheel(path: str) -> list[str]:
    with zipfile.ZipFile(path) as whl:
        names = whl.namelist()
    problems = [f"generated C {n}" for n in names if n.endswith(".c")]
    if "fastsse/py.typed" not in names:
        problems.append("missing fastsse/py.typed")
    compiled = _compiled_modules(names)
    if path.endswith("-py3-none-any.whl"):
        problems += [f"compiled module {m} in the pure wheel" for m in sorted(compiled)]
    else:
        problems += [f"missing compiled module fastsse.{m}" for m in COMPILED if m not in compiled]
        if "linux" in PurePosixPath(path).name and DRIVER not in compiled:
            problems.append(f"missing compiled module fastsse.{DRIVER} (the libcurl driver)")
    return problems


def check_loads() -> list[str]:
    import platform

    try:
        import fastsse
        from fastsse import _backend
        from fastsse.client import engine
    except ImportError as exc:
        return [f"fastsse does not import: {exc}"]
    problems = []
    if _backend.current.name != "cython":
        problems.append(f"the compiled modules do not load (backend {_backend.current.name!r})")
    if sys.platform == "linux" and platform.libc_ver()[0] == "glibc":
        driver = engine.compiled_driver()
        if isinstance(driver, str):
            problems.append(f"the compiled driver does not load: {driver}")
    if not problems:
        print(f"fastsse {fastsse.__version__}: compiled modules and driver load")
    return problems


def main(paths: list[str]) -> int:
    if paths == ["--loads"]:
        problems = check_loads()
        for problem in problems:
            print(f"installed fastsse: {problem}", file=sys.stderr)
        return 1 if problems else 0
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        if path.endswith(".tar.gz"):
            problems = check_sdist(path)
        elif path.endswith(".whl"):
            problems = check_wheel(path)
        else:
            problems = ["neither an sdist (.tar.gz) nor a wheel (.whl)"]
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        for problem in problems:
            print(f"{name}: {problem}", file=sys.stderr)
        if problems:
            status = 1
        else:
            print(f"{name}: ok")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

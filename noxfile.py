"""Developer sessions. ``nox`` runs them all, ``nox -l`` lists them, ``nox -s tests-3.12`` runs one.

tests        the suite on every Python found, against a strict build (compiled backend required)
tests_pure   the suite against a FASTSSE_NO_EXTENSIONS=1 build, which must report BACKEND == "python"
lint         ruff check and ruff format --check
typing       mypy --strict on the package and tests/test_typing_usage.py
build        sdist, strict wheel and pure wheel, their contents checked by tools/check_dist.py
no_compiler  a source install with CC=/bin/false: one warning and the pure backend; strict mode fails

Every install goes through a freshly built sdist, as on the package index, so the sessions also
prove the sdist is complete, and a stale ``build/`` directory never leaks modules into a wheel.
Interpreters are found on PATH; pyenv installs (``~/.pyenv/versions/3.X.Y``) are put ahead of
pyenv's shims, which only answer for the versions ``pyenv global`` selected.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nox

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
ROOT = Path(__file__).parent
CYTHON_PIN = str(ROOT / "requirements" / "cython.txt")
WARNING = "WARNING: fastsse: the compiled backend could not be built"
PYTEST = ("python", "-m", "pytest", "-p", "no:cacheprovider")
PIP_INSTALL = ("python", "-m", "pip", "install", "--no-cache-dir", "--force-reinstall")

nox.options.sessions = ["tests", "tests_pure", "lint", "typing", "build", "no_compiler"]


def _put_pyenv_versions_on_path() -> None:
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    newest: dict[str, tuple[int, Path]] = {}
    for path in versions.glob("3.*"):
        match = re.fullmatch(r"(3\.\d+)\.(\d+)", path.name)
        if match and match[1] in PYTHONS and (path / "bin").is_dir():
            patch = int(match[2])
            if match[1] not in newest or patch > newest[match[1]][0]:
                newest[match[1]] = (patch, path / "bin")
    bins = [str(b) for _, b in newest.values()]
    os.environ["PATH"] = os.pathsep.join([*bins, os.environ.get("PATH", "")])


if sys.platform != "win32":
    _put_pyenv_versions_on_path()


def _sdist(session: nox.Session) -> Path:
    """Build the sdist into the session's tmp dir and return its path."""
    session.install("-r", "requirements/build.txt")
    outdir = Path(session.create_tmp()) / "dist"
    for old in outdir.glob("*"):
        old.unlink()
    session.run("python", "-m", "build", "--sdist", "--outdir", str(outdir), silent=True)
    (sdist,) = outdir.glob("*.tar.gz")
    return sdist


def _install(session: nox.Session, sdist: Path, *, pure: bool) -> None:
    # --no-cache-dir: pip would otherwise reuse a wheel it built from an sdist of the same name
    # under the other switch.
    env = {"PIP_BUILD_CONSTRAINT": CYTHON_PIN}
    env["FASTSSE_NO_EXTENSIONS" if pure else "FASTSSE_REQUIRE_EXTENSIONS"] = "1"
    session.install("--no-cache-dir", "--force-reinstall", f"{sdist}[test]", env=env)


def _backend_of_install(session: nox.Session) -> str:
    # src/ is never on sys.path here, so this is the installed package speaking
    out = session.run(
        "python",
        "-c",
        "import fastsse; print(fastsse.BACKEND)",
        silent=True,
        env={"FASTSSE_NO_EXTENSIONS": ""},
    )
    return str(out).strip().splitlines()[-1]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The whole suite on both backends, against a strict build from the sdist."""
    _install(session, _sdist(session), pure=False)
    backend = _backend_of_install(session)
    if backend != "cython":
        session.error(f"strict build imports the {backend} backend")
    session.run(*PYTEST, *session.posargs, env={"FASTSSE_NO_EXTENSIONS": ""})


@nox.session(python=PYTHONS)
def tests_pure(session: nox.Session) -> None:
    """The suite on a FASTSSE_NO_EXTENSIONS=1 build: no compiled module may be installed."""
    _install(session, _sdist(session), pure=True)
    backend = _backend_of_install(session)
    if backend != "python":
        session.error(f"pure build imports the {backend} backend")
    session.run(*PYTEST, "--no-c-extensions", *session.posargs, env={"FASTSSE_NO_EXTENSIONS": ""})


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole tree."""
    session.install("-r", "requirements/lint.txt")
    session.run("ruff", "check", *session.posargs, ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHONS)
def typing(session: nox.Session) -> None:
    """mypy --strict; the compiled modules are typed through their _py twins (each __init__ says so)."""
    session.install("-r", "requirements/typing.txt")
    session.run("mypy", *session.posargs)


@nox.session(python=PYTHONS)
def build(session: nox.Session) -> None:
    """sdist, then a strict and a pure wheel built from it; tools/check_dist.py checks all three."""
    sdist = _sdist(session)
    outdir = sdist.parent
    session.run(
        "python",
        "-m",
        "build",
        "--wheel",
        "--outdir",
        str(outdir),
        "--dependency-constraints-txt",
        CYTHON_PIN,
        str(sdist),
        env={"FASTSSE_REQUIRE_EXTENSIONS": "1"},
        silent=True,
    )
    session.run(
        "python",
        "-m",
        "build",
        "--wheel",
        "--outdir",
        str(outdir),
        str(sdist),
        env={"FASTSSE_NO_EXTENSIONS": "1"},
        silent=True,
    )
    dists = sorted(str(p) for p in outdir.iterdir())
    if not any(d.endswith("-py3-none-any.whl") for d in dists) or len(dists) != 3:
        session.error(f"expected an sdist, a binary wheel and a py3-none-any wheel, got {dists}")
    session.run("python", "tools/check_dist.py", *dists)


@nox.session(python=PYTHONS[-1])
def no_compiler(session: nox.Session) -> None:
    """CC=/bin/false: the install succeeds with one warning and the pure backend; strict mode fails."""
    if sys.platform == "win32":
        session.skip("CC is not how setuptools finds MSVC")
    sdist = _sdist(session)
    env = {"CC": "/bin/false", "PIP_BUILD_CONSTRAINT": CYTHON_PIN}
    log = session.run(*PIP_INSTALL, "-v", str(sdist), env=env, silent=True)
    warnings = [line for line in str(log).splitlines() if WARNING in line]
    if len(warnings) != 1:
        session.error(f"expected one build warning, got {len(warnings)}:\n" + "\n".join(warnings))
    session.log(warnings[0].strip())
    backend = _backend_of_install(session)
    if backend != "python":
        session.error(f"a build without a compiler imports the {backend} backend")
    strict = {**env, "FASTSSE_REQUIRE_EXTENSIONS": "1"}
    session.run(*PIP_INSTALL, str(sdist), env=strict, success_codes=[1], silent=True)
    session.log("with FASTSSE_REQUIRE_EXTENSIONS=1 the same install fails, as it should")

"""The domain split, held by a check rather than by memory: each layer of ``[tool.importlinter]`` in
pyproject.toml imports only the layers below it, and the folders of one layer never import each
other. import-linter reads the ``.py`` modules; the compiled half (``.pyx`` / ``.pxd``, whose
``cimport`` lines it cannot see) is read here with the same layers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "fastsse"
IMPORT = re.compile(r"^\s*from\s+(\.+)([\w.]*)\s+c?import\s+(\(?[\w\s,.*()]*)", re.M)

pytestmark = pytest.mark.skipif(not SRC.is_dir(), reason="needs the source tree beside the tests")


def _layers() -> list[list[str]]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        tomllib = pytest.importorskip("tomli")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def _module(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _runtime_text(path: Path) -> str:
    """The source without its ``if TYPE_CHECKING:`` blocks (as import-linter is configured)."""
    out, skip_indent = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not line.strip() or indent > skip_indent:
                continue
            skip_indent = None
        if line.strip() == "if TYPE_CHECKING:":
            skip_indent = indent
            continue
        out.append(line)
    return "\n".join(out)


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports relatively (``from .x import y`` counts ``x.y`` when ``y`` is a
    module), at any depth: lazy imports inside functions count too."""
    name, is_package = _module(path)
    base = name.split(".") if is_package else name.split(".")[:-1]
    found = []
    for dots, target, names in IMPORT.findall(_runtime_text(path)):
        anchor = base[: len(base) - (len(dots) - 1)] if len(dots) > 1 else base
        module = ".".join([*anchor, target] if target else anchor)
        found.append(module)
        for item in re.split(r"[\s,()]+", names):
            item = item.split(" as ")[0]
            where = SRC.parent / module.replace(".", "/") / item
            if item and (where.with_suffix(".py").exists() or where.is_dir()):
                found.append(f"{module}.{item}")
    return found


def _where(module: str, layers: list[list[str]]) -> tuple[int, str] | None:
    for index, layer in enumerate(layers):
        for member in layer:
            if module == member or module.startswith(member + "."):
                return index, member
    return None


def _violations(suffixes: tuple[str, ...]) -> list[str]:
    layers = _layers()
    problems = []
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in suffixes:
            continue
        importer = _where(_module(path)[0], layers)
        if importer is None:
            continue
        for module in _imports(path):
            imported = _where(module, layers)
            if imported is None or imported[1] == importer[1]:
                continue
            if imported[0] < importer[0] or imported[0] == importer[0]:
                problems.append(
                    f"{path.relative_to(SRC)}: imports {module} ({imported[1]} is not below {importer[1]})"
                )
    return problems


def test_compiled_modules_import_only_downward() -> None:
    assert _violations((".pyx", ".pxd")) == []


def test_python_modules_import_only_downward() -> None:
    # the same rule as import-linter's, so it holds where import-linter is not installed
    assert _violations((".py",)) == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    # a check that cannot fail is no check: an import from the chat fold up into the client is found
    layers = _layers()
    chat = _where("fastsse.chat._fold_c", layers)
    client = _where("fastsse.client.engine", layers)
    assert chat is not None and client is not None and client[0] < chat[0]
    fake = SRC / "chat" / "_layers_probe.py"
    fake.write_text("from ..client import engine\n", encoding="utf-8")
    try:
        assert any("_layers_probe.py" in p for p in _violations((".py",)))
    finally:
        fake.unlink()


def test_lint_imports_keeps_the_contract() -> None:
    exe = shutil.which("lint-imports") or shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed")
    out = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]

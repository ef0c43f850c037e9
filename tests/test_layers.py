"""The domain split, held by a check rather than by memory.

The import picture of ``src/fastsse`` is built here from the sources: every ``import`` of every
``.py`` module at any depth (inside functions too; ``if TYPE_CHECKING:`` blocks excepted, as
import-linter is configured), every ``import`` and ``cimport`` line of the compiled half (``.pyx``,
``.pxd``), which import-linter cannot see, and every string that names a fastsse module whole (what
``importlib.import_module`` would load). Against ``[tool.importlinter]`` in pyproject.toml it holds
that every module has a layer and imports only the layers below it (the folders of one layer never
import each other), that nothing imports in a circle (counting the package ``__init__`` an import
runs first), and that no package imports another's private modules but the twins the contract
names. ``python tests/test_layers.py`` prints the picture's counts and every problem found.
"""

from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "fastsse"
SUFFIXES = (".py", ".pyx", ".pxd")
# A relative import or cimport line of the compiled half: the dots, the module, the names.
CYTHON_FROM = re.compile(
    r"^[ \t]*from[ \t]+(\.+)([\w.]*)[ \t]+c?import[ \t]+(\(?[\w \t,.*()\n]*?\)?)[ \t]*(?:#.*)?$", re.M
)

pytestmark = pytest.mark.skipif(not SRC.is_dir(), reason="needs the source tree beside the tests")


# Imports by a name the picture cannot read (``importlib.import_module(variable)``), each where it
# can only be an optional dependency or a module named whole elsewhere (the string rule sees those).
DYNAMIC = {
    ("fastsse.__main__", "main"): "a command's module, named whole in COMMANDS",
    ("fastsse.cli._common", "require"): "an optional dependency of a command",
    ("fastsse.bench._contenders", "_need"): "a peer library of the benchmark",
    ("fastsse.load._peers", "_need"): "a peer HTTP client of the load test",
}
IMPORT_CALLS = ("importlib.import_module", "import_module", "__import__")


class Import(NamedTuple):
    importer: str
    imported: str
    where: str  # path:line, for the report


def _config() -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        tomllib = pytest.importorskip("tomli")
    config: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["importlinter"]


def _contract(kind: str) -> dict[str, Any]:
    (contract,) = [c for c in _config()["contracts"] if c["type"] == kind]
    return contract


def layers() -> list[list[str]]:
    return [[name.strip() for name in layer.split("|")] for layer in _contract("layers")["layers"]]


def allowed_private() -> set[tuple[str, str]]:
    pairs = set()
    for line in _contract("private_modules")["ignore_imports"]:
        importer, _, imported = line.partition("->")
        pairs.add((importer.strip(), imported.strip()))
    return pairs


@functools.cache
def modules() -> dict[str, bool]:
    """Every module of the package (a ``.pyx`` and its ``.pxd`` are one), and whether it is a package."""
    found: dict[str, bool] = {}
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in SUFFIXES or "__pycache__" in path.parts:
            continue
        name, is_package = _name(path)
        found[name] = found.get(name, False) or is_package
    return found


def _name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _resolve(base: list[str], dots: int, target: str) -> str:
    anchor = base[: len(base) - (dots - 1)] if dots > 1 else base
    return ".".join([*anchor, target] if target else anchor)


def _targets(module: str, names: list[str], known: dict[str, bool]) -> Iterator[str]:
    """``from module import names``: each name that is a module itself, else the module."""
    plain = False
    for item in names:
        if f"{module}.{item}" in known:
            yield f"{module}.{item}"
        else:
            plain = True
    if plain or not names:
        yield module


def _type_checking(node: ast.If) -> bool:
    return ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _runtime_nodes(path: Path) -> Iterator[ast.AST]:
    """Every node of a module's tree but those under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    for node in ast.walk(tree):
        if id(node) not in skipped:
            yield node


def _python_imports(
    path: Path, name: str, base: list[str], known: dict[str, bool]
) -> Iterator[tuple[str, int]]:
    for node in _runtime_nodes(path):
        if isinstance(node, ast.ImportFrom):
            module = _resolve(base, node.level, node.module or "") if node.level else node.module or ""
            for target in _targets(module, [a.name for a in node.names], known):
                yield target, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.Constant) and node.value in known and node.value not in (name, "fastsse"):
            yield node.value, node.lineno  # a string that names a module whole


def _cython_imports(path: Path, base: list[str], known: dict[str, bool]) -> Iterator[tuple[str, int]]:
    text = path.read_text(encoding="utf-8")
    for match in CYTHON_FROM.finditer(text):
        dots, target, names = match.groups()
        line = text.count("\n", 0, match.start()) + 1
        items = [n.split(" as ")[0].strip() for n in re.split(r"[,()\n]+", names)]
        for module in _targets(_resolve(base, len(dots), target), [i for i in items if i], known):
            yield module, line


@functools.cache
def imports() -> list[Import]:
    """Every import of a fastsse module by a fastsse module, at the module it names."""
    known = modules()
    found = []
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in SUFFIXES or "__pycache__" in path.parts:
            continue
        name, is_package = _name(path)
        base = name.split(".") if is_package else name.split(".")[:-1]
        pairs = (
            _python_imports(path, name, base, known)
            if path.suffix == ".py"
            else _cython_imports(path, base, known)
        )
        for target, line in pairs:
            if target != "fastsse" and not target.startswith("fastsse."):
                continue
            while target not in known:  # ``from .x import function``: the module it lives in
                target = target.rpartition(".")[0]
            if target != name:
                found.append(Import(name, target, f"{path.relative_to(SRC)}:{line}"))
    return found


def dynamic_imports() -> list[str]:
    """Calls that import a module by a name that is not written in the call, outside ``DYNAMIC``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        name = _name(path)[0]
        functions = [
            n for n in _runtime_nodes(path) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        for node in _runtime_nodes(path):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func) in IMPORT_CALLS and node.args):
                continue
            if isinstance(node.args[0], ast.Constant):
                continue
            inside = [f.name for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
            if (name, inside[-1] if inside else "") not in DYNAMIC:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}")
    return found


def _layer_of(module: str, table: list[list[str]]) -> tuple[float, str] | None:
    if module == "fastsse":
        # The package's face: it re-exports the client and everything below it; the commands, the
        # load generator and the benchmark kit import it.
        return table.index(["fastsse.client"]) - 0.5, "fastsse"
    for index, layer in enumerate(table):
        for member in layer:
            if module == member or module.startswith(member + "."):
                return float(index), member
    return None


def unplaced() -> list[str]:
    table = layers()
    return [m for m in modules() if _layer_of(m, table) is None]


def upward() -> list[str]:
    """Every import that does not point down the layers (or goes across to a sibling)."""
    table = layers()
    problems = []
    for imp in imports():
        importer, imported = _layer_of(imp.importer, table), _layer_of(imp.imported, table)
        if importer is None or imported is None or importer[1] == imported[1]:
            continue
        if imported[0] <= importer[0]:
            problems.append(
                f"{imp.where}: {imp.importer} imports {imp.imported} ({imported[1]} is not below {importer[1]})"
            )
    return problems


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts))]  # the root package is always first


def cycles() -> list[list[str]]:
    """The circles of the import picture (strongly connected parts of two modules or more). An
    import also runs the ``__init__`` of each package around the module that the importer is not
    already inside, so that is an edge too (the root package, always imported first, excepted)."""
    graph: dict[str, set[str]] = {}
    for imp in imports():
        graph.setdefault(imp.importer, set()).add(imp.imported)
        inside = {imp.importer, *_ancestors(imp.importer)}
        graph[imp.importer].update(p for p in _ancestors(imp.imported) if p not in inside)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:  # Tarjan's
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _private_home(module: str) -> str | None:
    """The package a private module belongs to (None if it is not private): what may import it."""
    parts = module.split(".")
    for i in range(1, len(parts)):
        if parts[i].startswith("_") and not parts[i].startswith("__"):
            return ".".join(parts[:i])
    return None


def private_imports() -> list[Import]:
    """Imports of a private module from outside the package it belongs to."""
    found = []
    for imp in imports():
        home = _private_home(imp.imported)
        if home is not None and imp.importer != home and not imp.importer.startswith(home + "."):
            found.append(imp)
    return found


def unnamed_private_imports() -> list[str]:
    """Imports of another package's private module that the contract does not name."""
    allowed = allowed_private()
    return [f"{i.where}: {i.importer} -> {i.imported}" for i in private_imports() if i[:2] not in allowed]


def test_every_module_has_a_layer() -> None:
    assert unplaced() == []


def test_every_import_points_down_the_layers() -> None:
    # .py, .pyx and .pxd, imports inside functions and modules named by string included
    assert upward() == []


def test_every_import_can_be_read() -> None:
    # an import_module(f"fastsse.{name}") hides an arrow from both checks: name the module instead
    assert dynamic_imports() == []


def test_nothing_imports_in_a_circle() -> None:
    assert cycles() == []


def test_private_modules_are_imported_only_by_their_package_or_a_named_twin() -> None:
    assert unnamed_private_imports() == []


def test_every_named_exception_is_still_used() -> None:
    # an exception the code no longer needs would quietly allow the import again
    used = {i[:2] for i in private_imports()}
    assert sorted(allowed_private() - used) == []


@pytest.mark.parametrize(
    ("text", "check"),
    [
        ("from ..client import engine\n", upward),  # the chat fold reaching up to the client
        ("import importlib\n\nimportlib.import_module('fastsse.client.engine')\n", upward),  # by name
        (
            "import importlib\n\nname = 'engine'\nimportlib.import_module(f'fastsse.client.{name}')\n",
            dynamic_imports,
        ),
        (
            "def f():\n    from ..client import _request\n",
            unnamed_private_imports,
        ),  # a private module, lazily
        ("def f():\n    from . import _layers_probe_b\n", cycles),  # with the module below, a circle
    ],
    ids=["upward", "by-name", "hidden-name", "private", "circle"],
)
def test_the_check_sees_each_kind_of_problem(text: str, check: Any) -> None:
    # a check that cannot fail is no check
    probe, partner = SRC / "chat" / "_layers_probe.py", SRC / "chat" / "_layers_probe_b.py"
    assert check() == []
    probe.write_text(text, encoding="utf-8")
    partner.write_text("from . import _layers_probe\n", encoding="utf-8")
    try:
        _forget()
        assert any("_layers_probe" in str(problem) for problem in check())
    finally:
        probe.unlink()
        partner.unlink()
        _forget()


def _forget() -> None:
    modules.cache_clear()
    imports.cache_clear()


def test_lint_imports_keeps_the_contract() -> None:
    exe = shutil.which("lint-imports") or shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed")
    out = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


if __name__ == "__main__":
    found = imports()
    private = private_imports()
    named = allowed_private()
    print(f"{len(modules())} modules, {len(found)} imports ({len({i[:2] for i in found})} distinct pairs)")
    print(f"circles: {len(cycles())}", *cycles(), sep="\n  ")
    print(f"arrows not pointing down: {len(upward())}", *upward(), sep="\n  ")
    print(f"modules without a layer: {len(unplaced())}", *unplaced(), sep="\n  ")
    print(
        f"imports by a name the picture cannot read: {len(dynamic_imports())}", *dynamic_imports(), sep="\n  "
    )
    print(
        f"imports of another package's private module: {len(private)}"
        f" ({sum(i[:2] in named for i in private)} of them by the twins the contract names)",
        *unnamed_private_imports(),
        sep="\n  ",
    )

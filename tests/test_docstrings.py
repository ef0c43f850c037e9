"""Every public name ``help()`` shows has something to show: each class and function in
``fastsse.__all__`` (and the public modules' own ``__all__``), and each public method of a public
class, on both backends."""

from __future__ import annotations

import importlib
import inspect
from types import SimpleNamespace
from typing import Any

import pytest

import fastsse

PUBLIC_MODULES = (
    "fastsse",
    "fastsse.sse",
    "fastsse.sse.lint",
    "fastsse.chat",
    "fastsse.fold",
    "fastsse.responses",
    "fastsse.messages",
    "fastsse.relay",
    "fastsse.check",
    "fastsse.translate",
    "fastsse.client",
    "fastsse.testing",
    "fastsse.gateway",
    "fastsse.chat.encode",
    "fastsse.responses.encode",
    "fastsse.messages.encode",
    "fastsse.relay.normalize",
)


def _public(module_name: str) -> list[tuple[str, Any]]:
    module = importlib.import_module(module_name)
    return [(f"{module_name}.{name}", getattr(module, name)) for name in module.__all__]


def _undocumented(qualname: str, obj: Any) -> list[str]:
    if not (inspect.isclass(obj) or inspect.isroutine(obj)):
        return []
    missing = [] if (obj.__doc__ or "").strip() else [qualname]
    if inspect.isclass(obj):
        for name, member in vars(obj).items():
            if name.startswith("_") or not (inspect.isroutine(member) or isinstance(member, property)):
                continue
            if not (getattr(member, "__doc__", None) or "").strip():
                missing.append(f"{qualname}.{name}")
    return missing


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(module_name: str) -> None:
    missing = [m for qualname, obj in _public(module_name) for m in _undocumented(qualname, obj)]
    assert missing == []


def test_clients_show_their_options_in_help() -> None:
    # the class docstrings are plain literals (help() shows them) with the shared options appended
    for cls in (fastsse.Client, fastsse.AsyncClient):
        doc = inspect.getdoc(cls) or ""
        assert doc.startswith(f"``{cls.__name__}(*, api=DEFAULT, base_url=DEFAULT"), doc[:80]
        for option in fastsse.client.OPTIONS:  # the table's rows, each in help()
            if option.where != "call":
                assert f"``{option.name}``" in doc, option.name


def test_each_backends_public_classes_are_documented(backend: SimpleNamespace) -> None:
    missing = [
        m
        for name, obj in vars(backend).items()
        if inspect.isclass(obj)
        for m in _undocumented(f"{backend.name}.{name}", obj)
    ]
    assert missing == []

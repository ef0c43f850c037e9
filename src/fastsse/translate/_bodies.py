"""What the body translators (requests and whole answers) share: the result type, the error,
the bookkeeping of one translation (strict or lossy, the paths it names) and the type checks
that name the field they reject."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from .._errors import Untranslatable
from ..apis import NAMES

__all__ = ["APIS", "Translated", "Untranslatable"]

APIS: Final = NAMES

# OpenRouter's names for thinking carried in chat (``reasoning_details``): the format says whose it is
ANTHROPIC_FORMAT: Final = "anthropic-claude-v1"
OPENAI_FORMAT: Final = "openai-responses-v1"


class Translated(dict[str, Any]):
    """A translated body: the dict itself, plus ``dropped``, the paths (in the source body) of what
    the target could not carry and ``lossy=True`` left out, in the order met; empty otherwise."""

    __slots__ = ("dropped",)

    def __init__(self, body: dict[str, Any], dropped: list[str]) -> None:
        super().__init__(body)
        self.dropped = dropped


# a field's place in a body: a top-level name, or (its parent, ".name" or a list index), so that
# the walk builds a string only for a field it names in an error
Path = str | tuple["Path", str | int]


def _fmt(path: Path) -> str:
    """The path as written in errors and ``dropped``: ``messages[2].content[0].text``."""
    if isinstance(path, str):
        return path
    parent, step = path
    return f"{_fmt(parent)}[{step}]" if type(step) is int else _fmt(parent) + str(step)


class _Ctx:
    """One translation's bookkeeping: strict (raise) or lossy (list), and how a path is named."""

    __slots__ = ("dropped", "lossy", "name", "origins")

    def __init__(self, lossy: bool, name: Callable[[str], str] | None = None) -> None:
        self.lossy = lossy
        self.dropped: list[str] = []
        self.name = name
        # towards chat, when a second half will name paths in the source (through_chat): the source
        # path of each chat message written
        self.origins: list[Path] | None = None

    def drop(self, path: Path, why: str) -> None:
        """What the target cannot express: raise, or (lossy) list it and go on."""
        named = _fmt(path) if self.name is None else self.name(_fmt(path))
        if not self.lossy:
            raise Untranslatable(named, why)
        self.dropped.append(named)

    def bad(self, path: Path, why: str) -> Untranslatable:
        """What no API allows (a wrong type, a result with no call): an error in every mode."""
        return Untranslatable(_fmt(path) if self.name is None else self.name(_fmt(path)), why)


def _extra(d: dict[str, Any], allowed: frozenset[str]) -> list[str]:
    """The keys of ``d`` beyond ``allowed``, in order: none, without a loop in Python, when all are allowed."""
    return [] if d.keys() <= allowed else [k for k in d if k not in allowed]


_FUNCTION_KEYS: Final = frozenset({"name", "description", "parameters", "strict"})
_TEXT_KEYS: Final = frozenset({"type", "text"})
_IMAGE_KEYS: Final = frozenset({"type", "source"})
_TURN_KEYS: Final = frozenset({"role", "content"})
_RESULT_KEYS: Final = frozenset({"type", "tool_use_id", "content", "is_error"})
_TOOL_USE_KEYS: Final = frozenset({"type", "id", "name", "input"})
_TOOL_KEYS: Final = frozenset({"type", "name", "description", "input_schema", "strict"})
_INPUT_TEXT_KEYS: Final = frozenset({"type", "text", "annotations", "logprobs"})
_INPUT_FILE_KEYS: Final = frozenset({"type", "file_data", "file_id", "filename"})
_RESPONSES_TOOL_KEYS: Final = frozenset({"type", "name", "description", "parameters", "strict"})


def _api_error(source: object, target: object) -> ValueError | None:
    """The error for a pair of APIs that is not a translation, else None."""
    if source not in APIS or target not in APIS:
        return ValueError(f"unknown API {source if source not in APIS else target!r}; expected one of {APIS}")
    if source == target:
        return ValueError(f"nothing to translate: source and target are both {source!r}")
    return None


def _check_apis(source: object, target: object) -> None:
    error = _api_error(source, target)
    if error is not None:
        raise error


def _number(value: object) -> bool:
    return type(value) in (int, float)


def _text(value: object) -> bool:
    return isinstance(value, str)


def _dict(ctx: _Ctx, value: object, path: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ctx.bad(path, f"expected an object, not {type(value).__name__}")
    return value


def _list(ctx: _Ctx, value: object, path: Path) -> list[Any]:
    if type(value) is not list:
        raise ctx.bad(path, f"expected a list, not {type(value).__name__}")
    return value


def _str(ctx: _Ctx, value: object, path: Path) -> str:
    if not isinstance(value, str):
        raise ctx.bad(path, f"expected a string, not {type(value).__name__}")
    return value


def _data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a ``data:<type>;base64,<data>`` URL, else None."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url.partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[5:-7], data


def _arguments(ctx: _Ctx, raw: object, path: Path) -> dict[str, Any] | None:
    """A chat tool call's ``arguments`` string as the object Messages' ``input`` holds."""
    raw = _str(ctx, raw, path)
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        ctx.drop(path, "not JSON, and a Messages tool_use input is an object")
        return None
    if type(value) is not dict:
        ctx.drop(path, "not a JSON object, and a Messages tool_use input is an object")
        return None
    return value


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


# the sampling and limit fields each side shares under one name (chat <-> Responses)
_SAME_CR: Final = (
    "model",
    "temperature",
    "top_p",
    "stream",
    "user",
    "metadata",
    "store",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
    "parallel_tool_calls",
)


def _short(value: object) -> str:
    text = _dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _max_tokens(ctx: _Ctx, body: dict[str, Any]) -> int | None:
    new, old = body.get("max_completion_tokens"), body.get("max_tokens")
    if new is not None and old is not None and new != old:
        raise ctx.bad("max_tokens", "max_tokens and max_completion_tokens disagree")
    value = new if new is not None else old
    if value is not None and type(value) is not int:
        raise ctx.bad("max_completion_tokens" if new is not None else "max_tokens", "expected an integer")
    return value


def _stream_options(ctx: _Ctx, body: dict[str, Any], target: str) -> None:
    options = body.get("stream_options")
    if options is None:
        return
    for key in _dict(ctx, options, "stream_options"):
        if key != "include_usage":
            ctx.drop(f"stream_options.{key}", f"no {target} counterpart")
    # include_usage needs no counterpart: Messages and Responses streams always report usage


_CHAT_MESSAGE_KEYS: Final = {
    "system": frozenset({"role", "content"}),
    "developer": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
    "assistant": frozenset(
        {"role", "content", "refusal", "tool_calls", "reasoning_details", "reasoning_content", "reasoning"}
    ),
}

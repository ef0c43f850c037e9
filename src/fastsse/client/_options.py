"""The one table of options: ``OPTIONS``, from which the signatures, the checks and the docs are made.

Every option a user sets is one ``Option`` row here (name, type, default, where it applies, what
it means). ``create_stream``, ``Client.create_stream`` and ``AsyncClient.create_stream`` take them
all with the same signature (``call_signature``), ``Client(...)`` and ``AsyncClient(...)`` take the
client's (``client_signature``); ``check_options`` applies the table's own checks, and
``options_doc`` writes the text ``help()`` shows. ``RequestOptions`` is the frozen set a request is
prepared from (a client's, with a request's own laid on top); ``CallOptions`` / ``ClientOptions``
are the same names as TypedDicts, for type checkers (``tests/test_options.py`` holds the three
together). Adding an option is one row here, one field in ``RequestOptions`` if a request reads
it, and one line in each TypedDict.

``EventSource(...)`` and ``AsyncEventSource(...)`` take the rows of ``OPTIONS`` that apply to a
GET of an event stream (``SOURCE_SHARED``) and their own rows, ``SOURCE_OPTIONS``, kept apart so
that no call of the clients takes them (``source_signature``, ``source_doc``, ``SourceOptions``;
``tests/test_eventsource.py`` holds them together).
"""

from __future__ import annotations

import dataclasses
import inspect
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypedDict

from .._errors import InvalidRequest, event_limit
from ..apis import NAMES
from ._retry import RECONNECT_FLOOR

__all__ = [
    "DEFAULT",
    "OPTIONS",
    "SOURCE_OPTIONS",
    "CallOptions",
    "ClientOptions",
    "Option",
    "RequestOptions",
    "SourceOptions",
    "call_signature",
    "check_options",
    "client_options",
    "client_signature",
    "options_doc",
    "source_doc",
    "source_signature",
    "with_self",
]


class _Default:
    """The default of every keyword of a call: "not given", so the client's own value holds (and,
    for ``fastsse.create_stream``, the table's default)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "fastsse.DEFAULT"

    def __reduce__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default()

CLIENT, CALL, BOTH = "client", "call", "both"
SOURCE = "source"  # an EventSource's own (SOURCE_OPTIONS)


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {type(value).__name__}")
    return value


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 1:
        raise InvalidRequest(f"{name} must be at least 1, not {value}")
    return value


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise InvalidRequest(f"{name} must be 0 or more, not {value}")
    return value


def _fallbacks(value: Any, name: str) -> tuple[tuple[str, str | None], ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of base URLs or (base_url, api_key) pairs")
    out: list[tuple[str, str | None]] = []
    for entry in value:
        if isinstance(entry, str):
            out.append((entry, None))
        elif isinstance(entry, tuple) and len(entry) == 2 and all(isinstance(x, str) for x in entry):
            out.append((entry[0], entry[1]))
        else:
            raise TypeError(f"{name}: each entry is a base URL or a (base_url, api_key) pair, not {entry!r}")
    return tuple(out)


def _optional_count(value: Any, name: str) -> int | None:
    return None if value is None else _count(value, name)


# An EventSource's least wait between two connections: a cap below it would let an endless run of
# empty answers reconnect in a loop.
MIN_RETRY_DELAY: Final = RECONNECT_FLOOR


def _retry_delay(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not MIN_RETRY_DELAY <= value < float("inf"):
        raise InvalidRequest(
            f"{name} must be a finite number of seconds of at least {MIN_RETRY_DELAY}, not {value!r}"
        )
    return float(value)


def _event_id(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
    if any(c in value for c in "\r\n\x00"):
        raise InvalidRequest(f"{name} holds CR, LF or NUL (no SSE id can, and it would inject a header)")
    return value


def _choice(*allowed: Any) -> Callable[[Any, str], Any]:
    def check(value: Any, name: str) -> Any:
        if value not in allowed:
            raise InvalidRequest(f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")
        return value

    return check


def _event_limit(value: Any, name: str) -> Any:
    return event_limit(value, "create_stream")


@dataclasses.dataclass(frozen=True, slots=True)
class Timeouts:
    """``Timeouts(total=None, *, connect=None, first_byte=None, idle=None)``: a request's four
    timeouts as one value, as ``httpx.Timeout`` and ``aiohttp.ClientTimeout`` group theirs. Give it
    as ``timeout=`` (to a client, a call, ``create_stream``): it sets ``timeout`` (``total``),
    ``connect_timeout``, ``first_byte_timeout`` and ``idle_timeout`` at once, each in seconds or
    None for no bound. Naming one of those options beside it is an error.

    It raises InvalidRequest for a value that is not a positive finite number or None.
    """

    total: float | None = None
    connect: float | None = dataclasses.field(default=None, kw_only=True)
    first_byte: float | None = dataclasses.field(default=None, kw_only=True)
    idle: float | None = dataclasses.field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        for name in ("total", "connect", "first_byte", "idle"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise InvalidRequest(
                    f"Timeouts({name}=...) takes a positive number of seconds or None, not {value!r}"
                )

    def options(self) -> dict[str, float | None]:
        """The four options it stands for, by name."""
        return {
            "timeout": self.total,
            "connect_timeout": self.connect,
            "first_byte_timeout": self.first_byte,
            "idle_timeout": self.idle,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Option:
    """One row of the table: ``name``; ``annotation``, the type as written in signatures;
    ``default``; ``where``: ``"both"`` (a client's default and per call), ``"call"`` (per call
    only) or ``"client"`` (the client's only); ``doc``; ``check(value, name)`` (None: checked
    where it is used, by the request setup)."""

    name: str
    annotation: str
    default: Any
    where: str
    doc: str
    check: Callable[[Any, str], Any] | None = None


OPTIONS: Final[tuple[Option, ...]] = (
    Option(
        "api",
        "str",
        "chat",
        BOTH,
        '"chat", "responses" or "messages": the API spoken, its default path and auth header',
        _choice(*NAMES),
    ),
    Option(
        "base_url",
        "str | None",
        None,
        BOTH,
        "default OPENAI_BASE_URL (ANTHROPIC_BASE_URL for messages), then the API's endpoint; http(s) only",
    ),
    Option(
        "api_key",
        "str | None",
        None,
        BOTH,
        "default OPENAI_API_KEY (ANTHROPIC_API_KEY); sent as Authorization: Bearer (x-api-key)",
    ),
    Option(
        "path", "str | None", None, BOTH, 'the API\'s own ("/chat/completions", "/responses", "/messages")'
    ),
    Option(
        "headers", "Mapping[str, str] | Sequence[str] | None", None, BOTH, 'a mapping or "Name: value" lines'
    ),
    Option(
        "timeout",
        "float | Timeouts | None",
        None,
        BOTH,
        "seconds for the whole call, the wait for a free connection included; a fastsse.Timeouts "
        "sets the four timeouts at once",
    ),
    Option("connect_timeout", "float | None", None, BOTH, "seconds to connect"),
    Option(
        "idle_timeout",
        "float | None",
        None,
        BOTH,
        "seconds without a byte from the server (keep-alive comments count) before giving up",
    ),
    Option(
        "first_byte_timeout",
        "float | None",
        None,
        BOTH,
        "seconds from the start of an attempt to the server's first byte (its status line), the "
        "connection included; None: idle_timeout holds from the start too",
    ),
    Option("proxy", "str | None", None, BOTH, 'a proxy URL, "" for none; None follows the environment'),
    Option("ca_bundle", "str | None", None, BOTH, "a PEM file of CAs to trust"),
    Option(
        "client_cert", "str | tuple[str, str] | None", None, BOTH, "a PEM certificate file, or (cert, key)"
    ),
    Option(
        "max_event_bytes",
        "int | None",
        None,
        BOTH,
        "bound on a line or an event (EventTooLarge past it); None: none",
        _event_limit,
    ),
    Option(
        "max_retries",
        "int",
        2,
        BOTH,
        "retries of a request that failed before any of its answer reached the caller (a refused or "
        "reset connection, a timeout, 408, 409, 429, 5xx); 0: none; $FASTSSE_MAX_RETRIES sets the "
        "default of a client made without it",
        _count,
    ),
    Option(
        "first_chunk_gate",
        "bool",
        False,
        BOTH,
        "hold the stream until its first content-bearing event, so an error event before it "
        "(overloaded_error, an error chunk, response.failed) is retried too",
        _bool,
    ),
    Option(
        "fallbacks",
        "Sequence[str | tuple[str, str]] | None",
        None,
        BOTH,
        "base URLs (or (base_url, api_key) pairs) tried in order after a retryable failure; "
        'the result\'s http["upstream"] names the one that answered',
        _fallbacks,
    ),
    Option(
        "resume",
        "bool",
        True,
        BOTH,
        'a Responses stream of a "background": true request cut after content resumes from its '
        "last sequence number (GET /responses/{id}?stream=true&starting_after=N)",
        _bool,
    ),
    Option(
        "raise_for_status",
        "bool",
        False,
        BOTH,
        "raise HTTPStatusError for an answer that is no stream (an HTTP error...) instead of "
        "returning it as the result",
        _bool,
    ),
    Option(
        "http2",
        "bool",
        False,
        BOTH,
        "HTTP/2 (prior knowledge on http://, ALPN on https://), requests multiplexed on shared "
        "connections; False: curl's defaults",
        _bool,
    ),
    Option(
        "timing",
        "bool",
        True,
        BOTH,
        'result["timing"], a fastsse.Timing; False drops the record and its cost '
        "(fastsse.create_stream defaults to False: the seed's contract, the answer and its verdict)",
        _bool,
    ),
    Option(
        "keep_text",
        "bool",
        True,
        BOTH,
        'False: format="relay" folds the facts (finish reasons, usage, tool calls, errors, the verdict) '
        'and not the text, so memory per answer is bounded; the result\'s text fields read "" and '
        '"text_chars" counts them (for a relay that forwards the bytes and does not read the answer)',
        _bool,
    ),
    Option(
        "format",
        "str | None",
        None,
        CALL,
        'None: the API\'s fold; "relay" (chat), "passthrough" (any API: its whole events unchanged), '
        '"events" (each Event) or "to-chat" / "to-responses" / "to-messages": on_chunk receives the '
        "bytes to send downstream",
    ),
    Option(
        "curl",
        "Any",
        None,
        CALL,
        "a pycurl.Curl of your own, used for the transfer and left open (needs the pycurl driver)",
    ),
    Option(
        "driver",
        "str | None",
        None,
        BOTH,
        '"compiled" (libcurl driven from C, Linux) or "pycurl"; None: $FASTSSE_DRIVER, else '
        "compiled where it loads. Per call only the client's own",
        _choice(None, "compiled", "pycurl"),
    ),
    Option(
        "max_connections",
        "int",
        100,
        CLIENT,
        "transfers at once; more requests wait in a queue (timing started - queued)",
        _positive_int,
    ),
)

# ``fastsse.EventSource`` / ``AsyncEventSource``: the transport rows of OPTIONS that apply to a GET
# of an event stream, then the source's own rows.
SOURCE_OPTIONS: Final[tuple[Option, ...]] = (
    Option(
        "last_event_id",
        "str | None",
        None,
        SOURCE,
        "the id of the last event you already have: sent as Last-Event-ID from the first "
        "connection on, and an event with that id is not delivered again",
        _event_id,
    ),
    Option(
        "max_reconnects",
        "int | None",
        None,
        SOURCE,
        "connections made after the first one; then the source ends (raising the last failure if "
        "the last connection failed); None: no limit, 0: never reconnect",
        _optional_count,
    ),
    Option(
        "max_retry_delay",
        "float",
        30.0,
        SOURCE,
        "seconds, the longest wait before a reconnection: the server's retry:, a Retry-After and "
        f"the backoff are all capped by it (at least {MIN_RETRY_DELAY})",
        _retry_delay,
    ),
)
SOURCE_SHARED: Final = (
    "headers", "timeout", "connect_timeout", "idle_timeout", "proxy", "ca_bundle", "client_cert",
    "max_event_bytes", "http2", "driver",
)  # fmt: skip
# What the shared rows mean for a source, where their text speaks of one call.
_SOURCE_DOCS: Final = {
    "timeout": "seconds for the whole source, every connection and every wait between them; "
    "TransportError (code 28) when it runs out",
    "idle_timeout": "seconds without a byte from the server (comments count) before the connection "
    "is given up and made again",
    "max_event_bytes": "bound on a line or an event (EventTooLarge past it, which ends the source); "
    "None: none, else at least 32",
}

BY_NAME: Final = {option.name: option for option in OPTIONS + SOURCE_OPTIONS}
CALL_NAMES: Final = tuple(option.name for option in OPTIONS if option.where != CLIENT)
CLIENT_NAMES: Final = tuple(option.name for option in OPTIONS if option.where != CALL)
SOURCE_NAMES: Final = SOURCE_SHARED + tuple(option.name for option in SOURCE_OPTIONS)


def check_options(given: Mapping[str, Any], names: Sequence[str], what: str) -> dict[str, Any]:
    """The options in ``given`` that were set (not ``DEFAULT``), each checked by its row's check.

    It raises TypeError for a name that is not one of ``names`` (naming ``what``, the call), and
    what a row's check raises (TypeError for a wrong type, InvalidRequest for a bad value).
    """
    if isinstance(given.get("timeout"), Timeouts):
        given = _expanded(given, names, what)
    out: dict[str, Any] = {}
    for name, value in given.items():
        if value is DEFAULT:
            continue
        if name not in names:
            raise TypeError(f"{what} got an unexpected keyword argument {name!r}")
        check = BY_NAME[name].check
        out[name] = value if check is None else check(value, name)
    return out


def _expanded(given: Mapping[str, Any], names: Sequence[str], what: str) -> dict[str, Any]:
    """``given`` with ``timeout=Timeouts(...)`` spread into the four options it stands for (those
    ``names`` knows; a bound set for one it does not is a TypeError)."""
    out = dict(given)
    for name, value in given["timeout"].options().items():
        if name != "timeout" and given.get(name, DEFAULT) is not DEFAULT:
            raise InvalidRequest(f"{what}: {name}= beside timeout=Timeouts(...): give it in the Timeouts")
        if name not in names:
            if value is not None:
                raise TypeError(f"{what} takes no {name}: leave it None in the Timeouts")
            continue
        out[name] = value
    return out


def client_options(given: Mapping[str, Any], what: str) -> tuple[RequestOptions, dict[str, Any]]:
    """A client constructor's keywords, checked: the ``RequestOptions`` its requests start from and
    the engine's own (``max_connections``, ``driver``). It raises what ``check_options`` raises."""
    options = check_options(given, CLIENT_NAMES, what)
    if "max_retries" not in options:
        retries = env_retries()
        if retries is not None:
            options["max_retries"] = retries
    engine: dict[str, Any] = {
        name: options.pop(name) for name in ("max_connections", "driver") if name in options
    }
    return RequestOptions(**options), engine


def env_retries() -> int | None:
    """``$FASTSSE_MAX_RETRIES``, the default ``max_retries`` of a client made without one (read
    when the client is made), or None when it is not set. It raises InvalidRequest for a value
    that is not a count."""
    value = os.environ.get("FASTSSE_MAX_RETRIES", "").strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit():
        raise InvalidRequest(f"FASTSSE_MAX_RETRIES must be a count (0, 1, 2...), not {value!r}")
    return int(value)


def with_self(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` as a method's: ``self`` first."""
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY), *signature.parameters.values()]
    return signature.replace(parameters=params)


def _signature(names: Sequence[str], leading: Sequence[inspect.Parameter]) -> inspect.Signature:
    params = list(leading)
    params += [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=DEFAULT, annotation=BY_NAME[name].annotation
        )
        for name in names
    ]
    return inspect.Signature(params, return_annotation="dict[str, Any]")


def call_signature() -> inspect.Signature:
    """``(input, /, on_chunk=None, *, api=DEFAULT, ...)``: the signature of every ``create_stream``."""
    return _signature(
        CALL_NAMES,
        [
            inspect.Parameter("input", inspect.Parameter.POSITIONAL_ONLY, annotation="Mapping[str, Any]"),
            inspect.Parameter(
                "on_chunk", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation="OnChunk | None"
            ),
        ],
    )


def client_signature() -> inspect.Signature:
    """``(*, api=DEFAULT, ...)``: the signature of ``Client(...)`` and ``AsyncClient(...)``."""
    return _signature(CLIENT_NAMES, []).replace(return_annotation="None")


def options_doc(where: str) -> str:
    """The options as text for a docstring: ``"call"`` for a ``create_stream``, ``"client"`` for a
    client's constructor."""
    names = CALL_NAMES if where == CALL else CLIENT_NAMES
    lines = [
        "",
        "    Options (keyword-only; DEFAULT means not given, so the client's value, else the default, holds):",
    ]
    for name in names:
        option = BY_NAME[name]
        scope = {BOTH: "", CALL: " [per call only]", CLIENT: " [client only]"}[option.where]
        lines.append(
            f"      ``{name}`` ({option.annotation}, default {option.default!r}){scope}: {option.doc}."
        )
    return "\n".join(lines) + "\n"


def source_signature() -> inspect.Signature:
    """``(url, /, *, headers=None, ..., max_retry_delay=30.0)``: the signature of
    ``EventSource(...)`` and ``AsyncEventSource(...)``, each option with its table default."""
    params = [inspect.Parameter("url", inspect.Parameter.POSITIONAL_ONLY, annotation="str")]
    params += [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=BY_NAME[name].default,
            annotation=BY_NAME[name].annotation,
        )
        for name in SOURCE_NAMES
    ]
    return inspect.Signature(params, return_annotation="None")


def source_doc() -> str:
    """The options of an event source as text for its docstring."""
    lines = ["", "    Options (keyword-only):"]
    for name in SOURCE_NAMES:
        option = BY_NAME[name]
        doc = _SOURCE_DOCS.get(name, option.doc)
        lines.append(f"      ``{name}`` ({option.annotation}, default {option.default!r}): {doc}.")
    return "\n".join(lines) + "\n"


def _default(name: str) -> Any:
    """The default of the row ``name``: the table is where defaults are written."""
    return BY_NAME[name].default


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RequestOptions:
    """What a request is prepared from (each field a row of ``OPTIONS``, its default the row's);
    immutable, so a client's defaults can be shared by every request it makes."""

    api: str = _default("api")
    base_url: str | None = _default("base_url")
    api_key: str | None = _default("api_key")
    path: str | None = _default("path")
    headers: Mapping[str, str] | Sequence[str] | None = _default("headers")
    timeout: float | None = _default("timeout")
    connect_timeout: float | None = _default("connect_timeout")
    idle_timeout: float | None = _default("idle_timeout")
    first_byte_timeout: float | None = _default("first_byte_timeout")
    proxy: str | None = _default("proxy")
    ca_bundle: str | None = _default("ca_bundle")
    client_cert: str | tuple[str, str] | None = _default("client_cert")
    max_event_bytes: int | None = _default("max_event_bytes")
    max_retries: int = _default("max_retries")
    first_chunk_gate: bool = _default("first_chunk_gate")
    fallbacks: tuple[tuple[str, str | None], ...] | None = _default("fallbacks")
    resume: bool = _default("resume")
    raise_for_status: bool = _default("raise_for_status")
    http2: bool = _default("http2")
    timing: bool = _default("timing")
    keep_text: bool = _default("keep_text")

    def replace(self, overrides: Mapping[str, Any], /) -> RequestOptions:
        """These options with ``overrides`` (a request's own, checked) laid on top.

        It raises TypeError for a name that is not a field.
        """
        if not overrides:
            return self
        unknown = [name for name in overrides if name not in _FIELD_NAMES]
        if unknown:
            raise TypeError(f"unknown request option {unknown[0]!r}")
        # a copy through the fields' slots (dataclasses.replace, which calls __init__ with every
        # field, costs 2-3 times as much: one per request that sets an option of its own)
        new = object.__new__(type(self))
        for set_slot, value in zip(_SLOT_SETTERS, _field_values(self), strict=True):
            set_slot(new, value)
        for name, value in overrides.items():
            object.__setattr__(new, name, value)
        return new

    def as_dict(self) -> dict[str, Any]:
        """The options as keyword arguments."""
        return {name: getattr(self, name) for name in REQUEST_FIELDS}


REQUEST_FIELDS: Final = tuple(field.name for field in dataclasses.fields(RequestOptions))
_FIELD_NAMES: Final = frozenset(REQUEST_FIELDS)
_field_values: Final = operator.attrgetter(*REQUEST_FIELDS)
_SLOT_SETTERS: Final = tuple(getattr(RequestOptions, name).__set__ for name in REQUEST_FIELDS)


class _RequestKeywords(TypedDict, total=False):
    """The keywords a call and a client share (the rows of ``"both"`` before ``driver``)."""

    api: str
    base_url: str | None
    api_key: str | None
    path: str | None
    headers: Mapping[str, str] | Sequence[str] | None
    timeout: float | Timeouts | None
    connect_timeout: float | None
    idle_timeout: float | None
    first_byte_timeout: float | None
    proxy: str | None
    ca_bundle: str | None
    client_cert: str | tuple[str, str] | None
    max_event_bytes: int | None
    max_retries: int
    first_chunk_gate: bool
    fallbacks: Sequence[str | tuple[str, str]] | None
    resume: bool
    raise_for_status: bool
    http2: bool
    timing: bool
    keep_text: bool


class CallOptions(_RequestKeywords, total=False):
    """The keywords of every ``create_stream``, for type checkers (``**options: Unpack[CallOptions]``)."""

    format: str | None
    curl: Any
    driver: str | None


class ClientOptions(_RequestKeywords, total=False):
    """The keywords of ``Client(...)`` and ``AsyncClient(...)``, for type checkers."""

    driver: str | None
    max_connections: int


class SourceOptions(TypedDict, total=False):
    """The keywords of ``EventSource(...)`` and ``AsyncEventSource(...)``, for type checkers."""

    headers: Mapping[str, str] | Sequence[str] | None
    timeout: float | Timeouts | None
    connect_timeout: float | None
    idle_timeout: float | None
    proxy: str | None
    ca_bundle: str | None
    client_cert: str | tuple[str, str] | None
    max_event_bytes: int | None
    http2: bool
    driver: str | None
    last_event_id: str | None
    max_reconnects: int | None
    max_retry_delay: float

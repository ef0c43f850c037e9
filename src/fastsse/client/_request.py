"""Request setup for one streaming request: an API's POST (``prepare``) or an event stream's GET
(``prepare_get``, what an EventSource connects with). The first of three jobs, each a module:

- here, ``prepare(input, ...) -> RequestSpec`` validates everything before a byte is sent (URL
  scheme, header injection, the auth rule, timeouts, TLS and proxy options) and serialises the body
  once; the spec is immutable and may be reused for any number of transfers. ``prepare_get(url,
  ...)`` is the same for a GET of any event stream (no body, ``api="events"``). ``Preparer(options)``
  is ``prepare`` for a client: the environment read and the client's own options checked once.
- ``_curlopts``: ``apply(curl, spec, response)`` sets a spec's options on an easy handle;
  ``reset``, ``release`` and ``apply_body`` for handles that are reused.
- ``_response``: ``Response(spec, stream)``, the handle's header and write sink, and
  ``response.finish(code, message)``, which turns the transfer into the result dict or raises.

Shared by ``create_stream`` and the many-streams engine, so the two can never disagree. Nothing
here waits: driving the transfer (``perform()``, a wait loop, an event loop) is the caller's.
"""

from __future__ import annotations

import functools
import math
import operator
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from .._errors import InvalidRequest
from .._formats import API_FORMATS, ApiFormat, api_format
from ._options import RequestOptions

# Only http and https, for the request and for any redirect a caller's handle may follow: other
# schemes read local files (file://) or send chosen bytes to any port (gopher://, dict://).
SCHEMES = ("http", "https")


PROTOCOLS_STR = "http,https"


PROXY_SCHEMES = ("http", "https", "socks4", "socks4a", "socks5", "socks5h")


# Not advertised: a compressed event stream is only as live as the server's flush of its
# compressor (many buffer it), and decoding costs CPU on every stream. Whatever arrives encoded
# anyway (a proxy that compresses) is still decoded by curl: setting ACCEPT_ENCODING to "identity"
# turns curl's decoder on for gzip, deflate and br (and zstd where built), and an encoding curl
# cannot decode fails the transfer with CURLE_BAD_CONTENT_ENCODING (61) instead of handing the
# compressed bytes to the parser.
ACCEPT_ENCODING = "identity"


# RFC 9110 token characters: a header name is one token.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")


_FORBIDDEN_IN_VALUE = re.compile(r"[\r\n\x00]")


_CONTROL = re.compile(r"[\x00-\x20\x7f]")


# Set by fastsse from the body it sends: a caller's value would desynchronise the framing.
_RESERVED = frozenset({"content-length", "transfer-encoding"})


@dataclass(frozen=True)
class RequestSpec:
    """A validated request, built by ``prepare``; immutable, so one spec may serve many transfers.

    ``url`` is what curl gets; ``display_url`` is the same with any ``user:password@`` replaced, for
    messages. ``headers`` are curl ``HTTPHEADER`` lines (Authorization included, so never log them;
    a ``Last-Event-ID`` that is not ASCII is a line of UTF-8 bytes, as pycurl takes no other).
    Timeouts are whole milliseconds (0: none); ``idle_timeout`` and ``first_byte_timeout`` are
    seconds (None: none), enforced by the wait loop against ``Response.last_activity`` (set when
    the attempt starts, moved by every header line and read), not by curl.
    """

    url: str
    display_url: str
    body: bytes
    headers: tuple[str | bytes, ...]
    timeout_ms: int = 0
    connect_timeout_ms: int = 0
    idle_timeout: float | None = None
    first_byte_timeout: float | None = None
    proxy: str | None = None
    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    max_event_bytes: int | None = None
    api: str = "chat"  # which fused stream reads the answer (fastsse._formats)
    raise_for_status: bool = False
    http2: bool = False
    method: str = "POST"  # "GET" for a resume or an event stream's connection (no body)

    def __repr__(self) -> str:  # the headers hold the key: never print them
        if self.method == "GET":
            return f"RequestSpec(GET {self.display_url!r})"
        return f"RequestSpec(url={self.display_url!r}, {len(self.body)} body bytes)"

    def with_body(self, body: bytes, /) -> RequestSpec:
        """This spec with another body (a copy; ``dataclasses.replace`` costs several times more)."""
        spec = object.__new__(RequestSpec)
        fields = spec.__dict__
        fields.update(self.__dict__)
        fields["body"] = body
        return spec

    @functools.cached_property
    def transport(self) -> tuple[Any, ...]:
        """What ``apply`` sets on a handle beside the body and the callbacks: two specs with equal
        transports leave a handle in the same state, so a pooled handle only takes the new body.
        Built once per spec, and ``with_body`` copies carry their template's."""
        return (
            self.url,
            self.headers,
            self.timeout_ms,
            self.connect_timeout_ms,
            self.proxy,
            self.ca_bundle,
            self.client_cert,
            self.client_key,
            self.http2,
            self.method,
        )

    def resumed(self, response_id: str, after: int, /) -> RequestSpec:
        """The GET that resumes a background Responses stream after sequence number ``after``
        (``{url}/{id}?stream=true&starting_after=N``), with this spec's headers and options."""
        spec = self.with_body(b"")
        url = f"{self.url.rstrip('/')}/{quote(response_id, safe='')}?stream=true&starting_after={after}"
        fields = spec.__dict__
        fields.pop("transport", None)  # a cached property of the POST: built anew
        fields["url"], fields["display_url"], fields["method"] = url, redact(url), "GET"
        return spec


def redact(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def _check_url(url: str, what: str) -> str:
    if not isinstance(url, str):
        raise TypeError(f"{what} must be a str, not {type(url).__name__}")
    if _CONTROL.search(url):
        raise InvalidRequest(f"{what} holds a space or a control character: {redact(url)!r}")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidRequest(f"{what} is not a URL: {redact(url)!r} ({exc})") from None
    if parts.scheme.lower() not in SCHEMES:
        raise InvalidRequest(f"{what} must be an http:// or https:// URL, not {redact(url)!r}")
    if not parts.hostname:
        raise InvalidRequest(f"{what} has no host: {redact(url)!r}")
    return url


def _check_header(name: Any, value: Any) -> str:
    if not isinstance(name, str) or not isinstance(value, str):
        raise TypeError(f"header names and values must be str, not {name!r}: {type(value).__name__}")
    if not _TOKEN.match(name):
        raise InvalidRequest(
            f"header name {name!r} is not an HTTP token (no colon, space or control character)"
        )
    if _FORBIDDEN_IN_VALUE.search(value):
        raise InvalidRequest(f"header {name!r}: its value holds CR, LF or NUL (header injection)")
    value = value.strip(" \t")
    if not value:
        raise InvalidRequest(f"header {name!r} has no value")
    if not value.isascii():
        raise InvalidRequest(f"header {name!r}: its value must be ASCII")
    if name.lower() in _RESERVED:
        raise InvalidRequest(f"header {name!r} is set by fastsse from the request; it cannot be given")
    return f"{name}: {value}"


def _header_pairs(headers: Mapping[str, str] | Sequence[str] | None) -> list[tuple[Any, Any]]:
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return list(headers.items())
    if isinstance(headers, (str, bytes)):
        raise TypeError("headers must be a mapping or a sequence of 'Name: value' strings")
    pairs: list[tuple[Any, Any]] = []
    for line in headers:
        if not isinstance(line, str):
            raise TypeError(f"header lines must be str, not {type(line).__name__}")
        name, colon, value = line.partition(":")
        if not colon:
            raise InvalidRequest(f"header line {line[:40]!r} is not 'Name: value'")
        pairs.append((name, value))
    return pairs


def _milliseconds(value: Any, what: str) -> int:
    """Seconds to whole milliseconds, rounded up; None is 0 (no limit). A budget that reached zero
    must not turn into "wait forever", so ``<= 0`` is an error rather than curl's 0."""
    if value is None:
        return 0
    return math.ceil(_seconds(value, what) * 1000)


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidRequest(
            f"{what} must be a finite number of seconds > 0 (or None for none), not {value!r}"
        )
    return float(value)


def prepare(input: Mapping[str, Any], options: RequestOptions | None = None, /, **kwargs: Any) -> RequestSpec:
    """``prepare(input, options=None, /, **kwargs) -> RequestSpec``: validate a streaming request
    sent with ``options`` (a ``RequestOptions``; ``kwargs`` are laid on top, or stand alone) and build
    its ``RequestSpec``; nothing is sent. The rules are ``_prepare``'s.

    It raises TypeError for an unknown option, and what ``_prepare`` raises.
    """
    if options is None:
        options = RequestOptions(**kwargs)
    elif kwargs:
        options = options.replace(kwargs)
    return _prepare(input, options)


def environment() -> dict[str, str]:
    """The variables ``prepare`` reads (every API's base URL and key variable), as they are now."""
    names = {name for fmt in API_FORMATS.values() for name in (fmt.base_url_env, fmt.api_key_env) if name}
    return {name: value for name in names if (value := os.environ.get(name)) is not None}


# The options a RequestSpec is made from; the others (retries, fallbacks, timing...) are the
# engine's, read from the options themselves.
SPEC_OPTIONS = (
    "api", "base_url", "api_key", "path", "headers", "timeout", "connect_timeout", "idle_timeout",
    "first_byte_timeout", "proxy", "ca_bundle", "client_cert", "max_event_bytes", "raise_for_status",
    "http2",
)  # fmt: skip
_spec_options = operator.attrgetter(*SPEC_OPTIONS)


# How many specs of a request's own options (a gateway's forwarded headers, a route's path) a
# Preparer keeps; past them, the others are built for each request.
SPEC_CACHE = 64
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _spec_key(changed: list[tuple[Any, Any]], *, dicts: bool = True) -> tuple[Any, ...] | None:
    """A key for the options a request set (``(position or name, value)`` of each), equal only
    when they make the same spec: the same type and value, or (``dicts``) a dict of str headers
    with the same items in the same order; None when a value is of another kind (not kept)."""
    key: list[Any] = []
    for index, value in changed:
        kind = type(value)
        if kind is dict and dicts:
            items = tuple(value.items())
            if not all(type(name) is str and type(text) is str for name, text in items):
                return None
            key.append((index, kind, items))
        elif kind in _PLAIN:
            key.append((index, kind, value))
        else:
            return None
    return tuple(key)


class Preparer:
    """``prepare`` for a client: the environment's base URL and key variables are read once, when
    the client is made (as the openai SDK does), and the client's own options are checked once,
    so a request without options of its own costs its body's serialisation (``os.environ.get``
    alone costs more than that). ``preparer(input, options=None) -> RequestSpec``; a request's
    own ``options`` are checked against the same environment: when every option a spec is made
    from is the very object of the client's (a request that sets only ``timing``, ``max_retries``
    and their kind) its spec is the client's; else the spec of the options it set is kept (the
    first ``SPEC_CACHE`` kinds: plain values and dicts of str headers), so the next request that
    sets the same ones costs its body alone. A request's options that fail their checks are never
    kept: they raise each time. It raises what ``prepare`` raises (at construction for the
    client's options)."""

    __slots__ = ("_environ", "_fmt", "_merged", "_options", "_spec_options", "_specs", "_template")

    def __init__(self, options: RequestOptions, /) -> None:
        self._options = options
        self._environ = environment()
        self._template = _prepare({}, options, environ=self._environ)
        self._template.transport  # noqa: B018 - built now, so every request's copy carries it
        self._fmt = api_format(options.api)
        self._spec_options = _spec_options(options)
        self._specs: dict[tuple[Any, ...], tuple[RequestSpec, ApiFormat]] = {}
        self._merged: dict[tuple[Any, ...], RequestOptions] = {}

    def merged(self, defaults: RequestOptions, given: Mapping[str, Any], /) -> RequestOptions:
        """``defaults.replace(given)``: a request's own options (names checked, values not yet)
        on top of the client's. When ``defaults`` are this preparer's and every value is a plain
        one (str, int, float, bool, None), the result is kept for the next request that sets the
        same (the first ``SPEC_CACHE`` kinds; the same type and value: True is not 1), so the
        gateway's per-call ``timing=False`` costs one lookup. The values are checked by
        ``__call__`` each time, kept or not."""
        if defaults is not self._options:
            return defaults.replace(given)
        # plain values only: a dict (headers) kept here would be the caller's, which it may change
        key = _spec_key(list(given.items()), dicts=False)
        kept = None if key is None else self._merged.get(key)
        if kept is None:
            kept = defaults.replace(given)
            if key is not None and len(self._merged) < SPEC_CACHE:
                self._merged[key] = kept
        return kept

    def __call__(self, input: Mapping[str, Any], options: RequestOptions | None = None, /) -> RequestSpec:
        if not isinstance(input, Mapping):
            raise TypeError(f"input must be a mapping (the request body), not {type(input).__name__}")
        template, fmt = self._template, self._fmt
        if options is not None and options is not self._options:
            # identity, not equality: an equal value of another type (True for 1) is checked anew
            shaped = _spec_options(options)
            if not all(map(operator.is_, shaped, self._spec_options)):
                template, fmt = self._other(options, shaped)
        return template.with_body(fmt.body(input))

    def _other(self, options: RequestOptions, shaped: tuple[Any, ...]) -> tuple[RequestSpec, ApiFormat]:
        """The spec (without its body) and the format of ``options``, whose spec options
        (``shaped``) are not all the client's."""
        mine = self._spec_options
        key = _spec_key([(i, value) for i, value in enumerate(shaped) if value is not mine[i]])
        kept = None if key is None else self._specs.get(key)
        if kept is None:
            template = _prepare({}, options, environ=self._environ)
            template.transport  # noqa: B018 - as the client's template
            kept = (template, api_format(options.api))
            if key is not None and len(self._specs) < SPEC_CACHE:
                self._specs[key] = kept
        return kept


def _prepare(
    input: Mapping[str, Any], options: RequestOptions, /, *, environ: Mapping[str, str] | None = None
) -> RequestSpec:
    """Validate a streaming request sent with ``options`` and build its ``RequestSpec``; nothing is
    sent. ``environ`` (default ``os.environ``) is where the base URL and key variables are read.

    ``api`` (``"chat"``, ``"responses"``, ``"messages"``) picks the default ``path`` and the way the
    key is sent (``fastsse._formats``). ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY``, then the OpenAI endpoint (for Messages: ``ANTHROPIC_API_KEY`` and the
    Anthropic endpoint). The body is ``input`` with ``"stream": true`` forced. Auth rule: ``api_key``
    becomes ``Authorization: Bearer <key>`` (Messages: ``x-api-key: <key>`` beside
    ``anthropic-version``); that header in ``headers`` replaces the key taken from the environment,
    and passing both it and ``api_key=`` is an error (two credentials, one header).

    It raises InvalidRequest (a ValueError) if the URL is not http(s) or holds a control character, a header name is
    not a token or a value holds CR, LF or NUL (or is empty or not ASCII), a header is one fastsse
    sets itself (Content-Length, Transfer-Encoding), both ``api_key`` and an Authorization
    header are given, a timeout is ``<= 0`` or not finite, or ``proxy`` has an unknown scheme;
    TypeError for arguments of the wrong type (and orjson's for a body it cannot serialise).
    """
    if not isinstance(input, Mapping):
        raise TypeError(f"input must be a mapping (the request body), not {type(input).__name__}")
    fmt = api_format(options.api)
    base_url, api_key, path = options.base_url, options.api_key, options.path
    if environ is None:
        environ = os.environ
    env_base = environ.get(fmt.base_url_env) if fmt.base_url_env else None
    if base_url is not None:
        base = _check_url(base_url, "base_url")
    elif env_base:
        base = _check_url(env_base, f"base_url (from {fmt.base_url_env})")
    else:
        base = fmt.base_url
    if path is None:
        path = fmt.path
    if not isinstance(path, str) or _CONTROL.search(path):
        raise InvalidRequest(f"path must be a str without spaces or control characters, not {path!r}")
    url = _check_url(base.rstrip("/") + "/" + path.lstrip("/"), "base_url + path")

    given = [_check_header(name, value) for name, value in _header_pairs(options.headers)]
    auth = "x-api-key" if fmt.name == "messages" else "Authorization"
    has_auth = any(line[: len(auth) + 1].lower() == auth.lower() + ":" for line in given)
    if api_key and has_auth:
        raise InvalidRequest(f"pass either api_key or an {auth} header, not both")
    key = api_key if api_key is not None else (None if has_auth else environ.get(fmt.api_key_env))
    if key:
        if not isinstance(key, str):
            raise TypeError(f"api_key must be a str, not {type(key).__name__}")
        if _FORBIDDEN_IN_VALUE.search(key):
            raise InvalidRequest("api_key holds CR, LF or NUL (header injection)")
        if not key.isascii() or not key.strip():
            raise InvalidRequest("api_key must be ASCII text and not only blanks")
    else:
        key = None
    # A header the caller gives replaces fastsse's default of that name (anthropic-version,
    # Accept, ...) rather than going out twice. The key is checked above, before it reaches a line.
    named = {line.split(":", 1)[0].lower() for line in given}
    lines = [line for line in fmt.headers(key) if line.split(":", 1)[0].lower() not in named]
    lines += given

    return RequestSpec(
        url=url,
        display_url=redact(url),
        body=fmt.body(input),
        api=fmt.name,
        headers=tuple(lines),
        raise_for_status=options.raise_for_status,
        **_transport(options),
        max_event_bytes=options.max_event_bytes,
        http2=options.http2,
    )


def _transport(options: RequestOptions) -> dict[str, Any]:
    """The ``RequestSpec`` fields of the transport options, checked (what ``_prepare`` and
    ``prepare_get`` raise for them)."""
    ca_bundle, idle, first_byte = options.ca_bundle, options.idle_timeout, options.first_byte_timeout
    cert, cert_key = _check_proxy_and_files(options.proxy, ca_bundle, options.client_cert)
    return {
        "timeout_ms": _milliseconds(options.timeout, "timeout"),
        "connect_timeout_ms": _milliseconds(options.connect_timeout, "connect_timeout"),
        "idle_timeout": None if idle is None else _seconds(idle, "idle_timeout"),
        "first_byte_timeout": None if first_byte is None else _seconds(first_byte, "first_byte_timeout"),
        "proxy": options.proxy,
        "ca_bundle": None if ca_bundle is None else os.fspath(ca_bundle),
        "client_cert": None if cert is None else os.fspath(cert),
        "client_key": None if cert_key is None else os.fspath(cert_key),
    }


def _check_proxy_and_files(
    proxy: Any, ca_bundle: Any, client_cert: Any
) -> tuple[str | os.PathLike[str] | None, str | os.PathLike[str] | None]:
    """``(cert, key)`` of ``client_cert``, once ``proxy`` and the file options are checked."""
    if proxy is not None:
        if not isinstance(proxy, str):
            raise TypeError(f"proxy must be a str, not {type(proxy).__name__}")
        if proxy and (_CONTROL.search(proxy) or urlsplit(proxy).scheme.lower() not in PROXY_SCHEMES):
            raise InvalidRequest(
                f"proxy must be an http, https or socks URL, or '' for none: {redact(proxy)!r}"
            )
    cert, cert_key = (client_cert, None) if not isinstance(client_cert, tuple) else client_cert
    for what, file in (("ca_bundle", ca_bundle), ("client_cert", cert), ("client_cert key", cert_key)):
        if file is not None and not isinstance(file, (str, os.PathLike)):
            raise TypeError(f"{what} must be a path, not {type(file).__name__}")
    return cert, cert_key


# What an event stream's GET asks for: the stream, and no cached copy of it (WHATWG's EventSource
# sends the same two). A caller's header of either name replaces ours.
EVENTS_HEADERS = ("Accept: text/event-stream", "Cache-Control: no-cache")


def check_event_id(value: Any, what: str = "last_event_id") -> str:
    """``value`` as an id that can be sent in ``Last-Event-ID``: a str without CR, LF or NUL (what
    an ``id:`` field can never hold either). It raises TypeError for a non-str, InvalidRequest
    for CR, LF or NUL."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if _FORBIDDEN_IN_VALUE.search(value):
        raise InvalidRequest(f"{what} holds CR, LF or NUL (no SSE id can, and it would inject a header)")
    return value


def prepare_get(
    url: str,
    /,
    *,
    headers: Mapping[str, str] | Sequence[str] | None = None,
    last_event_id: str = "",
    timeout: float | None = None,
    connect_timeout: float | None = None,
    idle_timeout: float | None = None,
    proxy: str | None = None,
    ca_bundle: str | None = None,
    client_cert: str | tuple[str, str] | None = None,
    max_event_bytes: int | None = None,
    http2: bool = False,
) -> RequestSpec:
    """``prepare_get(url, /, *, headers=None, last_event_id="", timeout=None, ...) -> RequestSpec``:
    validate a GET of the event stream at ``url`` and build its spec (``method="GET"``, no body,
    ``api="events"``, ``raise_for_status``); nothing is sent. The headers are ``Accept:
    text/event-stream`` and ``Cache-Control: no-cache`` (a caller's header of either name replaces
    ours), the caller's, and ``Last-Event-ID`` when ``last_event_id`` is not empty (UTF-8, as WHATWG
    sends it). The answer is read by ``Response`` as an EventSource must: a 200 that says
    ``text/event-stream`` is the stream, anything else is no stream.

    It raises InvalidRequest (a ValueError) if the URL is not http(s), a header is malformed or is
    one fastsse sets (Content-Length, Transfer-Encoding, Last-Event-ID: pass ``last_event_id``),
    ``last_event_id`` holds CR, LF or NUL, a timeout is ``<= 0``, or ``proxy`` has an unknown
    scheme; TypeError for arguments of the wrong type.
    """
    url = _check_url(url, "url")
    given = [_check_header(name, value) for name, value in _header_pairs(headers)]
    named = {line.split(":", 1)[0].lower() for line in given}
    if "last-event-id" in named:
        raise InvalidRequest("the Last-Event-ID header is sent from last_event_id=; pass it there")
    lines: list[str | bytes] = [line for line in EVENTS_HEADERS if line.split(":", 1)[0].lower() not in named]
    lines += given
    check_event_id(last_event_id)
    if last_event_id:
        line = f"Last-Event-ID: {last_event_id}"
        lines.append(line if line.isascii() else line.encode())
    return RequestSpec(
        url=url,
        display_url=redact(url),
        body=b"",
        api="events",
        headers=tuple(lines),
        raise_for_status=True,
        **_transport(
            RequestOptions(
                timeout=timeout,
                connect_timeout=connect_timeout,
                idle_timeout=idle_timeout,
                proxy=proxy,
                ca_bundle=ca_bundle,
                client_cert=client_cert,
            )
        ),
        max_event_bytes=max_event_bytes,
        http2=http2,
        method="GET",
    )

"""Request setup and response classification for one streaming request over a curl easy handle: an
API's POST (``prepare``) or an event stream's GET (``prepare_get``, what an EventSource connects with).

The one place that decides what is sent and what an answer means, shared by ``create_stream`` and
the many-streams engine, so the two can never disagree:

- ``prepare(input, ...) -> RequestSpec`` validates everything before a byte is sent (URL scheme,
  header injection, the auth rule, timeouts, TLS and proxy options) and serialises the body once;
  the spec is immutable and may be reused for any number of transfers. ``prepare_get(url, ...)``
  is the same for a GET of any event stream (no body, ``api="events"``).
- ``apply(curl, spec, response)`` sets the spec's options on an easy handle (new, pooled or the
  caller's), for ``perform()`` or for a ``CurlMulti`` alike; ``reset(curl, spec)`` clears what
  ``apply`` set (the credentials above all) before the handle is given back to its owner. A
  client's own pooled handle is only ``release``-d (body and callbacks dropped) and its next
  request with the same ``spec.transport`` takes ``apply_body``: five options, not twenty.
- ``Preparer(options)`` is ``prepare`` for a client: the environment read and the client's own
  options checked once, when the client is made.
- ``Response(spec, stream)`` is the handle's header and write sink: it tracks the status line and
  the headers that matter, feeds an event stream to ``stream.write`` and keeps a bounded copy of any
  other body; ``response.finish(code, message)`` turns the transfer's curl code into the result
  dict, or raises (TransportError, EventTooLarge, whatever ``on_chunk`` raised).

Nothing here waits: driving the transfer (``perform()``, a wait loop, an event loop) is the caller's.
"""

from __future__ import annotations

import email.utils
import functools
import importlib
import math
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import orjson

from .._errors import HTTPStatusError, InvalidRequest, TransportError, too_large
from .._formats import API_FORMATS, api_format
from ._options import PREPARE_FIELDS, RequestOptions
from ._whole import as_stream

DEFAULT_BASE_URL = "https://api.openai.com/v1"
ERROR_BODY_LIMIT = 1 << 20  # bytes of an error body (or foreign body) kept for the result

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
_BLANK = b" \t\r\n"

_monotonic = time.monotonic

# libcurl's CURL_WRITEFUNC_PAUSE (part of its ABI): the write callback did not take the bytes;
# curl keeps them and hands them over again once the transfer is resumed.
WRITEFUNC_PAUSE = 0x10000001

# Headers kept per answer (a server sending thousands must not grow the result with them).
_MAX_HEADERS = 256

# Leading blank bytes of an untyped body kept as they came; past this they are squeezed.
_HEAD_LIMIT = 1 << 16

# What curl says about a failure it gives no message for (its code, our words).
_CURL_WORDS = {
    23: "the answer could not be written (the reader stopped)",
    28: "timed out",
    56: "the connection broke while the answer was being received",
    61: "the answer came in a content encoding curl cannot decode",
    63: "the answer was larger than the allowed size",
    100: "the answer's headers (or another part of it) passed curl's size limit (a response header of "
    "about 100 KiB or more, or headers of about 300 KiB in all)",
}


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
    return _prepare(input, **_prepared(options))


def _prepared(options: RequestOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in PREPARE_FIELDS}


def environment() -> dict[str, str]:
    """The variables ``prepare`` reads (every API's base URL and key variable), as they are now."""
    names = {name for fmt in API_FORMATS.values() for name in (fmt.base_url_env, fmt.api_key_env) if name}
    return {name: value for name in names if (value := os.environ.get(name)) is not None}


class Preparer:
    """``prepare`` for a client: the environment's base URL and key variables are read once, when
    the client is made (as the openai SDK does), and the client's own options are checked once,
    so a request without options of its own costs its body's serialisation (``os.environ.get``
    alone costs more than that). ``preparer(input, options=None) -> RequestSpec``; a request's
    own ``options`` are checked per request against the same environment. It raises what
    ``prepare`` raises (at construction for the client's options)."""

    __slots__ = ("_environ", "_fmt", "_options", "_template")

    def __init__(self, options: RequestOptions, /) -> None:
        self._options = options
        self._environ = environment()
        self._template = _prepare({}, environ=self._environ, **_prepared(options))
        self._template.transport  # noqa: B018 - built now, so every request's copy carries it
        self._fmt = api_format(options.api)

    def __call__(self, input: Mapping[str, Any], options: RequestOptions | None = None, /) -> RequestSpec:
        if options is not None and options is not self._options:
            return _prepare(input, environ=self._environ, **_prepared(options))
        if not isinstance(input, Mapping):
            raise TypeError(f"input must be a mapping (the request body), not {type(input).__name__}")
        return self._template.with_body(self._fmt.body(input))


def _prepare(
    input: Mapping[str, Any],
    /,
    *,
    api: str = "chat",
    base_url: str | None = None,
    api_key: str | None = None,
    path: str | None = None,
    headers: Mapping[str, str] | Sequence[str] | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    idle_timeout: float | None = None,
    first_byte_timeout: float | None = None,
    proxy: str | None = None,
    ca_bundle: str | None = None,
    client_cert: str | tuple[str, str] | None = None,
    max_event_bytes: int | None = None,
    raise_for_status: bool = False,
    http2: bool = False,
    environ: Mapping[str, str] | None = None,
) -> RequestSpec:
    """Validate a streaming request and build its ``RequestSpec``; nothing is sent.

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
    fmt = api_format(api)
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

    given = [_check_header(name, value) for name, value in _header_pairs(headers)]
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
        raise_for_status=raise_for_status,
        **_transport(
            timeout, connect_timeout, idle_timeout, first_byte_timeout, proxy, ca_bundle, client_cert
        ),
        max_event_bytes=max_event_bytes,
        http2=http2,
    )


def _transport(
    timeout: Any,
    connect_timeout: Any,
    idle_timeout: Any,
    first_byte_timeout: Any,
    proxy: Any,
    ca_bundle: Any,
    client_cert: Any,
) -> dict[str, Any]:
    """The ``RequestSpec`` fields of the transport options, checked (what ``_prepare`` and
    ``prepare_get`` raise for them)."""
    cert, cert_key = _check_proxy_and_files(proxy, ca_bundle, client_cert)
    return {
        "timeout_ms": _milliseconds(timeout, "timeout"),
        "connect_timeout_ms": _milliseconds(connect_timeout, "connect_timeout"),
        "idle_timeout": None if idle_timeout is None else _seconds(idle_timeout, "idle_timeout"),
        "first_byte_timeout": None
        if first_byte_timeout is None
        else _seconds(first_byte_timeout, "first_byte_timeout"),
        "proxy": proxy,
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
        **_transport(timeout, connect_timeout, idle_timeout, None, proxy, ca_bundle, client_cert),
        max_event_bytes=max_event_bytes,
        http2=http2,
        method="GET",
    )


def import_pycurl() -> Any:
    """The pycurl module; ImportError with the install hint if it is missing."""
    module = sys.modules.get("pycurl")  # the common case, without the import machinery
    if module is not None:
        return module
    try:
        # import_module: pycurl ships no type stubs, and every use here is dynamic anyway
        return importlib.import_module("pycurl")
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "create_stream needs pycurl: pip install 'fastsse-cython[curl]' (or pip install pycurl)",
            name="pycurl",  # lets the command line recognise it and print one line, not a traceback
        ) from exc


def _set_protocols(curl: Any, pycurl: Any, protocols: str | None) -> None:
    """PROTOCOLS_STR where pycurl knows it (libcurl >= 7.85), else the older bit masks."""
    if hasattr(pycurl, "PROTOCOLS_STR"):
        curl.setopt(pycurl.PROTOCOLS_STR, protocols or "all")
        curl.setopt(pycurl.REDIR_PROTOCOLS_STR, protocols or "http,https,ftp,ftps")
        return
    mask = pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS
    curl.setopt(pycurl.PROTOCOLS, mask if protocols else pycurl.PROTO_ALL)
    redir = mask | pycurl.PROTO_FTP | pycurl.PROTO_FTPS  # libcurl's default for redirects
    curl.setopt(pycurl.REDIR_PROTOCOLS, mask if protocols else redir)


def apply(curl: Any, spec: RequestSpec, response: Response) -> None:
    """Set ``spec``'s options and ``response``'s callbacks on the easy handle ``curl``.

    Works for ``curl.perform()`` and for a handle added to a ``CurlMulti``. Options the caller set
    on its own handle and ``spec`` does not touch (VERBOSE, SHARE, ...) are kept; a caller's
    FOLLOWLOCATION still only reaches http(s). Call ``reset(curl, spec)`` after the transfer.
    """
    pycurl = import_pycurl()
    curl.setopt(pycurl.URL, spec.url)
    _set_protocols(curl, pycurl, PROTOCOLS_STR)
    if spec.method == "GET":
        curl.setopt(pycurl.HTTPGET, 1)
    else:
        curl.setopt(pycurl.POST, 1)
        curl.setopt(pycurl.POSTFIELDS, spec.body)
        curl.setopt(pycurl.POSTFIELDSIZE, len(spec.body))
    curl.setopt(pycurl.HTTPHEADER, list(spec.headers))
    curl.setopt(pycurl.ACCEPT_ENCODING, ACCEPT_ENCODING)
    curl.setopt(pycurl.WRITEFUNCTION, response.write)
    curl.setopt(pycurl.HEADERFUNCTION, response.header)
    curl.setopt(pycurl.NOSIGNAL, 1)
    curl.setopt(pycurl.TIMEOUT_MS, spec.timeout_ms)
    curl.setopt(pycurl.CONNECTTIMEOUT_MS, spec.connect_timeout_ms)
    if spec.proxy is not None:
        curl.setopt(pycurl.PROXY, spec.proxy)  # "" turns off the environment's proxy as well
    if spec.ca_bundle is not None:
        curl.setopt(pycurl.CAINFO, spec.ca_bundle)
    if spec.client_cert is not None:
        curl.setopt(pycurl.SSLCERT, spec.client_cert)
    if spec.client_key is not None:
        curl.setopt(pycurl.SSLKEY, spec.client_key)


def apply_body(curl: Any, spec: RequestSpec, response: Response) -> None:
    """What ``apply`` sets that differs from one request to the next (the body, the callbacks,
    the timeout), for a handle whose last request had the same ``spec.transport`` and was given
    back with ``release``."""
    pycurl = import_pycurl()
    if spec.method != "GET":
        curl.setopt(pycurl.POSTFIELDS, spec.body)
        curl.setopt(pycurl.POSTFIELDSIZE, len(spec.body))
    curl.setopt(pycurl.WRITEFUNCTION, response.write)
    curl.setopt(pycurl.HEADERFUNCTION, response.header)
    curl.setopt(pycurl.TIMEOUT_MS, spec.timeout_ms)


def release(curl: Any) -> None:
    """Drop what must not outlive a request on a handle kept for the same client's next one: the
    body and the callbacks (they hold the Response, the stream and ``on_chunk``). The transport
    (URL, headers with the key, timeouts, TLS and proxy options) stays for ``apply_body``."""
    pycurl = import_pycurl()
    curl.setopt(pycurl.POSTFIELDS, b"")
    curl.setopt(pycurl.WRITEFUNCTION, _discard)
    curl.setopt(pycurl.HEADERFUNCTION, _discard)


def reset(curl: Any, spec: RequestSpec) -> None:
    """Clear what ``apply(curl, spec, ...)`` set, so the handle's next request (maybe to another host)
    carries none of it: the headers with the key, the body, the callbacks, the proxy and CA file.
    Options ``apply`` sets go back to libcurl's defaults (pycurl cannot read the previous value:
    an owner's own HTTPHEADER, timeouts or protocol lists are not restored); the connection cache
    and every option ``apply`` does not touch are kept. After a spec with a client certificate the
    whole handle is ``curl.reset()``: pycurl cannot unset one."""
    pycurl = import_pycurl()
    if spec.client_cert is not None or spec.client_key is not None:
        # pycurl cannot unset SSLCERT / SSLKEY: only a full reset forgets a client certificate
        # (create_stream refuses client_cert on a caller's handle, so this is a pooled handle).
        curl.reset()
        return
    curl.unsetopt(pycurl.HTTPHEADER)  # setopt(HTTPHEADER, []) would leave the old list in place
    curl.setopt(pycurl.POSTFIELDS, b"")
    curl.setopt(pycurl.POSTFIELDSIZE, -1)
    curl.setopt(pycurl.HTTPGET, 1)
    curl.unsetopt(pycurl.ACCEPT_ENCODING)
    _set_protocols(curl, pycurl, None)
    # Callbacks hold the Response (and through it the stream and on_chunk): drop them.
    curl.setopt(pycurl.WRITEFUNCTION, _discard)
    curl.setopt(pycurl.HEADERFUNCTION, _discard)
    curl.setopt(pycurl.TIMEOUT_MS, 0)
    curl.setopt(pycurl.CONNECTTIMEOUT_MS, 0)
    if spec.proxy is not None:
        curl.unsetopt(pycurl.PROXY)
    if spec.ca_bundle is not None:
        curl.unsetopt(pycurl.CAINFO)


def _discard(data: bytes) -> None:
    return None


def _squeeze(blanks: bytes | bytearray) -> bytes:
    """Leading blank bytes of an untyped body, cut to what can still change how the body reads:
    blank lines dispatch nothing, so only the last line end stays (a CR, which a following LF
    completes, or an LF) and one of the spaces or tabs after it (a line that starts with one is
    ignored by the SSE rules however many follow). At most two bytes, so a body of megabytes of
    blanks costs linear time and no memory."""
    end = max(blanks.rfind(b"\n"), blanks.rfind(b"\r"))
    if end < 0:
        return bytes(blanks[:1])
    return bytes(blanks[end : end + 2])


def _retry_after(value: str) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or an HTTP date), None if neither."""
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class Response:
    """The header and write callbacks of one transfer, and the classification of its outcome.

    ``status`` and the headers are those of the last header block (a 100 Continue or a proxy's
    CONNECT answer comes first). ``mode`` says where the body goes: ``"sse"`` to ``stream.write``,
    ``"json"`` (a non-streaming answer) or ``"body"`` (anything else) into a bounded buffer.
    ``last_activity`` (``time.monotonic()``) moves with every header line and body write, for an idle
    check. An exception in a callback is kept in ``exc`` and the transfer is stopped (``stopped``).
    """

    def __init__(self, spec: RequestSpec, stream: Any) -> None:
        self.spec = spec
        self.stream = stream
        self.status = 0
        self.content_type = ""
        # the last header block's headers, names lower-cased, repeated ones joined with ", "
        self.headers: dict[str, str] = {}
        self.mode = ""
        self.body = bytearray()
        # leading blank bytes of an untyped body, held until its first real byte; past _HEAD_LIMIT
        # cut to the two bytes that can still matter (``_squeeze``)
        self.head = bytearray()
        self.stopped = False
        self.fed = False  # a byte of an event stream reached the stream (so maybe the caller)
        self.exc: BaseException | None = None
        self.last_activity = time.monotonic()
        self.hold_until: Any = None  # a consumer's future: reading waits until it is done
        self.paused = False  # the last write was refused with WRITEFUNC_PAUSE; curl holds the bytes
        self.on_release: Any = None  # set by the engine: resume a paused transfer
        # The compiled driver's ``Curl.direct``, set by the engine: once the answer is an event
        # stream, the reads go to the stream from C (``directed``) until a hold turns it off.
        self.direct: Any = None
        self.directed = False

    def hold(self, until: Any, /) -> None:
        """Stop taking bytes (from the next write on) until the future ``until`` is done.

        Curl then stops reading the socket, so the server meets TCP backpressure; the bytes of the
        refused write are kept by curl and handed over again when ``on_release`` resumes it.
        """
        if until.done() or self.hold_until is until:
            return
        self.hold_until = until
        if self.directed:  # the next read comes here, to be refused (WRITEFUNC_PAUSE)
            self.direct(None)
            self.directed = False
        until.add_done_callback(self._release)

    def _release(self, until: Any = None) -> None:
        if until is not None and until is not self.hold_until:
            return
        self.hold_until = None
        if self.paused and self.on_release is not None:
            self.on_release()

    def header(self, line: bytes) -> int | None:
        try:
            self.last_activity = _monotonic()
            if line[:5] == b"HTTP/":
                parts = line.split(None, 2)
                self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
                self.content_type = ""
                self.headers = {}
                return None
            name, colon, value = line.partition(b":")
            if not colon:
                return None
            key = name.strip().lower().decode("latin-1")
            text = value.strip().decode("latin-1")
            headers = self.headers
            if len(headers) < _MAX_HEADERS:
                held = headers.get(key)
                headers[key] = text if held is None else f"{held}, {text}"
            if key == "content-type":
                self.content_type = text.lower()
            return None
        except BaseException as exc:  # e.g. a KeyboardInterrupt: pycurl would only print it
            self.exc = exc
            self.stopped = True
            return 0

    def _choose_mode(self, first: int) -> None:
        if self.spec.api == "events":
            # An EventSource reads a 200 that says it is an event stream, and nothing else (WHATWG
            # "fail the connection"): no sniffing, no JSON answer.
            self.mode = "sse" if self._event_stream() else "body"
            return
        if self.status >= 300 or self.status == 204:
            self.mode = "body"
        elif self.content_type.startswith("text/event-stream"):
            self.mode = "sse"
        elif self.content_type.startswith("application/json"):
            self.mode = "json"
        elif self.content_type:
            self.mode = "body"
        else:
            # No Content-Type (some servers omit it): the body's first byte tells. An event stream
            # never starts with "<" (an HTML error page) or "{" (a JSON answer).
            self.mode = "body" if first == 0x3C else "json" if first == 0x7B else "sse"

    def _event_stream(self) -> bool:
        """Whether the answer is one an EventSource reads: a 200 of MIME type text/event-stream."""
        return self.status == 200 and self.content_type.split(";", 1)[0].strip() == "text/event-stream"

    def write(self, data: bytes) -> int | None:
        self.last_activity = _monotonic()
        if self.mode == "sse" and self.hold_until is None:  # the stream's reads, once typed
            self.fed = True
            try:
                if self.stream.write(data) == 0:
                    self.stopped = True
                    return 0
                # not while a hold taken in this read stands: the next read must come here, refused
                if self.direct is not None and not self.directed and self.hold_until is None:
                    self.directed = self.direct(self.stream, self)
                    if not self.directed:
                        self.direct = None  # a stream C cannot feed (a byte format): do not ask again
                return None
            except BaseException as exc:  # re-raised unchanged by finish() once curl has stopped
                self.exc = exc
                self.stopped = True
                return 0
        hold = self.hold_until
        if hold is not None:
            if not hold.done():
                self.paused = True
                return WRITEFUNC_PAUSE
            self.hold_until = None
        try:
            if not self.mode:
                start = len(data) - len(data.lstrip(_BLANK))
                if start == len(data) and not self.content_type and 200 <= self.status < 300:
                    self.head += data
                    if len(self.head) > _HEAD_LIMIT:
                        self.head = bytearray(_squeeze(self.head))
                    return None
                self._choose_mode(data[start] if start < len(data) else 0)
                if self.head:
                    data, self.head = bytes(self.head) + data, bytearray()
            if self.mode == "sse":
                return self.write(data)  # the hold is over and the body typed: the path above
            room = ERROR_BODY_LIMIT - len(self.body)
            if self.mode == "json":
                # A whole completion (a server that ignored "stream"): kept, up to the cap if set.
                limit = self.spec.max_event_bytes
                if limit is not None and len(self.body) + len(data) > limit:
                    raise too_large(limit, [])
                room = len(data)
            self.body += data[: max(room, 0)]
            return None
        except BaseException as exc:  # as above
            self.exc = exc
            self.stopped = True
            return 0

    def finish(self, code: int = 0, message: str = "") -> dict[str, Any]:
        """The result of the finished transfer, given curl's result ``code`` (0: OK) and message.

        Whatever the answer, the result has one shape: the API's whole answer folded by the
        stream, with ``"verdict"`` and ``"http"`` (``http()``: the status, ``retry_after``,
        ``location``, ``upstream``, and ``error``, which is not None exactly when the answer was
        no stream: an HTTP error, a redirect, a 204, a body that is neither a stream nor JSON; its
        verdict says why). A JSON answer (a server that ignored ``stream``) is folded as the
        one-event stream it stands for.

        It raises whatever a callback caught (on_chunk's exception, EventTooLarge) unchanged;
        TransportError (``.code``, ``.result`` the partial fold) if curl failed and the transfer was
        not stopped on purpose (curl's 23 after an ``on_chunk`` that returned False is no failure);
        HTTPStatusError for an answer that is no stream when the spec has ``raise_for_status``.
        """
        if self.exc is not None:
            exc, self.exc = self.exc, None
            raise exc
        if code and not self.stopped:
            self.stream.close(truncated=True)  # a broken transfer is never a complete answer
            text = (
                message.replace(self.spec.url, self.spec.display_url)
                if message
                else _CURL_WORDS.get(code, "the transfer failed")
            )
            partial = dict(self.stream.result())
            partial["http"] = self.http()
            raise TransportError(
                f"{self.spec.display_url}: {text} (curl error {code})", result=partial, code=code
            )
        status = self.status
        if 300 <= status < 400 or status == 204:
            return self._no_stream(status)
        if self.mode == "body" or status >= 400:
            return self._error(status, bytes(self.body))
        if self.spec.api == "events" and not self._event_stream():  # an empty body of another type
            return self._error(status, b"")
        if not self.mode and self.head:  # an untyped body of blanks only: an empty stream
            self.stream.write(bytes(self.head))
        if self.mode == "json":
            return self._json_answer(bytes(self.body))
        self.stream.close()
        result = dict(self.stream.result())
        result["http"] = self.http()
        return result

    def http(self, error: Any = None) -> dict[str, Any]:
        """``result["http"]``: the transfer's facts beside the API's answer. ``status`` (0 before a
        status line), ``retry_after`` (``retry_after()``), ``location`` (the ``Location`` header,
        or None), ``upstream`` (the base URL that answered, set by the engine) and ``error``: the
        error of an answer that was no stream, None for a stream."""
        return {
            "status": self.status,
            "retry_after": self.retry_after(),
            "location": self.headers.get("location"),
            "upstream": None,
            "error": error,
        }

    def retry_after(self) -> float | None:
        """Seconds the server asked to wait: ``retry-after-ms``, else ``Retry-After`` (seconds or
        an HTTP date), None if neither is there or readable."""
        headers = self.headers
        value = headers.get("retry-after-ms")
        if value is not None:
            seconds = _retry_after_ms(value)
            if seconds is not None:
                return seconds
        value = headers.get("retry-after")
        return None if value is None else _retry_after(value)

    def _not_a_stream(self, status: int, error: Any, why: str, body: bytes = b"") -> dict[str, Any]:
        """The result of an answer that is no stream: the stream's (empty) fold, with ``http``
        holding its error (``why`` when the body named none) and a verdict that says ``why``; or
        HTTPStatusError."""
        result = dict(self.stream.result())
        http = result["http"] = self.http(error if error is not None else why)
        retry_after = http["retry_after"]
        verdict = result.get("verdict")
        if isinstance(verdict, dict):
            verdict["complete"] = False
            verdict["error"] = True
            verdict["why"] = why
        if self.spec.raise_for_status:
            raise HTTPStatusError(
                f"{self.spec.display_url}: {why}",
                status=status,
                headers=dict(self.headers),
                body=body,
                error=http["error"],
                retry_after=retry_after,
                result=result,
            )
        return result

    def _no_stream(self, status: int) -> dict[str, Any]:
        if status == 204:
            message = f"{self.spec.display_url} answered 204 No Content: no stream"
            return self._not_a_stream(status, message, "HTTP 204: no content")
        location = self.headers.get("location", "")
        where = redact(location) if location else "nowhere (no Location)"
        message = (
            f"{self.spec.display_url} answered {status}, a redirect to {where}, which is not followed: "
            "base_url is probably wrong (e.g. http:// where https:// is served)"
        )
        return self._not_a_stream(status, message, f"HTTP {status}: a redirect to {where}")

    def _error(self, status: int, body: bytes) -> dict[str, Any]:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            error: Any = body.decode("utf-8", "replace")
        else:
            error = parsed["error"] if isinstance(parsed, dict) and "error" in parsed else parsed
        if self.spec.api == "events":
            return self._not_a_stream(status, error, _events_why(status, self.content_type, error), body)
        return self._not_a_stream(status, error, _status_why(status, error, self.spec.display_url), body)

    def _json_answer(self, body: bytes) -> dict[str, Any]:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            text = body.decode("utf-8", "replace")
            return self._not_a_stream(self.status, text, f"HTTP {self.status}: the answer is not JSON", body)
        if "error" in parsed:  # an error object with a 200 status: say which status it came with
            error = parsed["error"]
            return self._not_a_stream(self.status, error, _status_why(self.status, error, ""), body)
        # A whole answer (a server that ignored "stream"): the stream it stands for, folded, so the
        # result has the streamed shape (and on_chunk sees its content, a relay sends it on).
        self.stream.write(as_stream(self.spec.api, parsed))
        self.stream.close()
        return dict(self.stream.result())


def _status_why(status: int, error: Any, url: str) -> str:
    """The verdict's ``why`` for an HTTP error: the status, its reason, the server's words."""
    words = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    kind = (error.get("type") or error.get("code")) if isinstance(error, dict) else None
    out = f"HTTP {status}"
    if isinstance(kind, str) and kind:
        out += f" {kind}"
    if isinstance(words, str) and words.strip():
        out += f": {words.strip()[:200]}"
    if status == 404 and url:
        out += f" (tried {url}; a base_url usually ends in /v1)"
    return out


def _events_why(status: int, content_type: str, error: Any) -> str:
    """The verdict's ``why`` for an event stream's GET answered with no event stream."""
    if status >= 300:
        return _status_why(status, error, "")  # no base_url hint: an EventSource's URL is the whole URL
    if status != 200:
        return f"HTTP {status}: an event stream comes with a 200"
    return f"HTTP 200 with Content-Type {content_type or '(none)'!r}: not text/event-stream"


def _retry_after_ms(value: str) -> float | None:
    try:
        ms = float(value.strip())
    except ValueError:
        return None
    return ms / 1000 if math.isfinite(ms) and ms >= 0 else None

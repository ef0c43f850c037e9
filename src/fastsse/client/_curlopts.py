"""Curl option binding for one request: ``apply(curl, spec, response)`` sets a ``RequestSpec``'s
options on an easy handle (new, pooled or the caller's), for ``perform()`` or a ``CurlMulti``;
``reset(curl, spec)`` clears what ``apply`` set (the credentials above all) before a handle goes back
to its owner; a client's own pooled handle is only ``release``-d (body and callbacks dropped), and
its next request with the same ``spec.transport`` takes ``apply_body``: five options, not twenty.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from ._request import ACCEPT_ENCODING, PROTOCOLS_STR, RequestSpec
from ._response import Response, _discard


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

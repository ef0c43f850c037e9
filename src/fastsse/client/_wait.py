"""One transfer driven through a ``CurlMulti`` by a short wait loop, instead of ``curl.perform()``.

``perform()`` blocks in C until the transfer ends, so a Ctrl-C on a silent server is acted on only
when the next byte arrives, if ever. Here the thread waits in ``selectors`` (epoll/kqueue: no
FD_SETSIZE limit) for at most ``TICK`` seconds at a time, so Python runs its signal handlers within
``TICK`` of the signal, and the idle check is exact: ``response.last_activity`` against the clock.

The many-streams engine replaces this loop with its own; this one drives a single handle.
"""

from __future__ import annotations

import selectors
import threading
import time
import weakref
from typing import Any

from ._request import Response

TICK = 0.1  # longest uninterrupted wait: the bound on Ctrl-C latency and on idle-check lateness

# A caller's handle keeps its connections in the multi it ran in (libcurl moves an easy handle's
# connection cache to the multi's), so each such handle keeps one multi for its lifetime.
_multis: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_multis_lock = threading.Lock()


def multi_for(pycurl: Any, curl: Any, owned: bool) -> Any:
    if owned:
        return pycurl.CurlMulti()
    with _multis_lock:
        multi = _multis.get(curl)
        if multi is None:
            multi = _multis[curl] = pycurl.CurlMulti()
        return multi


class _Loop:
    def __init__(self, pycurl: Any, multi: Any) -> None:
        self.pycurl = pycurl
        self.multi = multi
        self.selector = selectors.DefaultSelector()
        self.deadline: float | None = None
        self.exc: BaseException | None = None
        multi.setopt(pycurl.M_SOCKETFUNCTION, self._socket)
        multi.setopt(pycurl.M_TIMERFUNCTION, self._timer)

    def _socket(self, what: int, fd: int, multi: Any, data: Any) -> None:
        # pycurl only prints what a callback raises: keep it (a KeyboardInterrupt landing here)
        # and raise it once socket_action returns.
        try:
            pycurl = self.pycurl
            known = fd in self.selector.get_map()
            if what == pycurl.POLL_REMOVE:
                if known:
                    self.selector.unregister(fd)
                return
            events = (selectors.EVENT_READ if what & pycurl.POLL_IN else 0) | (
                selectors.EVENT_WRITE if what & pycurl.POLL_OUT else 0
            )
            if known:
                try:
                    self.selector.modify(fd, events)
                    return
                except (OSError, ValueError):  # a new socket under a reused number
                    self.selector.unregister(fd)
            self.selector.register(fd, events)
        except BaseException as exc:
            self.exc = exc

    def _timer(self, ms: int) -> None:
        self.deadline = None if ms < 0 else time.monotonic() + ms / 1000

    def _act(self, fd: int, mask: int) -> None:
        while True:
            ret, _ = self.multi.socket_action(fd, mask)
            if self.exc is not None:
                exc, self.exc = self.exc, None
                raise exc
            if ret != self.pycurl.E_CALL_MULTI_PERFORM:
                return

    def run(self, curl: Any, response: Response, idle_timeout: float | None) -> tuple[int, str]:
        pycurl = self.pycurl
        self.multi.add_handle(curl)
        try:
            while True:
                now = time.monotonic()
                if self.deadline is not None and self.deadline <= now:
                    self.deadline = None
                    self._act(pycurl.SOCKET_TIMEOUT, 0)
                _, done, failed = self.multi.info_read()
                if done:
                    return 0, ""
                if failed:
                    _, code, message = failed[0]
                    return int(code), str(message)
                if idle_timeout is not None and now - response.last_activity >= idle_timeout:
                    return pycurl.E_OPERATION_TIMEDOUT, f"no data for {idle_timeout:g} s (idle_timeout)"
                wait = TICK if self.deadline is None else min(TICK, max(0.0, self.deadline - now))
                if idle_timeout is not None:
                    wait = min(wait, max(0.0, response.last_activity + idle_timeout - now))
                for key, events in self.selector.select(wait):
                    mask = (pycurl.CSELECT_IN if events & selectors.EVENT_READ else 0) | (
                        pycurl.CSELECT_OUT if events & selectors.EVENT_WRITE else 0
                    )
                    self._act(key.fd, mask)
        finally:
            self.multi.remove_handle(curl)
            self.selector.close()


def run(pycurl: Any, curl: Any, response: Response, *, owned: bool) -> tuple[int, str]:
    """Drive ``curl`` to its end; returns curl's result code (0: OK) and message.

    Returns ``E_OPERATION_TIMEDOUT`` when ``response.spec.idle_timeout`` passes without a byte.
    Whatever a signal handler raises (KeyboardInterrupt) propagates within ``TICK`` seconds, with
    the handle taken out of the multi. ``owned``: the handle is ours (its multi is closed after)
    rather than the caller's (whose multi is kept, with its connections, for the next call).
    """
    multi = multi_for(pycurl, curl, owned)
    try:
        return _Loop(pycurl, multi).run(curl, response, response.spec.idle_timeout)
    finally:
        if owned:
            multi.close()

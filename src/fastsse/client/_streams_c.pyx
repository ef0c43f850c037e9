# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""The compiled byte-out stream (``_BytesStream`` and ``PassThrough`` in ``client/_streams.py`` are
its readable twins): a writer (a ``Relay``, a translator or a ``PassThrough``) whose output goes to
``on_bytes``, with the same stamps, holds and stops. The compiled driver feeds it each read from C
(``bytes_feed``): one bytes object for the writer, no Python frame but ``on_bytes``'s, and that
only when the read produced bytes.
"""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_Append

from time import monotonic_ns as _monotonic_ns

from .. import _backend
from .._errors import EventTooLarge
from .._formats import api_format
from .._timing import anchor_pair, build_timing


cdef class BytesStream:
    """BytesStream(writer, on_bytes, timing, *, relay=False)
--

    What the engine drives: ``writer`` (``write(data) -> bytes``, ``close(truncated=) -> bytes``,
    ``result()``) with its output going to ``on_bytes``. ``relay=True``: the writer is a ``Relay``,
    whose EventTooLarge carries the bytes before the oversized event (another writer's ``close``
    gives them). ``relay`` and ``translator`` name the writer, as ``RelayStream`` and
    ``TranslateStream`` do."""

    def __init__(self, writer, on_bytes, timing, *, relay=False):
        self.holder = None
        self._writer = writer
        self._send = on_bytes
        self._reads = [] if timing else None
        self._anchor = anchor_pair() if timing else None
        self._stopped = False
        self._relay = relay

    @property
    def relay(self):
        """The ``Relay`` (``verdict``, ``text()``)."""
        return self._writer

    @property
    def translator(self):
        """The translator (``verdict``, ``dropped``)."""
        return self._writer

    @cython.binding(False)
    def write(self, data, /):
        """The engine's write callback: None to go on, 0 to stop the transfer."""
        if self._reads is not None:
            PyList_Append(self._reads, _monotonic_ns())
        return self._take(data)

    cdef object _take(self, object data):
        # after the stamp: the writer, then on_bytes; None to go on, 0 to stop
        if self._stopped:
            return 0
        try:
            out = self._writer.write(data)
        except EventTooLarge as exc:
            self._stopped = True
            if self._relay:
                self._deliver(exc.events[0] if exc.events else b"")
            else:
                self._deliver(self._writer.close(truncated=True))
            raise
        if out and not self._deliver(out):
            self._stopped = True
            return 0
        return None

    cdef bint _deliver(self, object piece) except -1:
        if not piece or self._send is None:
            return True
        answer = self._send(piece)
        if answer is None:
            return True
        if callable(getattr(answer, "add_done_callback", None)):  # "hold until this is done"
            if self.holder is not None:
                self.holder.hold(answer)
            return True
        return bool(answer)

    def close(self, *, truncated=False):
        tail = self._writer.close(truncated=truncated)
        if not self._stopped:
            self._deliver(tail)

    def result(self):
        return self._writer.result()

    def timing(self):
        if self._reads is None or self._anchor is None:
            return None
        return build_timing(self._reads, [], [], [], self._anchor)


cdef int bytes_feed(object stream, const char* p, Py_ssize_t n) except -1:
    cdef BytesStream self = <BytesStream>stream
    if self._reads is not None:
        PyList_Append(self._reads, _monotonic_ns())
    if self._stopped:
        return 0
    return 0 if self._take(PyBytes_FromStringAndSize(p, n)) is not None else 1


cdef Py_ssize_t _boundary(bytes data):
    # where the last whole event of ``data`` ends (after its blank line), 0 if none does
    cdef Py_ssize_t cut = data.rfind(b"\n\n") + 2
    cdef Py_ssize_t crlf = data.rfind(b"\r\n\r\n") + 4
    cdef Py_ssize_t cr = data.rfind(b"\r\r") + 2
    return max(cut if cut > 1 else 0, crlf if crlf > 3 else 0, cr if cr > 1 else 0)


@cython.final
cdef class PassThrough:
    """PassThrough(api, *, max_event_bytes=None)
--

    The compiled twin of ``PassThrough`` in ``client/_streams.py``: an ``api`` stream's bytes
    handed on unchanged, each write cut after its last whole event, the API's fold beside them."""

    cdef object _fold
    cdef bytes _tail
    cdef bytes _ready

    def __init__(self, api, *, max_event_bytes=None):
        cls = getattr(_backend.current, api_format(api).stream_name)
        self._fold = cls(None, max_event_bytes=max_event_bytes, timing=False)
        self._tail = b""
        self._ready = b""

    def write(self, data, /):
        cdef bytes raw = data if type(data) is bytes else bytes(data)
        cdef bytes held = self._tail + raw if self._tail else raw
        cdef Py_ssize_t cut = _boundary(held)
        self._ready, self._tail = held[:cut], held[cut:]
        self._fold.write(raw)  # EventTooLarge leaves the whole events before it in _ready
        out, self._ready = self._ready, b""
        return out

    def close(self, *, truncated=False):
        out, self._ready, self._tail = self._ready, b"", b""
        self._fold.close(truncated=truncated)
        return out

    def result(self):
        return self._fold.result()

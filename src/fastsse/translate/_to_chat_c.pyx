# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""Compiled Messages -> chat and Responses -> chat translators; ``translate/_to_chat_py.py`` holds their
readable twins and ``translate/_rules.py`` the rules both share (``ChatFromMessages``,
``ChatFromResponses``).

Each translator drives the compiled fold stream of its upstream with the shared core as its
callback, and hangs a sink on it (``FoldSink``): once the core has written the role chunk, the
stream offers every event to its fold's fast reader first, and a delta the reader folds (text,
thinking or reasoning, a refusal, tool input or function arguments) is written here as the chat
chunk the core would write: a cached frame, the delta as orjson writes it (``_native/json_out.pxd``,
from the payload's bytes), the frame's tail. A thinking delta is written with its string twice
(``reasoning_content`` and the ``reasoning_details`` part of its block, as the core writes it).
Every other event goes to the core, after the sink
hands it what the fast path changed (pending bytes, the content length a citation span needs,
the arguments sent per call, the deltas dropped); after the core ran, the sink reads its frames
again (``fast_state``).
"""

cimport cython
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItemWithError
from cpython.list cimport PyList_Append
from cpython.object cimport PyObject

from ..fold._stream_c cimport D_ARGUMENTS, D_REASONING, D_REFUSAL, D_TEXT, FastDelta, FoldSink, set_fold_sink
from .._native.json_out cimport json_string_into, json_string_max
from .._native.reader cimport F_ESC
from .._native.outbuf cimport OutBuf, out_after, out_free, out_put, out_put_bytes, out_put_int, out_reserve, out_take

from typing import Any

from ..messages._fold_c import MessagesStream
from ..responses._fold_c import ResponsesStream
from ._rules import ARGUMENTS_TAIL, TEXT_TAIL, THINKING_MID, THINKING_TAIL, ChatFromMessages, ChatFromResponses
from .._errors import SSEError

cdef bytes _TEXT_TAIL = TEXT_TAIL
cdef bytes _ARGUMENTS_TAIL = ARGUMENTS_TAIL
cdef bytes _THINKING_MID = THINKING_MID
cdef bytes _THINKING_INDEX = THINKING_TAIL.split(b"%d")[0]  # up to the block's index
cdef bytes _THINKING_END = THINKING_TAIL.split(b"%d")[1]


@cython.final
cdef class _Call:
    cdef Py_ssize_t index  # the chat tool-call index
    cdef bytes frame
    cdef Py_ssize_t sent   # argument characters written since the core last saw the count


@cython.final
cdef class _Sink(FoldSink):
    """The fast path of one translator towards chat (see the module docstring)."""

    cdef object core
    cdef bint messages     # the core counts content characters (Messages citations)
    cdef bint fresh        # the mirror below matches the core
    cdef bint live         # the role chunk is out and the end is not
    cdef bytes content
    cdef bytes reasoning
    cdef bytes refusal
    cdef dict calls        # upstream index -> _Call
    cdef bint thinking     # a reasoning delta carries its string twice (Messages thinking)
    cdef Py_ssize_t chars  # content characters written since the core last saw its count
    cdef Py_ssize_t dropped
    cdef bint dirty        # calls hold counts to hand over
    cdef Py_ssize_t fast   # events the sink took (written, or dropped and counted)
    cdef OutBuf out

    def __dealloc__(self):
        out_free(&self.out)

    cdef bint ready(self) except -1:
        cdef _Call call
        if not self.fresh:
            state = self.core.fast_state()
            self.fresh = True
            self.live = state is not None
            if self.live:
                self.content, self.reasoning, self.refusal = state[0], state[1], state[2]
                self.thinking = state[4]
                self.calls = {}
                for up, (index, frame) in state[3].items():
                    call = _Call()
                    call.index = index
                    call.frame = frame
                    self.calls[up] = call
        return self.live

    cdef int flush(self) except -1:
        cdef _Call call
        core = self.core
        if self.out.len:
            PyList_Append(core.out, out_take(&self.out))
        if self.chars:
            core.chars += self.chars
            self.chars = 0
        if self.dropped:
            core.dropped += self.dropped
            self.dropped = 0
        if self.dirty:
            sent = core.args_sent
            for call in self.calls.values():
                if call.sent:
                    sent[call.index] += call.sent
                    call.sent = 0
            self.dirty = False
        self.fresh = False
        return 0

    cdef int take(self, FastDelta* delta) except -1:
        cdef Py_ssize_t n = delta.text.n
        cdef Py_ssize_t chars = 0
        cdef Py_ssize_t w
        cdef bytes frame
        cdef bytes tail
        cdef PyObject* found
        cdef _Call call = None
        cdef OutBuf* b
        self.fast += 1
        if delta.which == D_ARGUMENTS:
            found = PyDict_GetItemWithError(self.calls, <object>delta.index)
            if found == NULL:
                self.dropped += 1  # input for a block that is no tool call the core started
                return 0
            if n == 0:
                return 0
            call = <_Call>found
            frame = call.frame
            tail = _ARGUMENTS_TAIL
        else:
            if n == 0:
                return 0
            frame = self.content if delta.which == D_TEXT else self.reasoning if delta.which == D_REASONING else self.refusal
            tail = _TEXT_TAIL
        b = &self.out
        out_reserve(b, PyBytes_GET_SIZE(frame) + PyBytes_GET_SIZE(tail) + json_string_max(n))
        out_put_bytes(b, frame)
        w = json_string_into(b.ptr + b.len, delta.text.p, n, delta.text.flags & F_ESC, &chars)
        if w < 0:
            raise SSEError("a lone surrogate escape passed the reader")  # the fold refuses them
        b.len += w
        if delta.which == D_REASONING and self.thinking:
            # the string again, as the reasoning_details part of its block
            out_reserve(b, PyBytes_GET_SIZE(_THINKING_MID) + w + PyBytes_GET_SIZE(_THINKING_INDEX) + 24 + PyBytes_GET_SIZE(_THINKING_END))
            out_put_bytes(b, _THINKING_MID)
            out_put(b, b.ptr + b.len - PyBytes_GET_SIZE(_THINKING_MID) - w, w)
            out_put_bytes(b, _THINKING_INDEX)
            out_put_int(b, delta.index)
            tail = _THINKING_END
        out_put_bytes(b, tail)
        if call is not None:
            call.sent += chars
            self.dirty = True
        elif delta.which == D_TEXT and self.messages:
            self.chars += chars
        return 0


cdef class _ToChat:
    cdef object _core
    cdef object _stream
    cdef _Sink _sink

    cdef int _setup(self, object core, object stream, bint messages) except -1:
        cdef _Sink sink = _Sink()
        self._core = core
        self._stream = stream
        sink.core = core
        sink.messages = messages
        sink.calls = {}
        self._sink = sink
        set_fold_sink(stream, sink)
        return 0

    @cython.binding(False)
    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Translate the next upstream bytes; return the chat chunks they allow (maybe ``b""``).

        It raises TypeError for input other than bytes, bytearray or memoryview and EventTooLarge
        when an upstream event passes ``max_event_bytes``.
        """
        self._stream.write(data)
        return out_after(self._core, &self._sink.out)

    def close(self, *, truncated: bool = False) -> bytes:
        """The upstream ended: return the last chunks (no ``[DONE]`` when it was truncated).
        ``truncated=True`` says the transfer broke."""
        self._stream.close(truncated=truncated)
        self._sink.flush()
        return out_after(self._core, &self._sink.out)

    def result(self) -> dict[str, Any]:
        """The upstream's fold (``MessagesAggregator`` / ``ResponsesAggregator``) with its ``verdict``."""
        return self._stream.result()

    @property
    def verdict(self):
        """The upstream's verdict (``complete``, ``terminal``, ``why``, departures)."""
        return self._stream.verdict

    @property
    def complete(self) -> bool:
        """True when the upstream ended with its terminal event and ``[DONE]`` was written."""
        return self._core.complete

    @property
    def error(self) -> Any:
        """The upstream's error, carried downstream as a chat error payload, or None."""
        return self._core.error

    @property
    def dropped(self) -> int:
        """Upstream deltas with no chat counterpart (signatures, citations, redacted thinking)."""
        return self._core.dropped

    @property
    def skipped(self) -> int:
        """Upstream events that were not a JSON object or not of a known type."""
        return self._core.skipped

    @property
    def _fast_events(self) -> int:
        # Events the compiled fast path translated itself (for the tests that prove it ran).
        return self._sink.fast


@cython.final
cdef class MessagesToChat(_ToChat):
    """MessagesToChat(*, created=None, include_usage=True, max_event_bytes=None)
--

Messages events in, chat chunks out; see the Python twin (``fastsse.translate._to_chat_py``) for the
    mapping. Both behave identically."""

    def __init__(self, *, created: int | None = None, include_usage: bool = True, max_event_bytes: int | None = None) -> None:
        core = ChatFromMessages(created=created, include_usage=include_usage)
        self._setup(core, MessagesStream(core.on_event, max_event_bytes=max_event_bytes), True)


@cython.final
cdef class ResponsesToChat(_ToChat):
    """ResponsesToChat(*, created=None, include_usage=True, max_event_bytes=None)
--

Responses events in, chat chunks out; see the Python twin (``fastsse.translate._to_chat_py``) for the
    mapping. Both behave identically."""

    def __init__(self, *, created: int | None = None, include_usage: bool = True, max_event_bytes: int | None = None) -> None:
        core = ChatFromResponses(created=created, include_usage=include_usage)
        self._setup(core, ResponsesStream(core.on_event, max_event_bytes=max_event_bytes), False)

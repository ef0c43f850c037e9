# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""Compiled translators; ``translate/_from_chat_py.py`` and ``_to_chat_py.py`` hold the readable twins and ``translate/_rules.py`` the
rules both share. Here: chat -> Messages and chat -> Responses; the Messages / Responses -> chat
pair lives in ``translate/_to_chat_c.pyx`` and is re-exported.

A chat translator is a compiled ``ChatStream`` whose callback is the shared core
(``MessagesFromChat`` / ``ResponsesFromChat``), with a sink (``ChatSink``) that sees every event
first. The sink reads the payload with the chat fold's reader (``_read``); when the chunk only
continues what is open downstream (text, reasoning or a refusal into the open block or part, or
arguments of a tool call already started) it folds the plan (``fast_apply``) and writes the
target's events itself: a cached frame, the delta as orjson would write it (``_native/json_out.pxd``,
straight from the payload's bytes), the frame's tail. Everything else (first and last chunks,
a new block, part or call, usage, annotations, errors, anything the reader gives up on) goes to
the core, after the sink hands it what it wrote and changed (pending bytes, the Responses
sequence number, the last tool-call index); after the core ran, the sink reads its frames again
(``fast_state``).
"""

cimport cython
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItemWithError
from cpython.list cimport PyList_Append
from libc.string cimport memcmp

from ..chat._fold_c cimport (
    K_ARGUMENTS,
    K_CONTENT,
    K_REASONING,
    K_REASONING_CONTENT,
    K_REFUSAL,
    W_ANNOTATIONS,
    W_DETAILS,
    W_USAGE,
    ChatSink,
    ChoicePlan,
    Op,
    Other,
    Plan,
    _read,
    fast_apply,
    set_sink,
    stream_aggregator,
)
from .._native.reader cimport F_ESC, Span, decode
from .._native.json_out cimport json_string_into, json_string_max
from .._native.outbuf cimport OutBuf, out_after, out_free, out_put_bytes, out_put_int, out_reserve, out_take

from typing import Any

from ..chat._fold_c import ChatStream
from ._to_chat_c import MessagesToChat, ResponsesToChat
from ._rules import MessagesFromChat, ResponsesFromChat
from .._errors import SSEError

__all__ = ["ChatToMessages", "ChatToResponses", "MessagesToChat", "ResponsesToChat"]


cdef enum:
    T_CONTENT = 1
    T_REASONING = 2
    T_REFUSAL = 4

cdef bytes _MESSAGES_TAIL = b"}}\n\n"  # after the string of a Messages delta event


cdef inline bint _has(const char* p, Py_ssize_t n, const char* word, Py_ssize_t k) noexcept nogil:
    # Whether the k bytes of word occur in p[:n].
    cdef Py_ssize_t i
    for i in range(n - k + 1):
        if p[i] == word[0] and memcmp(p + i, word, k) == 0:
            return True
    return False


cdef int _kinds_of(object kind, bint responses):
    # The chat text fields the open block (Messages) or part (Responses) takes.
    if kind is None:
        return 0
    if kind == "thinking" or kind == "reasoning":
        return T_REASONING
    if kind == "refusal":
        return T_REFUSAL
    if kind == "text":
        return T_CONTENT if responses else T_CONTENT | T_REFUSAL
    return 0


@cython.final
cdef class _Sink(ChatSink):
    """The fast path of one chat translator (see the module docstring)."""

    cdef object core
    cdef object agg
    cdef bint responses
    cdef bint fresh        # the mirror below matches the core
    cdef bint live         # begun and not ended: the fast path may run
    cdef bint slow         # the core saw an event since the translator last looked
    cdef int kinds         # T_* the open text frame takes (0: none open)
    cdef bytes head        # the text frame up to the string (Responses: up to the sequence number)
    cdef bytes where       # Responses: after the sequence number, up to the string
    cdef bytes tail
    cdef list frags        # Responses: the open part's fragments, which the .done events join
    cdef dict calls        # chat tool-call index -> its frame (Messages: bytes; Responses: a tuple)
    cdef object last_call  # the core's last tool-call index
    cdef bint last_dirty
    cdef long long seq     # Responses: the next sequence number
    cdef bint seq_dirty
    cdef Py_ssize_t fast   # events the sink translated itself
    cdef OutBuf out

    def __dealloc__(self):
        out_free(&self.out)

    # the mirror of the core

    cdef int flush(self) except -1:
        """Hand the core what the fast path wrote and changed, before the core sees an event."""
        core = self.core
        if self.out.len:
            PyList_Append(core.out, out_take(&self.out))
        if self.last_dirty:
            core.last_call = self.last_call
            self.last_dirty = False
        if self.seq_dirty:
            core.enc._set_sequence_number(self.seq)
            self.seq_dirty = False
        self.fresh = False
        self.slow = True
        return 0

    cdef int refresh(self) except -1:
        cdef tuple frame
        state = self.core.fast_state()
        self.fresh = True
        self.live = state is not None
        self.kinds = 0
        if not self.live:
            return 0
        if self.responses:
            frame = state[0]
            if frame is not None:
                self.kinds = _kinds_of(frame[0], True)
                self.head, self.where, self.tail, self.frags = frame[1], frame[2], frame[3], frame[4]
            self.calls = state[1]
            self.last_call = state[2]
            self.seq = state[3]
        else:
            self.kinds = _kinds_of(state[0], False)
            self.head = state[1]
            self.calls = state[2]
            self.last_call = state[3]
        return 0

    # the fast path

    cdef int take(self, const char* data, Py_ssize_t n, bint is_error) except -1:
        cdef Plan plan
        if not is_error:
            if not self.fresh:
                self.refresh()
            if self.live and _read(data, n, &plan) and self._check(&plan) and fast_apply(self.agg, &plan):
                self._emit(&plan)
                self.fast += 1
                return 1
        self.flush()
        return 0

    cdef inline Op* _reasoning_op(self, Plan* plan) noexcept:
        # The core reads reasoning_content, and reasoning only when reasoning_content is absent.
        cdef int i
        cdef Op* found = NULL
        for i in range(plan.nops):
            if plan.ops[i].target == K_REASONING_CONTENT:
                return &plan.ops[i]
            if plan.ops[i].target == K_REASONING:
                found = &plan.ops[i]
        return found

    cdef bint _check(self, Plan* plan) except -1:
        """Whether the core, given this chunk, would only continue open blocks: then the sink
        writes exactly what the core would have written."""
        cdef ChoicePlan* cp
        cdef Op* op
        cdef Op* reasoning
        cdef Other* o
        cdef int i
        if plan.nchoices != 1:
            return False
        cp = &plan.choices[0]
        if (cp.index if cp.index >= 0 else cp.pos) != 0:
            return False
        if cp.finish.p != NULL and cp.finish.n:
            return False  # the core keeps the finish reason
        for i in range(plan.nothers):
            o = &plan.others[i]
            if o.where == W_USAGE or o.where == W_ANNOTATIONS:
                return False  # the core holds the usage and carries annotations
            if o.where == W_DETAILS and (
                _has(o.value, o.value_n, b"signature", 9) or _has(o.value, o.value_n, b"encrypted", 9)
            ):
                return False  # maybe a signature or a redacted block: the core carries them
        reasoning = self._reasoning_op(plan)
        if reasoning != NULL and reasoning.text.n and not self.kinds & T_REASONING:
            return False
        for i in range(plan.nops):
            op = &plan.ops[i]
            if op.target == K_CONTENT:
                if op.text.n and not self.kinds & T_CONTENT:
                    return False
            elif op.target == K_REFUSAL:
                if op.text.n and not self.kinds & T_REFUSAL:
                    return False
            elif op.target == K_ARGUMENTS:
                if op.index < 0:
                    return False  # no index: the core picks the call
                if PyDict_GetItemWithError(self.calls, <object>op.index) == NULL:
                    return False  # a call not yet started downstream
        return True

    cdef int _emit(self, Plan* plan) except -1:
        cdef Op* op
        cdef int i
        cdef object last = None
        op = self._reasoning_op(plan)
        if op != NULL and op.text.n:
            self._text(op)
        for i in range(plan.nops):
            op = &plan.ops[i]
            if op.target == K_CONTENT and op.text.n:
                self._text(op)
        for i in range(plan.nops):
            op = &plan.ops[i]
            if op.target == K_REFUSAL and op.text.n:
                self._text(op)
        for i in range(plan.nops):
            op = &plan.ops[i]
            if op.target == K_ARGUMENTS:
                last = op.index
                if op.text.p != NULL and op.text.n:
                    self._arguments(op, <object>PyDict_GetItemWithError(self.calls, last))
        if last is not None and last != self.last_call:
            self.last_call = last
            self.last_dirty = True
        return 0

    cdef int _text(self, Op* op) except -1:
        if self.responses:
            self._event(self.head, self.where, self.tail, self.frags, &op.text)
        else:
            self._event(self.head, None, _MESSAGES_TAIL, None, &op.text)
        return 0

    cdef int _arguments(self, Op* op, object frame) except -1:
        cdef tuple t
        if self.responses:
            t = <tuple>frame
            self._event(<bytes>t[0], <bytes>t[1], <bytes>t[2], <list>t[3], &op.text)
        else:
            self._event(<bytes>frame, None, _MESSAGES_TAIL, None, &op.text)
        return 0

    cdef int _event(self, bytes head, bytes where, bytes tail, list frags, Span* text) except -1:
        # head, [the sequence number, where,] the string as orjson writes it, tail; a Responses
        # event also adds the fragment to its part or call, which the .done events join
        cdef OutBuf* b = &self.out
        cdef Py_ssize_t w
        out_reserve(b, PyBytes_GET_SIZE(head) + PyBytes_GET_SIZE(tail) + json_string_max(text.n) + (
            24 + PyBytes_GET_SIZE(where) if where is not None else 0
        ))
        out_put_bytes(b, head)
        if where is not None:
            out_put_int(b, self.seq)
            self.seq += 1
            self.seq_dirty = True
            out_put_bytes(b, where)
        w = json_string_into(b.ptr + b.len, text.p, text.n, text.flags & F_ESC, NULL)
        if w < 0:
            raise SSEError("a lone surrogate escape passed the reader")  # the reader refuses them
        b.len += w
        out_put_bytes(b, tail)
        if frags is not None:
            PyList_Append(frags, decode(text[0]))
        return 0


cdef class _FromChat:
    cdef object _core
    cdef object _stream
    cdef object _agg
    cdef _Sink _sink

    cdef int _setup(self, object core, object max_event_bytes, bint responses) except -1:
        self._core = core
        self._stream = ChatStream(core.on_chunk, max_event_bytes=max_event_bytes)
        self._agg = stream_aggregator(self._stream)
        sink = _Sink()
        sink.core = core
        sink.agg = self._agg
        sink.responses = responses
        sink.calls = {}
        self._sink = sink
        set_sink(self._stream, sink)
        return 0

    @cython.binding(False)
    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Translate the next upstream bytes; return what they allow downstream (maybe ``b""``).

        It raises TypeError for input other than bytes, bytearray or memoryview and EventTooLarge
        when an upstream event passes ``max_event_bytes``.
        """
        cdef _Sink sink = self._sink
        self._stream.write(data)
        if sink.slow:
            # the core saw an event ([DONE] among them): the end may have come
            sink.slow = False
            if sink.out.len:
                PyList_Append(self._core.out, out_take(&sink.out))
            self._core.end_if(self._agg.done)
        return out_after(self._core, &self._sink.out)

    def close(self, *, truncated: bool = False) -> bytes:
        """The upstream ended: return the last bytes (none when it was truncated). ``truncated=True``
        says the transfer broke, so an answer without ``[DONE]`` is not taken as whole."""
        self._stream.close(truncated=truncated)
        self._sink.flush()
        self._sink.slow = False
        self._core.end_if(self._stream.verdict.complete)
        return out_after(self._core, &self._sink.out)

    def result(self) -> dict[str, Any]:
        """The upstream's folded ``chat.completion`` with its ``verdict`` (see ``ChatStream``)."""
        return self._stream.result()

    @property
    def verdict(self):
        """The upstream's verdict (see ``ChatStream``); the translation ends with the target's terminal
        event when choice 0 finished and ``[DONE]`` came."""
        return self._stream.verdict

    @property
    def complete(self) -> bool:
        """Whether the terminal event of a whole answer went out (the Python twin says when)."""
        return self._core.complete

    @property
    def dropped(self) -> int:
        """Upstream fields with no counterpart that were left out (other choices, nameless tool calls)."""
        return self._core.dropped

    @property
    def _fast_events(self) -> int:
        # Events the compiled fast path translated itself (for the tests that prove it ran).
        return self._sink.fast


@cython.final
cdef class ChatToMessages(_FromChat):
    """ChatToMessages(*, max_event_bytes=None)
--

Chat chunks in, Messages events out; see the Python twin (``fastsse.translate._from_chat_py``) for the
    mapping. Both behave identically."""

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        self._setup(MessagesFromChat(), max_event_bytes, False)


@cython.final
cdef class ChatToResponses(_FromChat):
    """ChatToResponses(*, max_event_bytes=None)
--

Chat chunks in, Responses events out; see the Python twin (``fastsse.translate._from_chat_py``) for the
    mapping. Both behave identically."""

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        self._setup(ResponsesFromChat(), max_event_bytes, True)

# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""Compiled ``Relay``; ``relay/_relay_py.py`` is the readable twin.

One pass per payload: the relay subclasses the compiled ``Decoder`` (the scanner), reads each
payload with the chat fold's validating reader (``_read``, cimported from ``chat._fold_c``),
decides from the reader's plan whether the chunk can go out as its own bytes, and folds the plan
into the ``ChatAggregator`` (``fast_apply``) with no dict built. The per-chunk repairs that leave
the chunk's shape alone are splices into those bytes: ``finish_reason: ""`` becomes ``null``, a
usage value on a chunk with choices is cut out (and held for the end), an ``id`` or ``model`` is
rewritten. A final chunk with an empty delta and an upstream usage chunk are taken here too,
with the core's state set as its rules would have left it; ``[DONE]`` goes to the core's
``done()`` with no parse. Everything else (first chunks, finals with text, tool-call resends,
errors, anything the reader gives up on) goes to ``_core.RelayCore``, the repair rules both
backends share.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_DATA, PyUnicode_GET_LENGTH
from libc.string cimport memcmp, memcpy

from ..chat._fold_c cimport (
    K_ARGUMENTS,
    K_CONTENT,
    K_REASONING,
    K_REASONING_CONTENT,
    K_REFUSAL,
    MAX_CHOICES,
    W_ANNOTATIONS,
    W_CALL,
    W_CHOICE,
    W_DELTA,
    W_FUNCTION,
    W_LOGPROBS,
    W_TOP,
    W_USAGE,
    ChoicePlan,
    Op,
    Other,
    Plan,
    _read,
    fast_apply,
    fix_top,
    fold_choices,
    fold_complete,
    fold_finished,
    fold_result,
    fold_usage,
    fold_verdict,
)
from ..sse._decoder_c cimport Decoder
from .._native.reader cimport F_ESC, Span, decode
from .._native.outbuf cimport KEEP_CAPACITY, OutBuf, out_free, out_put, out_reserve, out_take
from .._native.chunked cimport frame_chunk
from .._native.done cimport payload_is_done

from typing import Any

import orjson

from ..chat._fold_c import ChatAggregator
from ..chat import ChatVerdict
from .._errors import UsageError, too_large
from ._core import READER_FIELDS, RelayCore, check_options


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)


cdef enum:
    E_NULL = 0   # write null (an empty finish_reason)
    E_CUT        # write nothing (a usage member, with its comma)
    E_ID         # write the head id's JSON
    E_MODEL      # write the head model's JSON
    MAX_EDITS = MAX_CHOICES + 3
    U_END = 0
    U_KEEP
    U_DROP
    C_ANY = 0
    C_INT
    C_OTHER




cdef struct Edit:
    const char* start
    const char* end
    int what


cdef inline bint _blank(char c) noexcept nogil:
    return c == c' ' or c == c'\n' or c == c'\r' or c == c'\t'


cdef inline bint _span_is(Span s, const char* text, Py_ssize_t n) noexcept nogil:
    return s.flags == 0 and s.n == n and memcmp(s.p, text, n) == 0


cdef bint _same(Span s, object held) except -1:
    """Whether a validated string span spells the str ``held``."""
    if held is None or not PyUnicode_CheckExact(held):
        return False
    if s.flags == 0:
        return (
            PyUnicode_IS_ASCII(held)
            and PyUnicode_GET_LENGTH(held) == s.n
            and memcmp(PyUnicode_DATA(held), s.p, s.n) == 0
        )
    return decode(s) == held


cdef inline int _add_edit(Edit* edits, int* n, const char* start, const char* end, int what) noexcept nogil:
    # Kept sorted by start (insertion): spans never overlap, and there are at most MAX_EDITS.
    cdef int i = n[0]
    while i > 0 and edits[i - 1].start > start:
        edits[i] = edits[i - 1]
        i -= 1
    edits[i].start = start
    edits[i].end = end
    edits[i].what = what
    n[0] += 1
    return 0


@cython.final
cdef class Relay(Decoder):
    """Relay(*, on_chunk=None, max_event_bytes=None, usage="end", model=None, id=None, drop_fields=(), comments=True, keep_text=True)
--

Upstream bytes in, compliant bytes out, folded on the way: one per proxied stream, not safe to
    share between threads. ``write(data) -> bytes`` takes the next upstream bytes and returns what
    to send downstream now (often ``b""``); ``close() -> bytes`` ends the upstream and returns the
    tail. ``result()``, ``verdict`` and ``text()`` give the fold of what was forwarded, as
    ``ChatStream`` does. The README's "Relay" section lists every repair and option.

    ``write`` raises TypeError for anything but a byte buffer (the relay stays usable), ValueError
    after ``close()``, RuntimeError if ``on_chunk`` writes to its own relay, what ``on_chunk``
    raised, and EventTooLarge when an event passes ``max_event_bytes`` (the relay then stops; the
    exception's ``events`` holds one ``bytes``: what that call had to send before the event).
    The constructor raises ValueError or TypeError for a bad option.

    ``keep_text=False``: the fold keeps the facts and not the text (``ChatAggregator``'s option:
    ``text()`` is then ``""`` and ``result()`` has ``text_chars``), for a relay that only logs.
    """

    cdef object _agg
    cdef object _core
    cdef dict _seen  # the core's choices: the indexes it has repaired a first chunk of
    cdef unsigned long long _seen_bits  # which of the indexes 0-63 were found in _seen (it only grows)
    cdef bint _comments
    cdef bint _fast           # the fast path may run (no on_chunk, no field it cannot see to drop)
    cdef bint _drop_any
    cdef int _usage_mode
    cdef bint _halt           # the core stopped: [DONE], an error payload, an abort
    cdef bint _capped         # the core drops some tool call's fragments (RELAY_CALLS)
    cdef bint _has_head
    cdef bint _force_id
    cdef bint _force_model
    cdef object _head_id
    cdef object _head_created
    cdef int _created_kind    # the head's created: C_ANY (none), C_INT (in _created), C_OTHER
    cdef long long _created
    cdef object _head_model
    cdef bytes _id_json
    cdef bytes _model_json
    cdef OutBuf _out
    cdef bint _closed
    cdef bint _too_large
    cdef bint _eof_truncated
    cdef bint _writing
    cdef bint _in_core        # a call into the core has not returned (on_chunk may have stopped it)

    def __dealloc__(self):
        out_free(&self._out)

    def __init__(
        self,
        *,
        on_chunk=None,
        max_event_bytes=None,
        usage="end",
        model=None,
        id=None,
        drop_fields=(),
        comments=True,
        keep_text=True,
    ) -> None:
        Decoder.__init__(self, max_event_bytes=max_event_bytes)
        drop = check_options(usage, model, id, drop_fields)
        self._agg = ChatAggregator(keep_text=keep_text)
        self._core = RelayCore(self._agg, usage=usage, model=model, id=id, drop_fields=drop, on_chunk=on_chunk)
        self._seen = self._core.choices
        self._comments = bool(comments)
        self._drop_any = bool(drop)
        # a field the reader classifies itself is not among the values it hands over, so dropping
        # one is left to the core
        self._fast = on_chunk is None and drop.isdisjoint(READER_FIELDS)
        self._usage_mode = U_END if usage == "end" else U_KEEP if usage == "keep" else U_DROP
        self._force_id = id is not None
        self._force_model = model is not None

    # Public API

    @cython.binding(False)
    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Relay the next upstream bytes; returns the bytes to send downstream now."""
        return self._relay(data, False)

    cdef bytes _relay(self, object data, bint framed):
        # write(); ``framed``: what it returns as one HTTP/1.1 chunk (b"" stays b"")
        cdef bytes out
        if self._closed:
            raise UsageError("write() after close(): a Relay forwards one stream")
        if self._writing:
            raise UsageError("Relay.write() called again from inside on_chunk")
        self._writing = True
        self._overflowed = False
        try:
            self._feed_object(data)
        finally:
            self._writing = False
            if self._in_core:  # the core raised (on_chunk did): it may have stopped
                self._in_core = False
                if not self._halt and self._core.stopped:
                    self._halt = True
        if self._overflowed:
            out = self._take()
            self._too_large = True
            self._halt = True
            self._core.stopped = True
            self._stopped = True
            raise too_large(self._limit, [out])
        return self._take_framed() if framed else self._take()

    def close(self, *, truncated: bool = False) -> bytes:
        """End the upstream; returns the tail: the held usage chunk and ``[DONE]`` when the answer
        is whole (every choice finished, no error, nothing cut), else nothing at all.
        ``truncated=True`` says the upstream transfer broke (a transport error): the answer is then
        not whole unless it had already ended, and the client gets no ``[DONE]``."""
        if self._closed:
            return b""
        self._closed = True
        if not self._halt and not self._stopped:
            if self._line.len == 0 and self._head_len == 0 and self._ndata > 0 and not self._discarding:
                # every line of the last event arrived, only its blank line is missing: keep it
                self._overflowed = False
                self._process(self._data.ptr, 0)
        Decoder.close(self)
        self._eof_truncated = (self._truncated or truncated) and not self._core.stopped and not self._too_large
        whole = not (self._eof_truncated or self._too_large) and fold_finished(self._agg)
        head = self._take()
        return head + self._core.close(whole)

    def result(self) -> dict[str, Any]:
        """The folded ``chat.completion`` of what was forwarded, with ``"verdict"``: a new dict per call."""
        core = self._core
        # the fold's result with the relay's verdict, built once (not the fold's own, then replaced)
        return fold_result(self._agg, core.aborted, self._too_large, self._eof_truncated or core.lost, self._closed)

    @property
    def verdict(self) -> ChatVerdict:
        """How complete the forwarded stream is so far (``complete``, ``done``, ``truncated``, ...)."""
        core = self._core
        # a chunk that could not be read leaves a hole in the answer: as a cut would
        return fold_verdict(self._agg, core.aborted, self._too_large, self._eof_truncated or core.lost, self._closed)

    @property
    def complete(self) -> bool:
        """True once the answer sent is complete and nothing after can change it: ``[DONE]`` came
        after every choice finished (no error, abort or lost chunk). What comes next, a cut
        included, sends nothing more."""
        return self._complete()

    cdef bint _complete(self) except -1:
        core = self._core
        # halted by an event, or by close() adding [DONE] at a whole answer's clean end
        if not (self._halt or (self._closed and core.stopped)):
            return False
        return not (self._too_large or core.aborted or core.lost) and fold_complete(self._agg)

    @property
    def aggregator(self) -> ChatAggregator:
        """The ``ChatAggregator`` the forwarded chunks are folded into."""
        return self._agg

    def text(self, index: int = 0, /) -> str:
        """The content of choice ``index`` forwarded so far (``""`` if none), without building the result."""
        choice = fold_choices(self._agg).get(index)
        if choice is None:
            return ""
        parts = choice.content
        if parts is None:
            return ""
        return "".join(parts)

    @property
    def feed(self):
        """A Relay has no ``feed``: ``write(data)`` takes the upstream bytes and returns the bytes to
        send. (The scanner's ``feed`` it is built on returns events and would skip ``write``'s checks.)"""
        raise AttributeError("'Relay' object has no attribute 'feed': write(data) relays upstream bytes and returns the bytes to send")

    # Internals

    cdef bytes _take(self):
        return out_take(&self._out)

    cdef bytes _take_framed(self):
        # _take()'s bytes framed as one HTTP/1.1 chunk: one object and one copy
        cdef bytes framed
        if self._out.len == 0:
            return out_take(&self._out)
        framed = frame_chunk(self._out.ptr, self._out.len)
        self._out.len = 0
        if self._out.cap > KEEP_CAPACITY:
            out_free(&self._out)
        return framed

    cdef inline int _put(self, const char* p, Py_ssize_t n) except -1:
        if n <= 0:
            return 0
        out_reserve(&self._out, n)
        out_put(&self._out, p, n)
        return 0

    cdef int _sync(self) except -1:
        # After the core handled an event: whether it stopped, and the head it settled on.
        cdef int overflow = 0
        core = self._core
        self._halt = core.stopped
        self._capped = core.capped
        if not self._has_head and core.head:
            self._has_head = True
            self._head_id = core.head_id
            self._head_created = core.head_created
            self._created_kind = C_ANY if self._head_created is None else C_OTHER
            if PyLong_CheckExact(self._head_created):
                self._created = PyLong_AsLongLongAndOverflow(self._head_created, &overflow)
                if not overflow:
                    self._created_kind = C_INT
            self._head_model = core.head_model
            self._id_json = None if self._head_id is None else orjson.dumps(self._head_id)
            self._model_json = None if self._head_model is None else orjson.dumps(self._head_model)
        return 0

    cdef int _on_comment(self, const char* line, Py_ssize_t n) except -1:
        if self._comments and not self._halt:
            self._put(line, n)
            self._put(b"\n\n", 2)
        return 0

    cdef int _on_event(self, const char* data, Py_ssize_t n, const char* etype, Py_ssize_t tn) except -1:
        cdef Plan plan
        cdef bint is_error
        cdef bytes out
        if self._overflowed:  # stop at the oversized event: write raises EventTooLarge
            return 1
        if self._halt:
            return 1
        is_error = tn == 5 and memcmp(etype, b"error", 5) == 0
        if self._fast and not is_error and self._ndata <= 1 and self._has_head:
            if _read(data, n, &plan) and self._forward(data, n, &plan):
                return 0
        if not is_error and n < 64 and payload_is_done(data, n):
            return self._done()
        self._in_core = True
        out = self._core.event(PyBytes_FromStringAndSize(data, n), is_error, self._ndata > 1)
        self._put(PyBytes_AS_STRING(out), PyBytes_GET_SIZE(out))
        self._sync()
        self._in_core = False
        return 1 if self._halt else 0

    cdef int _forward(self, const char* data, Py_ssize_t n, Plan* plan) except -1:
        """Forward a chunk the reader accepted, as its own bytes with at most a few splices, and
        fold it: 1 if it did, 0 if the chunk needs the core (then nothing has changed). The checks
        mirror ``RelayCore.repair``: a chunk passes here exactly when the core would leave it
        alone or make only these splices."""
        cdef Edit edits[MAX_EDITS]
        cdef int nedits = 0
        cdef int i, j
        cdef ChoicePlan* cp
        cdef Op* op
        cdef Other* o
        cdef bint payload, bare
        cdef const char* start
        cdef const char* end
        cdef const char* stop = data + n
        cdef const char* at
        cdef bint cut_usage = False
        cdef bint id_edit = False
        cdef bint model_edit = False
        cdef bint usage_chunk = False
        cdef bint has_usage = False
        cdef long long finals[MAX_CHOICES]
        cdef int nfinals = 0
        if plan.quirks:
            return 0
        if plan.nchoices == 0:
            # "choices": [] and a usage: the core forwards it as it is unless usage="drop" (a
            # missing or null list it writes as [], a chunk without a usage it drops)
            if not plan.empty_choices or self._usage_mode == U_DROP:
                return 0
            usage_chunk = True
        if plan.object.p != NULL and not (
            _span_is(plan.object, b"chat.completion.chunk", 21) or _span_is(plan.object, b"text_completion", 15)
        ):
            return 0
        if plan.has_created and self._created_kind != C_ANY and (
            self._created_kind == C_OTHER or plan.created != self._created
        ):
            return 0
        if self._head_id is not None:
            if plan.id.p == NULL:
                if self._force_id:
                    return 0
            elif not _same(plan.id, self._head_id):
                _add_edit(edits, &nedits, plan.id.p - 1, plan.id.p + plan.id.n + 1, E_ID)
                id_edit = True
        if self._head_model is not None:
            if plan.model.p == NULL:
                if self._force_model:
                    return 0
            elif not _same(plan.model, self._head_model):
                _add_edit(edits, &nedits, plan.model.p - 1, plan.model.p + plan.model.n + 1, E_MODEL)
                model_edit = True
        for i in range(plan.nchoices):
            cp = &plan.choices[i]
            if cp.index < 0 or not cp.has_delta:
                continue  # the core leaves a choice without an index or a delta as it is
            if cp.role.p != NULL or not self._was_seen(cp.index):
                return 0  # a role to check, or the choice's first delta: the core adds the role
            if cp.finish.p != NULL:
                if cp.finish.n:
                    # A final chunk: the core forwards it as it is when its delta is {} and the
                    # choice has not finished (it splits one with text, clears a delta of nulls,
                    # drops a second finish). The core marks the choice finished once folded.
                    if not cp.empty_delta or self._seen[cp.index].finished:
                        return 0
                    finals[nfinals] = cp.index
                    nfinals += 1
                    continue
                _add_edit(edits, &nedits, cp.finish.p - 1, cp.finish.p + 1, E_NULL)
            payload = False
            bare = True
            for j in range(plan.nops):
                op = &plan.ops[j]
                if op.choice != i:
                    continue
                if op.target == K_ARGUMENTS:
                    payload = True
                    if op.index < 0 or self._capped:
                        # without an index it continues the most recent call, which the core
                        # tracks; once a call was dropped the core sees every fragment, so the
                        # call a fragment without an index continues is known exactly
                        return 0
                    if op.type.p != NULL and op.type.n:
                        return 0  # a type resent: the core drops it
                    if op.text.p == NULL and not self._has_other(plan, j):
                        return 0  # a fragment with nothing in it: the core drops it
                elif op.target == K_CONTENT or op.target == K_REASONING_CONTENT or op.target == K_REASONING or op.target == K_REFUSAL:
                    if op.text.n == 0:
                        return 0  # empty text: the core drops it
                    payload = True
                else:
                    bare = False  # legacy "text"
            for j in range(plan.nothers):
                o = &plan.others[j]
                if o.choice != i:
                    continue
                if o.where == W_DELTA or o.where == W_ANNOTATIONS:
                    payload = True
                elif o.where == W_CHOICE or o.where == W_LOGPROBS:
                    bare = False
            if not payload and bare:
                return 0  # nothing to deliver: the core drops the entry
        for j in range(plan.nothers):
            o = &plan.others[j]
            if o.where == W_USAGE:
                has_usage = True
                if self._usage_mode != U_KEEP and not usage_chunk:
                    # cut the member and one comma beside it
                    start = o.key - 1
                    end = o.value + o.value_n
                    at = start - 1
                    while at > data and _blank(at[0]):
                        at -= 1
                    if at[0] == c',':
                        start = at
                    else:
                        at = end
                        while at < stop and _blank(at[0]):
                            at += 1
                        if at < stop and at[0] == c',':
                            end = at + 1
                    _add_edit(edits, &nedits, start, end, E_CUT)
                    cut_usage = True
            elif self._drop_any and (o.where == W_TOP or o.where == W_CHOICE or o.where == W_DELTA):
                return 0
        if usage_chunk and not has_usage:
            return 0
        if not fast_apply(self._agg, plan):
            return 0
        # Forward, and keep the core's state as its repair would have left it.
        for i in range(nfinals):
            self._seen[finals[i]].finished = True
        if usage_chunk:
            self._core.usage_held = False  # the upstream's own usage chunk carries it
        if id_edit or model_edit:
            fix_top(self._agg, self._head_id if id_edit else None, self._head_model if model_edit else None)
        if cut_usage:
            core = self._core
            core.last_usage = fold_usage(self._agg)
            if self._usage_mode == U_END:
                core.usage_held = True
        out_reserve(&self._out, n + 8 + 2 * nedits + (
            (PyBytes_GET_SIZE(self._id_json) if id_edit else 0) + (PyBytes_GET_SIZE(self._model_json) if model_edit else 0)
        ))
        self._put(b"data: ", 6)
        at = data
        for i in range(nedits):
            self._put(at, edits[i].start - at)
            if edits[i].what == E_NULL:
                self._put(b"null", 4)
            elif edits[i].what == E_ID:
                self._put(PyBytes_AS_STRING(self._id_json), PyBytes_GET_SIZE(self._id_json))
            elif edits[i].what == E_MODEL:
                self._put(PyBytes_AS_STRING(self._model_json), PyBytes_GET_SIZE(self._model_json))
            at = edits[i].end
        self._put(at, stop - at)
        self._put(b"\n\n", 2)
        return 1

    cdef int _done(self) except -1:
        # [DONE] from upstream: the core's own done() (a held usage chunk first, or no [DONE] after
        # a lost chunk), called straight, not through event()'s parse
        cdef bytes out
        self._in_core = True
        out = self._core.done()
        self._put(PyBytes_AS_STRING(out), PyBytes_GET_SIZE(out))
        self._sync()
        self._in_core = False
        return 1

    cdef inline bint _was_seen(self, long long index) except -1:
        # ``index in self._seen``, remembered for 0-63 once true (the core never forgets a choice)
        if index < 64 and self._seen_bits & (<unsigned long long>1 << index):
            return True
        if index not in self._seen:
            return False
        if index < 64:
            self._seen_bits |= <unsigned long long>1 << index
        return True

    cdef bint _has_other(self, Plan* plan, int op) noexcept:
        cdef int j
        for j in range(plan.nothers):
            if (plan.others[j].where == W_CALL or plan.others[j].where == W_FUNCTION) and plan.others[j].op == op:
                return True
        return False


cdef bytes relay_write_framed(object relay, object data):
    if type(relay) is not Relay:
        return None
    return (<Relay>relay)._relay(data, True)


cdef int relay_complete(object relay) except -2:
    if type(relay) is not Relay:
        return -1
    return (<Relay>relay)._complete()

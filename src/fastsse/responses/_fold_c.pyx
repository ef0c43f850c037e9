# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""Compiled Responses fold and ResponsesStream; ``responses/_fold_py.py`` is the readable twin and the
reference. Each payload goes through ``orjson.loads`` and one dispatch on the event type (a dict
lookup to a small code); text fragments are kept in per-part lists joined once. ResponsesStream
subclasses the shared compiled FoldStream (a Decoder, in ``fold._stream_c``) and folds inside its
event hook, with no Event object per event.
The cold half (vocabulary, result assembly, the verdict) is shared Python in ``responses/_result.py``.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItemWithError, PyDict_SetItem
from cpython.list cimport PyList_Append
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.unicode cimport PyUnicode_GET_LENGTH
from cpython.object cimport PyObject
from libc.string cimport memcmp

from ..fold._stream_c cimport D_ARGUMENTS, D_REASONING, D_REFUSAL, D_TEXT, FastDelta, FoldCounters, FoldStream, check_payload, event_name, event_name_given
from .._native.done cimport payload_is_done
from .._native.reader cimport Span, decode, next_member, read_empty_array, read_key, read_plain, read_string, read_uint, skip_ws, span_is

from ..fold import CONTENT, REASONING
from ..fold import MAX_INDEX, format_verdict_dict, is_done, joined
from ._result import ITEM_OF_PART, ITEM_TEXT, PART_TEXT, build_response, event_error
from ._result import make_verdict as _make_verdict
from ._result import token_kind as _token_kind

cdef long long _MAX_INDEX = MAX_INDEX
cdef int CONTENT_C = CONTENT
cdef int REASONING_C = REASONING

cdef enum:
    E_OTHER
    E_LIFECYCLE
    E_TERMINAL
    E_ITEM_ADDED
    E_ITEM_DONE
    E_PART_ADDED
    E_PART_DONE
    E_SUMMARY_ADDED
    E_SUMMARY_DONE
    E_PART_DELTA
    E_PART_TEXT_DONE
    E_ITEM_DELTA
    E_ITEM_TEXT_DONE
    E_ANNOTATION
    E_ERROR

# The event vocabulary, read-only after import: event type -> (code, the stem's PART_TEXT or
# ITEM_TEXT entry).
cdef dict _CODES = {
    "response.created": (E_LIFECYCLE, None),
    "response.in_progress": (E_LIFECYCLE, None),
    "response.queued": (E_LIFECYCLE, None),
    "response.completed": (E_TERMINAL, None),
    "response.incomplete": (E_TERMINAL, None),
    "response.failed": (E_TERMINAL, None),
    "response.output_item.added": (E_ITEM_ADDED, None),
    "response.output_item.done": (E_ITEM_DONE, None),
    "response.content_part.added": (E_PART_ADDED, None),
    "response.content_part.done": (E_PART_DONE, None),
    "response.reasoning_summary_part.added": (E_SUMMARY_ADDED, None),
    "response.reasoning_summary_part.done": (E_SUMMARY_DONE, None),
    "response.output_text.annotation.added": (E_ANNOTATION, None),
    "error": (E_ERROR, None),
}
for _stem, _entry in PART_TEXT.items():
    _CODES[_stem + ".delta"] = (E_PART_DELTA, _entry)
    _CODES[_stem + ".done"] = (E_PART_TEXT_DONE, _entry)
for _stem, _entry in ITEM_TEXT.items():
    _CODES[_stem + ".delta"] = (E_ITEM_DELTA, _entry)
    _CODES[_stem + ".done"] = (E_ITEM_TEXT_DONE, _entry)
del _stem, _entry


cdef inline bint _is_index(object value) noexcept:
    return _as_index(value) >= 0


cdef inline long long _as_index(object value) noexcept:
    # The index a JSON integer names, or -1 (not an int, a bool, negative, past MAX_INDEX).
    cdef int overflow = 0
    cdef long long v
    if type(value) is not int:
        return -1
    v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or v < 0 or v > _MAX_INDEX:
        return -1
    return v


cdef inline object _get(dict d, str key):
    cdef PyObject* found = PyDict_GetItemWithError(d, key)
    return None if found is NULL else <object>found


cdef int _merge(dict held, dict new, tuple skip) except -1:
    for key, value in new.items():
        if value is not None and key not in skip:
            held[key] = value
    return 0


cdef bint _is_done(object payload) except -1:
    # [DONE] is short: only a short payload pays for the Python check.
    if type(payload) is bytes:
        return payload_is_done(PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload))
    return len(payload) <= 64 and is_done(payload)


cdef class _Part:
    """One content or summary part being assembled."""

    cdef public object index
    cdef public dict fields
    cdef public list text
    cdef public object done_text
    cdef public str text_key
    cdef public list annotations
    cdef public list logprobs

    def __cinit__(self, index, str text_key):
        self.index = index
        self.fields = {}
        self.text_key = text_key


@cython.final
cdef class _Item:
    """One output item being assembled."""

    cdef public object index
    cdef public dict fields
    cdef public dict parts
    cdef public dict summary
    cdef public list args
    cdef public object args_done
    cdef public object args_key
    cdef public bint announced
    cdef public bint done

    def __cinit__(self, index):
        self.index = index
        self.fields = {}
        self.parts = {}
        self.summary = {}


@cython.final
cdef class ResponsesAggregator(FoldCounters):
    """ResponsesAggregator()
--

Folds the events of an OpenAI Responses stream into the object the API returns without
    streaming. One aggregator per stream; not safe to share between threads. See the Python twin
    (``fastsse.responses._fold_py.ResponsesAggregator``) for the rules; both behave identically.
    """

    cdef dict _top
    cdef dict _items
    cdef dict _by_id
    cdef dict _extra
    cdef Py_ssize_t _last
    cdef object _terminal

    def __init__(self) -> None:
        self._top = {}
        self._items = {}
        self._by_id = {}
        self._extra = {}
        self._last = -1

    # Public API

    def feed(self, event: dict[str, Any], /) -> None:
        """Fold one parsed event. Something other than a dict is skipped and counted in ``skipped``."""
        if self._terminal is not None:
            self._ignored += 1
        elif type(event) is dict:
            self._take(<dict>event, None)
        else:
            self._skipped += 1

    def feed_data(self, payload: str | bytes | bytearray | memoryview, /) -> bool:
        """Parse one event's data and fold it: True if it was folded, False for a skipped or ignored
        payload and ``[DONE]``. It raises TypeError if ``payload`` is not str or bytes-like."""
        if type(payload) is not bytes and type(payload) is not str:
            check_payload(payload)
        return self._fold(payload, None) is not None

    def feed_event(self, event: Any, /) -> bool:
        """Fold one SSE event (anything with ``event`` and ``data`` attributes); returns what
        ``feed_data`` returns. It raises TypeError if ``event.data`` is not str or bytes-like."""
        data = event.data
        check_payload(data)
        name = event.event
        return self._fold(data, name if name and name != "message" else None) is not None

    def result(self) -> dict[str, Any]:
        """The response folded so far: a new dict (and new lists) on every call."""
        return build_response(self._top, self._items, self._extra, self._error)

    @property
    def terminal(self) -> str | None:
        """The terminal event that arrived (``"response.completed"``, ...), or None."""
        return self._terminal

    @property
    def deltas(self) -> int:
        """Text deltas folded so far (output, refusal, reasoning, arguments, code)."""
        return self._deltas

    @property
    def ignored(self) -> int:
        """Payloads ignored because they came after the terminal event."""
        return self._ignored

    # Internal entry points shared with ResponsesStream

    cdef object _verdict(self, bint aborted, bint too_big, bint truncated):
        return _make_verdict(
            self._top, self._items, self._terminal, self._error, self._departures,
            self._skipped, self._ignored, self._malformed, aborted, too_big, truncated,
        )

    cdef object _fold(self, object payload, object name):
        if _is_done(payload):
            return None
        if self._terminal is not None:
            self._ignored += 1
            return None
        if name is None and type(payload) is bytes and self._fast(PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload), NULL, 0, NULL):
            return True
        return self._parse_take(payload, name)

    cdef int _fast(self, const char* data, Py_ssize_t n, const char* etype, Py_ssize_t tn, FastDelta* out) except -1:
        # The hot events, response.{output_text,refusal,reasoning_text,reasoning_summary_text,
        # function_call_arguments}.delta with the fields OpenAI sends (sequence_number, item_id,
        # output_index, content_index or summary_index, delta, logprobs: [], obfuscation), read from
        # their bytes into an item and part that exist: 1 if folded. Anything else answers 0 with
        # nothing changed, and the payload goes the orjson way, which records what the reader left.
        cdef const char* p = data
        cdef const char* end = data + n
        cdef Span key, kind, skipped, text
        cdef long long output_index = -1
        cdef long long part_index = -1
        cdef long long number = 0
        cdef bint more = True
        cdef int seen = 0
        cdef int bit
        cdef int which  # 1 output_text, 2 refusal, 3 reasoning_text, 4 summary, 5 arguments
        cdef PyObject* found
        cdef _Item it
        cdef _Part part
        cdef object piece
        cdef int taken
        kind.p = text.p = NULL
        kind.n = text.n = 0
        p = skip_ws(p, end)
        if p >= end or p[0] != 123:
            return 0
        p = skip_ws(p + 1, end)
        while more:
            p = read_key(p, end, &key)
            if p == NULL:
                return 0
            if span_is(key, b"type", 4):
                bit = 1
                p = read_plain(p, end, &kind)
            elif span_is(key, b"delta", 5):
                bit = 2
                p = read_string(p, end, &text)
            elif span_is(key, b"output_index", 12):
                bit = 4
                p = read_uint(p, end, &output_index)
            elif span_is(key, b"content_index", 13):
                bit = 8
                p = read_uint(p, end, &part_index)
            elif span_is(key, b"summary_index", 13):
                bit = 16
                p = read_uint(p, end, &part_index)
            elif span_is(key, b"sequence_number", 15):
                bit = 32
                p = read_uint(p, end, &number)
            elif span_is(key, b"item_id", 7):
                bit = 64
                p = read_plain(p, end, &skipped)
            elif span_is(key, b"obfuscation", 11):
                bit = 128
                p = read_plain(p, end, &skipped)
            elif span_is(key, b"logprobs", 8):
                bit = 256
                p = read_empty_array(p, end)
            else:
                return 0
            if p == NULL or seen & bit:
                return 0
            seen |= bit
            p = next_member(p, end, &more, c'}')
            if p == NULL:
                return 0
        if skip_ws(p, end) != end or seen & 7 != 7 or output_index > _MAX_INDEX or part_index > _MAX_INDEX:
            return 0
        if tn and not (tn == kind.n and memcmp(etype, kind.p, tn) == 0):
            return 0
        if span_is(kind, b"response.output_text.delta", 26):
            which = 1
        elif span_is(kind, b"response.refusal.delta", 22):
            which = 2
        elif span_is(kind, b"response.reasoning_text.delta", 29):
            which = 3
        elif span_is(kind, b"response.reasoning_summary_text.delta", 37):
            which = 4
        elif span_is(kind, b"response.function_call_arguments.delta", 38):
            which = 5
        else:
            return 0
        # The index key the slow path reads for this kind must be the one present, alone.
        if which == 5:
            if seen & 24:
                return 0
        elif which == 4:
            if seen & 24 != 16:
                return 0
        elif seen & 24 != 8:
            return 0
        found = PyDict_GetItemWithError(self._items, <object>output_index)
        if found is NULL:
            return 0
        it = <_Item>found
        if which != 5:
            found = PyDict_GetItemWithError(it.summary if which == 4 else it.parts, <object>part_index)
            if found is NULL:
                return 0
        piece = decode(text)
        if piece is None:
            return 0
        self._deltas += 1
        self._fast_count += 1
        if out != NULL:  # what a translator's sink carries on
            out.which = D_TEXT if which == 1 else D_REFUSAL if which == 2 else D_ARGUMENTS if which == 5 else D_REASONING
            out.index = output_index
            out.text = text
        # 1 + the token kind (what the timing record counts): none for an empty fragment.
        taken = 1 if PyUnicode_GET_LENGTH(piece) == 0 else 1 + (REASONING_C if which == 3 or which == 4 else CONTENT_C)
        if which == 5:
            it.args_key = "arguments"
            if it.args is None:
                it.args = [piece]
            else:
                PyList_Append(it.args, piece)
            return taken
        part = <_Part>found
        if part.text is None:
            part.text = [piece]
        else:
            PyList_Append(part.text, piece)
        return taken

    cdef int _take(self, dict ev, object name) except -1:
        cdef object kind = _get(ev, "type")
        cdef PyObject* found
        cdef int code
        cdef tuple entry
        if type(kind) is not str:
            if kind is not None:
                self._malformed += 1
            if name is None:
                self._depart("untyped_event")
                return 0
            kind = name
        elif name is not None and name != kind:
            self._depart("type_mismatch")
        found = PyDict_GetItemWithError(_CODES, kind)
        if found is NULL:
            if not (<str>kind).startswith("response.") or (<str>kind).endswith(".delta"):
                self._depart("unknown_event")
            # Other response.* events are progress notes: the items' own events carry their state.
            return 0
        code = (<tuple>found)[0]
        entry = (<tuple>found)[1]
        if code == E_PART_DELTA:
            self._part_text(ev, entry, True)
        elif code == E_ITEM_DELTA:
            self._item_text(ev, entry, True)
        elif code == E_LIFECYCLE or code == E_TERMINAL:
            self._response(ev, kind, code == E_TERMINAL)
        elif code == E_PART_TEXT_DONE:
            self._part_text(ev, entry, False)
        elif code == E_ITEM_TEXT_DONE:
            self._item_text(ev, entry, False)
        elif code == E_ITEM_ADDED or code == E_ITEM_DONE:
            self._item_event(ev, code == E_ITEM_DONE)
        elif code == E_PART_ADDED or code == E_PART_DONE:
            self._part_event(ev, True, "content_index", code == E_PART_DONE)
        elif code == E_SUMMARY_ADDED or code == E_SUMMARY_DONE:
            self._part_event(ev, False, "summary_index", code == E_SUMMARY_DONE)
        elif code == E_ANNOTATION:
            p = self._part(ev, True, "output_text", "text", "content_index")
            annotation = _get(ev, "annotation")
            if annotation is not None:
                if p.annotations is None:
                    p.annotations = []
                PyList_Append(p.annotations, annotation)
        elif code == E_ERROR:
            self._error = event_error(ev)
        return 0

    cdef int _response(self, dict ev, str kind, bint terminal) except -1:
        cdef object response = _get(ev, "response")
        if type(response) is not dict:
            if response is not None:
                self._malformed += 1
        else:
            _merge(self._top, <dict>response, ("output",))
            output = (<dict>response).get("output")
            if terminal and type(output) is list:
                for i, item in enumerate(<list>output):
                    if type(item) is not dict:
                        self._malformed += 1  # an entry that is no item: dropped, counted
                        continue
                    held = self._items.get(i)
                    if held is None:
                        self._extra[i] = item
                        self._depart("item_only_in_terminal")
                    elif (<dict>item).get("id") != (<_Item>held).fields.get("id"):
                        self._depart("terminal_ids_differ")  # OpenRouter: the streamed items are kept
        if terminal:
            self._terminal = kind
        return 0

    cdef _Item _item(self, dict ev, str assumed):
        cdef object index = _get(ev, "output_index")
        cdef PyObject* found
        cdef _Item it
        cdef object item_id
        if not _is_index(index):
            if index is not None:
                self._malformed += 1
            item_id = _get(ev, "item_id")
            index = self._by_id.get(item_id) if type(item_id) is str else None
            if index is None:
                index = self._last if self._last > 0 else 0
        found = PyDict_GetItemWithError(self._items, index)
        if found is not NULL:
            it = <_Item>found
        else:
            it = _Item(index)
            PyDict_SetItem(self._items, index, it)
            it.fields["type"] = assumed
            item_id = _get(ev, "item_id")
            if type(item_id) is str:
                it.fields["id"] = item_id
                self._by_id[item_id] = index
            self._depart("item_not_announced")
        if index > self._last:
            self._last = index
        return it

    cdef int _item_event(self, dict ev, bint done) except -1:
        cdef object item = _get(ev, "item")
        cdef _Item it
        cdef object index = _get(ev, "output_index")
        if type(item) is not dict:
            # no item to make: an output item always has a type, and this event names none
            self._malformed += 1 + (not _is_index(index))
            return 0
        if not _is_index(index):
            self._malformed += 1
            item_id = (<dict>item).get("id")
            index = self._by_id.get(item_id) if type(item_id) is str else None
            if index is None:
                index = self._last + (0 if done else 1)
                if index < 0:
                    index = 0
        found = self._items.get(index)
        if found is None:
            it = _Item(index)
            self._items[index] = it
            if done:
                self._depart("item_not_announced")
        else:
            it = <_Item>found
            if not done and it.announced:
                self._depart("item_announced_twice")
        if index > self._last:
            self._last = index
        it.announced = True
        it.done = it.done or done
        _merge(it.fields, <dict>item, ())
        item_id = (<dict>item).get("id")
        if type(item_id) is str:
            self._by_id[item_id] = index
        return 0

    cdef object _index(self, dict ev, str key):
        cdef object index = _get(ev, key)
        if _is_index(index):
            return index
        if index is not None:
            self._malformed += 1
        return 0

    cdef _Part _part(self, dict ev, bint content, str part_type, str text_key, str key):
        # A part a text event names: created with the type the event implies if never announced.
        cdef _Item it = self._item(ev, ITEM_OF_PART[part_type])
        cdef dict parts = it.parts if content else it.summary
        cdef object index = self._index(ev, key)
        cdef PyObject* found = PyDict_GetItemWithError(parts, index)
        cdef _Part p
        if found is not NULL:
            return <_Part>found
        p = _Part(index, text_key)
        PyDict_SetItem(parts, index, p)
        p.fields["type"] = part_type
        self._depart("part_not_announced")
        return p

    cdef int _part_event(self, dict ev, bint content, str key, bint done) except -1:
        cdef object part = _get(ev, "part")
        cdef _Part p
        if type(part) is not dict:
            self._malformed += 1
            part = {}
        ptype = (<dict>part).get("type")
        # a summary part belongs to a reasoning item; a content part's type names its item's
        cdef _Item it = self._item(
            ev, "reasoning" if not content else ITEM_OF_PART.get(ptype, "message") if type(ptype) is str else "message"
        )
        cdef dict parts = it.parts if content else it.summary
        index = self._index(ev, key)
        found = parts.get(index)
        if found is None:
            p = _Part(index, "refusal" if ptype == "refusal" else "text")
            parts[index] = p
            if done:
                self._depart("part_not_announced")
        else:
            p = <_Part>found
        _merge(p.fields, <dict>part, (p.text_key, "annotations", "logprobs"))
        whole = (<dict>part).get(p.text_key)
        if type(whole) is str:
            self._done_text(p, whole)
        elif whole is not None:
            self._malformed += 1
        value = (<dict>part).get("annotations")
        if type(value) is list:
            if p.annotations is None or len(p.annotations) < len(<list>value):
                p.annotations = list(value)
        elif value is not None:
            self._malformed += 1
        value = (<dict>part).get("logprobs")
        if type(value) is list:
            if p.logprobs is None or len(p.logprobs) < len(<list>value):
                p.logprobs = list(value)
        elif value is not None:
            self._malformed += 1
        return 0

    cdef int _done_text(self, _Part p, str whole) except -1:
        if p.text is not None:
            if joined(p.text) != whole:
                self._depart("done_text_differs")
        elif p.done_text is None or len(whole) >= len(p.done_text):
            p.done_text = whole
        return 0

    cdef int _part_text(self, dict ev, tuple entry, bint delta) except -1:
        cdef _Part p = self._part(ev, entry[0] == "content", entry[1], entry[2], entry[3])
        cdef object text
        if delta:
            text = _get(ev, "delta")
            if type(text) is str:
                if p.text is None:
                    p.text = [text]
                else:
                    PyList_Append(p.text, text)
                self._deltas += 1
            elif text is not None:
                self._malformed += 1
            logprobs = _get(ev, "logprobs")
            if type(logprobs) is list and logprobs:
                if p.logprobs is None:
                    p.logprobs = []
                p.logprobs.extend(<list>logprobs)
        else:
            text = _get(ev, p.text_key)
            if type(text) is str:
                self._done_text(p, text)
            elif text is not None:
                self._malformed += 1
        return 0

    cdef int _item_text(self, dict ev, tuple entry, bint delta) except -1:
        cdef _Item it = self._item(ev, entry[0])
        cdef object text
        it.args_key = entry[1]
        if delta:
            text = _get(ev, "delta")
            if type(text) is str:
                if it.args is None:
                    it.args = [text]
                else:
                    PyList_Append(it.args, text)
                self._deltas += 1
            elif text is not None:
                self._malformed += 1
        else:
            text = _get(ev, entry[1])
            if type(text) is str:
                if it.args is not None:
                    if joined(it.args) != text:
                        self._depart("done_text_differs")
                else:
                    it.args_done = text
            elif text is not None:
                self._malformed += 1
        return 0


@cython.final
cdef class ResponsesStream(FoldStream):
    """ResponsesStream(on_chunk=None, *, max_event_bytes=None, timing=False)
--

Scans, parses and folds an OpenAI Responses stream in one pass, for pycurl's
    ``WRITEFUNCTION`` (or any push source); one per stream, not safe to share between threads.
    The protocol of ``ChatStream``; see the Python twin (``fastsse.responses._fold_py.ResponsesStream``).
    """

    def __init__(
        self, on_chunk: OnEvent | None = None, *, max_event_bytes: int | None = None, timing: bool = False
    ) -> None:
        FoldStream.__init__(self, on_chunk, max_event_bytes=max_event_bytes, timing=timing)
        self._agg = ResponsesAggregator()

    def result(self) -> dict[str, Any]:
        """The folded response so far, with ``"verdict"`` (as plain data): a new dict on every call."""
        out = self._agg.result()
        out["verdict"] = format_verdict_dict(self.verdict)
        return out

    @property
    def aggregator(self) -> ResponsesAggregator:
        """The ``ResponsesAggregator`` this stream folds into."""
        return self._agg

    cdef int _on_event(self, const char* data, Py_ssize_t n, const char* etype, Py_ssize_t tn) except -1:
        cdef FastDelta delta
        cdef ResponsesAggregator agg = <ResponsesAggregator>self._agg
        cdef int taken
        if self._overflowed:
            return 1
        if payload_is_done(data, n):
            return 0
        if agg._terminal is not None:
            agg._ignored += 1
            return 0
        if self._on_chunk is None:
            taken = agg._fast(data, n, etype, tn if event_name_given(etype, tn) else 0, NULL)
            if taken:
                if self._timed and taken > 1:
                    self._token(taken - 1, 1)
                return 0
        elif self._sink is not None:
            if self._sink.ready():
                taken = agg._fast(data, n, etype, tn if event_name_given(etype, tn) else 0, &delta)
                if taken:
                    if self._timed and taken > 1:
                        self._token(taken - 1, 1)
                    self._sink.take(&delta)
                    return 0
            self._sink.flush()
        return self._deliver(agg._parse_take(PyBytes_FromStringAndSize(data, n), event_name(etype, tn)))

    cdef int _kind(self, object event) except -1:
        return _token_kind(event)

    cdef object _verdict_now(self):
        return (<ResponsesAggregator>self._agg)._verdict(self._aborted, self._too_large, self._eof_truncated)

# cython: language_level=3
# The chat chunk reader: the fast reader's plan (what one chat.completion.chunk payload asks of the
# fold), the field vocabularies both ways into the fold classify keys with, and ``read_chunk``,
# which validates a payload with the byte reader (_native/reader.pxd) and fills a plan. Inline, so
# it inlines into chat/_fold_c.pyx's hot loop; that module exports it as ``_read`` to the relay
# and the translators (chat/_fold_c.pxd).

from cpython.object cimport PyObject
from libc.string cimport memcmp

from .._native.reader cimport (
    F_ESC,
    Span,
    is_null,
    named,
    next_member,
    read_key,
    read_null,
    read_text,
    read_uint,
    skip_value,
    skip_ws,
)

# Key codes: each dict is walked once and every key classified by its length first.
cdef enum:
    K_OTHER
    K_CHOICES
    K_OBJECT
    K_DROP
    K_ERROR
    K_TOP_ID
    K_CREATED
    K_MODEL
    K_FINGERPRINT
    K_USAGE
    K_TIER
    K_INDEX
    K_DELTA
    K_FINISH
    K_TEXT
    K_LOGPROBS
    K_CONTENT
    K_ROLE
    K_TOOL_CALLS
    K_REASONING_CONTENT
    K_REASONING
    K_REFUSAL
    K_ANNOTATIONS
    K_FUNCTION_CALL
    K_AUDIO
    K_ID
    K_FUNCTION
    K_TYPE
    K_NAME
    K_ARGUMENTS
    K_AUDIO_TEXT
    K_REASONING_DETAILS  # the 32nd code: _once keeps one bit per code in an unsigned int


cdef enum:
    MAX_CHOICES = 4
    MAX_OPS = 16
    MAX_OTHERS = 8


    # where a value the plan hands to orjson goes
    W_TOP = 0       # an unknown top-level field
    W_USAGE
    W_CHOICE        # an unknown choice field
    W_LOGPROBS
    W_DELTA         # an unknown delta field
    W_ANNOTATIONS
    W_CALL          # an unknown tool call field
    W_FUNCTION      # an unknown tool call function field
    W_DETAILS       # reasoning_details


cdef struct Op:
    int target        # the field it appends to (K_CONTENT ... K_TEXT), or K_ARGUMENTS for a tool call
    int choice        # index into Plan.choices
    long long index   # tool call index, -1 when the delta had none
    Span text         # what to append (p NULL: nothing; a tool call delta without arguments)
    Span type         # tool call type to compare (p NULL: absent)
    PyObject* call    # the resolved _Call (borrowed; set by _fast_take's check)


cdef struct Other:
    int where
    int choice        # Plan.choices index (W_CHOICE, W_LOGPROBS, W_DELTA, W_ANNOTATIONS)
    int op            # Plan.ops index (W_CALL, W_FUNCTION)
    const char* key   # plain ASCII
    Py_ssize_t key_n
    const char* value # the JSON text of a non-null value
    Py_ssize_t value_n


cdef struct ChoicePlan:
    long long index   # -1 when absent or null: the position in the list is the index
    long long pos
    bint has_delta
    bint empty_delta  # its "delta" (not "message") was {}: what a relay forwards as a bare final
    Span role
    Span finish
    PyObject* choice  # the resolved _Choice (borrowed)
    PyObject* last    # its most recent call as the plan's ops leave it (borrowed, NULL: none)


cdef struct Plan:
    Span id
    Span model
    Span fingerprint
    Span tier
    long long created
    bint has_created
    bint text_completion
    Span object       # the "object" value (p NULL: absent or null)
    bint empty_choices  # "choices" was [] (not absent, null or [null]): a usage chunk's shape
    int quirks        # Q_* bits: what the fold ignores but a relay repairs
    int nchoices
    int nops
    int nothers
    ChoicePlan choices[MAX_CHOICES]
    Op ops[MAX_OPS]
    Other others[MAX_OTHERS]


cdef enum:
    Q_EMPTY_CALLS = 1  # a delta held "tool_calls": []
    Q_NULL_HEAD = 2    # "id", "model" or "created" was null (a relay writes the first chunk's)


# One vocabulary for both ways in. Each classifier reads a field name's bytes (a key as it stands
# in a payload for the fast reader, a dict key's one-byte str data for the fold) and dispatches
# on the length first; a name that is not a field of that object is K_OTHER.

ctypedef int (*_Vocabulary)(const char* key, Py_ssize_t n) noexcept nogil


cdef inline bint _eq(const char* key, const char* name, Py_ssize_t n) noexcept nogil:
    return memcmp(key, name, n) == 0


cdef inline int _top_code(const char* k, Py_ssize_t n) noexcept nogil:
    if n == 2:
        if _eq(k, b"id", n):
            return K_TOP_ID
    elif n == 7:
        if _eq(k, b"choices", n):
            return K_CHOICES
        if _eq(k, b"created", n):
            return K_CREATED
    elif n == 5:
        if _eq(k, b"model", n):
            return K_MODEL
        if _eq(k, b"usage", n):
            return K_USAGE
        if _eq(k, b"error", n):
            return K_ERROR
    elif n == 6:
        if _eq(k, b"object", n):
            return K_OBJECT
    elif n == 18:
        if _eq(k, b"system_fingerprint", n):
            return K_FINGERPRINT
    elif n == 12:
        if _eq(k, b"service_tier", n):
            return K_TIER
    elif n == 11:
        if _eq(k, b"obfuscation", n):
            return K_DROP
    return K_OTHER


cdef inline int _choice_code(const char* k, Py_ssize_t n) noexcept nogil:
    if n == 5:
        if _eq(k, b"delta", n):
            return K_DELTA
        if _eq(k, b"index", n):
            return K_INDEX
    elif n == 13:
        if _eq(k, b"finish_reason", n):
            return K_FINISH
    elif n == 8:
        if _eq(k, b"logprobs", n):
            return K_LOGPROBS
    elif n == 7:
        if _eq(k, b"message", n):
            return K_DELTA
    elif n == 4:
        if _eq(k, b"text", n):
            return K_TEXT
    return K_OTHER


cdef inline int _delta_code(const char* k, Py_ssize_t n) noexcept nogil:
    if n == 7:
        if _eq(k, b"content", n):
            return K_CONTENT
        if _eq(k, b"refusal", n):
            return K_REFUSAL
    elif n == 4:
        if _eq(k, b"role", n):
            return K_ROLE
    elif n == 10:
        if _eq(k, b"tool_calls", n):
            return K_TOOL_CALLS
    elif n == 17:
        if _eq(k, b"reasoning_content", n):
            return K_REASONING_CONTENT
        if _eq(k, b"reasoning_details", n):
            return K_REASONING_DETAILS
    elif n == 9:
        if _eq(k, b"reasoning", n):
            return K_REASONING
    elif n == 11:
        if _eq(k, b"annotations", n):
            return K_ANNOTATIONS
    elif n == 13:
        if _eq(k, b"function_call", n):
            return K_FUNCTION_CALL
    elif n == 5:
        if _eq(k, b"audio", n):
            return K_AUDIO
    return K_OTHER


cdef inline int _call_code(const char* k, Py_ssize_t n) noexcept nogil:
    if n == 5:
        if _eq(k, b"index", n):
            return K_INDEX
    elif n == 2:
        if _eq(k, b"id", n):
            return K_ID
    elif n == 8:
        if _eq(k, b"function", n):
            return K_FUNCTION
    elif n == 4:
        if _eq(k, b"type", n):
            return K_TYPE
    return K_OTHER


cdef inline int _function_code(const char* k, Py_ssize_t n) noexcept nogil:
    if n == 9:
        if _eq(k, b"arguments", n):
            return K_ARGUMENTS
    elif n == 4:
        if _eq(k, b"name", n):
            return K_NAME
    return K_OTHER


cdef inline int _audio_code(const char* k, Py_ssize_t n) noexcept nogil:
    if n == 4:
        if _eq(k, b"data", n):
            return K_AUDIO_TEXT
    elif n == 10:
        if _eq(k, b"transcript", n):
            return K_AUDIO_TEXT
    return K_OTHER


# The fast reader ------------------------------------------------------------------------------
#
# Most chunks of a chat stream have one shape: the standard top-level fields with the values the
# previous chunk had, and one delta that appends a text fragment to a choice (or a tool call) that
# already exists. For those, building orjson's five dicts and a list only for the fold to walk and
# free them costs more than the fold itself. ``_read`` validates the whole payload as JSON in one
# pass over the bytes and records what the fold would do (a plan: spans of text to append, values
# to compare, and the spans of values the fold keeps whole, such as usage, logprobs or a
# provider's own fields, which orjson parses one by one); ``_fast_take`` checks the plan against
# the fold state and applies it. Anything else (a new choice or call, a changed role or call type,
# an error, escaped or repeated keys, numbers that are not small integers where the reader reads
# them, invalid UTF-8, lone surrogate escapes, invalid JSON) makes the reader give up before
# anything changed, and the payload goes through orjson and ``_take`` as before. So the fast path
# only ever produces what ``_take`` would have produced on orjson's dict: tests/test_fast_reader.py
# compares the two on hand-written and generated payloads, and the fuzz harness compares this
# backend with the Python twin, which has no fast path at all.


cdef inline const char* _other(
    const char* p, const char* end, Plan* plan, int where, int choice, int op, const char* key, Py_ssize_t n
) noexcept nogil:
    """A value the fold keeps as orjson parses it (usage, logprobs, annotations, provider fields):
    null is absent; anything else is recorded as a span for ``_fast_take`` to parse. A key seen
    before in the same object gives up (orjson keeps a repeated key's last value, maybe null)."""
    cdef int i
    cdef Other* o
    cdef const char* start = p
    for i in range(plan.nothers):
        o = &plan.others[i]
        if o.where == where and o.choice == choice and o.op == op and named(o.key, o.key_n, key, n):
            return NULL
    if is_null(p, end):
        return read_null(p, end)
    if plan.nothers == MAX_OTHERS:
        return NULL
    p = skip_value(p, end, 0)
    if p == NULL:
        return NULL
    o = &plan.others[plan.nothers]
    plan.nothers += 1
    o.where = where
    o.choice = choice
    o.op = op
    o.key = key
    o.key_n = n
    o.value = start
    o.value_n = p - start
    return p


cdef inline bint _once(unsigned int* seen, int code) noexcept nogil:
    # Mark a field (a K_ code) as read; False if it was read before (a repeated key: the slow
    # way). K_OTHER names are not counted here: ``_other`` checks those by name.
    cdef unsigned int bit = 1u << code
    if code == K_OTHER:
        return True
    if seen[0] & bit:
        return False
    seen[0] |= bit
    return True


cdef inline Op* _new_op(Plan* plan, int target, int choice) noexcept nogil:
    if plan.nops == MAX_OPS:
        return NULL
    cdef Op* op = &plan.ops[plan.nops]
    plan.nops += 1
    op.target = target
    op.choice = choice
    op.index = -1
    op.text.p = NULL
    op.type.p = NULL
    op.call = NULL
    return op


cdef inline const char* _read_function(const char* p, const char* end, Plan* plan, int opi) noexcept nogil:
    cdef Op* op = &plan.ops[opi]
    cdef Span key
    cdef bint more = True
    cdef Span name
    cdef unsigned int seen = 0
    cdef int code
    p = skip_ws(p + 1, end)
    if p < end and p[0] == c'}':
        return p + 1
    while more:
        p = read_key(p, end, &key)
        if p == NULL:
            return NULL
        code = _function_code(key.p, key.n)
        if not _once(&seen, code):
            return NULL
        if code == K_ARGUMENTS:
            p = read_text(p, end, &op.text)
        elif code == K_NAME:
            name.p = NULL
            p = read_text(p, end, &name)
            if p != NULL and name.p != NULL and name.n:
                return NULL  # a name fragment: the slow path applies the naming rules
        else:
            p = _other(p, end, plan, W_FUNCTION, op.choice, opi, key.p, key.n)
        p = next_member(p, end, &more, c'}')
        if p == NULL:
            return NULL
    return p


cdef inline const char* _read_tool_calls(const char* p, const char* end, Plan* plan, int choice) noexcept nogil:
    cdef Span key
    cdef bint more = True
    cdef bint members
    cdef unsigned int seen
    cdef int code
    cdef int opi
    cdef Op* op
    cdef Span span
    p = skip_ws(p + 1, end)
    if p < end and p[0] == c']':
        plan.quirks |= Q_EMPTY_CALLS
        return p + 1
    while more:
        if is_null(p, end):
            p = read_null(p, end)
        elif p < end and p[0] == c'{':
            op = _new_op(plan, K_ARGUMENTS, choice)
            if op == NULL:
                return NULL
            opi = plan.nops - 1
            seen = 0
            p = skip_ws(p + 1, end)
            members = not (p < end and p[0] == c'}')
            if not members:
                p += 1
            while members:
                p = read_key(p, end, &key)
                if p == NULL:
                    return NULL
                code = _call_code(key.p, key.n)
                if not _once(&seen, code):
                    return NULL
                if code == K_INDEX:
                    p = read_null(p, end) if is_null(p, end) else read_uint(p, end, &op.index)
                elif code == K_FUNCTION:
                    if is_null(p, end):
                        p = read_null(p, end)
                    elif p < end and p[0] == c'{':
                        p = _read_function(p, end, plan, opi)
                    else:
                        return NULL
                elif code == K_TYPE:
                    p = read_text(p, end, &op.type)
                elif code == K_ID:
                    span.p = NULL
                    p = read_text(p, end, &span)
                    if p != NULL and span.p != NULL and span.n:
                        return NULL  # an id: the slow path decides whether it starts a call
                else:
                    p = _other(p, end, plan, W_CALL, choice, opi, key.p, key.n)
                p = next_member(p, end, &members, c'}')
                if p == NULL:
                    return NULL
        else:
            return NULL
        p = next_member(p, end, &more, c']')
        if p == NULL:
            return NULL
    return p


cdef inline const char* _read_delta(const char* p, const char* end, Plan* plan, int choice) noexcept nogil:
    cdef Span key
    cdef bint more = True
    cdef unsigned int seen = 0
    cdef int code
    cdef Span span
    cdef Op* op
    p = skip_ws(p + 1, end)
    if p < end and p[0] == c'}':
        return p + 1
    while more:
        p = read_key(p, end, &key)
        if p == NULL:
            return NULL
        code = _delta_code(key.p, key.n)
        if not _once(&seen, code):
            return NULL
        if code == K_CONTENT or code == K_REASONING_CONTENT or code == K_REASONING or code == K_REFUSAL:
            span.p = NULL
            p = read_text(p, end, &span)
            if p != NULL and span.p != NULL:
                op = _new_op(plan, code, choice)
                if op == NULL:
                    return NULL
                op.text = span
        elif code == K_ROLE:
            p = read_text(p, end, &plan.choices[choice].role)
        elif code == K_TOOL_CALLS:
            if is_null(p, end):
                p = read_null(p, end)
            elif p < end and p[0] == c'[':
                p = _read_tool_calls(p, end, plan, choice)
            else:
                return NULL
        elif code == K_ANNOTATIONS:
            p = _other(p, end, plan, W_ANNOTATIONS, choice, -1, key.p, key.n)
        elif code == K_REASONING_DETAILS:
            p = _other(p, end, plan, W_DETAILS, choice, -1, key.p, key.n)
        elif code == K_AUDIO or code == K_FUNCTION_CALL:
            p = read_null(p, end)  # folded the slow way unless null
        else:
            p = _other(p, end, plan, W_DELTA, choice, -1, key.p, key.n)
        p = next_member(p, end, &more, c'}')
        if p == NULL:
            return NULL
    return p


cdef inline const char* _read_choice(const char* p, const char* end, Plan* plan, long long pos) noexcept nogil:
    cdef Span key
    cdef bint more = True
    cdef unsigned int seen = 0
    cdef int code
    cdef int choice
    cdef ChoicePlan* c
    cdef Span span
    cdef Op* op
    cdef const char* q
    if plan.nchoices == MAX_CHOICES:
        return NULL
    choice = plan.nchoices
    plan.nchoices += 1
    c = &plan.choices[choice]
    c.index = -1
    c.pos = pos
    c.has_delta = False
    c.empty_delta = False
    c.role.p = NULL
    c.finish.p = NULL
    c.choice = NULL
    p = skip_ws(p + 1, end)
    if p < end and p[0] == c'}':
        return p + 1
    while more:
        p = read_key(p, end, &key)
        if p == NULL:
            return NULL
        code = _choice_code(key.p, key.n)
        if not _once(&seen, code):  # "delta" and "message" share a code: both is a repeat
            return NULL
        if code == K_INDEX:
            p = read_null(p, end) if is_null(p, end) else read_uint(p, end, &c.index)
        elif code == K_DELTA:
            if is_null(p, end):
                p = read_null(p, end)
            elif p < end and p[0] == c'{':
                c.has_delta = True
                if key.n == 5:  # "delta" (the core relay reads no "message")
                    q = skip_ws(p + 1, end)
                    c.empty_delta = q < end and q[0] == c'}'
                p = _read_delta(p, end, plan, choice)
            else:
                return NULL
        elif code == K_FINISH:
            p = read_text(p, end, &c.finish)
        elif code == K_TEXT:
            span.p = NULL
            p = read_text(p, end, &span)
            if p != NULL and span.p != NULL:
                op = _new_op(plan, K_TEXT, choice)
                if op == NULL:
                    return NULL
                op.text = span
        elif code == K_LOGPROBS:
            p = _other(p, end, plan, W_LOGPROBS, choice, -1, key.p, key.n)
        else:
            p = _other(p, end, plan, W_CHOICE, choice, -1, key.p, key.n)
        p = next_member(p, end, &more, c'}')
        if p == NULL:
            return NULL
    return p


cdef inline const char* _read_choices(const char* p, const char* end, Plan* plan) noexcept nogil:
    cdef bint more = True
    cdef long long pos = 0
    p = skip_ws(p + 1, end)
    if p < end and p[0] == c']':
        return p + 1
    while more:
        if is_null(p, end):
            p = read_null(p, end)
        elif p < end and p[0] == c'{':
            p = _read_choice(p, end, plan, pos)
        else:
            return NULL
        if p == NULL:
            return NULL
        pos += 1
        p = next_member(p, end, &more, c']')
        if p == NULL:
            return NULL
    return p


cdef inline bint read_chunk(const char* p, Py_ssize_t size, Plan* plan) noexcept nogil:
    """Validate one payload and fill ``plan``: False when the payload needs the slow path."""
    cdef const char* end = p + size
    cdef Span key
    cdef bint more = True
    cdef unsigned int seen = 0
    cdef int code
    cdef Span span
    cdef const char* q
    plan.id.p = NULL
    plan.model.p = NULL
    plan.fingerprint.p = NULL
    plan.tier.p = NULL
    plan.has_created = False
    plan.text_completion = False
    plan.object.p = NULL
    plan.empty_choices = False
    plan.quirks = 0
    plan.nchoices = 0
    plan.nops = 0
    plan.nothers = 0
    p = skip_ws(p, end)
    if p >= end or p[0] != c'{':
        return False
    p = skip_ws(p + 1, end)
    if p < end and p[0] == c'}':
        more = False
        p += 1
    while more:
        p = read_key(p, end, &key)
        if p == NULL:
            return False
        code = _top_code(key.p, key.n)
        if not _once(&seen, code):
            return False  # a repeated key: orjson keeps the last value, in the first's place
        if code == K_TOP_ID:
            if is_null(p, end):
                plan.quirks |= Q_NULL_HEAD
            p = read_text(p, end, &plan.id)
        elif code == K_MODEL:
            if is_null(p, end):
                plan.quirks |= Q_NULL_HEAD
            p = read_text(p, end, &plan.model)
        elif code == K_FINGERPRINT:
            p = read_text(p, end, &plan.fingerprint)
        elif code == K_TIER:
            p = read_text(p, end, &plan.tier)
        elif code == K_CHOICES:
            if is_null(p, end):
                p = read_null(p, end)
            elif p < end and p[0] == c'[':
                q = skip_ws(p + 1, end)
                plan.empty_choices = q < end and q[0] == c']'
                p = _read_choices(p, end, plan)
            else:
                return False
        elif code == K_CREATED:
            if is_null(p, end):
                plan.quirks |= Q_NULL_HEAD
                p = read_null(p, end)
            else:
                p = read_uint(p, end, &plan.created)
                plan.has_created = True
        elif code == K_OBJECT or code == K_DROP:
            span.p = NULL
            p = read_text(p, end, &span)
            if p != NULL and code == K_OBJECT and span.p != NULL:
                if span.flags & F_ESC:
                    return False
                plan.object = span
                plan.text_completion = named(span.p, span.n, b"text_completion", 15)
        elif code == K_USAGE:
            p = _other(p, end, plan, W_USAGE, -1, -1, key.p, key.n)
        elif code == K_ERROR:
            p = read_null(p, end)  # an error payload goes the slow way
        else:
            p = _other(p, end, plan, W_TOP, -1, -1, key.p, key.n)
        p = next_member(p, end, &more, c'}')
        if p == NULL:
            return False
    return skip_ws(p, end) == end

# cython: language_level=3
# What other compiled modules reuse of the chat fold: the key codes, the fast reader's plan and
# ``_read``, and a few entry points into ChatAggregator (module functions rather than the class
# itself, so its layout, and _Choice's and _Call's, stay private to chat/_fold_c.pyx). The relay
# (relay/_relay_c.pyx) reads each payload once with ``_read``, decides from the plan whether the chunk
# can be forwarded as it is, and folds it with ``fast_apply``.

from cpython.object cimport PyObject

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
    F_ESC = 1       # the string holds a backslash escape
    F_UTF8 = 2      # the string holds non-ASCII bytes (valid UTF-8)
    MAX_CHOICES = 4
    MAX_OPS = 16
    MAX_OTHERS = 8
    MAX_DEPTH = 64  # of a value handed to orjson (orjson's own limit for the whole payload is 1024)
    MAX_DIGITS = 18  # any 18-digit integer fits an int64


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


cdef struct Span:
    const char* p   # the string's bytes between the quotes, escapes undecoded; NULL when absent
    Py_ssize_t n
    int flags


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
    int quirks        # Q_* bits: what the fold ignores but a relay repairs
    int nchoices
    int nops
    int nothers
    ChoicePlan choices[MAX_CHOICES]
    Op ops[MAX_OPS]
    Other others[MAX_OTHERS]


cdef enum:
    Q_EMPTY_CALLS = 1  # a delta held "tool_calls": []


cdef bint _read(const char* p, Py_ssize_t size, Plan* plan) noexcept nogil
cdef str _decode(Span s)

# ChatAggregator entry points (agg must be a compiled ChatAggregator).
cdef int fast_apply(object agg, Plan* plan) except -1
cdef object fold_usage(object agg)
cdef int fix_top(object agg, object id, object model) except -1
cdef dict fold_choices(object agg)
cdef object fold_verdict(object agg, bint aborted, bint too_large, bint truncated, bint ended)


# A translator's fast path on a ChatStream (see ChatSink in chat/_fold_c.pyx).
cdef class ChatSink:
    cdef int take(self, const char* data, Py_ssize_t n, bint is_error) except -1

cdef int set_sink(object stream, ChatSink sink) except -1
cdef object stream_aggregator(object stream)

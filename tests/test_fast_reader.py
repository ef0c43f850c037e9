"""The compiled fold's fast reader: payloads folded straight from their bytes, without orjson's
dicts, must end exactly where orjson + the fold end. The reference is the Python twin, which has
no fast reader. Each hand-written case also says whether the fast reader takes the payload (from
the rules in ``chat/_fold_c.pyx``, not from running it), so a reader that quietly gives up on
everything, or takes what it must leave to orjson, fails here as well."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsse
from test_aggregator_hypothesis import SHAPED_CHUNK

pytestmark = pytest.mark.c_extension

# Choices 0 and 1 exist, choice 0 has tool calls at index 0 ("f", id call_a) and 1 ("g", id
# call_b, the most recent), so continuation fragments can go the fast way.
SETUP = [
    b'{"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"m",'
    b'"system_fingerprint":"fp","service_tier":"default",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
    b'{"id":"c1","choices":[{"index":1,"delta":{"role":"assistant","content":""}}]}',
    b'{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a",'
    b'"type":"function","function":{"name":"f","arguments":""}}]}}]}',
    b'{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b",'
    b'"type":"function","function":{"name":"g","arguments":"{"}}]}}]}',
]
SUFFIX = [
    b'{"id":"c1","choices":[{"index":0,"delta":{"content":"!","tool_calls":[{"function":{"arguments":"}"}}]}}]}',
    b'{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    b"[DONE]",
]


def _content(text: bytes, **choice: bytes) -> bytes:
    extra = b"".join(b',"%s":%s' % (k.encode(), v) for k, v in choice.items())
    return b'{"id":"c1","choices":[{"index":0,"delta":{"content":%s}%s}]}' % (text, extra)


def _delta(delta: bytes, index: bytes = b"0") -> bytes:
    return b'{"id":"c1","choices":[{"index":%s,"delta":%s}]}' % (index, delta)


def _calls(calls: bytes) -> bytes:
    return _delta(b'{"tool_calls":%s}' % calls)


def _top(members: bytes) -> bytes:
    return b'{%s,"choices":[{"index":0,"delta":{"content":"x"}}]}' % members


FULL = (
    b'{"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"m",'
    b'"service_tier":"default","system_fingerprint":"fp","usage":null,"obfuscation":"Zx9",'
    b'"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}'
)

# (name, payload, taken by the fast reader)
CASES: list[tuple[str, bytes, bool]] = [
    # the shapes the reader exists for
    ("content", _content(b'"Hi"'), True),
    ("openai-full-chunk", FULL, True),
    ("empty-object", b"{}", True),
    (
        "whitespace-everywhere",
        b' \t{\r\n "id" : "c1" ,\n"choices" : [ { "index" : 0 , '
        b'"delta" : { "content" : "Hi" } , "finish_reason" : null } ] }\n ',
        True,
    ),
    ("escapes", _content(b'"a\\n\\t\\"\\\\\\/\\b\\f\\r\\u0000\\u00e9\\u4E2D\\ud83d\\ude00z"'), True),
    ("utf8", _content('"é中😀"'.encode()), True),
    (
        "utf8-edges",
        _content(b'"\xc2\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"'),
        True,
    ),
    ("empty-content", _content(b'""'), True),
    ("content-null", _content(b"null"), True),
    ("refusal", _delta(b'{"refusal":"no"}'), True),
    ("reasoning-content", _delta(b'{"reasoning_content":"think"}'), True),
    ("reasoning", _delta(b'{"reasoning":"hmm","content":"a"}'), True),
    ("legacy-text", b'{"choices":[{"index":0,"text":"abc","finish_reason":null}]}', True),
    ("text-null", b'{"choices":[{"index":0,"text":null}]}', True),
    ("message-not-delta", b'{"choices":[{"index":0,"message":{"content":"m"}}]}', True),
    ("delta-null", b'{"choices":[{"index":0,"delta":null}]}', True),
    ("delta-empty", b'{"choices":[{"index":0,"delta":{}}]}', True),
    ("finish-empty-string", _content(b'"a"', finish_reason=b'""'), True),
    ("role-same", _delta(b'{"role":"assistant","content":"a"}'), True),
    ("role-empty", _delta(b'{"role":"","content":"a"}'), True),
    ("role-null", _delta(b'{"role":null,"content":"a"}'), True),
    (
        "nulls-for-everything",
        _delta(
            b'{"content":"a","annotations":null,"audio":null,'
            b'"function_call":null,"tool_calls":null,"whatever":null}'
        ),
        True,
    ),
    ("unknown-choice-key-null", _content(b'"a"', native_finish_reason=b"null"), True),
    ("choice-without-index", b'{"choices":[{"delta":{"content":"a"}}]}', True),
    ("choice-index-null", b'{"choices":[{"index":null,"delta":{"content":"a"}}]}', True),
    (
        "two-choices",
        b'{"choices":[{"index":1,"delta":{"content":"b"}},{"index":0,"delta":{"content":"a"}}]}',
        True,
    ),
    ("choices-null", b'{"id":"c1","choices":null}', True),
    ("choices-empty", b'{"id":"c1","choices":[]}', True),
    ("choice-null-then-position-1", b'{"choices":[null,{"delta":{"content":"b"}}]}', True),
    ("id-changed", _top(b'"id":"c2"'), True),
    ("id-escaped-same", _top(b'"id":"c\\u0031"'), True),
    ("id-non-ascii", _top('"id":"ç"'.encode()), True),
    ("id-null", _top(b'"id":null'), True),
    ("model-changed", _top(b'"model":"m2"'), True),
    ("model-empty", _top(b'"model":""'), True),
    ("fingerprint-changed", _top(b'"system_fingerprint":"fp2"'), True),
    ("tier-changed", _top(b'"service_tier":"flex"'), True),
    ("created-changed", _top(b'"created":1700000001'), True),
    ("created-zero", _top(b'"created":0'), True),
    ("created-null", _top(b'"created":null'), True),
    ("object-text-completion", _top(b'"object":"text_completion"'), True),
    ("unknown-top-null", _top(b'"x_groq":null,"usage":null,"error":null'), True),
    ("tool-arguments", _calls(b'[{"index":0,"function":{"arguments":"{\\"a\\":1}"}}]'), True),
    ("tool-no-index-continues-last", _calls(b'[{"function":{"arguments":"1"}}]'), True),
    ("tool-type-same", _calls(b'[{"index":0,"type":"function","function":{"arguments":"a"}}]'), True),
    ("tool-type-empty", _calls(b'[{"index":0,"type":"","function":{"arguments":"a"}}]'), True),
    (
        "tool-id-empty-name-empty",
        _calls(b'[{"index":0,"id":"","function":{"name":"","arguments":"a"}}]'),
        True,
    ),
    (
        "tool-nulls",
        _calls(b'[{"index":0,"id":null,"type":null,"function":{"name":null,"arguments":null},"x":null}]'),
        True,
    ),
    ("tool-function-null", _calls(b'[{"index":1,"function":null}]'), True),
    ("tool-function-empty", _calls(b'[{"index":0,"function":{}}]'), True),
    ("tool-empty-object", _calls(b"[{}]"), True),
    ("tool-calls-empty", _calls(b"[]"), True),
    ("tool-calls-null-item", _calls(b'[null,{"index":0,"function":{"arguments":"a"}}]'), True),
    (
        "tool-two-fragments",
        _calls(b'[{"index":0,"function":{"arguments":"a"}},{"function":{"arguments":"b"}}]'),
        True,
    ),
    # everything else goes to orjson and the fold
    ("done", b"[DONE]", False),
    ("array", b"[1]", False),
    ("string", b'"x"', False),
    ("empty", b"", False),
    ("bom", b"\xef\xbb\xbf{}", False),
    ("lone-high-surrogate", _content(b'"\\ud83d"'), False),
    ("lone-low-surrogate", _content(b'"\\ude00"'), False),
    ("high-then-not-low", _content(b'"\\ud83d\\u0041"'), False),
    ("bad-escape", _content(b'"\\x41"'), False),
    ("bad-hex", _content(b'"\\u12g4"'), False),
    ("short-hex", _content(b'"\\u12"'), False),
    ("control-char", _content(b'"a\x01b"'), False),
    ("raw-tab", _content(b'"a\tb"'), False),
    ("overlong-nul", _content(b'"\xc0\x80"'), False),
    ("utf8-surrogate", _content(b'"\xed\xa0\x80"'), False),
    ("overlong-3", _content(b'"\xe0\x80\x80"'), False),
    ("overlong-4", _content(b'"\xf0\x80\x80\x80"'), False),
    ("past-10ffff", _content(b'"\xf4\x90\x80\x80"'), False),
    ("f5", _content(b'"\xf5\x80\x80\x80"'), False),
    ("truncated-utf8", _content(b'"\xe4\xb8"'), False),
    ("lone-continuation", _content(b'"\x80"'), False),
    ("non-ascii-outside-string", b'{"id":"c1"}\xc2\xa0', False),
    ("duplicate-content", _delta(b'{"content":"a","content":"b"}'), False),
    ("duplicate-content-null", _delta(b'{"content":"a","content":null}'), False),
    ("duplicate-index", b'{"choices":[{"index":0,"index":1,"delta":{"content":"a"}}]}', False),
    (
        "delta-and-message",
        b'{"choices":[{"index":0,"delta":{"content":"a"},"message":{"content":"b"}}]}',
        False,
    ),
    ("duplicate-id", b'{"id":"a","id":"b"}', False),
    ("duplicate-choices", b'{"choices":[],"choices":[{"index":0,"delta":{"content":"a"}}]}', False),
    # bytes below a space that JSON does not count as whitespace, where whitespace may stand
    ("form-feed-after-key", b'{"id"\x0c:"c1"}', False),
    ("vertical-tab-after-colon", b'{"id":\x0b"c1"}', False),
    ("nul-after-value", b'{"id":"c1"\x00}', False),
    ("nul-before-object", b'\x00{"id":"c1"}', False),
    ("trailing-garbage", _content(b'"a"') + b"x", False),
    ("two-objects", b"{}{}", False),
    ("trailing-comma-object", b'{"id":"c1",}', False),
    ("trailing-comma-array", b'{"choices":[{"index":0,"delta":{"content":"a"}},]}', False),
    ("missing-comma", b'{"id":"c1" "model":"m"}', False),
    ("missing-colon", b'{"id" "c1"}', False),
    ("wrong-closer", b'{"choices":[{"index":0}}}', False),
    ("truncated", _content(b'"a"')[:-3], False),
    ("unterminated-string", b'{"id":"c1', False),
    ("index-leading-zero", b'{"choices":[{"index":00,"delta":{"content":"a"}}]}', False),
    ("index-minus-zero", b'{"choices":[{"index":-0,"delta":{"content":"a"}}]}', False),
    ("index-float", b'{"choices":[{"index":0.0,"delta":{"content":"a"}}]}', False),
    ("index-exponent", b'{"choices":[{"index":0e0,"delta":{"content":"a"}}]}', False),
    ("index-string", b'{"choices":[{"index":"0","delta":{"content":"a"}}]}', False),
    ("index-true", b'{"choices":[{"index":true,"delta":{"content":"a"}}]}', False),
    ("new-choice", b'{"choices":[{"index":2,"delta":{"content":"a"}}]}', False),
    (
        "same-choice-twice",
        b'{"choices":[{"index":0,"delta":{"content":"a"}},{"index":0,"delta":{"content":"b"}}]}',
        False,
    ),
    ("five-choices", b'{"choices":[' + b",".join([b"{}"] * 5) + b"]}", False),
    ("created-float", _top(b'"created":1.7e9'), False),
    ("created-negative", _top(b'"created":-1'), False),
    ("created-19-digits", _top(b'"created":1000000000000000000'), False),
    ("created-huge", _top(b'"created":99999999999999999999999'), False),
    ("id-number", _top(b'"id":5'), False),
    ("object-escaped", _top(b'"object":"text\\u005fcompletion"'), False),
    ("object-number", _top(b'"object":5'), False),
    ("error", b'{"error":{"message":"boom"}}', False),
    ("choices-number", b'{"choices":5}', False),
    ("choice-number", b'{"choices":[5]}', False),
    ("delta-list", b'{"choices":[{"index":0,"delta":[]}]}', False),
    ("finish-number", _content(b'"a"', finish_reason=b"5"), False),
    ("logprobs-false", _content(b'"a"', logprobs=b"false"), False),
    ("role-changed", _delta(b'{"role":"tool","content":"a"}'), False),
    ("role-number", _delta(b'{"role":5}'), False),
    ("content-number", _content(b"5"), False),
    ("audio", _delta(b'{"audio":{"data":"AA"}}'), False),
    ("function-call", _delta(b'{"function_call":{"arguments":"a"}}'), False),
    ("escaped-key", _delta(b'{"con\\u0074ent":"a"}'), False),
    ("non-ascii-key", _delta('{"cöntent":"a"}'.encode()), False),
    ("tool-type-changed", _calls(b'[{"index":0,"type":"custom","function":{"arguments":"a"}}]'), False),
    ("tool-id", _calls(b'[{"index":0,"id":"call_a","function":{"arguments":"a"}}]'), False),
    ("tool-name", _calls(b'[{"index":0,"function":{"name":"f","arguments":"a"}}]'), False),
    ("tool-new-index", _calls(b'[{"index":5,"function":{"arguments":"a"}}]'), False),
    ("tool-index-string", _calls(b'[{"index":"0","function":{"arguments":"a"}}]'), False),
    ("tool-arguments-number", _calls(b'[{"index":0,"function":{"arguments":5}}]'), False),
    ("tool-item-number", _calls(b"[5]"), False),
    ("tool-function-list", _calls(b'[{"index":0,"function":[]}]'), False),
    ("tool-calls-object", _calls(b"{}"), False),
    ("tool-too-many", _calls(b"[" + b",".join([b'{"index":0}'] * 17) + b"]"), False),
    # values kept whole (usage, logprobs, annotations, provider fields) are parsed by orjson alone
    ("unknown-top-value", _top(b'"x_groq":{"id":"q"}'), True),
    ("usage", b'{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}', True),
    ("finish-stop", _content(b'"a"', finish_reason=b'"stop"'), True),
    ("logprobs", _content(b'"a"', logprobs=b'{"content":[]}'), True),
    ("annotations", _delta(b'{"annotations":[]}'), True),
    ("unknown-delta-value", _delta(b'{"content":"a","x":1}'), True),
    ("unknown-choice-value", _content(b'"a"', x=b'"y"'), True),
    ("tool-unknown-value", _calls(b'[{"index":0,"x":1}]'), True),
    ("tool-function-unknown-value", _calls(b'[{"index":0,"function":{"x":1}}]'), True),
    ("deep-unknown", _top(b'"x":' + b"[" * 50 + b"]" * 50), True),
    ("unknown-null-then-value", _top(b'"x":null,"x":{"a":1}'), True),
    ("unknown-value-then-null", _top(b'"x":{"a":1},"x":null'), False),
    ("unknown-twice", _top(b'"x":1,"x":2'), False),
    (
        "same-key-in-three-objects",
        b'{"x":1,"choices":[{"index":0,"x":2,"delta":{"x":3,"content":"a"}}]}',
        True,
    ),
    (
        "usage-with-details",
        b'{"id":"c1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,'
        b'"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}',
        True,
    ),
    (
        "azure-content-filter",
        b'{"choices":[{"index":0,"delta":{"content":"a"},'
        b'"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}',
        True,
    ),
    ("openrouter-provider", _top(b'"provider":"OpenAI","native_finish_reason":null'), True),
    ("unknown-value-forms", _top(b'"x":[-0,1e5,-2.5E-3,true,false,null,"s\\n",{},[]]'), True),
    ("unknown-bad-number", _top(b'"x":1.5e'), False),
    ("unknown-leading-zero", _top(b'"x":01'), False),
    ("unknown-bare-minus", _top(b'"x":-'), False),
    ("unknown-bad-literal", _top(b'"x":tru'), False),
    ("unknown-unterminated-array", _top(b'"x":[1,2'), False),
    ("unknown-missing-colon", _top(b'"x":{"a" 1}'), False),
    ("unknown-bad-utf8", _top(b'"x":"\xff"'), False),
    ("unknown-lone-surrogate", _top(b'"x":"\\ud800"'), False),
    ("eight-unknowns", _top(b",".join(b'"k%d":%d' % (i, i) for i in range(8))), True),
    ("nine-unknowns", _top(b",".join(b'"k%d":%d' % (i, i) for i in range(9))), False),
    ("deep-unknown-100", _top(b'"x":' + b"[" * 100 + b"]" * 100), False),
    ("logprobs-list", _content(b'"a"', logprobs=b"[]"), False),
    (
        "duplicate-logprobs",
        b'{"choices":[{"index":0,"delta":{},"logprobs":{"content":[]},"logprobs":null}]}',
        False,
    ),
    ("annotations-object", _delta(b'{"annotations":{}}'), False),
    ("finish-escaped", _content(b'"a"', finish_reason=b'"st\\u006fp"'), True),
    # provider shapes (issue 15): taken and folded by the shared rules, or left to the fold
    (
        "reasoning-details-fragment",
        _delta(
            b'{"reasoning":"x","reasoning_details":[{"type":"reasoning.text","text":"x",'
            b'"format":"anthropic-claude-v1","index":0}]}'
        ),
        True,
    ),
    ("reasoning-details-empty", _delta(b'{"content":"","reasoning_details":[]}'), True),
    ("reasoning-details-null", _delta(b'{"content":"a","reasoning_details":null}'), True),
    ("reasoning-details-signature", _delta(b'{"reasoning_details":[{"signature":"","index":0}]}'), True),
    ("reasoning-details-malformed-part", _delta(b'{"reasoning_details":[5,{"index":"0"}]}'), True),
    ("reasoning-details-object", _delta(b'{"reasoning_details":{"index":0}}'), False),
    (
        "annotations-one-citation",
        _delta(b'{"annotations":[{"type":"url_citation","url_citation":{"url":"https://a"}}]}'),
        True,
    ),
    (
        "content-parts",
        _delta(b'{"content":[{"type":"thinking","thinking":[{"type":"text","text":"t"}]}]}'),
        False,
    ),
    ("content-parts-text", _delta(b'{"content":[{"type":"text","text":"a"}]}'), False),
    ("content-parts-empty", _delta(b'{"content":[]}'), False),
    ("content-object", _delta(b'{"content":{"type":"text"}}'), False),
    ("x-groq-usage", _top(b'"x_groq":{"id":"q","usage":{"total_tokens":3}}'), True),
    ("x-groq-usage-null", _top(b'"x_groq":{"id":"q","usage":null}'), True),
    ("x-groq-not-object", _top(b'"x_groq":[1]'), True),
    (
        "finish-and-usage-chunk",
        b'{"choices":[{"index":1,"delta":{},"finish_reason":"length"}],"usage":{"total_tokens":3}}',
        True,
    ),
]


def _observe(agg: Any) -> tuple[Any, ...]:
    return (agg.result(), agg.verdict, agg.error, agg.done)


def _feed_all(agg: Any, payloads: list[Any]) -> list[bool]:
    return [agg.feed_data(p) for p in payloads]


@pytest.mark.parametrize(("name", "payload", "fast"), CASES, ids=[c[0] for c in CASES])
def test_fast_reader_matches_orjson_and_the_fold(name: str, payload: bytes, fast: bool) -> None:
    c_agg = fastsse.get_backend("cython").ChatAggregator()
    py_agg = fastsse.get_backend("python").ChatAggregator()
    assert _feed_all(c_agg, SETUP) == _feed_all(py_agg, SETUP)
    before = c_agg._fast_folds
    assert c_agg.feed_data(payload) == py_agg.feed_data(payload)
    assert (c_agg._fast_folds - before == 1) is fast
    assert _observe(c_agg) == _observe(py_agg)
    assert _feed_all(c_agg, SUFFIX) == _feed_all(py_agg, SUFFIX)
    assert _observe(c_agg) == _observe(py_agg)


# What a string may hold that is not plain ASCII, valid or not: the reader skips plain ASCII 8 bytes
# at a time, so each goes at every offset in and around a word, in strings of every length.
STRING_PARTS = [
    b'"',
    b"\\",
    b"\\n",
    b"\\x",
    b"\\u00e9",
    b"\\ud83d\\ude00",
    b"\\ud83d",
    b"\x01",
    b"\x1f",
    b"\t",
    b"\x7f",
    b"\xc3\xa9",
    b"\xe2\x82\xac",
    b"\xf0\x9f\x98\x80",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xff",
]


@pytest.mark.parametrize("part", STRING_PARTS)
def test_fast_reader_finds_a_non_plain_byte_anywhere_in_a_string(part: bytes) -> None:
    for before in range(18):
        for after in (0, 1, 7, 8, 9):
            payload = _content(b'"' + b"a" * before + part + b"b" * after + b'"')
            c_agg = fastsse.get_backend("cython").ChatAggregator()
            py_agg = fastsse.get_backend("python").ChatAggregator()
            _feed_all(c_agg, SETUP)
            _feed_all(py_agg, SETUP)
            assert c_agg.feed_data(payload) == py_agg.feed_data(payload), payload
            assert _observe(c_agg) == _observe(py_agg), payload


# The field names the reader knows in each object it walks (chat/_chunk_reader.pxd), and a payload
# with a slot for one more member in that object ("top-last": the payload's last member, so the
# key ends in the reader's last 8 bytes). The reader finds a key's end 8 bytes at a time, then
# classifies the key by its length and bytes.
TOP_NAMES = (b"id", b"choices", b"created", b"model", b"usage", b"error", b"object", b"system_fingerprint")
TOP_NAMES += (b"service_tier", b"obfuscation")
DELTA_NAMES = (b"content", b"refusal", b"role", b"tool_calls", b"reasoning_content", b"reasoning_details")
DELTA_NAMES += (b"reasoning", b"annotations", b"function_call", b"audio")
KEY_SLOTS = {
    "top": (b'{"id":"c1",%s,"choices":[{"index":0,"delta":{"content":"a"}}]}', TOP_NAMES),
    "top-last": (b'{"id":"c1","choices":[{"index":0,"delta":{"content":"a"}}],%s}', TOP_NAMES),
    "choice": (
        b'{"id":"c1","choices":[{"index":0,%s,"delta":{"content":"a"}}]}',
        (b"delta", b"index", b"finish_reason", b"logprobs", b"message", b"text"),
    ),
    "delta": (b'{"id":"c1","choices":[{"index":0,"delta":{"content":"a",%s}}]}', DELTA_NAMES),
    "call": (
        _calls(b'[{"index":0,%s,"function":{"arguments":"a"}}]'),
        (b"index", b"id", b"function", b"type"),
    ),
    "function": (_calls(b'[{"index":0,"function":{"arguments":"a",%s}}]'), (b"arguments", b"name")),
}


def _near_keys(name: bytes) -> list[tuple[bytes, bool]]:
    """Keys that share a prefix, a suffix or the length with a known name, and the name itself
    escaped or with a byte that is not plain ASCII: (key as written, taken by the fast reader,
    which only ever takes a plain ASCII key that is not a known name of its object)."""
    plain = [name[:-1], name[1:], name + b"s", b"_" + name, name + b"a" * (8 - len(name) % 8)]
    plain += [name[:i] + b"X" + name[i + 1 :] for i in range(len(name))]
    other = [name[:i] + b"\\u%04x" % name[i] + name[i + 1 :] for i in range(len(name))]
    other += [name + b"\\n", b"\\/" + name, name[:-1] + b"\xc3\xa9", name + b"\x01", name + b"\x7f\x80"]
    return [(k, True) for k in plain] + [(k, False) for k in other]


@pytest.mark.parametrize("slot", list(KEY_SLOTS))
def test_fast_reader_tells_a_known_key_from_a_near_one(slot: str) -> None:
    template, names = KEY_SLOTS[slot]
    keys = [k for name in names for k in _near_keys(name)]
    # and keys of every length, with each kind of byte that is not plain at every offset
    for part in (b"\\u0061", b'\\"', b"\xc3\xa9", b"\x01", b"\t", b'"', b"\x7f"):
        keys += [
            (b"k" * before + part + b"k" * after, part == b"\x7f")
            for before in range(18)
            for after in (0, 1, 7, 8)
        ]
    for key, plain in keys:
        for value in (b'"zz"', b"0"):
            payload = template % (b'"%s":%s' % (key, value))
            c_agg = fastsse.get_backend("cython").ChatAggregator()
            py_agg = fastsse.get_backend("python").ChatAggregator()
            _feed_all(c_agg, SETUP)
            _feed_all(py_agg, SETUP)
            before = c_agg._fast_folds
            assert c_agg.feed_data(payload) == py_agg.feed_data(payload), payload
            assert _observe(c_agg) == _observe(py_agg), payload
            if key not in names:
                assert (c_agg._fast_folds - before == 1) is plain, payload


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


TEXT_CASES = [c for c in CASES if _is_utf8(c[1])]  # what a str can hold


@pytest.mark.parametrize(("name", "payload", "fast"), TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_fast_reader_takes_str_payloads_alike(name: str, payload: bytes, fast: bool) -> None:
    text = payload.decode("utf-8")
    c_agg = fastsse.get_backend("cython").ChatAggregator()
    py_agg = fastsse.get_backend("python").ChatAggregator()
    for agg in (c_agg, py_agg):
        _feed_all(agg, [p.decode() for p in SETUP])
    before = c_agg._fast_folds
    assert c_agg.feed_data(text) == py_agg.feed_data(text)
    assert (c_agg._fast_folds - before == 1) is fast
    for agg in (c_agg, py_agg):
        _feed_all(agg, [p.decode() for p in SUFFIX])
    assert _observe(c_agg) == _observe(py_agg)


def _frame(payloads: list[bytes]) -> bytes:
    # A payload's own line breaks become data lines, which the decoder joins with LF again.
    return b"".join(b"".join(b"data: " + line + b"\n" for line in p.split(b"\n")) + b"\n" for p in payloads)


STREAMABLE = [c for c in CASES if b"\r" not in c[1]]  # a CR inside a payload would end its line


@pytest.mark.parametrize(("name", "payload", "fast"), STREAMABLE, ids=[c[0] for c in STREAMABLE])
def test_chat_stream_folds_the_same_with_and_without_on_chunk(name: str, payload: bytes, fast: bool) -> None:
    """ChatStream uses the fast reader only when nobody asked for the chunks."""
    raw = _frame([*SETUP, payload, *SUFFIX])
    c_seen: list[Any] = []
    py_seen: list[Any] = []
    streams = [
        fastsse.get_backend("cython").ChatStream(),
        fastsse.get_backend("cython").ChatStream(c_seen.append),
        fastsse.get_backend("python").ChatStream(),
        fastsse.get_backend("python").ChatStream(py_seen.append),
    ]
    for stream in streams:
        for i in range(0, len(raw), 7):
            stream.write(raw[i : i + 7])
        stream.close()
    results = [stream.result() for stream in streams]
    assert results[0] == results[1] == results[2] == results[3]
    assert c_seen == py_seen
    assert streams[1].aggregator._fast_folds == 0
    ref = fastsse.get_backend("python").ChatAggregator()
    _feed_all(ref, [*SETUP, payload])
    suffix_fast = 0 if ref.done or ref.error is not None else 2  # SUFFIX's two chunks
    assert streams[0].aggregator._fast_folds == fast + suffix_fast


# A value a chunk carries whole, as JSON writes it; the plain scalars among them (an integer of at
# most 18 digits, a string, true, false) are read without orjson. Each must keep the type and value
# orjson gives it (True is not 1, 1 is not 1.0, an integer past 64 bits is a float), whether read
# here or left to orjson.
KEPT_VALUES = [
    b"0",
    b"-0",
    b"7",
    b"-7",
    b"123456789012345678",
    b"-123456789012345678",
    b"1234567890123456789",  # 19 digits: orjson's
    b"18446744073709551615",
    b"99999999999999999999999",  # past 64 bits: a float, as orjson reads it
    b"-9223372036854775809",
    b"1.0",
    b"1e3",
    b"-2.5E-3",
    b'""',
    b'"plain"',
    b'"esc\\"aped\\u00e9\\n"',
    '"é中😀"'.encode(),
    b"true",
    b"false",
    b"[1]",
    b'{"a":true}',
]
REFUSED_VALUES = [b"01", b"-", b"-a", b"1.", b"tru", b"True", b'"\\ud800"', b'"\xff"']


@pytest.mark.parametrize(
    ("value", "kept"), [(v, True) for v in KEPT_VALUES] + [(v, False) for v in REFUSED_VALUES]
)
def test_fast_reader_keeps_a_whole_value_as_json_types_it(value: bytes, kept: bool) -> None:
    """A value JSON reads is folded the fast way with the type and value orjson gives it; one
    JSON refuses leaves the payload to the slow path, which ends as the twin ends."""
    payload = _top(b'"x":%s' % value)
    c_agg = fastsse.get_backend("cython").ChatAggregator()
    py_agg = fastsse.get_backend("python").ChatAggregator()
    _feed_all(c_agg, SETUP)
    _feed_all(py_agg, SETUP)
    before = c_agg._fast_folds
    assert c_agg.feed_data(payload) == py_agg.feed_data(payload)
    assert c_agg._fast_folds - before == kept
    assert _observe(c_agg) == _observe(py_agg)
    if kept:
        expected = orjson.loads(value)
        got = c_agg.result()["x"]
        assert (type(got), got) == (type(expected), expected)
        assert orjson.dumps(c_agg.result()) == orjson.dumps(py_agg.result())


def test_fast_reader_takes_the_benchmark_streams() -> None:
    """On an OpenAI-shaped answer only the chunks that open something (the role chunk that
    creates the choice, the first fragment of each tool call) go through orjson."""
    from fastsse import bench as _corpora

    for name, slow in (("chat", 1), ("tools", 4)):
        corpus = _corpora.build(name, scale=0.05)
        agg = fastsse.get_backend("cython").ChatAggregator()
        for payload in corpus.payload_bytes:
            agg.feed_data(payload)
        assert agg._fast_folds == len(corpus.json_payload_bytes) - slow


# Generated payloads: the chunk shapes of the fold's property tests, written out with the
# formatting servers use (compact, spaced, indented, ASCII-escaped) and sometimes damaged.


@st.composite
def _payload(draw: st.DrawFn) -> bytes:
    chunk = draw(SHAPED_CHUNK)
    style = draw(st.sampled_from(("orjson", "spaced", "indented", "ascii")))
    if style == "orjson":
        data = orjson.dumps(chunk)
    else:
        text = json.dumps(
            chunk,
            ensure_ascii=style == "ascii",
            indent=2 if style == "indented" else None,
            separators=(", ", ": ") if style == "spaced" else None,
        )
        data = text.encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(("none", "none", "none", "cut", "flip", "insert")))
    if data and damage != "none":
        pos = draw(st.integers(0, len(data) - 1))
        if damage == "cut":
            data = data[:pos]
        elif damage == "flip":
            data = (
                data[:pos] + bytes([data[pos] ^ draw(st.sampled_from((0x01, 0x20, 0x80)))]) + data[pos + 1 :]
            )
        else:
            data = (
                data[:pos]
                + draw(st.sampled_from((b",", b"]", b"}", b'"', b"\\", b"\xc3", b" ")))
                + data[pos:]
            )
    return data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads=st.lists(_payload(), max_size=8))
def test_fast_reader_agrees_with_the_twin_on_generated_payloads(payloads: list[bytes]) -> None:
    c_agg = fastsse.get_backend("cython").ChatAggregator()
    py_agg = fastsse.get_backend("python").ChatAggregator()
    for payload in [*SETUP, *payloads]:
        assert c_agg.feed_data(payload) == py_agg.feed_data(payload)
        assert _observe(c_agg) == _observe(py_agg)


def test_fast_reader_engages_on_generated_payloads() -> None:
    """The property test above proves nothing if the generated payloads never take the fast
    way: count it on a seeded sample of continuation-shaped chunks."""
    rng = random.Random(7)
    agg = fastsse.get_backend("cython").ChatAggregator()
    for payload in SETUP:
        agg.feed_data(payload)
    before = agg._fast_folds
    for _ in range(200):
        piece = "".join(rng.choice('ab é\n"\\😀') for _ in range(rng.randint(0, 6)))
        if rng.random() < 0.5:
            choice = {"index": rng.randint(0, 1), "delta": {"content": piece}, "finish_reason": None}
        else:  # choice 0 holds the tool calls
            call = {"index": rng.randint(0, 1), "function": {"arguments": piece}}
            choice = {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}
        agg.feed_data(json.dumps({"id": "c1", "choices": [choice]}, ensure_ascii=rng.random() < 0.5).encode())
    assert agg._fast_folds - before == 200


@pytest.mark.parametrize(
    "name",
    [
        "25-openrouter-reasoning-comments.sse",  # reasoning_details on every chunk
        "27-openrouter-annotations.sse",  # one annotation per chunk
        "38-snowflake-no-finish-reason.sse",  # reasoning only in reasoning_details
        "28-mistral-magistral-content-parts.sse",  # content as a list of parts
        "48-mistral-magistral-answer-in-text-part.sse",
    ],
)
def test_fast_reader_on_recorded_provider_shapes(name: str) -> None:
    """Issue 15's shapes as providers send them: after the chunk that opens the choice, the
    reader takes every chunk carrying reasoning_details or annotations (and hands their values
    to the shared merge), and leaves every list-valued content to the general fold; both ways
    end where the Python twin ends."""
    from _recorded import recorded

    data = recorded("chat", name)
    payloads = [
        line[6:] for line in data.split(b"\n") if line.startswith(b"data: ") and line != b"data: [DONE]"
    ]
    lists = sum(b'"content":[' in p for p in payloads[1:])  # read from the bytes, not by fastsse
    c_agg = fastsse.get_backend("cython").ChatAggregator()
    py_agg = fastsse.get_backend("python").ChatAggregator()
    for payload in payloads:
        assert c_agg.feed_data(payload) == py_agg.feed_data(payload)
        assert _observe(c_agg) == _observe(py_agg)
    assert c_agg._fast_folds == len(payloads) - 1 - lists

"""Writes sse.json. The expected values below are worked out by hand from the WHATWG
"event stream interpretation" text and the web-platform-tests eventsource/format-* cases;
nothing here is produced by running fastsse."""

import json

M = "message"


def ev(data, event=M, id="", retry=None):
    return {"data": data, "event": event, "id": id, "retry": retry}


V = []


def vec(name, source, inp, events, *, latin1=False, last_event_id="", retry=None, truncated=False):
    V.append(
        {
            "name": name,
            "source": source,
            "input": inp,
            "encoding": "latin-1" if latin1 else "utf-8",
            "events": events,
            "last_event_id": last_event_id,
            "retry": retry,
            "truncated": truncated,
        }
    )


vec("lf", "spec: lines end in LF", "data: a\n\n", [ev("a")])
vec("crlf", "spec: lines end in CRLF", "data: a\r\n\r\n", [ev("a")])
vec("cr", "spec: lines end in a lone CR", "data: a\r\rdata: b\r\r", [ev("a"), ev("b")])
vec(
    "mixed-endings",
    "spec: CR, LF and CRLF in one stream",
    "data: 1\rdata: 2\ndata: 3\r\n\r\n",
    [ev("1\n2\n3")],
)
vec("wpt-format-newlines", "wpt format-newlines", "data:test\r\ndata\ndata:test\r\n\r", [ev("test\n\ntest")])
vec(
    "cr-lf-counts-once",
    "spec: CRLF is one terminator, CR CR is two",
    "data: a\r\n\r\ndata: b\r\r\ndata: c\n\n",
    [ev("a"), ev("b"), ev("c")],
)
vec(
    "bom",
    "wpt format-bom: one leading BOM is dropped; a later one is part of the field name",
    "\ufeffdata:1\n\n\ufeffdata:2\n\ndata:3\n\n",
    [ev("1"), ev("3")],
)
vec(
    "bom-twice",
    "wpt format-bom-2: only the first BOM is dropped",
    "\ufeff\ufeffdata:1\n\ndata:2\n\ndata:3\n\n",
    [ev("2"), ev("3")],
)
vec("bom-alone-bytes", "spec: a BOM then a CR-ended stream", "\ufeffdata: x\r\r", [ev("x")])
vec(
    "not-a-bom",
    "spec: bytes that start like a BOM but are not one are invalid UTF-8",
    "\xef\xbbdata: x\n\ndata: y\n\n",
    [ev("y")],
    latin1=True,
)
vec(
    "comments",
    "wpt format-comments: lines starting with a colon are ignored",
    "data:1\r:\0\n:\r\ndata:2\n:" + "x" * 300 + "\rdata:3\n:data:fail\r:" + "y" * 200 + "\ndata:4\n\n",
    [ev("1\n2\n3\n4")],
)
vec("comment-only", "spec: a comment alone dispatches nothing", ": ping\n\n: ping\n\n", [])
vec(
    "no-colon",
    "spec: a line without a colon is a field with an empty value",
    "data\n\ndata\ndata\n\n",
    [ev(""), ev("\n")],
)
vec("no-space", "spec: the space after the colon is optional", "data:a\n\n", [ev("a")])
vec("two-spaces", "spec: only one leading space is removed", "data:  a\n\n", [ev(" a")])
vec(
    "wpt-leading-space",
    "wpt format-leading-space",
    "data:\ttest\rdata: \ndata:test\n\n",
    [ev("\ttest\n\ntest")],
)
vec("colon-in-value", "spec: the value runs to the end of the line", "data: a:b: c\n\n", [ev("a:b: c")])
vec(
    "wpt-field-parsing",
    "wpt format-field-parsing",
    "data:\0\ndata:  2\rData:1\ndata\0:2\ndata:1\r\0data:4\nda-ta:3\rdata_5\ndata:3\rdata:\r\n data:32\ndata:4\n\n",
    [ev("\0\n 2\n1\n3\n\n4")],
)
vec(
    "wpt-field-unknown",
    "wpt format-field-unknown",
    "data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test\n\n",
    [ev("test\n\ntest")],
)
vec("wpt-null-character", "wpt format-null-character", "data:\0\n\n\n\n", [ev("\0")])
vec(
    "multi-line-data",
    "spec: each data line appends value + LF",
    "data: a\ndata: b\ndata: c\n\n",
    [ev("a\nb\nc")],
)
vec("empty-data-lines", "spec: two empty data lines give one LF", "data:\ndata:\n\n", [ev("\n")])
vec("one-trailing-lf-removed", "spec: only the last LF is removed", "data: a\ndata:\n\n", [ev("a\n")])
vec(
    "event-type",
    "spec: event sets the type; it resets after dispatch",
    "event: add\ndata: 1\n\ndata: 2\n\n",
    [ev("1", "add"), ev("2")],
)
vec(
    "event-empty",
    "wpt format-field-event-empty: an empty type means message",
    "event: \ndata:data\n\n",
    [ev("data")],
)
vec(
    "event-last-wins",
    "spec: a later event field replaces the type",
    "event: a\nevent: b\ndata: x\n\n",
    [ev("x", "b")],
)
vec(
    "id-persists",
    "spec: the last event id persists across events",
    "id: 1\ndata: a\n\ndata: b\n\n",
    [ev("a", id="1"), ev("b", id="1")],
    last_event_id="1",
)
vec(
    "id-empty-resets",
    "spec: an empty id resets the last event id",
    "id: 1\ndata: a\n\nid\ndata: b\n\nid: 2\ndata: c\n\nid:\ndata: d\n\n",
    [ev("a", id="1"), ev("b"), ev("c", id="2"), ev("d")],
)
vec(
    "id-nul-ignored",
    "spec: an id containing NUL is ignored",
    "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
    [ev("a", id="1"), ev("b", id="1")],
    last_event_id="1",
)
vec(
    "id-without-data",
    "spec: an id in a block with no data is kept though nothing is dispatched",
    "id: 7\n\ndata: a\n\n",
    [ev("a", id="7")],
    last_event_id="7",
)
vec(
    "id-set-after-data",
    "spec: the id of a block applies to that block's event",
    "data: a\nid: 9\n\n",
    [ev("a", id="9")],
    last_event_id="9",
)
vec(
    "retry-digits",
    "spec: retry is applied only when all ASCII digits",
    "retry: 1000\ndata: a\n\nretry: 10a\ndata: b\n\nretry: -5\ndata: c\n\nretry:\ndata: d\n\n"
    "retry:  7\ndata: e\n\nretry: 1.5\ndata: f\n\nretry: 2000\n\n",
    [
        ev("a", retry=1000),
        ev("b", retry=1000),
        ev("c", retry=1000),
        ev("d", retry=1000),
        ev("e", retry=1000),
        ev("f", retry=1000),
    ],
    retry=2000,
)
vec(
    "retry-bogus",
    "wpt format-field-retry-bogus",
    "retry:3000\nretry:1000x\ndata:x\n\n",
    [ev("x", retry=3000)],
    retry=3000,
)
vec("retry-empty", "wpt format-field-retry-empty", "retry\ndata:test\n\n", [ev("test")])
vec("retry-zero", "spec: zero is all digits", "retry: 0\ndata: a\n\n", [ev("a", retry=0)], retry=0)
vec(
    "retry-huge",
    "spec: any number of digits",
    "retry: 123456789012345678901234567890\ndata: a\n\n",
    [ev("a", retry=123456789012345678901234567890)],
    retry=123456789012345678901234567890,
)
vec("retry-fullwidth-digits", "spec: only ASCII digits count", "retry: \uff11\ndata: a\n\n", [ev("a")])
vec(
    "unknown-and-miscased",
    "spec: field names are case-sensitive; unknown fields are ignored",
    "Data: x\nDATA: y\nEvent: e\nID: 5\nfoo: bar\ndata: z\n\n",
    [ev("z")],
)
vec(
    "field-only-blocks",
    "spec: a block without data dispatches nothing and resets the type",
    "event: ping\n\nid: 5\n\nretry: 100\n\ndata: a\n\n",
    [ev("a", id="5", retry=100)],
    last_event_id="5",
    retry=100,
)
vec(
    "eof-unterminated",
    "spec: an unterminated event at EOF is discarded",
    "data: a\n\ndata: b\n",
    [ev("a")],
    truncated=True,
)
vec(
    "eof-mid-line",
    "spec: a partial line at EOF is discarded",
    "data: a\n\ndata: b",
    [ev("a")],
    truncated=True,
)
vec(
    "wpt-data-before-final-empty-line",
    "wpt format-data-before-final-empty-line",
    "retry:1000\ndata:test1\n\nid:test\ndata:test2",
    [ev("test1", retry=1000)],
    last_event_id="test",
    retry=1000,
    truncated=True,
)
vec("blank-lines", "spec: blank lines with no data dispatch nothing", "\n\n\r\n\rdata: a\n\n\n\n", [ev("a")])
vec("leading-space-name", "spec: a space before the name is part of the name", " data: x\n\n", [])
vec(
    "invalid-utf8",
    "spec: invalid UTF-8 decodes to U+FFFD",
    "data: \xff\xfe\n\n",
    [ev("\ufffd\ufffd")],
    latin1=True,
)
vec(
    "truncated-utf8-sequence",
    "spec/Encoding: a truncated sequence is one U+FFFD",
    "data: a\xe2\x82b\n\n",
    [ev("a\ufffdb")],
    latin1=True,
)
vec(
    "invalid-utf8-in-event-and-id",
    "spec: every field is decoded with replacement",
    "event: \xc3\nid: \xff\ndata: x\n\n",
    [ev("x", "\ufffd", "\ufffd")],
    latin1=True,
    last_event_id="\ufffd",
)
vec(
    "unicode",
    "spec: UTF-8 data passes through",
    "event: \u00e9v\ndata: h\u00e9llo \U0001f642 \u4e16\u754c\n\n",
    [ev("h\u00e9llo \U0001f642 \u4e16\u754c", "\u00e9v")],
)
vec(
    "unicode-line-separators",
    "spec: only CR and LF end lines",
    "data: a\u2028b\u2029c\u0085d\x0be\x0cf\n\n",
    [ev("a\u2028b\u2029c\u0085d\x0be\x0cf")],
)
vec(
    "openai-chat",
    "OpenAI chat stream shape (seed 000)",
    'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    "data: [DONE]\n\n",
    [
        ev('{"choices":[{"index":0,"delta":{"role":"assistant"}}]}'),
        ev('{"choices":[{"index":0,"delta":{"content":"Hi"}}]}'),
        ev("[DONE]"),
    ],
)

with open(__file__.replace("_write_sse.py", "sse.json"), "w", encoding="utf-8") as f:
    json.dump(V, f, indent=1, ensure_ascii=True)
    f.write("\n")
print(len(V), "vectors")

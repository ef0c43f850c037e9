"""Writes regressions.json: inputs that broke a backend once (found by the hardening tests, the
fuzzers or by reading the code), each with its expected outcome worked out by hand from the WHATWG
text and the documented rules. Same fields as sse.json; nothing here is produced by running fastsse."""

import json

M = "message"


def ev(data, event=M, id="", retry=None):
    return {"data": data, "event": event, "id": id, "retry": retry}


V = []


def vec(name, source, inp, events, *, last_event_id="", retry=None, truncated=False):
    V.append(
        {
            "name": name,
            "source": source,
            "input": inp,
            "encoding": "utf-8",
            "events": events,
            "last_event_id": last_event_id,
            "retry": retry,
            "truncated": truncated,
        }
    )


# A retry value of more than 4300 digits raised a bare ValueError out of feed() (CPython's limit on
# int(str) conversions) on both backends, losing the events the same call had completed. Rule since:
# leading zeros do not count; a value of more than 4300 significant digits is ignored like any other
# unusable retry value (exact conversion of longer ones would cost quadratic time).
vec(
    "retry-over-4300-digits-ignored",
    "hardening: int() digit limit; a longer value is ignored",
    "retry: 100\nretry: " + "9" * 4301 + "\ndata: a\n\n",
    [ev("a", retry=100)],
    retry=100,
)
vec(
    "retry-4300-digits-exact",
    "hardening: int() digit limit; 4300 significant digits still convert exactly",
    "retry: 1" + "0" * 4299 + "\ndata: a\n\n",
    [ev("a", retry=10**4299)],
    retry=10**4299,
)
vec(
    "retry-leading-zeros-do-not-count",
    "hardening: int() digit limit; 10000 leading zeros then 42 is 42",
    "retry: " + "0" * 10000 + "42\ndata: a\n\n",
    [ev("a", retry=42)],
    retry=42,
)
vec(
    "retry-huge-keeps-the-events-around-it",
    "hardening: int() digit limit; events before and after in one chunk survive",
    "data: before\n\nretry: " + "1" * 5000 + "\ndata: after\n\n",
    [ev("before"), ev("after")],
)
vec(
    "retry-all-zeros",
    "hardening: int() digit limit; 5000 zeros are 0",
    "retry: " + "0" * 5000 + "\ndata: a\n\n",
    [ev("a", retry=0)],
    retry=0,
)

with open(__file__.replace("_write_regressions.py", "regressions.json"), "w", encoding="utf-8") as f:
    json.dump(V, f, indent=1, ensure_ascii=True)

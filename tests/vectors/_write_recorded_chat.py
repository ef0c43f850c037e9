"""Writes recorded_chat.json: the expected fold of each recorded chat stream (issue 15), from two
jq readings of the files (recorded_chat/derive.jq: texts, tool calls, usage, ids by the fold's
rules; recorded_chat/lint.jq: the payload-level linter codes by the linter's rules) and the facts
read from the streams by eye below (errors, missing [DONE]). Uses json and jq only: fastsse is
never imported. Run from the repository root with the shared folder beside it or FASTSSE_SHARED set:
``python tests/vectors/_write_recorded_chat.py``."""

import json
import os
import subprocess
from pathlib import Path

HERE = Path(__file__).parent
SHARED = Path(os.environ.get("FASTSSE_SHARED") or HERE.parent.parent.parent / "shared")
REC = SHARED / "recorded" / "chat"
OUT = HERE / "recorded_chat.json"
manifest = {c["file"]: c for c in json.loads((REC / "manifest.json").read_text())["captures"]}


def cut(s):
    if s is None or len(s) <= 160:
        return s
    return {"head": s[:40], "tail": s[-40:], "length": len(s)}


def payloads(path):
    lines = [line[6:] for line in path.read_text(encoding="utf-8").split("\n") if line.startswith("data: ")]
    return [line for line in lines if line != "[DONE]"]


def jq(program, path):
    text = "\n".join(payloads(path))
    out = subprocess.run(
        ["jq", "-s", "-c", "-f", str(program)], input=text, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


# Read by eye (see the notes in each entry's "why").
ERRORS = {
    "18-groq-reasoning-event-error.sse": "event",  # the event: error payload's "error" object
    "26-openrouter-midstream-error.sse": {"code": 400, "message": "Token limit reached"},
}
NO_DONE = {"18-groq-reasoning-event-error.sse", "35-cerebras-hf-router.sse"}
NOTES = {
    "10-azure-prompt-filter-content-filter.sse": "first chunk has id '', model '', created 0: the later real values win",
    "17-tgi-tools-stream.sse": "no chunk ever carries a finish_reason: not complete though [DONE] came",
    "18-groq-reasoning-event-error.sse": "event: error ends it; no finish_reason, no [DONE]",
    "20-groq-compound-changing-ids.sse": "id changes on every chunk (last 'stub'); usage only in x_groq.usage",
    "21-together-hf-router.sse": "each choice carries legacy text and a delta: both are kept",
    "25-openrouter-reasoning-comments.sse": "reasoning_details: one part; the Anthropic signature arrives in its last fragment after signature ''",
    "26-openrouter-midstream-error.sse": "the error chunk is folded (its usage too), then [DONE] is ignored: done is False",
    "27-openrouter-annotations.sse": "five url_citation annotations, one per chunk: all five kept in order",
    "28-mistral-magistral-content-parts.sse": "thinking parts go to reasoning_content, plain strings to content",
    "29-mistral-toolcall-no-index.sse": "a tool call without index becomes the choice's first call",
    "35-cerebras-hf-router.sse": "finished (length) with usage but no [DONE]: complete once the bytes end cleanly",
    "38-snowflake-no-finish-reason.sse": "reasoning only in reasoning_details ('15' + ' * 27 = 405'); no finish_reason ever",
    "41-gemini-toolcall-no-index.sse": "one frame: a tool call without index, finish_reason and usage together; no id",
    "43-groq-toolcall-xgroq-usage.sse": "usage both top level and in x_groq: the top-level one is the result's",
    "44-mistral-incremental-toolcall-glm.sse": "a later fragment sends name '' and no id: the name stays webSearchTool",
    "46-together-r1-think-text-and-delta.sse": "legacy text and delta content both carry the <think> answer",
    "48-mistral-magistral-answer-in-text-part.sse": "the whole answer is inside a text content part",
}

entries = []
for path in sorted(REC.glob("*.sse")):
    name = path.name
    d = jq(HERE / "recorded_chat" / "derive.jq", path)
    lint = jq(HERE / "recorded_chat" / "lint.jq", path)
    error = ERRORS.get(name)
    if error == "event":
        raw = path.read_text(encoding="utf-8").split("event: error\ndata: ", 1)[1].split("\n", 1)[0]
        error = json.loads(raw)["error"]
    if error is not None:
        lint.append("error-object")
    if name in NO_DONE:
        lint.append("missing-done")
    done = name not in NO_DONE and error is None  # an error stops the fold before [DONE]
    choices = []
    for c in d["choices"]:
        out = {
            "index": c["index"],
            "role": c["role"],
            "content": c["content"],
            "reasoning_content": c["reasoning_content"],
            "reasoning": c["reasoning"],
            "refusal": c["refusal"],
            "finish_reason": c["finish_reason"],
            "tool_calls": [{k: t[k] for k in ("id", "type", "name", "arguments")} for t in c["tool_calls"]],
        }
        if c["text"] is not None:
            out["text"] = c["text"]
        if c["annotations"]:
            out["annotation_urls"] = [a["url_citation"]["url"] for a in c["annotations"]]
        if c["reasoning_details"]:
            out["reasoning_details"] = [
                {k: cut(v) if isinstance(v, str) else v for k, v in p.items()} for p in c["reasoning_details"]
            ]
        choices.append(out)
    reasons = [c["finish_reason"] for c in choices]
    finished = bool(reasons) and None not in reasons
    entry = {
        "file": name,
        "provider": manifest[name]["provider"],
        "id": d["id"],
        "model": d["model"],
        "created": d["created"],
        "usage": d["usage"],
        "choices": choices,
        "error": error,
        "verdict": {
            "done": done,
            "error": error is not None,
            "finish_reasons": reasons,
            "usage": d["usage"] is not None,
            "complete_open": finished and error is None and done,
            "complete_closed": finished and error is None,
            "skipped": 0,
            "malformed": 0,
            "unknown_parts": 0,
        },
        "lint": sorted(set(lint)),
    }
    if name in NOTES:
        entry["why"] = NOTES[name]
    entries.append(entry)

doc = {
    "description": "The expected fold of every stream in shared/recorded/chat (issue 15), written from the rules in DESIGN.md and the ChatAggregator docstring, never by fastsse: texts, tool calls, usage and ids read with jq over the files (recorded_chat/derive.jq; long texts as their exact first and last 40 characters and length), linter codes by recorded_chat/lint.jq and by eye, errors and missing [DONE] by eye (_write_recorded_chat.py writes this file). complete_open: the verdict before the byte stream is closed; complete_closed: after a clean close().",
    "streams": entries,
}
OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
print(len(entries), "streams")

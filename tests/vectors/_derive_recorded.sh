#!/bin/sh
# Writes formats/recorded.json: what the fold of each recorded stream must hold, derived from the
# streams with jq alone (independently of fastsse). Usage: sh _derive_recorded.sh <shared>/recorded/formats
# Framing: every event in the corpus has one data line; an event without its closing blank line at
# the end of a file is not dispatched (WHATWG), so it is dropped here too.
set -eu
dir=$1
out=$(dirname "$0")/formats/recorded.json

# A text as the tests compare it: whole when short, else its length, first and last 40 characters.
SUMMARY='def summary: if . == null then null elif length <= 120 then . else {len: length, prefix: .[:40], suffix: .[-40:]} end;
def nonnull: to_entries | map(select(.value != null)) | from_entries;'

RESPONSES="$SUMMARY"'
. as $E
| ($E | map(select(.type == "response.completed" or .type == "response.incomplete" or .type == "response.failed")) | first) as $T
| ([$E[] | select(.type == "error")] | first) as $ERR
| {
  terminal: ($T.type // null),
  status: ($T.response.status // null),
  usage: ($T.response.usage // null),
  incomplete_details: ($T.response.incomplete_details // null),
  error: (if ($T.response.error // null) != null then $T.response.error elif $ERR == null then null
          elif ($ERR.error | type) == "object" then $ERR.error else ($ERR | del(.type, .sequence_number)) end),
  output: ([$E[] | select(.output_index != null) | .output_index] | unique | map(. as $i
    | ([$E[] | select((.type == "response.output_item.added" or .type == "response.output_item.done") and .output_index == $i) | .item | nonnull] | add // {}) as $item
    | ([$E[] | select(.output_index == $i and .type == "response.function_call_arguments.delta") | .delta]) as $args
    | ([$E[] | select(.output_index == $i and .type == "response.code_interpreter_call_code.delta") | .delta]) as $code
    | {
        type: $item.type, id: $item.id, status: $item.status, name: $item.name, call_id: $item.call_id,
        arguments: ((if ($args | length) > 0 then ($args | join("")) else $item.arguments end) | summary),
        code: ((if ($code | length) > 0 then ($code | join("")) else $item.code end) | summary),
        content: ([$E[] | select(.output_index == $i and (.type == "response.output_text.delta" or .type == "response.refusal.delta" or .type == "response.reasoning_text.delta"))]
                  | group_by(.content_index) | map({index: .[0].content_index, type: (.[0].type | ltrimstr("response.") | rtrimstr(".delta")), text: (map(.delta) | join("") | summary)})),
        summary: ([$E[] | select(.output_index == $i and .type == "response.reasoning_summary_text.delta")]
                  | group_by(.summary_index) | map(map(.delta) | join("") | summary)),
        annotations: ([$E[] | select(.output_index == $i and .type == "response.output_text.annotation.added")] | length),
        done: any($E[]; .type == "response.output_item.done" and .output_index == $i)
      } | nonnull))
}'

MESSAGES="$SUMMARY"'
. as $E
| ([$E[] | select(.type == "error")] | first) as $ERR
| {
  terminal: (if any($E[]; .type == "message_stop") then "message_stop" else null end),
  error: ($ERR.error // null),
  id: ([$E[] | select(.type == "message_start") | .message.id] | first // null),
  model: ([$E[] | select(.type == "message_start") | .message.model] | first // null),
  stop_reason: ([$E[] | select(.type == "message_delta") | .delta.stop_reason | select(. != null)] | last // null),
  stop_sequence: ([$E[] | select(.type == "message_delta") | .delta.stop_sequence | select(. != null)] | last // null),
  usage: (([$E[] | select(.type == "message_start") | .message.usage] + [$E[] | select(.type == "message_delta") | .usage])
          | map(select(. != null) | nonnull) | if length == 0 then null else add end),
  content: ([$E[] | select(.type == "content_block_start" or .type == "content_block_delta") | .index] | unique | map(. as $i
    | ([$E[] | select(.type == "content_block_start" and .index == $i) | .content_block] | first // {}) as $start
    | ([$E[] | select(.type == "content_block_delta" and .index == $i) | .delta]) as $D
    | ($D | map(select(.type == "input_json_delta") | .partial_json) | join("")) as $json
    | {
        index: $i, type: ($start.type // {"text_delta": "text", "input_json_delta": "tool_use", "thinking_delta": "thinking"}[$D[0].type]), id: $start.id, name: $start.name, tool_use_id: $start.tool_use_id,
        text: ($D | map(select(.type == "text_delta") | .text) | if length > 0 then join("") else null end | summary),
        thinking: ($D | map(select(.type == "thinking_delta") | .thinking) | if length > 0 then join("") else null end | summary),
        signature: ($D | map(select(.type == "signature_delta") | .signature) | if length > 0 then join("") else null end | summary),
        data: ($start.data | summary),
        input: (if ($json | test("^\\s*$")) then $start.input else (try ($json | fromjson) catch $start.input) end),
        partial_json: (if ($json | test("^\\s*$")) then null else (try ($json | fromjson | null) catch $json) end | summary),
        citations: ($D | map(select(.type == "citations_delta")) | length),
        stopped: any($E[]; .type == "content_block_stop" and .index == $i)
      } | nonnull))
}'

events() {
  # Complete events only, then their data lines, without [DONE].
  if [ "$(tail -c 2 "$1" | od -An -c | tr -d ' ')" = '\n\n' ]; then cat "$1"; else sed '$d' "$1" | sed '$d'; fi \
    | sed -n 's/^data: \{0,1\}//p' | grep -v '^\[DONE\]$'
}

{
  printf '{\n'
  first=1
  for f in "$dir"/responses/*.sse "$dir"/messages/*.sse; do
    name=$(basename "$f" .sse)
    case "$f" in */responses/*) prog=$RESPONSES; api=responses ;; *) prog=$MESSAGES; api=messages ;; esac
    [ $first = 1 ] || printf ',\n'
    first=0
    printf '"%s": {"api": "%s", "truncated": %s, "expect": ' "$name" "$api" \
      "$([ "$(tail -c 2 "$f" | od -An -c | tr -d ' ')" = '\n\n' ] && echo false || echo true)"
    events "$f" | jq -s -c "$prog"
    printf '}'
  done
  printf '\n}\n'
} > "$out"
jq . "$out" > "$out.tmp" && mv "$out.tmp" "$out"

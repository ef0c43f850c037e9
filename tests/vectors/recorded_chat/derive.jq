# An independent reading of one recorded stream: $chunks = the JSON payloads before [DONE].
def txt: if . == null then null elif length <= 160 then . else {head: .[0:40], tail: .[-40:], length: length} end;
def joinall: if length == 0 then null else add end;
def lastnn(f): [ .[] | f | select(. != null) ] | last;
def lastne(f): [ .[] | f | select(. != null and . != "") ] | last;
def thinking: if type == "array" then [ .[] | select(type == "object" and .type == "thinking") | .thinking | if type == "string" then . else (.[] | .text) end ] else [] end;
def texts: if type == "array" then [ .[] | select(type == "object" and .type == "text") | .text ] elif type == "string" then [.] else [] end;
def merge_details: reduce .[] as $p ({}; ($p.index | tostring) as $k | .[$k] = (reduce ($p | to_entries[]) as $e ((.[$k] // {index: $p.index}); if $e.value == null or $e.key == "index" then . elif ($e.key == "text" or $e.key == "summary") then .[$e.key] = ((.[$e.key] // "") + $e.value) elif $e.value == "" and has($e.key) then . else .[$e.key] = $e.value end))) | [ .[] ] | sort_by(.index);
def names: reduce .[] as $n (""; if $n == null or $n == "" or $n == . then . else . + $n end);
. as $chunks
| [ $chunks[] | (.choices // [])[] ] as $chs
| ($chs | map(.index) | unique) as $idx
| {
    id: ($chunks | lastnn(.id)),
    created: ($chunks | lastnn(.created)),
    model: ($chunks | lastnn(.model)),
    usage: (($chunks | lastnn(.usage)) // ($chunks | lastnn(.x_groq.usage))),
    choices: [ $idx[] as $i | ($chs | map(select(.index == $i))) as $c | {
      index: $i,
      role: (($c | lastne(.delta.role)) // "assistant"),
      content: ([ $c[] | .delta.content | texts[] ] | joinall | txt),
      reasoning_content: ([ $c[] | .delta | ((.content | thinking[]), (.reasoning_content | select(type == "string"))) ] | joinall | txt),
      reasoning: ([ $c[] | .delta.reasoning | select(type == "string") ] | joinall | txt),
      refusal: ([ $c[] | .delta.refusal | select(type == "string") ] | joinall | txt),
      text: ([ $c[] | .text | select(type == "string") ] | joinall | txt),
      finish_reason: ($c | lastne(.finish_reason)),
      tool_calls: ([ $c[] | (.delta.tool_calls // [])[] ] | group_by(.index) | map({
          index: .[0].index,
          id: ([ .[] | .id | select(. != null and . != "") ] | first),
          type: (([ .[] | .type | select(. != null and . != "") ] | last) // "function"),
          name: ([ .[] | .function.name ] | names),
          arguments: ([ .[] | .function.arguments | select(type == "string") ] | joinall // "")
        })),
      annotations: ([ $c[] | (.delta.annotations // [])[] | select(. != null) ] | reduce .[] as $a ([]; if any(.[]; . == $a) then . else . + [$a] end)),
      reasoning_details: ([ $c[] | (.delta.reasoning_details // [])[] ] | merge_details)
    }]
  }

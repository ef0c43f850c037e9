# Reads the non-error JSON payloads (array) and lists the payload-level finding codes by the linter's rules.
def firstnn(f): [ .[] | f | select(. != null) ] | first;
def truthy: . != null and . != false and . != "" and . != [] and . != {} and . != 0;
. as $all
| [ $all[] | select((.error | truthy) | not) ] as $ch
| [
    (if any($ch[]; .object != "chat.completion.chunk") then "wrong-object" else empty end),
    (($ch | firstnn(.id)) as $f | if any($ch[]; .id != null and .id != $f) then "id-changed" else empty end),
    (($ch | firstnn(.created)) as $f | if any($ch[]; .created != null and .created != $f) then "created-changed" else empty end),
    (if any($ch[]; .choices == [] and ((.usage | truthy) | not)) then "empty-choices" else empty end),
    (if any($ch[]; (.choices | type) != "array") or any($ch[] | .choices[]?; (.index | type) != "number" or (.delta | type) != "object") then "malformed-chunk" else empty end),
    ([ $ch[] | .choices[]? ] as $cs | ($cs | map(.index) | unique)[] as $i | [ $cs[] | select(.index == $i) ] as $c
      | (if $c[0].delta.content == "" then "empty-initial-content" else empty end),
        (if any($c[1:][]; .delta.role != null) then "role-repeated" else empty end),
        (if all($c[]; .delta.role == null) then "missing-role" else empty end),
        (if any($c[]; .finish_reason == "") then "empty-finish-reason" else empty end),
        (if all($c[]; (.finish_reason | truthy) | not) then "missing-finish-reason" else empty end),
        (if any($c[]; (.finish_reason | truthy) and ([.delta[]? | select(. != null)] | length > 0)) then "final-delta-not-empty" else empty end),
        ( [ $c | to_entries[] | select(.value.finish_reason | truthy) | .key ] | first ) as $fi
        | (if $fi != null and any($c[$fi+1:][]; (.finish_reason | truthy) or (.delta.content | truthy) or (.delta.reasoning_content | truthy) or (.delta.reasoning | truthy) or (.delta.refusal | truthy) or (.delta.tool_calls | truthy)) then "delta-after-finish" else empty end),
        (if any($c[]; (.delta.content | type) == "array") then "content-parts" else empty end),
        (if any($c[]; ([.delta.reasoning_details[]? | objects | (.text, .summary) | strings | select(. != "")] | length > 0) and ((.delta.reasoning | truthy) | not) and ((.delta.reasoning_content | truthy) | not)) then "reasoning-field" else empty end),
        (if any($c[]; .delta.tool_calls == []) then "empty-tool-calls" else empty end),
        (if any($c[] | .delta.tool_calls[]?; (.index | type) != "number") then "tool-call-without-index" else empty end),
        ([ $c[] | .delta.tool_calls[]? | select((.index | type) == "number") ] as $t
          | (if any($c[]; .finish_reason == "tool_calls") and ($t | length == 0) then "tool-calls-without-calls" else empty end),
            (if ($t | map(.index) | unique) as $u | ($u | length > 0) and ($u != [range(0; $u | length)]) then "tool-call-index-gap?" else empty end),
            (if ($t | group_by(.index) | any(.[]; ([.[] | .id | truthy | select(.)] | length > 1) or ([.[] | .function.name | truthy | select(.)] | length > 1))) then "tool-call-repeated" else empty end),
            (if ($t | group_by(.index) | any(.[]; ([.[] | .id | truthy | select(.)] | length == 0) or ([.[] | .function.name | truthy | select(.)] | length == 0))) then "tool-call-incomplete" else empty end))
    )
  ] | unique

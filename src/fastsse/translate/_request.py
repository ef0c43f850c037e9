"""Request bodies translated between chat completions, Responses and Messages.

``request(body, source, target)`` returns the body a ``target`` upstream takes for a ``source``
client's request: the system prompt, the turns with their text and images, tool definitions and
``tool_choice``, earlier tool calls and their results matched by id, earlier thinking with its
signature, the sampling and token limits, streaming and the user id. Chat is the hub, as for the
stream translators: Messages <-> Responses goes through it. Whatever the target cannot express
raises ``Untranslatable`` naming the field, or with ``lossy=True`` is left out and listed in the
result's ``dropped``. docs/translation.md has the mapping tables and the normalisations a round
trip may show.
"""

from __future__ import annotations

from typing import Any, Final

from .._errors import InvalidRequest
from ._bodies import (
    APIS,
    Path,
    Translated,
    Untranslatable,
    _check_apis,
    _Ctx,
    _fmt,
)
from ._request_direct import messages_to_responses, responses_to_messages
from ._request_messages import _chat_to_messages, _messages_to_chat
from ._request_responses import _chat_to_responses, _responses_to_chat

__all__ = ["APIS", "Translated", "Untranslatable", "request"]


# Messages <-> Responses: the rule is the two halves through chat (``through_chat``); ``request``
# takes one walk that gives the same body (tests/test_translate_request.py holds them equal)

_TO_CHAT: Final = {"messages": _messages_to_chat, "responses": _responses_to_chat}
_FROM_CHAT: Final = {"messages": _chat_to_messages, "responses": _chat_to_responses}

# a chat field an error in the second half names, as the source API calls it
_CHAT_NAMES: Final = {
    "messages": {"stop": "stop_sequences", "user": "metadata.user_id", "max_completion_tokens": "max_tokens"},
    "responses": {
        "reasoning_effort": "reasoning.effort",
        "response_format": "text.format",
        "verbosity": "text.verbosity",
        "max_completion_tokens": "max_output_tokens",
        "max_tokens": "max_output_tokens",
    },
}


def _via_chat(source: str, middle: dict[str, Any], origins: list[Path], path: str) -> str:
    """A path in the chat body between the two halves, named in the source body: the message it
    came from (and for Messages thinking, its block), else the source's name of the field."""
    head, sep, rest = path.partition(".")
    if head.startswith("messages[") and head.endswith("]") and head[9:-1].isdigit():
        n = int(head[9:-1])
        origin = _fmt(origins[n]) if n < len(origins) else head
        if rest.startswith("reasoning_details[") and source == "messages":
            k = int(rest[18 : rest.index("]")])
            block = middle["messages"][n]["reasoning_details"][k].get("index")
            return f"{origin}.content[{block}]"
        return f"{origin} ({rest} in chat)" if rest else origin
    named = _CHAT_NAMES[source].get(head)
    return named + sep + rest if named is not None else path


def request(body: dict[str, Any], source: str, target: str, /, *, lossy: bool = False) -> Translated:
    """``request(body, source, target, /, *, lossy=False) -> Translated``

    Translate a request body from ``source`` to ``target`` (``"chat"``, ``"responses"`` or
    ``"messages"``) and return it as a ``Translated`` dict (the body for the target upstream,
    ready for ``orjson.dumps``; ``dropped`` lists what ``lossy=True`` left out). Messages <->
    Responses gives what the two halves through chat give. The input is not modified; the result may share its nested
    values (schemas, metadata).

    It raises TypeError if ``body`` is not a dict, ValueError for an unknown API or ``source ==
    target``, and ``Untranslatable`` (a ValueError) naming the field when the body is not what
    its API allows (a wrong type, an unknown role, a tool result whose call is not in the history,
    a Messages target without ``max_tokens``) or, unless ``lossy``, when it holds what the target
    cannot express.
    """
    if not isinstance(body, dict):
        raise TypeError(f"request() takes the body as a dict, not {type(body).__name__}")
    _check_apis(source, target)
    ctx = _Ctx(lossy)
    if source == "chat":
        out = _FROM_CHAT[target](body, ctx)
    elif target == "chat":
        out = _TO_CHAT[source](body, ctx)
    else:
        out = (messages_to_responses if source == "messages" else responses_to_messages)(body, ctx)
    return Translated(out, ctx.dropped)


def through_chat(body: dict[str, Any], source: str, target: str, /, *, lossy: bool = False) -> Translated:
    """``through_chat(body, source, target, /, *, lossy=False) -> Translated``: Messages <->
    Responses as the two halves through chat, the rule ``request`` follows in one walk; a field
    the second half cannot carry is named by where it came from in ``body``. It raises as
    ``request`` does, and ValueError unless the two APIs are Messages and Responses."""
    if {source, target} != {"messages", "responses"}:
        raise InvalidRequest("through_chat() goes between messages and responses")
    ctx = _Ctx(lossy)
    origins: list[Path] = []
    ctx.origins = origins
    middle = _TO_CHAT[source](body, ctx)
    second = _Ctx(lossy, lambda path: _via_chat(source, middle, origins, path))
    out = _FROM_CHAT[target](middle, second)
    return Translated(out, ctx.dropped + second.dropped)

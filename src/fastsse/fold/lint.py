"""The linter base of the typed-event APIs (Responses, Messages): the SSE framing rules every API
shares (``fastsse.sse.lint``: BOM, line endings, truncation...) with the payload rules (invalid
UTF-8 / JSON) and an event grammar on top. Each API's ``lint`` module adds its grammar and its codes.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from ..sse.lint import ERROR, WARNING, CodeInfo, FramingChecker
from ._base import is_done

__all__ = ["GRAMMAR_CODES", "GrammarChecker"]

GRAMMAR_CODES: Final[dict[str, CodeInfo]] = {
    "missing-event-field": CodeInfo(WARNING, "an event has no event: line naming its type"),
    "event-type-mismatch": CodeInfo(ERROR, "the event: line and the payload's type differ"),
    "unknown-event": CodeInfo(WARNING, "an event type the API does not define"),
    "done-sentinel": CodeInfo(WARNING, "a chat-style data: [DONE] the grammar does not define"),
    # the chat code's name, kept: an event that lacks the integer index the grammar places it by
    "malformed-chunk": CodeInfo(
        ERROR, "an output item or a content block announced without an integer index"
    ),
}


class GrammarChecker(FramingChecker):
    """The SSE framing rules with an event grammar on top: each API names its event ``types`` and
    its ``codes``, and reads each known event in ``_grammar``."""

    api: str = ""
    types: frozenset[str] = frozenset()
    done_effect: str = ""  # what the API's SDK does with a data: [DONE], for the done-sentinel finding
    codes: dict[str, CodeInfo] = {}  # noqa: RUF012 (each API's CODES; never mutated)

    def _report_once(self, code: str, offset: int | None, message: str, key: object = None) -> None:
        if code == "non-data-field" and key == "event":
            return  # these grammars name every event
        super()._report_once(code, offset, message, key)

    def _event(self, offset: int, raw: bytes, etype: bytes | None) -> None:
        if is_done(raw):
            # Gateways that bridge chat streams end these with it too (LiteLLM's Responses adapter);
            # the openai SDK stops reading there and fastsse's folds skip it, so nothing breaks
            # unless events follow it.
            self._report_once(
                "done-sentinel", offset, f"data: [DONE] is not a {self.api} event; {self.done_effect}"
            )
            return
        if b"\n" in raw:
            self._report_once("multi-line-data", offset, "a payload spread over several data: lines")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._report(
                "invalid-utf8", offset, f"the payload is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            )
            text = raw.decode("utf-8", "replace")
        try:
            payload = orjson.loads(text)
        except orjson.JSONDecodeError:
            preview = text if len(text) <= 40 else text[:37] + "..."
            self._report("invalid-json", offset, f"the payload is not JSON: {preview!r}")
            return
        if not isinstance(payload, dict):
            self._report(
                "invalid-json", offset, f"the payload is JSON but not an object: {type(payload).__name__}"
            )
            return
        kind = payload.get("type")
        named = etype.decode("utf-8", "replace") if etype is not None else None
        if named is None:
            self._report_once(
                "missing-event-field", offset, "events without an event: line (the payload's type is used)"
            )
        elif isinstance(kind, str) and named != kind:
            self._report("event-type-mismatch", offset, f"event: {named} carries a payload of type {kind!r}")
        if not isinstance(kind, str):
            kind = named or ""
        if kind not in self.types:
            self._report_once("unknown-event", offset, f"an event of unknown type {kind!r}", key=kind)
            self._unknown(offset, payload)
            return
        self._grammar(offset, kind, payload)

    def _unknown(self, offset: int, payload: dict[str, Any]) -> None:
        pass

    def _grammar(self, offset: int, kind: str, payload: dict[str, Any]) -> None:
        raise NotImplementedError

    def _end_checks(self, end: int) -> None:
        if self.events == 0:
            self._report("empty-stream", end, "no event in the stream")
            return
        self._grammar_end(end)

    def _grammar_end(self, end: int) -> None:
        raise NotImplementedError

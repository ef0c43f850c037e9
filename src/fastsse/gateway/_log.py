"""Structured logs: ``JsonFormatter`` writes each record as one JSON line (an answer's record
merged in), and ``QuietCuts`` drops the one line a server writes for a response the gateway cut
on purpose (its own record says why)."""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Final

import orjson

# uvicorn's words for an app that returned before its response's end: the gateway's way to cut
_CUT_LINES: Final = ("ASGI callable returned without completing response.",)


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...}``: one line per record; a record's ``answer``
    (the gateway's per-answer dict) is merged in, a traceback goes under ``"exc"``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # (a second, its text): gmtime and strftime cost half of a line, and a busy gateway writes
        # many lines a second (one tuple, so a formatter shared by two handlers is safe)
        self._stamp: tuple[float, str] = (math.nan, "")

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON line."""
        created, stamp = record.created, self._stamp
        if created // 1 != stamp[0]:  # the second gmtime rounds down to
            stamp = self._stamp = (created // 1, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)))
        out: dict[str, Any] = {
            "ts": f"{stamp[1]}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        answer = getattr(record, "answer", None)
        if isinstance(answer, dict):
            out.update(answer)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class QuietCuts(logging.Filter):
    """Drops a server's line for a response the app left unfinished on purpose (a cut)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a server's line about a response left unfinished on purpose. The server
        logs that line as a plain message, so the record's format string is compared: every other
        record (an answer's among them) is not formatted here a first time for nothing."""
        return record.msg not in _CUT_LINES

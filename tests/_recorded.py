"""Where the recorded streams live: the ``shared`` folder beside the checkout (``../shared``), or
the folder named by ``FASTSSE_SHARED``. They are never copied into the repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path | None:
    """The shared folder: ``FASTSSE_SHARED`` when it is set (None if that folder does not exist, so
    setting it to a missing path runs the suite as a plain clone would), else ``../shared`` if it
    exists, else None."""
    env = os.environ.get("FASTSSE_SHARED")
    candidate = Path(env) if env else ROOT.parent / "shared"
    return candidate if candidate.is_dir() else None


def recorded(kind: str, name: str) -> bytes:
    """The bytes of one recorded stream (``kind`` is a folder such as ``chat``); the test is
    skipped, with the reason, when the shared folder is absent."""
    folder = shared_dir()
    if folder is None:
        pytest.skip("the recorded streams are not here: set FASTSSE_SHARED or check out ../shared")
    path = folder / "recorded" / kind / name
    if not path.is_file():
        pytest.skip(f"recorded stream {kind}/{name} is not in {folder}")
    return path.read_bytes()

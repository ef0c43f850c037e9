"""The comparison clients of ``fastsse.load._peers`` against the scripted server: same records, any peer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fastsse.load import PEERS, PeerRecord, run_peer
from fastsse.testing import serve_scripted_in_thread

pytest.importorskip("aiohttp", reason="the aiohttp peers need aiohttp (test extra)")


@pytest.fixture(scope="module")
def scripted() -> Iterator[Any]:
    with serve_scripted_in_thread(ttft_ms=2, itl_ms=1, chunks=4) as server:
        yield server


@pytest.mark.parametrize("name", list(PEERS))
def test_peer_records_every_chunk_with_tokens_and_stamps(scripted: Any, name: str) -> None:
    bodies = [
        {
            "model": "tokens_per_chunk=3,reasoning_chunks=1",
            "messages": [{"role": "user", "content": "hi"}],
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
    ] * 3
    records = run_peer(name, scripted.base_url, bodies, concurrency=2)
    assert len(records) == 3
    for rec in records:
        assert isinstance(rec, PeerRecord)
        assert rec.error is None and rec.done and rec.status == 200
        # role, 4 token chunks, finish, usage chunk: 7 chunks; only the 4 carry tokens, 3 each
        assert rec.tokens == [0, 3, 3, 3, 3, 0, 0]
        assert rec.reasoning == [False, True, False, False, False, False, False]
        assert rec.usage_tokens == 12
        assert all(0 < sent <= recv for sent, recv in zip(rec.sent_ns, rec.recv_ns, strict=True))
        assert rec.start_ns <= rec.recv_ns[0] <= rec.end_ns


@pytest.mark.parametrize("name", ["aiohttp-vllm", "fastsse-aiohttp", "fastsse-threads"])
def test_peer_does_not_call_a_cut_stream_done(scripted: Any, name: str) -> None:
    records = run_peer(
        name, scripted.base_url, [{"model": "truncate_after=2", "messages": []}], concurrency=1
    )
    assert records[0].done is False
    assert records[0].tokens[:3] == [0, 1, 1]


def test_unknown_peer_is_a_value_error(scripted: Any) -> None:
    with pytest.raises(ValueError, match="unknown peer"):
        run_peer("curl-cli", scripted.base_url, [], concurrency=1)

"""The fuzz targets' checks over their seed corpus, in every test run, so the targets cannot rot and
every vector also passes the differential and chunk-invariance checks (no atheris needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import fastsse

FUZZ = Path(__file__).resolve().parent.parent / "fuzz"
if not (FUZZ / "_harness.py").exists():
    # cibuildwheel copies only tests/, examples/ and docs/ next to each wheel's tests.
    pytest.skip("fuzz/ is not beside tests/ here (a wheel test run)", allow_module_level=True)
sys.path.insert(0, str(FUZZ))

import make_corpus  # noqa: E402

pytestmark = pytest.mark.c_extension  # both targets compare the compiled backend with the twin

SEEDS = make_corpus.seeds()


def test_there_are_seeds() -> None:
    assert len(SEEDS) > 100


def _harness():  # type: ignore[no-untyped-def]
    # Imported here: it loads the compiled backend, which a pure-Python run does not have.
    import _harness

    return _harness


def test_decoder_target_on_seeds() -> None:
    check = _harness().check_decoder
    for seed in SEEDS:
        check(seed)


@pytest.mark.skipif(
    not hasattr(fastsse.ChatStream, "write"), reason="ChatStream (branch agg) has not landed on main yet"
)
def test_chatstream_target_on_seeds() -> None:
    check = _harness().check_chatstream
    for seed in SEEDS:
        check(seed)


def test_relay_target_on_seeds() -> None:
    check = _harness().check_relay
    for seed in SEEDS:
        check(seed)


def test_translate_target_on_seeds() -> None:
    check = _harness().check_translate
    for seed in SEEDS:
        check(seed)

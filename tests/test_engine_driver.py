"""Which driver an engine runs on (issue 28): the compiled libcurl driver where it is built and
loads, pycurl otherwise or when asked; what each refuses, and the compiled driver's own handle
methods where they differ from pycurl's. The engine's behaviour on both is in the engine tests,
which run on both drivers (the ``driver`` fixture)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import fastsse
import fastsse._backend
from fastsse.client import engine

LINUX = sys.platform.startswith("linux")


def _compiled() -> Any:
    """The compiled driver, which must load wherever it is built (Linux, with the compiled backend
    and pycurl): a driver that is built and does not load fails the test, as a broken backend does."""
    module = engine.compiled_driver()
    if isinstance(module, str):
        if fastsse._backend.NO_EXTENSIONS or not LINUX or module.startswith("pycurl is not installed"):
            pytest.skip(f"the compiled driver: {module}")
        pytest.fail(f"the compiled driver does not load: {module}")
    return module


def test_an_unknown_driver_is_refused() -> None:
    with pytest.raises(fastsse.InvalidRequest, match="'compiled', 'pycurl'"):
        fastsse.Client(driver="libuv")


def test_the_environment_picks_pycurl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTSSE_DRIVER", "pycurl")
    with fastsse.Client() as client:
        assert client._engine.driver == "pycurl"
    with fastsse.Client(driver="pycurl") as client:
        assert client._engine.driver == "pycurl"


@pytest.mark.c_extension
def test_the_compiled_driver_is_the_default_on_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    if not LINUX:
        pytest.skip("the compiled driver is built on Linux only")
    monkeypatch.delenv("FASTSSE_DRIVER", raising=False)
    module = engine.compiled_driver()
    if isinstance(module, str) and module.startswith("pycurl is not installed"):
        pytest.skip(f"the compiled driver: {module}")
    # built with the compiled backend beside pycurl (the wheels' test step), it must load
    assert not isinstance(module, str), module
    with fastsse.Client() as client:
        assert client._engine.driver == "compiled"


def test_compiled_where_it_is_not_available_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_compiled", "not built here (a test)")
    with pytest.raises(RuntimeError, match="not available: not built here"):
        fastsse.Client(driver="compiled")
    with fastsse.Client() as client:  # the default falls back
        assert client._engine.driver == "pycurl"


def test_a_pycurl_handle_needs_the_pycurl_driver() -> None:
    _compiled()
    import pycurl

    client = fastsse.Client(driver="compiled", base_url="http://127.0.0.1:9/v1", api_key="x")
    with client, pytest.raises(TypeError, match="driver='pycurl'"):
        client.create_stream({"model": "m"}, curl=pycurl.Curl())


def test_compiled_handles_refuse_what_they_do_not_carry() -> None:
    module = _compiled()
    import pycurl

    handle = module.Curl()
    with pytest.raises(TypeError, match="not supported"):
        handle.setopt(pycurl.SHARE, pycurl.CurlShare())
    with pytest.raises(TypeError, match="not supported"):
        handle.setopt(pycurl.PROGRESSFUNCTION, lambda *a: 0)
    with pytest.raises(TypeError, match="not supported"):
        handle.unsetopt(pycurl.POST)
    handle.setopt(pycurl.URL, "http://127.0.0.1:9/")
    handle.setopt(pycurl.HTTPHEADER, ["A: b", "C: d"])
    handle.unsetopt(pycurl.HTTPHEADER)
    assert handle.getinfo(pycurl.RESPONSE_CODE) == 0
    assert handle.direct(object()) is False  # only a compiled stream (a Feed) is fed from C
    handle.close()
    with pytest.raises(pycurl.error):
        handle.setopt(pycurl.URL, "http://127.0.0.1:9/")
    multi = module.CurlMulti()
    with pytest.raises(TypeError):
        multi.add_handle(pycurl.Curl())  # a pycurl handle is not the driver's
    multi.close()

"""``python -m fastsse load --ray ADDRESS --workers K``: the workers as Ray actors, over a cluster.

Each actor is one worker of ``_run``: its own ``AsyncClient`` on its own event loop, in its
own process, on whichever node Ray places it (spread over the nodes). The driver decides the
arrival schedule once and deals it out (``_plan.shares``), agrees a start time with the
actors once they are all up, and merges their records, already on the run's clock: each actor maps
the agreed epoch start onto its own monotonic clock through one ``(monotonic_ns, epoch_ns)`` anchor.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import time
from typing import Any, Final

from .._errors import LoadError
from ._plan import Config, Share
from ._run import Counters, Interrupt, on_sigint, run_share

INSTALL: Final = (
    "--ray needs ray, which is not installed: pip install 'fastsse-cython[ray]' (or pip install ray)"
)
START_AHEAD_S: Final = 0.5  # from the actors' "ready" to the agreed start: the run() calls reach them
POLL_S: Final = 0.2  # how often the driver looks for a Ctrl-C while the actors run


class LoadActor:
    """One load worker inside a Ray actor (wrapped with ``ray.remote`` when ray is there; two
    threads, so that ``stop`` is heard while ``run`` runs)."""

    def __init__(self) -> None:
        self.interrupt = Interrupt()

    def ready(self) -> tuple[str, int]:
        """The actor's host and process: it is up, and has imported fastsse."""
        import socket

        return socket.gethostname(), os.getpid()

    def run(self, config: Config, share: Share, start_epoch_ns: int) -> dict[str, Any]:
        """Run the share on a new event loop of the actor's thread; the worker's result as a dict."""
        counters = Counters([0, 0, 0, 0], 0)
        return run_share(config, share, start_epoch_ns, counters, "ray", self.interrupt).to_dict()

    def stop(self) -> None:
        """End the run early (the driver's Ctrl-C): ``run`` returns the records that had ended."""
        self.interrupt.request()


def _ray() -> Any:
    # typed as Any: ray is optional, and its stubs are not what this module is checked against
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ImportError(INSTALL) from None


def available() -> bool:
    """True when ray can be imported here."""
    return importlib.util.find_spec("ray") is not None


def connect(address: str, workers: int) -> None:
    """Join the cluster at ``address`` (``auto``: the one this machine is part of), or start a local
    one (``local``, room for ``workers`` actors). It raises ImportError without ray."""
    ray = _ray()
    if ray.is_initialized():
        return
    if address == "local":
        ray.init(
            num_cpus=max(workers, os.cpu_count() or 1),
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    else:
        ray.init(address=address, log_to_driver=False, configure_logging=False)


def shutdown() -> None:
    """Leave the cluster (and stop the local one this process started)."""
    if not available():
        return
    ray = _ray()
    if ray.is_initialized():
        ray.shutdown()


def run_actors(config: Config, shares: list[Share]) -> list[dict[str, Any]]:
    """One actor per share, spread over the cluster's nodes; their results, in worker order.

    It raises ImportError without ray and LoadError if an actor fails.
    """
    assert config.ray is not None
    connect(config.ray, len(shares))
    ray = _ray()

    remote = ray.remote(num_cpus=1, max_concurrency=2)(LoadActor)
    actors = [remote.options(scheduling_strategy="SPREAD").remote() for _ in shares]
    interrupted: list[bool] = []
    try:
        ray.get([a.ready.remote() for a in actors])
        start = time.time_ns() + int(START_AHEAD_S * 1e9)
        runs = [a.run.remote(config, s, start) for a, s in zip(actors, shares, strict=True)]
        with on_sigint(lambda: interrupted.append(True)):
            # Ray calls do not belong in a signal handler: the loop passes the Ctrl-C on
            pending, told = list(runs), False
            while pending:
                _, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
                if interrupted and not told:
                    for actor in actors:
                        actor.stop.remote()
                    told = True
        try:
            return list(ray.get(runs))
        except ray.exceptions.RayError as exc:
            raise LoadError(f"a load actor failed: {exc}") from None
    finally:
        for actor in actors:
            ray.kill(actor)

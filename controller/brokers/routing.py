"""One broker per kind, chosen per run by its spec's ``[broker] kind`` (docs/spec.md, ADR-0015).

A process drives runs of both kinds (``crucible serve`` with some specs local and some on Kubernetes),
but the run service holds one broker. This broker is that one: it launches each round through the
broker of its kind, remembers which one has the round, and answers for it from there on. ``kind_of``
(run id, round) is injected: the composition root reads the run's stored spec, and may keep some
rounds local (refinement rounds, which the worker does not run yet). Brokers are built on first use,
so a process that never sees a Kubernetes run never loads the client.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from controller.brokers.base import Broker, BrokerCapabilities, RoundReport
from controller.domain.errors import SpecError
from controller.domain.jobs import RoundJob


class RoutedBroker:
    """See the module docstring. ``brokers`` maps a kind to a factory of its broker."""

    def __init__(
        self,
        brokers: Mapping[str, Callable[[], Broker]],
        kind_of: Callable[[str, int], str],
        *,
        concurrent: bool,
    ) -> None:
        self._factories = dict(brokers)
        self._kind_of = kind_of
        self._built: dict[str, Broker] = {}
        self._rounds: dict[tuple[str, int], Broker] = {}
        self._lock = threading.Lock()
        # Whether rounds of different runs may run at once is the caller's to say (an inline local broker
        # may not); whether a run's rounds are remote depends on the run: ``capabilities_for``.
        self.capabilities = BrokerCapabilities(remote=False, concurrent=concurrent)

    def broker_for(self, run_id: str, round: int) -> Broker:
        """The broker of the round's kind; SpecError naming ``broker.kind`` if none is configured."""
        kind = self._kind_of(run_id, round)
        with self._lock:
            built = self._built.get(kind)
            if built is None:
                factory = self._factories.get(kind)
                if factory is None:
                    raise SpecError("broker.kind", f"this controller runs no {kind!r} rounds")
                built = self._built[kind] = factory()
            return built

    def capabilities_for(self, run_id: str, round: int) -> BrokerCapabilities:
        """What the broker of that round can do (``remote``: its commits come back as bundles)."""
        return self._of(run_id, round).capabilities

    def launch(self, job: RoundJob) -> RoundReport:
        broker = self.broker_for(job.run_id, job.round)
        report = broker.launch(job)
        with self._lock:
            self._rounds[(job.run_id, job.round)] = broker
        return report

    def status(self, run_id: str, round: int) -> RoundReport:
        return self._of(run_id, round).status(run_id, round)

    def wait(self, run_id: str, round: int, timeout: float | None = None) -> RoundReport:
        return self._of(run_id, round).wait(run_id, round, timeout)

    def cancel(self, run_id: str, round: int) -> RoundReport:
        return self._of(run_id, round).cancel(run_id, round)

    def _of(self, run_id: str, round: int) -> Broker:
        with self._lock:
            known = self._rounds.get((run_id, round))
        return known if known is not None else self.broker_for(run_id, round)

"""The local broker: rounds run on the controller's own machine, exactly as ``crucible loop`` always did.

Dependency inversion (ADR-0003): ``brokers`` sits below ``services``, so this module cannot know how
a round is executed. The composition root injects the ``RoundRunner`` (a services function that
opens the run's context and drives its turns); the broker only tracks rounds, hands each its
cancel event, and records how it ended.

Two modes: ``inline`` runs the round in the caller's thread before ``launch`` returns (what
``crucible loop`` uses: signals and Ctrl-C behave as they always did); otherwise each round gets a
thread of its own (what ``crucible serve`` uses to drive several runs at once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.brokers.base import BrokerCapabilities, RoundOutcome, RoundReport
from controller.brokers.table import RoundTable
from controller.domain.errors import CrucibleError
from controller.domain.jobs import RoundJob, RoundState

RoundRunner = Callable[[RoundJob, threading.Event], RoundOutcome]
"""Executes a round's turns; stops soon after the event is set, and says how the round ended."""


@dataclass
class _Round:
    job: RoundJob
    report: RoundReport
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)


class LocalBroker:
    """Runs rounds in this process through an injected runner (see the module docstring)."""

    def __init__(self, runner: RoundRunner, *, inline: bool = True) -> None:
        self._runner = runner
        self._inline = inline
        self._table: RoundTable[_Round] = RoundTable()  # (run, round) -> its latest attempt
        self._lock = self._table.lock
        self.capabilities = BrokerCapabilities(remote=False, concurrent=not inline)

    def launch(self, job: RoundJob) -> RoundReport:
        entry, new = self._table.admit(
            job, lambda: _Round(job, RoundReport(job.run_id, job.round, RoundState.PENDING))
        )
        if not new:
            return entry.report
        if self._inline:
            self._execute(entry)
        else:
            name = f"crucible-round-{job.run_id}-{job.round}-{job.attempt}"
            threading.Thread(target=self._execute, args=(entry,), name=name, daemon=True).start()
        return self.status(job.run_id, job.round)

    def status(self, run_id: str, round: int) -> RoundReport:
        return self._get(run_id, round).report

    def wait(self, run_id: str, round: int, timeout: float | None = None) -> RoundReport:
        return self._table.wait(run_id, round, timeout)

    def cancel(self, run_id: str, round: int) -> RoundReport:
        entry = self._get(run_id, round)
        with self._lock:
            if entry.report.state == RoundState.PENDING:
                # Never started: it never will (the runner checks nothing, so decide it here).
                self._move(entry, RoundState.CANCELLED)
                entry.done.set()
            entry.cancel.set()
            return entry.report

    def _get(self, run_id: str, round: int) -> _Round:
        return self._table.get(run_id, round)

    def _move(self, entry: _Round, state: RoundState, **changes: object) -> None:
        self._table.move(entry, state, **changes)

    def _execute(self, entry: _Round) -> None:
        with self._lock:
            if entry.report.state != RoundState.PENDING:
                return  # cancelled before it started
            self._move(entry, RoundState.RUNNING)
        try:
            outcome = self._runner(entry.job, entry.cancel)
        except Exception as exc:  # the round failed, not the broker: report it, as a remote one would
            text = str(exc) if isinstance(exc, CrucibleError) else f"{type(exc).__name__}: {exc}"
            with self._lock:
                self._move(entry, RoundState.FAILED, error=text)
        except BaseException as exc:
            # KeyboardInterrupt / SystemExit (inline mode): record, then let the process see it.
            with self._lock:
                self._move(entry, RoundState.FAILED, error=f"{type(exc).__name__}: {exc}")
            raise
        else:
            state = RoundState.CANCELLED if entry.cancel.is_set() else RoundState.SUCCEEDED
            with self._lock:
                self._move(entry, state, outcome=outcome)
        finally:
            entry.done.set()

"""The in-process round table of the brokers that run rounds from this process (local, subprocess).

Both keep, per (run, round), the latest attempt they launched, and both must answer the same way to a
relaunch (the same job again: its report; another job for the same attempt: a conflict; a later
attempt: only once the earlier one finished, ADR-0012), to ``status``/``wait`` of a round never
launched here (NotFoundError), and move a round's report only along ``check_round_transition``.
Written once here so the two cannot drift; each broker keeps only how it executes a round.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Generic, Protocol, TypeVar

from controller.brokers.base import RoundReport
from controller.domain.errors import ConflictError, NotFoundError
from controller.domain.jobs import RoundJob, RoundState, check_round_transition


class TrackedRound(Protocol):
    """What the table needs of a broker's entry for one attempt of a round."""

    job: RoundJob
    report: RoundReport
    done: threading.Event


E = TypeVar("E", bound=TrackedRound)


def check_supersedes(known: TrackedRound, job: RoundJob) -> None:
    """A new attempt replaces a round's finished latest attempt, and nothing else (ADR-0012)."""
    where = f"round {job.round} of run {job.run_id}"
    if job.attempt < known.job.attempt:
        raise ConflictError(f"{where}: attempt {job.attempt} is stale, attempt {known.job.attempt} exists")
    if not known.report.finished:
        raise ConflictError(
            f"{where}: attempt {known.job.attempt} is still {known.report.state}; cancel it and wait first"
        )


class RoundTable(Generic[E]):
    """(run, round) → the latest attempt launched here; ``lock`` guards the entries' reports too."""

    def __init__(self) -> None:
        self._rounds: dict[tuple[str, int], E] = {}
        self.lock = threading.Lock()

    def admit(self, job: RoundJob, make: Callable[[], E]) -> tuple[E, bool]:
        """The entry for ``job`` and whether it is new: the known one when the same attempt is
        launched again with the same job, else ``make()`` replacing a finished earlier attempt;
        ConflictError for another job under the same attempt, a stale attempt or one still going."""
        with self.lock:
            known = self._rounds.get(job.key)
            if known is not None and known.job.attempt == job.attempt:
                if known.job != job:
                    raise ConflictError(
                        f"round {job.round} of run {job.run_id} (attempt {job.attempt}) was launched "
                        "with a different job"
                    )
                return known, False
            if known is not None:
                check_supersedes(known, job)
            entry = make()
            self._rounds[job.key] = entry
            return entry, True

    def get(self, run_id: str, round: int) -> E:
        """The latest attempt of ``round``; NotFoundError when it was never launched here."""
        entry = self._rounds.get((run_id, round))
        if entry is None:
            raise NotFoundError(f"round {round} of run {run_id} was never launched here")
        return entry

    def wait(self, run_id: str, round: int, timeout: float | None) -> RoundReport:
        entry = self.get(run_id, round)
        entry.done.wait(timeout)
        return entry.report

    @staticmethod
    def move(entry: TrackedRound, state: RoundState, **changes: object) -> None:
        """Move the entry's report to ``state`` (with ``changes``); the caller holds ``lock``."""
        check_round_transition(entry.report.state, state)
        entry.report = replace(entry.report, state=state, **changes)  # type: ignore[arg-type]

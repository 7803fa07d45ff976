"""Ports of the reads the API and the dashboard serve: pages of runs and turns, and the counters of
``/metrics``. They take ``limit`` and filters in SQL, never filter a whole run in Python, and read
without a transaction's bookkeeping on PostgreSQL (``Store._reading``). Errors as in ``ports.runs``.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Protocol

from controller.domain.enums import EventKind, Outcome, RunStatus, SampleArm
from controller.store.records import (
    EventRecord,
    HypothesisRecord,
    RunRecord,
    RunTally,
    TurnPage,
)
from controller.store.summary import RunSummaryRecord


class RunPages(Protocol):
    """Pages of runs, newest first, and what a line of the runs list counts per run."""

    def page_runs(
        self, *, limit: int = 50, offset: int = 0, status: RunStatus | None = None
    ) -> list[RunRecord]:
        """A page of whole runs; only of ``status`` when given."""
        ...

    def run_summaries(
        self, *, limit: int = 50, offset: int = 0, status: RunStatus | None = None
    ) -> list[RunSummaryRecord]:
        """A page of the columns a line of the runs list shows."""
        ...

    def run_tallies(self, run_ids: Collection[str]) -> dict[str, RunTally]:
        """Decided turns, kept turns and PRs of each run (zeros for a run without any)."""
        ...


class TurnPages(Protocol):
    """Pages of a run's decided turns with the values they show, and where its event stream stands."""

    def turns_version(self, run_id: str) -> int:
        """A number that changes whenever a page of the run's decided turns could (its newest event id)."""
        ...

    def turn_page(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int = 100,
        round: int | None = None,
        outcome: Outcome | None = None,
    ) -> TurnPage:
        """Decided turns numbered above ``after``, at most ``limit``, with their samples and hypotheses."""
        ...

    def metric_samples(self, run_id: str, metric: str) -> dict[tuple[int, SampleArm], list[float]]:
        """Every valid sample's value of ``metric`` (the baseline's as turn 0), by (turn, arm), in the
        order they were added (a sample without it left out; none for an unknown run)."""
        ...

    def hypotheses_of_turns(self, run_id: str, turns: Collection[int]) -> list[HypothesisRecord]:
        """The parallel hypotheses of the given turns only, with their samples (by turn, then index)."""
        ...

    def hypothesis_outcomes(self, run_id: str) -> dict[int, dict[int, Outcome]]:
        """Per decided parallel turn, each hypothesis's outcome by index (no samples, no texts)."""
        ...

    def last_event_id(self, run_id: str) -> int:
        """The id of the run's newest event (0: none)."""
        ...

    def last_event_of(self, run_id: str, kind: EventKind) -> EventRecord | None:
        """The run's newest event of ``kind``, or None."""
        ...


class OpsCounts(Protocol):
    """The counters ``/metrics`` shows, each one aggregate query."""

    def count_runs_by_status(self) -> dict[RunStatus, int]:
        """Runs per status (statuses without runs absent)."""
        ...

    def count_turns_by_outcome(self) -> dict[Outcome, int]:
        """Decided turns per outcome (outcomes without turns absent)."""
        ...

    def count_deliveries(self) -> tuple[int, int]:
        """(stored, still pending) webhook deliveries."""
        ...


class SchemaHealth(Protocol):
    """What ``/readyz`` and ``/metrics`` ask of the database itself rather than of its runs."""

    def check_schema(self) -> None:
        """Return if the database answers and is at this code's head revision; SchemaOutdatedError
        when it is behind, an error of ``domain.errors`` when it does not answer."""
        ...

    @property
    def statements(self) -> int:
        """SQL statements this process has sent so far (never decreases)."""
        ...


class SessionRevocations(Protocol):
    """Dashboard sessions ended by a logout (``api.dashboard.session``), shared by every replica on
    the database, so a copy of a logged-out cookie is refused wherever it is sent."""

    def revoke_session(self, nonce_hash: str, expires_at: datetime) -> None:
        """Record that the session whose nonce hashes to ``nonce_hash`` (sha256, hex) ended; kept
        until ``expires_at`` (timezone-aware: ValueError otherwise), when its cookie expires anyway.
        Revoking it again changes nothing."""
        ...

    def session_revoked(self, nonce_hash: str) -> bool:
        """Whether ``revoke_session`` recorded that session (and its expiry has not long passed)."""
        ...

"""The ledger port: the part of the store the turn path needs, and nothing else (ADR-0003).

Executing a round (baseline, turns, their decisions) needs a dozen reads and writes of one run's
record. Today the SQL ``Store`` serves them in the controller's process; in a loop pod (next issue)
an HTTP client to the controller's API will, with the same contract. Stating the contract on a
small Protocol, and testing every implementation with one suite (``tests/ledger``, Optuna's
``StorageTestCase`` pattern), is what lets the round run anywhere without the turn path knowing.

Deliberately absent: creating runs, components, pull requests, feedback, leases, listing runs.
Those belong to the controller that owns the run, not to whoever executes one of its rounds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from controller.domain.enums import EventKind, Reason, RunStatus, StopReason
from controller.store.records import (
    ChampionUpdate,
    EventRecord,
    HypothesisRecord,
    HypothesisReport,
    RunRecord,
    Sample,
    SampleRecord,
    TurnDecision,
    TurnRecord,
    TurnSnapshot,
)


class Ledger(Protocol):
    """One run's record as the turn path reads and writes it.

    Atomicity: every method is one transaction (all or nothing). Decisions are exactly-once:
    ``decide_turn`` and ``set_baseline`` write the decision, champion, usage, heads, samples and the
    event together, so no decided turn is ever without its event, and a racing second writer fails.

    Errors (``controller.domain.errors``), the same from every implementation:
      - NotFoundError: the run (or turn) does not exist; every method checks the run, reads included.
      - ConflictError: the call contradicts the record and changed nothing: deciding a decided
        turn, starting a decided turn, samples for a decided turn or for a recorded baseline, a
        second baseline, an illegal run transition (``enums.RUN_TRANSITIONS``).
      - RetryLaterError: the backend is busy or unreachable; the same call may succeed later.
      - ValueError: a caller bug (NaN or infinite measurements, turn number < 1, a stop reason
        that does not match the status); nothing is written.

    Idempotency (what recovery relies on): ``start_turn`` of a STARTED turn returns it again and
    drops the samples of the cut-off attempt; ``start_baseline`` likewise for turn 0 until the
    baseline is recorded. Every other write is not idempotent and says so with ConflictError
    where repeating it would be wrong.
    """

    def get_run(self, run_id: str) -> RunRecord:
        """The run as stored now."""
        ...

    def turn_snapshot(self, run_id: str, *, last: int) -> TurnSnapshot:
        """The run, its turn counts and its ``last`` turns (ascending), read together."""
        ...

    def start_baseline(self, run_id: str) -> None:
        """Prepare to measure the baseline (again); ConflictError once it is recorded."""
        ...

    def set_baseline(self, run_id: str, value: float, event_payload: Mapping[str, Any]) -> None:
        """Record the baseline as the champion (turn 0) with its BASELINE event, exactly once."""
        ...

    def add_samples(self, run_id: str, turn: int, samples: Sequence[Sample]) -> None:
        """Store raw samples of turn ``turn`` (0: the baseline); see the errors above."""
        ...

    def list_samples(self, run_id: str, turn: int | None = None) -> list[SampleRecord]:
        """Samples by turn, then in the order they were added."""
        ...

    def start_turn(
        self,
        run_id: str,
        number: int,
        round: int,
        *,
        event: tuple[EventKind, Mapping[str, Any]] | None = None,
    ) -> TurnRecord:
        """Create turn ``number`` STARTED in ``round`` (idempotent while STARTED, see above)."""
        ...

    def decide_turn(
        self,
        run_id: str,
        number: int,
        decision: TurnDecision,
        *,
        champion: ChampionUpdate | None,
        component_heads: Mapping[str, str],
        event: tuple[EventKind, Mapping[str, Any]],
        samples: Sequence[Sample] = (),
        hypotheses: Mapping[int, tuple[Reason, str]] | None = None,
        progress: Sequence[tuple[EventKind, Mapping[str, Any]]] = (),
    ) -> TurnRecord:
        """Decide a STARTED turn exactly once, with everything it changes, in one transaction.

        ``hypotheses`` (``broker.parallel > 1``): index -> (final reason, detail) of every reported
        hypothesis; ConflictError unless it names exactly the reported ones. ``progress``: the turn's
        progress events not written yet (``execution.progress``), appended in order before ``event``:
        in the decision's transaction where the backend has one (the SQL store, the memory fake: a
        refused decision writes none of them); the HTTP ledger sends them first, as ``append_events``
        does, so a refused decision may follow them."""
        ...

    def report_hypothesis(self, run_id: str, turn: int, report: HypothesisReport) -> HypothesisRecord:
        """Record one of the parallel hypotheses of STARTED turn ``turn`` (each executor reports its
        own; the controller decides the turn once all have reported). ConflictError for a decided turn
        or an index reported already; a restarted turn (``start_turn``) forgets its hypotheses."""
        ...

    def list_hypotheses(self, run_id: str, turn: int | None = None) -> list[HypothesisRecord]:
        """Reported hypotheses by turn, then index; empty for turns of a single hypothesis."""
        ...

    def append_event(self, run_id: str, kind: EventKind, payload: Mapping[str, Any]) -> EventRecord:
        """Append one event; ids increase in the order events become visible."""
        ...

    def append_events(
        self, run_id: str, events: Sequence[tuple[EventKind, Mapping[str, Any]]]
    ) -> list[EventRecord]:
        """Append ``events`` in order (ids increase in that order), in one transaction where the backend
        has them (the SQL store, the memory fake); the HTTP ledger sends them one request each, so a
        failure there may leave a prefix written. Meant for a turn's progress events, which nothing
        decides or recovers from (``execution.progress``): grouping them saves a transaction each.
        An empty ``events`` writes nothing and checks nothing."""
        ...

    def list_events(
        self,
        run_id: str,
        *,
        after_id: int = 0,
        limit: int | None = None,
        kinds: Collection[EventKind] | None = None,
    ) -> list[EventRecord]:
        """Events with id > ``after_id``, oldest first; only of ``kinds`` when given."""
        ...

    def set_run_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        stop_reason: StopReason | None = None,
        stop_message: str | None = None,
    ) -> RunRecord:
        """Move the run to ``status`` along ``enums.RUN_TRANSITIONS`` (ConflictError otherwise)."""
        ...

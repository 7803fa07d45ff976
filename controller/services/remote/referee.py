"""The controller's checks of a worker's reports that need its store (``recount`` does the arithmetic).

- ``reference``: what a turn is compared with besides the report: the champion's stored samples
  (the arm to beat without interleaving, read only when needed) and whether the champion is still
  the base commit.
- ``require_progress`` / ``require_own_progress`` / ``require_event``: a worker appends only its
  running turn's progress (``turn_step``, ``sample``, about a turn of its own round); every other
  event it causes comes with its write, of that write's kind and about that turn, so it cannot draft a
  reply, finish a round or complete the run in the stream.
- ``require_champion``: a hypothesis counts only against the champion its grant was measured
  against (ADR-0051): one taken ahead of a turn whose predecessor kept is void (its grant ended, 401).
- ``add_baseline_samples`` / ``set_baseline``: the baseline is the one measurement stored apart
  from a decision. Its samples come first (only baseline samples, only before the baseline is set:
  samples added to a decided turn would change the arm later turns are compared with), then its
  value, refused unless it is the median of those samples.

Refusals are recorded by ``refusals.refuse_report`` (403, the token stays good). What the ledger
refuses anyway (a turn that does not exist or is decided, a hypothesis reported already, a baseline
recorded already) is answered as the ledger answers it (404, 409) before a refusal is recorded: a late
or repeated report is no claim to refuse (``require_started``, ``require_unreported``, checked only
once a report did not match, so an honest one costs no extra query).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from controller.config.spec import Spec
from controller.domain.enums import EventKind, SampleArm, TurnPhase
from controller.domain.errors import ConflictError, ForbiddenError, UnauthenticatedError
from controller.domain.jobs import RoundJob
from controller.services.remote.recount import Reference, recount_baseline, stored_arm
from controller.services.remote.refusals import refuse_report
from controller.stats import Arm
from controller.store.ports import RemoteRoundStore
from controller.store.records import Sample, WorkerRoundRecord
from controller.store.worker_rounds import hypothesis_scope


def reference(store: RemoteRoundStore, spec: Spec, run_id: str) -> Reference:
    """What the controller knows of a turn's comparison (``recount.Reference``), from its store."""

    def champion() -> Arm:
        turn = store.get_run(run_id).champion_turn or 0
        arm = SampleArm.BASELINE if turn == 0 else SampleArm.CANDIDATE
        return stored_arm(spec, _stored(store, run_id, turn), arm)

    def at_base() -> bool:
        return all(c.head_sha == c.base_sha for c in store.list_components(run_id))

    return Reference(champion=champion, champion_is_base=at_base)


WORKER_EVENTS = frozenset({EventKind.TURN_STEP, EventKind.SAMPLE})
"""What a worker appends on its own: the running turn's progress. Every other event a worker causes
comes with the write it belongs to, of the kind that write makes; ``reply_drafted``, ``completed``,
rounds, publishing and the rest are the controller's."""


def require_progress(kind: EventKind) -> None:
    """ForbiddenError unless ``kind`` is one a worker appends on its own (``WORKER_EVENTS``)."""
    if kind not in WORKER_EVENTS:
        allowed = ", ".join(sorted(WORKER_EVENTS))
        raise ForbiddenError(f"a worker appends only {allowed} events, not {kind}")


def require_own_progress(grant: WorkerRoundRecord, payload: Mapping[str, Any]) -> None:
    """ForbiddenError unless a progress event is about a turn of the token's own round: a worker's
    token never shows steps or samples for another round's turns, or turns its round cannot have."""
    job = RoundJob.from_json(grant.job)
    turn, round = payload.get("turn"), payload.get("round")
    if round != grant.round:
        raise ForbiddenError(f"progress of round {round}: this token is round {grant.round}'s")
    last = job.first_turn + job.turns - 1
    if not isinstance(turn, int) or not job.first_turn <= turn <= last:
        raise ForbiddenError(f"progress of turn {turn}: this round's turns are {job.first_turn} to {last}")


def event_mismatch(
    event: tuple[EventKind, Mapping[str, Any]], kind: EventKind, *, number: int, round: int | None = None
) -> str | None:
    """What is wrong with ``event`` as the ``kind`` event of turn ``number`` (of ``round``), or None."""
    found, payload = event
    if found is not kind:
        return f"this write records a {kind} event, not {found}"
    if payload.get("turn") != number or (round is not None and payload.get("round") != round):
        return f"the {kind} event is about another turn than {number}"
    return None


def require_event(
    event: tuple[EventKind, Mapping[str, Any]], kind: EventKind, *, number: int, round: int | None = None
) -> None:
    """ForbiddenError unless ``event`` is of ``kind`` and about turn ``number`` (of ``round``)."""
    problem = event_mismatch(event, kind, number=number, round=round)
    if problem is not None:
        raise ForbiddenError(problem)


def require_started(store: RemoteRoundStore, run_id: str, turn: int) -> None:
    """NotFoundError for no such turn, ConflictError for a decided one (as ``Ledger.decide_turn``)."""
    if store.get_turn(run_id, turn).phase is not TurnPhase.STARTED:
        raise ConflictError(f"turn {turn} of run {run_id} is decided")


def require_unreported(store: RemoteRoundStore, run_id: str, turn: int, index: int) -> None:
    """As ``require_started``, and ConflictError for a hypothesis reported already."""
    require_started(store, run_id, turn)
    if any(h.index == index for h in store.list_hypotheses(run_id, turn)):
        raise ConflictError(f"hypothesis {index} of turn {turn} of run {run_id} is already reported")


def add_baseline_samples(
    store: RemoteRoundStore, grant: WorkerRoundRecord, turn: int, samples: Sequence[Sample]
) -> None:
    """Store the baseline's samples (module docstring)."""
    _no_baseline_yet(store, grant.run_id)
    if turn != 0:
        require_started(store, grant.run_id, turn)  # a decided turn's samples are final (409)
    if turn != 0 or any(arm != SampleArm.BASELINE for arm, _i, _v, _ok in samples):
        raise refuse_report(store, grant, turn, "samples are stored apart only for the baseline")
    store.add_samples(grant.run_id, 0, samples)


def set_baseline(
    store: RemoteRoundStore,
    spec: Spec,
    grant: WorkerRoundRecord,
    value: float,
    event_payload: Mapping[str, Any],
) -> None:
    """Record the baseline if its stored samples give ``value`` (module docstring)."""
    if not math.isfinite(value):
        raise ValueError(f"baseline: must be finite, got {value}")
    _no_baseline_yet(store, grant.run_id)
    problem = recount_baseline(spec, value, _stored(store, grant.run_id, 0))
    if problem is not None:
        raise refuse_report(store, grant, 0, problem)
    store.set_baseline(grant.run_id, value, event_payload)


def _no_baseline_yet(store: RemoteRoundStore, run_id: str) -> None:
    if store.get_run(run_id).baseline_value is not None:
        raise ConflictError(f"run {run_id} already has its baseline")


def _stored(store: RemoteRoundStore, run_id: str, turn: int) -> list[Sample]:
    return [(s.arm, s.index, s.values, s.valid) for s in store.list_samples(run_id, turn)]


def require_champion(store: RemoteRoundStore, grant: WorkerRoundRecord) -> None:
    """UnauthenticatedError, its grant ended, for a hypothesis whose grant names other heads than
    the run's champion (ADR-0051): a warm pod took it ahead of its turn, and the turn before kept.
    The controller withdraws such grants before the turn starts (so their tokens are refused
    already); this is the report route's own check of it. The pod drops a hypothesis on a 401."""
    if hypothesis_scope(grant.job) is None:
        return
    heads = {c.name: c.head_sha for c in store.list_components(grant.run_id)}
    if dict(grant.job.get("heads") or {}) != heads:
        with contextlib.suppress(ConflictError):  # ended meanwhile: refused all the same
            store.finish_worker_round(grant.token_hash, {"withdrawn": "the champion moved"})
        raise UnauthenticatedError("this hypothesis was measured against a champion that is no longer one")

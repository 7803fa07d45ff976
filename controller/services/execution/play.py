"""The turns of a round, one loop for every kind of round: round 0's search, a refinement round on
the controller and in ``crucible worker`` (``play_turns``).

What differs between rounds is which turn comes next and when the round is over: a ``Planner``
answers both. Round 0's (``loop.Search``) applies the stop rules (budgets, knobs exhausted, the
hand-over to the feedback watch) and proposes knobs, one or ``broker.parallel`` hypotheses a turn;
a refinement round's (``Refinement``) plays up to N turns until one holds the score. What varies
per round (its rule, the feedback it quotes) is an argument, never state set on the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from controller.domain.enums import Outcome
from controller.engine.candidate import FeedbackQuote
from controller.engine.knobs import Proposal
from controller.services.execution.context import RoundRule, RunContext
from controller.services.execution.hypotheses import run_parallel_turn
from controller.services.execution.turn import run_turn
from controller.store.records import RunRecord, TurnRecord


@dataclass(frozen=True)
class TurnPlan:
    """The next turn of a round as its planner wants it played: its number, the knobs ``proposals``
    (None: the agent proposes), how many hypotheses (``parallel`` > 1: a turn of N, round 0 only),
    and the planner's reads of the record (``recent`` turns, ``decided_total``, ``run``), passed on so
    the turn does not read them again (None: the turn reads them). ``ahead``: the next turn's knobs
    proposals if this turn keeps nothing, for hypothesis pods that finish early (ADR-0051)."""

    number: int
    proposals: Sequence[Proposal] | None = None
    parallel: int = 1
    recent: Sequence[TurnRecord] | None = None
    decided_total: int | None = None
    run: RunRecord | None = None
    ahead: Sequence[Proposal] = ()


class Planner(Protocol):
    """Which turn of a round comes next, and when the round is over."""

    def next_turn(self, ctx: RunContext) -> TurnPlan | None:
        """The next turn to play; None: the round is over before it (the planner knows why)."""
        ...

    def decided(self, ctx: RunContext, record: TurnRecord) -> bool:
        """Turn ``record`` was decided; True: the round is over after it."""
        ...


@dataclass(frozen=True)
class Played:
    """What a round's turns came to: whether one was kept, the detail of the last decided one (None:
    no turn ran), and whether a cancel cut the round off before a turn was kept (the run then stays
    in the round, for a resume)."""

    kept: bool
    detail: str | None
    cut_off: bool = False


def play_turns(
    ctx: RunContext,
    round_number: int,
    planner: Planner,
    *,
    round_rule: RoundRule | None = None,
    feedback: Sequence[FeedbackQuote] = (),
) -> Played:
    """The turns of round ``round_number`` as ``planner`` lays them out, through the ledger only: on
    the controller and in ``crucible worker`` alike. In a refinement round ``round_rule`` keeps a turn
    that holds the score and ``feedback`` is quoted in CANDIDATE.md."""
    kept, detail = False, None
    while (plan := planner.next_turn(ctx)) is not None:
        record = play_turn(ctx, round_number, plan, round_rule=round_rule, feedback=feedback)
        kept, detail = kept or record.outcome == Outcome.ACCEPTED, record.detail
        if planner.decided(ctx, record):
            break
    return Played(kept, detail, cut_off=ctx.executor.cancel.is_set() and not kept)


def play_turn(
    ctx: RunContext,
    round_number: int,
    plan: TurnPlan,
    *,
    round_rule: RoundRule | None = None,
    feedback: Sequence[FeedbackQuote] = (),
) -> TurnRecord:
    """One planned turn: of N hypotheses (``hypotheses.run_parallel_turn``) or of one candidate
    (``turn.run_turn``); its decision is written exactly once."""
    if plan.parallel > 1:
        return run_parallel_turn(
            ctx,
            plan.number,
            plan.parallel,
            plan.proposals,
            plan.recent,
            plan.decided_total,
            plan.run,
            plan.ahead,
        )
    proposal = plan.proposals[0] if plan.proposals else None
    return run_turn(
        ctx,
        plan.number,
        round_number,
        proposal,
        plan.recent,
        plan.decided_total,
        plan.run,
        round_rule=round_rule,
        feedback=feedback,
    )


class Refinement:
    """A refinement round's turns (ADR-0019): up to ``turns`` of them, numbered after the run's last
    (a turn a crash cut off runs again under its number), until one is kept; a cancel ends it."""

    def __init__(self, turns: int) -> None:
        self.left = turns

    def next_turn(self, ctx: RunContext) -> TurnPlan | None:
        if self.left <= 0 or ctx.executor.cancel.is_set():
            return None
        self.left -= 1
        counts = ctx.ledger.turn_snapshot(ctx.run_id, last=1).counts
        return TurnPlan(counts.started[0] if counts.started else counts.highest + 1)

    def decided(self, ctx: RunContext, record: TurnRecord) -> bool:
        return record.outcome == Outcome.ACCEPTED

"""A turn's verdict from its samples: the one function the turn path and the controller both decide with.

The turn path (``services.execution.verdict``) measures a turn and calls ``turn_verdict`` on what it
measured. A worker (``crucible worker``, in a loop pod) reports its turn's samples and its decision;
the controller calls ``turn_verdict`` again over the reported samples (``services.remote.recount``)
and refuses a decision it does not reproduce (issue 21: "the controller decides"). Both ends reading
one function is what makes that check exact: a rule changed here changes both at once.

Which rule applies to a turn (``TurnRule``):

- a search turn with sequential measurement (``sequential_design``): the looks are replayed over the
  pairs measured, and the first one that decides is the verdict (``first_decision``); the guards of a
  keep are then checked against the base;
- a search turn without it (fixed sample count, or a parallel hypothesis): ``decide_keep``, and for a
  keep with guards the base as a third arm (a parallel hypothesis leaves that to the turn's choice);
- a refinement turn: ``decide_hold``, holding the score instead of improving it.

The base arm is a thunk: the turn path measures it only when a keep is near, the controller reads it
from the reported samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller.config.spec import MetricSpec
from controller.config.units import Tolerance
from controller.domain.enums import Reason, SequentialStop
from controller.stats.keep import Arm, KeepRule, KeepVerdict, decide_hold, decide_keep, guard_check
from controller.stats.sequential import Look, LookAction, SequentialDesign, design_for, look

__all__ = ["HoldScore", "TurnRule", "TurnVerdict", "first_decision", "sequential_design", "turn_verdict"]

BaseArm = Callable[[], Arm]
"""The base commit's samples, asked for only when a keep with guards needs them."""


@dataclass(frozen=True)
class HoldScore:
    """A refinement round's rule: hold the score within ``tolerance`` of the PR head and of the first
    published score."""

    tolerance: Tolerance
    first_published: float


@dataclass(frozen=True)
class TurnRule:
    """What decides a turn besides its samples. ``design``: sequential looks (None: a fixed count);
    ``hold``: a refinement turn; ``parallel``: one hypothesis of N (its base check is the turn's)."""

    keep: KeepRule
    design: SequentialDesign | None = None
    hold: HoldScore | None = None
    parallel: bool = False


@dataclass(frozen=True)
class TurnVerdict:
    """The verdict and what a decision records of it: ``p_value`` (None for a refinement turn, which
    tests nothing), and ``pairs`` / ``stop`` for a sequential one."""

    verdict: KeepVerdict
    p_value: float | None
    pairs: int | None = None
    stop: SequentialStop | None = None


def sequential_design(metric: MetricSpec, *, refinement: bool, parallel: bool) -> SequentialDesign | None:
    """The sequential design for a turn, or None where the fixed rule decides: refinement turns
    (holding a score is not an improvement test), parallel hypotheses (Holm over the turn's N, ADR-0016),
    ``interleave = false`` (no pairs) and ``confidence = 0`` (no test to stop on)."""
    if refinement or parallel or not (metric.sequential and metric.interleave and metric.confidence > 0):
        return None
    return design_for(metric.min_samples, metric.samples, metric.confidence)


def first_decision(rule: KeepRule, design: SequentialDesign, candidate: Arm, champion: Arm) -> Look | None:
    """The first look over ``candidate`` and ``champion`` (pairs in the order measured) that decides,
    as the measurement ran them after each pair; None when there were fewer pairs than the first look
    (``samples = 1``: the fixed rule decides). ValueError when looks ran and none decided, or pairs
    follow the one that did: no measurement stops so, or goes on past a decision."""
    pairs = len(candidate.primary)
    if len(champion.primary) != pairs:
        raise ValueError(f"{pairs} candidate samples but {len(champion.primary)} champion samples")
    if pairs < design.min_pairs:
        return None
    for k in range(design.min_pairs, pairs + 1):
        found = look(rule, design, _first(candidate, k), _first(champion, k))
        if found.action is not LookAction.CONTINUE:
            if k < pairs:  # the measurement stops at the look that decides
                raise ValueError(f"{pairs} pairs measured, but the look after {k} decided")
            return found
    raise ValueError(f"no look decides after {pairs} pairs (the first is at {design.min_pairs})")


def turn_verdict(rule: TurnRule, candidate: Arm, champion: Arm, base: BaseArm) -> TurnVerdict:
    """The turn's verdict (module docstring). ``champion`` is the reference measured beside the
    candidate (the PR head in a refinement turn, the stored champion without interleaving)."""
    keep = rule.keep
    if rule.hold is not None:
        hold, first = rule.hold.tolerance, rule.hold.first_published
        held = decide_hold(keep, hold, candidate, champion, first)
        if held.keep and keep.guards:
            held = decide_hold(keep, hold, candidate, champion, first, base())
        return TurnVerdict(held, None)
    final = None if rule.design is None else first_decision(keep, rule.design, candidate, champion)
    if final is not None:
        assert final.verdict is not None
        verdict = final.verdict
        if verdict.keep and keep.guards:
            failures = guard_check(keep, candidate, champion, base())
            if failures:
                detail = f"Not kept: a guard regressed: {'; '.join(failures)} ({final.pairs} pairs)"
                verdict = KeepVerdict(
                    keep=False,
                    reason=Reason.GUARD_REGRESSED,
                    candidate_median=verdict.candidate_median,
                    champion_median=verdict.champion_median,
                    delta=verdict.delta,
                    p_value=verdict.p_value,
                    guard_failures=failures,
                    detail=detail,
                )
        return TurnVerdict(verdict, final.p_value, final.pairs, final.stop)
    verdict = decide_keep(keep, candidate, champion)
    if verdict.keep and keep.guards and not rule.parallel:
        verdict = decide_keep(keep, candidate, champion, base())
    return TurnVerdict(verdict, verdict.p_value)


def _first(arm: Arm, k: int) -> Arm:
    return Arm(primary=arm.primary[:k], guards={name: values[:k] for name, values in arm.guards.items()})

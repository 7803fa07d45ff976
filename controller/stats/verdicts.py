"""A turn's verdict from its samples: the one function the turn path and the controller both decide with.

The turn path (``services.execution.verdict``) measures a turn and calls ``turn_verdict`` on what it
measured. A worker (``crucible worker``, in a loop pod) reports its turn's samples and its decision;
the controller calls ``turn_verdict`` again over the reported samples (``services.remote.recount``)
and refuses a decision it does not reproduce (issue 21: "the controller decides"). Both ends reading
one function is what makes that check exact: a rule changed here changes both at once.

Which rule applies to a turn (``TurnRule``):

- a turn with sequential measurement (``sequential_design``, ADR-0032): the looks are replayed over
  the pairs measured (without interleaving: over the candidate's samples against the stored champion's),
  and the first one that decides is the verdict (``first_decision``); the guards of a keep are then
  checked against the base. A parallel hypothesis's looks keep early only at Holm's strictest level and
  report the p-value Holm's correction takes (``sequential.combined_p``); a refinement turn's looks are
  the hold rule's (``stats.hold``), whose last look is ``decide_hold`` itself;
- a turn without it (``sequential = false``, ``confidence = 0``, or fewer samples than the first
  look): ``decide_keep``, and for a keep with guards the base as a third arm (a parallel hypothesis
  leaves that to the turn's choice), or ``decide_hold`` in a refinement round.

The base arm is a thunk: the turn path measures it only when a keep is near, the controller reads it
from the reported samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller.config.spec import MetricSpec
from controller.config.units import Tolerance
from controller.domain.enums import Reason, SequentialStop
from controller.stats.hold import hold_look
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


def sequential_design(metric: MetricSpec, *, hypotheses: int = 1) -> SequentialDesign | None:
    """The sequential design for a turn (one of ``hypotheses`` parallel ones), or None where the fixed
    rule decides: ``sequential = false``, and ``confidence = 0`` (no test: the medians of ``samples``
    decide, and a look would have nothing to stop on). Search and refinement turns, parallel
    hypotheses and ``interleave = false`` all look (ADR-0032)."""
    if not (metric.sequential and metric.confidence > 0):
        return None
    return design_for(
        metric.min_samples,
        metric.samples,
        metric.confidence,
        hypotheses=max(1, hypotheses),
        interleaved=metric.interleave,
    )


def first_decision(
    rule: KeepRule, design: SequentialDesign, candidate: Arm, champion: Arm, hold: HoldScore | None = None
) -> Look | None:
    """The first look over ``candidate`` and ``champion`` (pairs in the order measured; without
    interleaving, the candidate's samples and the champion's stored ones) that decides, as the
    measurement ran them after each pair; with ``hold``, the refinement round's looks. None when there
    were fewer pairs than the first look (``samples = 1``: the fixed rule decides). ValueError when
    looks ran and none decided, or pairs follow the one that did: no measurement stops so, or goes on
    past a decision."""
    pairs = len(candidate.primary)
    if design.interleaved and len(champion.primary) != pairs:
        raise ValueError(f"{pairs} candidate samples but {len(champion.primary)} champion samples")
    if pairs < design.min_pairs:
        return None
    for k in range(design.min_pairs, pairs + 1):
        reference = _first(champion, k) if design.interleaved else champion
        if hold is None:
            found = look(rule, design, _first(candidate, k), reference)
        else:
            tolerance, first = hold.tolerance, hold.first_published
            found = hold_look(rule, tolerance, design, _first(candidate, k), reference, first)
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
        looked = (
            None if rule.design is None else first_decision(keep, rule.design, candidate, champion, rule.hold)
        )
        held = decide_hold(keep, hold, candidate, champion, first) if looked is None else looked.verdict
        assert held is not None
        if held.keep and keep.guards:
            held = _with_base(decide_hold(keep, hold, candidate, champion, first, base()), held)
        return TurnVerdict(held, None, *((looked.pairs, looked.stop) if looked else (None, None)))
    final = None if rule.design is None else first_decision(keep, rule.design, candidate, champion)
    if final is not None:
        assert final.verdict is not None
        verdict = final.verdict
        if verdict.keep and keep.guards and not rule.parallel:  # parallel: only for the chosen one
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


def _with_base(checked: KeepVerdict, looked: KeepVerdict) -> KeepVerdict:
    """The hold rule re-run with the base arm: its verdict when the base turned it down, else the
    look's (whose detail says how early it was settled)."""
    return looked if checked.keep else checked


def _first(arm: Arm, k: int) -> Arm:
    return Arm(primary=arm.primary[:k], guards={name: values[:k] for name, values in arm.guards.items()})

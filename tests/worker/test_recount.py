"""The controller recomputes a worker's verdicts from its samples (``services.remote.recount``, issue 21).

Numbers in, a mismatch (or None) out: the decision a worker reports must be the one the keep rule
gives its samples, a keep must name its commits and move the champion to the recomputed value, and
without interleaving the reference is the champion's stored samples, whatever the report carries.
``test_forged_reports.py`` replays the attack against a real controller and worker.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from controller.config.spec import Spec, parse_spec
from controller.domain.enums import Outcome, Reason, SampleArm, SequentialStop
from controller.domain.jobs import HoldRule, RoundJob
from controller.services.remote.recount import (
    Reference,
    keep_rule,
    recount_baseline,
    recount_decision,
    recount_hypothesis,
)
from controller.stats import Arm
from controller.stats.sequential import design_for, look
from controller.store.records import ChampionUpdate, HypothesisReport, Sample, TurnDecision

SHA = "b" * 40
JOB = RoundJob(run_id="r1", round=0, turns=3, first_turn=1, heads={"app": "a" * 40})


def _spec(metric: str = "") -> Spec:
    text = f"""
objective = "x"
[agent]
command = "true"
[metric]
command = "true"
name = "m"
direction = "minimize"
{metric}
[feedback]
hold = "2%"
[[component]]
name = "app"
repo = "."
"""
    return parse_spec(text, Path("/tmp"))


FIXED = _spec("samples = 3\nsequential = false")


def _samples(arm: SampleArm, *values: float, guard: tuple[float, ...] = ()) -> list[Sample]:
    rows: list[Sample] = []
    for i, v in enumerate(values):
        rows.append((arm, i, {"m": v, **({"rss": guard[i]} if guard else {})}, True))
    return rows


def _pairs(champion: tuple[float, ...], candidate: tuple[float, ...]) -> list[Sample]:
    return _samples(SampleArm.CHAMPION, *champion) + _samples(SampleArm.CANDIDATE, *candidate)


AT_BASE = Reference(champion=lambda: Arm(()), champion_is_base=lambda: True)
BETTER = _pairs((100.0, 101.0, 99.0), (90.0, 91.0, 89.0))  # median 90 vs 100, p = 0.05
WORSE = _pairs((100.0, 101.0, 99.0), (110.0, 111.0, 109.0))


def _keep(value: float = 90.0, p: float | None = 0.05, commits: dict[str, str] | None = None) -> TurnDecision:
    commits = {"app": SHA} if commits is None else commits
    return TurnDecision(Outcome.ACCEPTED, Reason.IMPROVED, value=value, p_value=p, commits=commits)


def _check(
    decision: TurnDecision,
    samples: list[Sample],
    *,
    spec: Spec = FIXED,
    champion: ChampionUpdate | None = None,
    heads: dict[str, str] | None = None,
    reference: Reference = AT_BASE,
    job: RoundJob = JOB,
) -> str | None:
    kept = decision.outcome is Outcome.ACCEPTED
    if kept and champion is None:
        champion = ChampionUpdate(value=decision.value or 0.0, turn=1)
    return recount_decision(
        spec,
        job,
        1,
        decision,
        champion=champion,
        component_heads=dict(decision.commits) if heads is None else heads,
        samples=samples,
        reference=reference,
    )


def test_an_honest_keep_and_an_honest_rejection_stand() -> None:
    assert _check(_keep(), BETTER) is None
    rejected = TurnDecision(Outcome.REJECTED, Reason.NOT_IMPROVED, value=110.0, p_value=1.0)
    assert _check(rejected, WORSE) is None


def test_a_keep_with_a_made_up_value_is_refused_naming_the_value() -> None:
    problem = _check(_keep(value=0.001), BETTER)
    assert problem is not None and problem.startswith("value: reported 0.001, the samples give 90.0")


def test_a_keep_the_samples_do_not_give_is_refused_naming_the_reason() -> None:
    problem = _check(_keep(value=110.0), WORSE)
    assert problem == "reason: reported improved, the samples give not_improved"


def test_a_keep_without_samples_is_refused() -> None:
    assert _check(_keep(), []) == "no candidate samples"


def test_a_keep_with_no_commit_is_refused() -> None:
    assert _check(_keep(commits={}), BETTER) == "a kept turn names no commit"


def test_a_keep_must_move_the_champion_to_this_turn_at_the_recomputed_value() -> None:
    assert _check(_keep(), BETTER, champion=ChampionUpdate(value=0.001, turn=1)) == (
        "champion value: reported 0.001, the samples give 90.0"
    )
    assert _check(_keep(), BETTER, champion=ChampionUpdate(value=90.0, turn=7)) == (
        "champion turn: reported 7, the samples give 1"
    )
    other = {"app": "c" * 40}
    problem = _check(_keep(), BETTER, heads=other)
    assert problem is not None and problem.startswith("component_heads:")


def test_a_turn_that_keeps_nothing_moves_nothing() -> None:
    failed = TurnDecision(Outcome.FAILED, Reason.AGENT_FAILED)
    assert _check(failed, []) is None, "a worker may always spend its own turn"
    moved = _check(failed, [], champion=ChampionUpdate(value=1.0, turn=1))
    assert moved == "a agent_failed decision moves the champion"
    assert _check(failed, [], heads={"app": SHA}) == "a agent_failed decision carries commits"


def test_without_interleaving_the_reference_is_the_champions_stored_samples() -> None:
    spec = _spec("samples = 3\ninterleave = false\nsequential = false")
    stored = Reference(champion=lambda: Arm((100.0, 101.0, 99.0)), champion_is_base=lambda: True)
    candidate = _samples(SampleArm.CANDIDATE, 90.0, 91.0, 89.0)
    assert _check(_keep(), candidate, spec=spec, reference=stored) is None
    # A report that carries a worse "champion" of its own changes nothing: the stored one is used.
    rigged = _samples(SampleArm.CHAMPION, 1000.0, 1000.0, 1000.0) + _samples(
        SampleArm.CANDIDATE, 99.5, 99.6, 99.4
    )
    problem = _check(_keep(value=99.5, p=0.05), rigged, spec=spec, reference=stored)
    assert problem is not None and problem.startswith("reason:")


def test_a_sequential_turn_must_stop_where_its_looks_decide() -> None:
    spec = _spec("samples = 6\nmin_samples = 3\nconfidence = 0.9")
    champion = (100.0, 101.0, 99.0, 100.5, 99.5, 100.2)
    candidate = (80.0, 81.0, 79.0, 80.5, 79.5, 80.2)
    # A deterministic separation keeps at the first look that may keep (3 pairs, ``design_for``).
    early = _pairs(champion[:3], candidate[:3])
    kept = TurnDecision(
        Outcome.ACCEPTED,
        Reason.IMPROVED,
        value=80.0,
        p_value=_p(spec, early),
        commits={"app": SHA},
        pairs=3,
        sequential_stop=SequentialStop.KEPT_EARLY,
    )
    assert _check(kept, early, spec=spec) is None
    longer = _pairs(champion, candidate)  # measured on past a look that decided: not what ran
    assert _check(kept, longer, spec=spec) == (
        "the samples decide nothing: 6 pairs measured, but the look after 3 decided"
    )


def _p(spec: Spec, samples: list[Sample]) -> float | None:
    cand = Arm(tuple(v["m"] for a, _i, v, _ok in samples if a == SampleArm.CANDIDATE))
    champ = Arm(tuple(v["m"] for a, _i, v, _ok in samples if a == SampleArm.CHAMPION))
    metric = spec.metric
    return look(
        keep_rule(spec), design_for(metric.min_samples, metric.samples, metric.confidence), cand, champ
    ).p_value


def test_a_keep_with_guards_needs_the_base_once_the_champion_moved() -> None:
    guard = '[[metric.guard]]\nname = "rss"\ndirection = "minimize"\ntolerance = "5%"'
    spec = _spec(f"samples = 3\nsequential = false\n{guard}")
    samples = _samples(SampleArm.CHAMPION, 100.0, 101.0, 99.0, guard=(10.0, 10.0, 10.0)) + _samples(
        SampleArm.CANDIDATE, 90.0, 91.0, 89.0, guard=(10.0, 10.0, 10.0)
    )
    moved = Reference(champion=lambda: Arm(()), champion_is_base=lambda: False)
    assert _check(_keep(), samples, spec=spec) is None
    assert _check(_keep(), samples, spec=spec, reference=moved) == (
        "a keep with guards reports no samples of the base"
    )
    base = _samples(SampleArm.BASE, 100.0, 100.0, 100.0, guard=(20.0, 20.0, 20.0))
    assert _check(_keep(), samples + base, spec=spec, reference=moved) is None
    worse_base = _samples(SampleArm.BASE, 100.0, 100.0, 100.0, guard=(5.0, 5.0, 5.0))
    problem = _check(_keep(), samples + worse_base, spec=spec, reference=moved)
    assert problem is not None and "guard_regressed" in problem


def test_a_refinement_turn_is_held_to_the_hold_rule_of_its_job() -> None:
    job = RoundJob(
        run_id="r1",
        round=1,
        turns=3,
        first_turn=4,
        heads={"app": "a" * 40},
        hold=HoldRule(tolerance=2.0, relative=True, first_published=100.0),
    )
    # 101 holds 100 within 2%; the hold rule tests nothing, so the decision records no p-value.
    held = _pairs((100.0, 100.0, 100.0), (101.0, 101.0, 101.0))
    assert _check(_keep(value=101.0, p=None), held, job=job) is None
    slid = _pairs((100.0, 100.0, 100.0), (104.0, 104.0, 104.0))
    problem = _check(_keep(value=104.0, p=None), slid, job=job)
    assert problem is not None and problem.startswith("reason:")


def test_a_hypothesis_report_must_carry_what_its_samples_give() -> None:
    honest = HypothesisReport(
        index=0,
        reason=Reason.IMPROVED,
        value=90.0,
        reference_value=100.0,
        delta=10.0,
        p_value=0.05,
        commits={"app": SHA},
        samples=tuple(BETTER),
    )
    assert recount_hypothesis(FIXED, honest, AT_BASE) is None
    assert recount_hypothesis(FIXED, replace(honest, p_value=0.0001), AT_BASE) == (
        "p_value: reported 0.0001, the samples give 0.05"
    )
    assert recount_hypothesis(FIXED, replace(honest, delta=50.0), AT_BASE) == (
        "delta: reported 50.0, the samples give 10.0"
    )
    failed = HypothesisReport(index=1, reason=Reason.AGENT_FAILED, commits={"app": SHA})
    assert recount_hypothesis(FIXED, failed, AT_BASE) == "a agent_failed hypothesis carries commits"
    with pytest.raises(ValueError, match="p_value"):
        recount_hypothesis(FIXED, replace(honest, p_value=float("nan")), AT_BASE)


def test_the_baseline_is_the_median_of_its_stored_samples() -> None:
    stored = _samples(SampleArm.BASELINE, 100.0, 101.0, 99.0)
    assert recount_baseline(FIXED, 100.0, stored) is None
    assert recount_baseline(FIXED, 1.0, stored) == "baseline value: reported 1.0, the samples give 100.0"
    assert recount_baseline(FIXED, 100.0, []) == "no baseline samples were reported before the baseline"

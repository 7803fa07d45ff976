"""Decision quality and cost of the keep rule: the fixed-sample rule and the sequential rule side by side.

A simulated metric (Gaussian or heavy-tailed noise, a slow multiplicative drift, a true effect) is
measured in the interleaved A B B A order and fed to the real keep-rule code: ``stats.decide_keep`` for
the fixed rule, ``stats.sequential.look`` after each pair for the sequential rule (the very functions
``services.execution.turn`` calls). Both rules see the same simulated samples, so the comparison is paired.

Printed per scenario: the keep rate (false keeps for do-nothing changes, power for true improvements)
and the mean samples per arm per decision, then the sequential rule's mean samples as a ratio of the
fixed rule's over a candidate mix (the floor is the fixed rule measured in the same run).

The real-run part (``--real``) drives ``crucible loop`` on a small noisy fixture (a knobs proposer whose
values are do-nothing changes or true improvements) with ``sequential = true`` and ``false``, and checks
that the simulated figures hold end to end.

With ``--parallel N`` it also simulates parallel hypotheses (``broker.parallel``, ADR-0016): N
candidates per turn, each decided by the fixed rule against the champion, at most one kept through
``stats.holm.choose`` (the very function the loop calls). Printed: the rate of turns that keep a
do-nothing change when all N are do-nothing changes (target <= 5%), the power for a true 3%
improvement among N - 1 do-nothing changes, and the wall time per kept true improvement on the
noisefix-like mix (80% do-nothing changes, 20% true 3% improvements, each hypothesis drawn on its own)
with N hypotheses against one (the sequential rule, the default) in the same run, as a ratio: once with
the N measured at the same time (pods on Kubernetes) and once one after another (the local broker).

    python bench/decisions.py                 # the simulation, ~1 minute
    python bench/decisions.py --parallel 4    # plus parallel hypotheses at N = 4
    python bench/decisions.py --real 20       # plus two real runs of 20 turns each
    python bench/decisions.py --pods-walk 600 # plus the floor of bench/parallel_pods.py's ratio, ~3 min

``--pods-walk`` simulates ``bench/parallel_pods.py``'s workload with the real knobs walk (a keep
restarts it) and prints the ratio that bench calls "the sleep alone": what N = 4 against N = 1 gives
when nothing but the decisions and the metric's samples take time (ADR-0047). Then the same
workload with speculative turns (``decisions_speculative``): a pod whose hypothesis ended starts the
next turn's at once while the turn before is undecided, and a keep voids what was started beyond it.
The decision rule is unchanged, so the decisions must be today's: each hypothesis's samples are keyed
by its turn, index and the keeps before it, and every speculative arm is checked turn by turn against
the same walk without speculation (it raises otherwise). Printed per fixed overhead a hypothesis
(``--overheads``, in pairs, paid in both arms) and per way of speculating (how many turns ahead;
whether a keep cancels the void hypotheses in flight or lets them run out): the ratio with its
Monte-Carlo error, keeps an arm, the slot time the void hypotheses took, and the bench's configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its siblings decisions_real, decisions_speculative

from decisions_speculative import Decided, Measure, Speculation, speculative_arm

from controller.config.units import Tolerance
from controller.domain.enums import Direction
from controller.engine.knobs import Knob, KnobProposer, Proposal
from controller.stats import Arm, KeepRule, decide_hold, decide_keep, interleaved_order, median
from controller.stats.hold import hold_look
from controller.stats.holm import Contender, choose
from controller.stats.sequential import Look, LookAction, design_for, look, replay


@dataclass(frozen=True)
class Scenario:
    name: str
    effect: float  # true relative improvement of the candidate (0.03 = 3% better)
    drift: float = 0.0  # relative change per measured sample
    heavy: bool = False  # Student-t(3) noise scaled to the same standard deviation


SCENARIOS = (
    Scenario("do-nothing", 0.0),
    Scenario("do-nothing, drift 0.1%", 0.0, drift=0.001),
    Scenario("do-nothing, heavy tails", 0.0, heavy=True),
    Scenario("3% worse", -0.03),
    Scenario("1% better", 0.01),
    Scenario("2% better", 0.02),
    Scenario("3% better", 0.03),
    Scenario("3% better, drift 0.1%", 0.03, drift=0.001),
    Scenario("3% better, heavy tails", 0.03, heavy=True),
    Scenario("5% better", 0.05),
)
# The candidate mix the mean-samples ratio is taken over, from the real runs behind the issue (176
# do-nothing changes and 44 true 3% improvements), plus an even mix of every scenario.
MIXES = {
    "80% do-nothing / 20% 3% better": {"do-nothing": 0.8, "3% better": 0.2},
    "every scenario alike": {s.name: 1.0 / len(SCENARIOS) for s in SCENARIOS},
}


def _noise(rng: random.Random, sd: float, heavy: bool) -> float:
    if not heavy:
        return rng.gauss(0.0, sd)
    # Student-t with 3 degrees of freedom has variance 3: scale to the same standard deviation.
    z = rng.gauss(0.0, 1.0)
    chi2 = sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3))
    return float(sd * z / (chi2 / 3) ** 0.5 / 3**0.5)


def simulate(scenario: Scenario, samples: int, rng: random.Random, noise: float) -> tuple[list[float], ...]:
    """One decision's samples (champion, candidate) in the interleaved order, minimised metric."""
    champion: list[float] = []
    candidate: list[float] = []
    for t, arm in enumerate(interleaved_order(samples)):
        mean = 100.0 * (1 - scenario.effect) if arm == "B" else 100.0
        value = mean * (1 + scenario.drift * t) * (1 + _noise(rng, noise, scenario.heavy))
        (candidate if arm == "B" else champion).append(value)
    return champion, candidate


def decide_both(
    rule: KeepRule, samples: int, min_samples: int, champion: list[float], candidate: list[float]
) -> tuple[bool, bool, int]:
    fixed = decide_keep(rule, Arm(tuple(candidate)), Arm(tuple(champion))).keep
    design = design_for(min_samples, samples, rule.confidence)
    for pairs in range(design.min_pairs, samples + 1):
        result = look(rule, design, Arm(tuple(candidate[:pairs])), Arm(tuple(champion[:pairs])))
        if result.action is not LookAction.CONTINUE:
            return fixed, result.action is LookAction.KEEP, pairs
    raise AssertionError("the last look always decides")


def run_simulation(
    decisions: int, samples: int, min_samples: int, noise: float, seed: int
) -> dict[str, dict[str, Any]]:
    rule = KeepRule(direction=Direction.MINIMIZE, confidence=0.95)
    rng = random.Random(seed)
    rows: dict[str, dict[str, Any]] = {}
    print(
        f"{decisions} decisions per scenario, samples = {samples}, min_samples = {min_samples}, "
        f"noise {noise:.0%}, confidence 0.95"
    )
    print(f"{'scenario':28} {'fixed keeps':>12} {'seq keeps':>10} {'fixed n':>8} {'seq n':>6}")
    for sc in SCENARIOS:
        fixed_keeps = seq_keeps = 0
        used: list[int] = []
        for _ in range(decisions):
            champion, candidate = simulate(sc, samples, rng, noise)
            f, s, n = decide_both(rule, samples, min_samples, champion, candidate)
            fixed_keeps += f
            seq_keeps += s
            used.append(n)
        row = {"fixed": fixed_keeps / decisions, "seq": seq_keeps / decisions, "n": statistics.fmean(used)}
        rows[sc.name] = row
        print(f"{sc.name:28} {row['fixed']:12.3f} {row['seq']:10.3f} {samples:8d} {row['n']:6.2f}")
    for mix, weights in MIXES.items():
        mean = sum(w * rows[name]["n"] for name, w in weights.items())
        print(
            f"mean samples per decision, {mix}: sequential {mean:.2f} vs fixed {samples} "
            f"= ratio {mean / samples:.2f} (target <= 0.60)"
        )
    worst = max(rows[s.name]["seq"] for s in SCENARIOS if s.effect == 0)
    power = rows["3% better"]["seq"]
    print(
        f"false keeps (worst do-nothing scenario): {worst:.3f} (target <= 0.05); "
        f"3% improvements kept: {power:.3f} (target >= 0.90)"
    )
    return rows


NOISEFIX_MIX = {"do-nothing": 0.8, "3% better": 0.2}
BY_NAME = {s.name: s for s in SCENARIOS}


def parallel_turn(
    rule: KeepRule, scenarios: list[Scenario], samples: int, rng: random.Random, noise: float
) -> int | None:
    """One turn of N parallel hypotheses (one scenario each), decided as the loop decides: the fixed
    rule per hypothesis, then Holm over N. The kept index or None."""
    contenders = []
    for i, sc in enumerate(scenarios):
        champion, candidate = simulate(sc, samples, rng, noise)
        contenders.append(Contender(i, decide_keep(rule, Arm(tuple(candidate)), Arm(tuple(champion)))))
    return choose(contenders, 1 - rule.confidence, len(scenarios)).kept


def _draw(rng: random.Random, mix: dict[str, float]) -> Scenario:
    names = list(mix)
    return BY_NAME[rng.choices(names, weights=[mix[n] for n in names])[0]]


def run_parallel(
    decisions: int, samples: int, min_samples: int, noise: float, seed: int, n: int, agent_cost: float
) -> dict[str, float]:
    """The figures of parallel hypotheses at ``n``; ``agent_cost`` is one agent proposal's time in
    units of one metric sample."""
    rule = KeepRule(direction=Direction.MINIMIZE, confidence=0.95)
    rng = random.Random(seed + n)
    out: dict[str, float] = {}
    print(f"\nparallel hypotheses: N = {n}, fixed rule per hypothesis, Holm over N, {decisions} turns each")
    for name in ("do-nothing", "do-nothing, drift 0.1%", "do-nothing, heavy tails"):
        kept = sum(
            parallel_turn(rule, [BY_NAME[name]] * n, samples, rng, noise) is not None
            for _ in range(decisions)
        )
        rate = kept / decisions
        out[f"false keeps, {name}"] = rate
        error = (max(rate, 0.05) * (1 - max(rate, 0.05)) / decisions) ** 0.5
        print(
            f"  turns keeping a do-nothing change, all {n} {name}: {rate:.3f} ± {error:.3f} "
            "(Monte-Carlo sd; target <= 0.05)"
        )
    one_good = [BY_NAME["3% better"]] + [BY_NAME["do-nothing"]] * (n - 1)
    power = sum(parallel_turn(rule, one_good, samples, rng, noise) == 0 for _ in range(decisions)) / decisions
    out["power"] = power
    print(f"  a true 3% improvement among {n - 1} do-nothing changes kept: {power:.3f}")
    # Wall time per kept true improvement on the noisefix-like mix, N against 1 in the same run.
    design = design_for(min_samples, samples, rule.confidence)
    single_time = single_kept = 0.0
    for _ in range(decisions):
        sc = _draw(rng, NOISEFIX_MIX)
        champion, candidate = simulate(sc, samples, rng, noise)
        for pairs in range(design.min_pairs, samples + 1):
            result = look(rule, design, Arm(tuple(candidate[:pairs])), Arm(tuple(champion[:pairs])))
            if result.action is not LookAction.CONTINUE:
                break
        single_time += agent_cost + 2 * pairs
        single_kept += result.action is LookAction.KEEP and sc.effect > 0
    turn_time = agent_cost + 2 * samples
    many_kept = 0.0
    for _ in range(decisions):
        scenarios = [_draw(rng, NOISEFIX_MIX) for _ in range(n)]
        winner = parallel_turn(rule, scenarios, samples, rng, noise)
        many_kept += winner is not None and scenarios[winner].effect > 0
    per_single = single_time / max(single_kept, 1)
    per_pods = decisions * turn_time / max(many_kept, 1)
    per_local = decisions * n * turn_time / max(many_kept, 1)
    out.update(
        single=per_single,
        pods=per_pods,
        local=per_local,
        pods_ratio=per_pods / per_single,
        local_ratio=per_local / per_single,
    )
    print(
        f"  wall time per kept true improvement (noisefix-like mix, in metric samples, agent {agent_cost:g}):"
        f" parallel = 1 (sequential rule) {per_single:.1f}; parallel = {n} in pods at once {per_pods:.1f}"
        f" = ratio {per_pods / per_single:.2f}; one after another (local broker) {per_local:.1f}"
        f" = ratio {per_local / per_single:.2f}"
    )
    return out


# --- The sequential rule everywhere it applies (ADR-0032) ------------------------------------------


def run_parallel_sequential(
    decisions: int, samples: int, min_samples: int, noise: float, seed: int, n: int
) -> dict[str, float]:
    """Parallel hypotheses with sequential looks and Holm over N, beside the fixed rule with Holm, on
    the same simulated samples. A hypothesis's samples are its pairs; the ratio is over the
    noisefix-like mix (each hypothesis drawn on its own)."""
    rule = KeepRule(direction=Direction.MINIMIZE, confidence=0.95)
    design = design_for(min_samples, samples, rule.confidence, hypotheses=n)
    rng = random.Random(seed + 100 + n)
    alpha = 1 - rule.confidence

    def turn(scenarios: list[Scenario]) -> tuple[int | None, int | None, list[int]]:
        fixed, seq, used = [], [], []
        for i, sc in enumerate(scenarios):
            champion, candidate = simulate(sc, samples, rng, noise)
            cand, champ = Arm(tuple(candidate)), Arm(tuple(champion))
            fixed.append(Contender(i, decide_keep(rule, cand, champ)))
            decided = replay(rule, design, cand, champ)
            seq.append(Contender(i, decided.verdict))
            used.append(decided.pairs)
        return choose(fixed, alpha, n).kept, choose(seq, alpha, n).kept, used

    print(
        f"\nparallel hypotheses, N = {n}: the fixed rule vs sequential looks, Holm over N, "
        f"{decisions} turns each"
    )
    print(f"  {'turns of N':34} {'fixed keeps':>12} {'seq keeps':>10} {'seq pairs':>8}")
    out: dict[str, float] = {}
    cases = {
        f"all {n} do-nothing": [BY_NAME["do-nothing"]] * n,
        f"all {n} do-nothing, drift 0.1%": [BY_NAME["do-nothing, drift 0.1%"]] * n,
        f"all {n} do-nothing, heavy tails": [BY_NAME["do-nothing, heavy tails"]] * n,
        f"one 3% better among {n - 1} do-nothing": [BY_NAME["3% better"]] + [BY_NAME["do-nothing"]] * (n - 1),
    }
    for name, scenarios in cases.items():
        fixed_kept = seq_kept = 0
        pairs: list[float] = []
        for _ in range(decisions):
            f, s, used = turn(scenarios)
            good = scenarios[0].effect > 0
            fixed_kept += f is not None and (not good or f == 0)
            seq_kept += s is not None and (not good or s == 0)
            pairs.append(statistics.fmean(used))
        out[f"fixed {name}"], out[f"seq {name}"] = fixed_kept / decisions, seq_kept / decisions
        print(
            f"  {name:34} {fixed_kept / decisions:12.3f} {seq_kept / decisions:10.3f} "
            f"{statistics.fmean(pairs):8.2f}"
        )
    used_all: list[int] = []
    slowest: list[int] = []
    fixed_good = seq_good = 0
    for _ in range(decisions):
        scenarios = [_draw(rng, NOISEFIX_MIX) for _ in range(n)]
        f, s, used = turn(scenarios)
        used_all += used
        slowest.append(max(used))
        fixed_good += f is not None and scenarios[f].effect > 0
        seq_good += s is not None and scenarios[s].effect > 0
    ratio = statistics.fmean(used_all) / samples
    out["ratio"] = ratio
    out["slowest"] = statistics.fmean(slowest) / samples
    print(
        f"  samples per hypothesis, noisefix-like mix: sequential {statistics.fmean(used_all):.2f} vs fixed "
        f"{samples} = ratio {ratio:.2f} (target <= 0.65); slowest of the N per turn "
        f"{statistics.fmean(slowest):.2f} = {statistics.fmean(slowest) / samples:.2f}; true improvements "
        f"kept per turn: fixed {fixed_good / decisions:.3f}, sequential {seq_good / decisions:.3f}"
    )
    return out


def _stored(sc: Scenario, samples: int, rng: random.Random, noise: float) -> tuple[list[float], list[float]]:
    """``interleave = false``: the champion's stored samples (measured when it was kept) and the
    candidate's, each arm alone in its own window."""
    champion = [100.0 * (1 + _noise(rng, noise, sc.heavy)) for _ in range(samples)]
    mean = 100.0 * (1 - sc.effect)
    candidate = [mean * (1 + _noise(rng, noise, sc.heavy)) for _ in range(samples)]
    return champion, candidate


def run_stored(decisions: int, samples: int, min_samples: int, noise: float, seed: int) -> dict[str, float]:
    """``interleave = false``: the candidate alone against the champion's stored samples, Mann-Whitney U
    at each look (candidate samples) beside the fixed rule, on the same simulated samples."""
    rule = KeepRule(direction=Direction.MINIMIZE, confidence=0.95)
    design = design_for(min_samples, samples, rule.confidence, interleaved=False)
    rng = random.Random(seed + 200)
    print(f"\ninterleave = false: the candidate against stored champion samples, {decisions} decisions each")
    print(f"  {'scenario':34} {'fixed keeps':>12} {'seq keeps':>10} {'seq n':>8}")
    out: dict[str, float] = {}
    names = ("do-nothing", "do-nothing, heavy tails", "3% worse", "1% better", "3% better", "5% better")
    for name in names:
        fixed_kept = seq_kept = 0
        used: list[int] = []
        for _ in range(decisions):
            champion, candidate = _stored(BY_NAME[name], samples, rng, noise)
            cand, champ = Arm(tuple(candidate)), Arm(tuple(champion))
            fixed_kept += decide_keep(rule, cand, champ).keep
            decided = replay(rule, design, cand, champ)
            seq_kept += decided.action is LookAction.KEEP
            used.append(decided.pairs)
        out[name] = statistics.fmean(used)
        out[f"fixed {name}"], out[f"seq {name}"] = fixed_kept / decisions, seq_kept / decisions
        print(f"  {name:34} {fixed_kept / decisions:12.3f} {seq_kept / decisions:10.3f} {out[name]:8.2f}")
    deterministic = replay(rule, design, Arm(tuple([97.0] * samples)), Arm(tuple([100.0] * samples)))
    mix = NOISEFIX_MIX["do-nothing"] * out["do-nothing"] + NOISEFIX_MIX["3% better"] * out["3% better"]
    out["ratio"] = mix / samples
    print(
        f"  candidate samples, noisefix-like mix: sequential {mix:.2f} vs fixed {samples} = ratio "
        f"{mix / samples:.2f} (target <= 0.65); a deterministic 3% improvement is kept after "
        f"{deterministic.pairs} samples ({deterministic.stop})"
    )
    return out


HOLD_SCENARIOS = (
    Scenario("does nothing to the score", 0.0),
    Scenario("does nothing, drift 0.1%", 0.0, drift=0.001),
    Scenario("1% worse (= the hold)", -0.01),
    Scenario("2% worse", -0.02),
    Scenario("3% worse", -0.03),
    Scenario("3% better", 0.03),
)
# Review fixes rarely touch the score; some regress it. The mix the ratio is taken over.
HOLD_MIX = {"does nothing to the score": 0.8, "3% worse": 0.2}


def run_refinement(
    decisions: int, samples: int, min_samples: int, noise: float, seed: int
) -> dict[str, float]:
    """Refinement rounds: the hold rule (hold 1%, the default) at the last look, early looks that settle
    a candidate clearly within or clearly beyond the hold, beside the fixed hold rule."""
    rule = KeepRule(direction=Direction.MINIMIZE, confidence=0.95)
    hold = Tolerance(0.01, relative=True)
    design = design_for(min_samples, samples, rule.confidence)
    rng = random.Random(seed + 300)
    print(f"\nrefinement rounds: holding the score (hold {hold}), {decisions} decisions each")
    print(f"  {'candidate':34} {'fixed holds':>12} {'seq holds':>10} {'seq pairs':>8}")
    out: dict[str, float] = {}
    for sc in HOLD_SCENARIOS:
        fixed_kept = seq_kept = 0
        used: list[int] = []
        for _ in range(decisions):
            head, candidate = simulate(sc, samples, rng, noise)
            cand, champ = Arm(tuple(candidate)), Arm(tuple(head))
            first = median(head)
            fixed_kept += decide_hold(rule, hold, cand, champ, first).keep
            for pairs in range(design.min_pairs, samples + 1):
                decided = hold_look(
                    rule, hold, design, Arm(cand.primary[:pairs]), Arm(champ.primary[:pairs]), first
                )
                if decided.action is not LookAction.CONTINUE:
                    break
            seq_kept += decided.action is LookAction.KEEP
            used.append(decided.pairs)
        out[sc.name] = statistics.fmean(used)
        out[f"fixed {sc.name}"], out[f"seq {sc.name}"] = fixed_kept / decisions, seq_kept / decisions
        print(
            f"  {sc.name:34} {fixed_kept / decisions:12.3f} {seq_kept / decisions:10.3f} {out[sc.name]:8.2f}"
        )
    mix = sum(w * out[name] for name, w in HOLD_MIX.items())
    out["ratio"] = mix / samples
    print(
        f"  pairs per decision, 80% do-nothing / 20% 3% worse: sequential {mix:.2f} vs fixed {samples} = "
        f"ratio {mix / samples:.2f} (target <= 0.65)"
    )
    return out


# --- The workload of bench/parallel_pods.py: the floor of its ratio (ADR-0047) ---------------------


def _walk_arm(
    rng: random.Random,
    walk_seed: int,
    n: int,
    hypotheses: int,
    knobs: int,
    good: set[str],
    noise: float,
    early_end: bool = False,
    measure: Measure | None = None,
    trace: list[Decided] | None = None,
) -> tuple[int, int, int, int]:
    """One arm of ``bench/parallel_pods.py`` simulated: the real knobs walk (``KnobProposer``: one knob
    switched per hypothesis, a keep restarts the walk from the new state), each hypothesis measured
    until the loop's own looks decide (``replay`` with the design of ``n``), Holm over a turn's
    (``choose``). A turn of ``n`` waits for its slowest hypothesis. Returns (pairs waited for, true
    improvements kept, other changes kept, other changes tried: the bench's own counts).

    ``early_end``, a what-if the loop does not do: a turn ends at the first look at which one of its
    hypotheses keeps early (Holm's strictest level), the others cut there.

    ``measure``, when given, decides each hypothesis instead of samples drawn from ``rng`` (the keyed
    samples the speculative walk shares), and ``trace`` receives each decided turn."""
    rule = KeepRule(direction=Direction.MINIMIZE, confidence=0.95)
    design = design_for(3, 10, rule.confidence, hypotheses=n)
    walk = _walk_knobs(knobs)
    proposer = KnobProposer(walk, walk_seed)
    current: dict[tuple[str, str], Any] = {k.ident: 0 for k in walk}
    history: list[tuple[Proposal, bool]] = []
    waited = kept_true = kept_null = tried_null = 0
    for turn in range(hypotheses // n):
        proposals = proposer.next_proposals(current, history, n)
        if not proposals:
            break
        # A good knob switched on is a true improvement; switched off again (the walk tries that once
        # another keep made it a new state), 3% worse; any other knob does nothing.
        effects = [_effect(p, good) for p in proposals]
        better = [effect == "3% better" for effect in effects]
        tried_null += better.count(False)
        looks = []
        for i, effect in enumerate(effects):
            if measure is not None:
                looks.append(measure(turn, i, kept_true + kept_null, proposals[i]))
                continue
            champion, candidate = simulate(BY_NAME[effect], 10, rng, noise)
            looks.append(replay(rule, design, Arm(tuple(candidate)), Arm(tuple(champion))))
        early = [(d.pairs, i) for i, d in enumerate(looks) if d.action is LookAction.KEEP and d.pairs < 10]
        kept: int | None
        if early_end and early:
            stop, kept = min(early)
            waited += max(min(d.pairs, stop) for d in looks)
        else:
            contenders = [Contender(i, d.verdict) for i, d in enumerate(looks)]
            kept = choose(contenders, 1 - rule.confidence, len(looks)).kept
            waited += max(d.pairs for d in looks)
        history += [(p, i == kept) for i, p in enumerate(proposals)]
        if trace is not None:
            trace.append(
                (
                    turn,
                    tuple((p.knob.key, p.new, d.pairs) for p, d in zip(proposals, looks, strict=True)),
                    kept,
                )
            )
        if kept is not None:
            current[proposals[kept].knob.ident] = proposals[kept].new
            kept_true += better[kept]
            kept_null += not better[kept]
    return waited, kept_true, kept_null, tried_null


def _walk_knobs(knobs: int) -> list[Knob]:
    return [Knob("conf.json", f"k{i}", (0, 1)) for i in range(knobs)]


def _effect(proposal: Proposal, good: set[str]) -> str:
    if proposal.knob.key not in good:
        return "do-nothing"
    return "3% better" if proposal.new == 1 else "3% worse"


BENCH_SEED = 7  # ``bench/parallel_pods.py``'s configuration of ADR-0040 (``--seed 7``)


def _good_knobs(label: str, knobs: int) -> set[str]:
    """The quarter of ``knobs`` (10 of 40) that are a true improvement, drawn from ``label``'s stream
    so every simulation of the same set or bench configuration draws the same ones."""
    return set(random.Random(label).sample([f"k{i}" for i in range(knobs)], 10))


def _batch_error(batches: Sequence[Sequence[float]], pairs: int, keeps: int) -> float:
    """Monte-Carlo error of the ratio (pairs per keep at N over pairs per keep at N = 1, whose pairs and
    keeps are columns 0 and 1) from its batches: their ratios' standard error."""
    per_batch = [(b[pairs] / b[keeps]) / (b[0] / b[1]) for b in batches if b[1] and b[keeps]]
    return float(statistics.stdev(per_batch) / len(per_batch) ** 0.5)


def run_pods_walk(
    runs: int, seed: int, noise: float, n: int = 4, overheads: tuple[float, ...] = (0.0, 1.0, 2.0)
) -> dict[str, float]:
    """The ratio ``bench/parallel_pods.py`` prints as "the sleep alone" (pairs waited for per true
    improvement kept, N = n over N = 1), simulated: its workload (40 knobs, a quarter of them a true
    3% improvement, 40 hypotheses an arm, samples 10), first over ``runs`` random knob sets and walk
    orders (the floor of the figure, and its Monte-Carlo error from 20 batches), then that bench's
    configuration of ADR-0040 (``--pairs 3 --seed 7``: one knob set, three walks) ``runs // 3``
    times, whose spread is what one bench run of 10-11 keeps an arm can show."""
    knobs, share, hypotheses = 40, 0.25, 40
    rng = random.Random(seed + 400)
    print(
        f"\nbench/parallel_pods.py's workload ({knobs} knobs, {share:.0%} a 3% improvement, {hypotheses} "
        f"hypotheses an arm, noise {noise:.0%}): pairs waited for per true improvement kept, N = {n} / N = 1"
    )
    out: dict[str, float] = {}
    for early_end in (False, True):
        name = "the turn ends at the first early keep (what-if)" if early_end else "the loop's rule"
        batches: list[list[int]] = [[0] * 8 for _ in range(20)]
        for r in range(runs):
            good = _good_knobs(f"good {seed} {r}", knobs)
            one = _walk_arm(rng, seed + r, 1, hypotheses, knobs, good, noise)
            many = _walk_arm(rng, seed + r, n, hypotheses, knobs, good, noise, early_end)
            for j, v in enumerate(one + many):
                batches[r % 20][j] += v
        totals = [sum(b[j] for b in batches) for j in range(8)]
        ratio = (totals[4] / totals[5]) / (totals[0] / totals[1])
        error = _batch_error(batches, 4, 5)
        out[name] = ratio
        print(
            f"  {name:50} ratio {ratio:.3f} ± {error:.3f}; pairs a turn N = 1 "
            f"{totals[0] / (runs * hypotheses):.2f}, N = {n} {totals[4] / (runs * hypotheses // n):.2f}; "
            f"keeps an arm {totals[1] / runs:.2f} / {totals[5] / runs:.2f}; do-nothing kept "
            f"{totals[2] / totals[3]:.3f} / {totals[6] / totals[7]:.3f}"
        )
    bench_seed = BENCH_SEED
    good = _good_knobs(f"good knobs {bench_seed}", knobs)
    ratios: list[float] = []
    for _ in range(max(2, runs // 3)):
        sums = [0] * 8
        for pair in range(3):
            one = _walk_arm(rng, bench_seed + pair, 1, hypotheses, knobs, good, noise)
            many = _walk_arm(rng, bench_seed + pair, n, hypotheses, knobs, good, noise)
            sums = [a + b for a, b in zip(sums, one + many, strict=True)]
        if sums[1] and sums[5]:
            ratios.append((sums[4] / sums[5]) / (sums[0] / sums[1]))
    out["bench"] = statistics.fmean(ratios)
    out["bench sd"] = statistics.stdev(ratios)
    print(
        f"  the bench's configuration (--pairs 3 --seed 7), {len(ratios)} simulated bench runs: mean "
        f"{out['bench']:.3f}, sd {out['bench sd']:.3f} a run, at most 0.40 in "
        f"{sum(r <= 0.40 for r in ratios) / len(ratios):.0%} of them"
    )
    out.update(run_speculative_walk(runs, seed, noise, n, overheads))
    return out


# --- Speculative turns: a slot starts the next turn's hypothesis while the turn before is undecided --

# Ways of speculating, simulated at each overhead: today's rule, then one turn ahead, two, unlimited,
# each with a keep cancelling the void hypotheses in flight at once or letting them run out; and one
# turn ahead with the cancel reaching the pods one sample (half a pair) late.
SPECULATIONS = (
    Speculation(0),
    Speculation(1),
    Speculation(1, latency=0.5),
    Speculation(1, cancel=False),
    Speculation(2),
    Speculation(2, cancel=False),
    Speculation(None),
    Speculation(None, cancel=False),
)


def _keyed_measure(key: str, n: int, good: set[str], noise: float) -> Measure:
    """Each hypothesis decided from samples keyed by (turn, index, keeps before it) and its effect alone,
    so a hypothesis measured speculatively has the very samples the walk without speculation gives it;
    a hypothesis proposed again after a keep has other keeps before it, so fresh samples."""
    rule = KeepRule(direction=Direction.MINIMIZE, confidence=0.95)
    design = design_for(3, 10, rule.confidence, hypotheses=n)
    decided: dict[tuple[int, int, int, str], Look] = {}

    def measure(turn: int, index: int, keeps: int, proposal: Proposal) -> Look:
        effect = _effect(proposal, good)
        if (turn, index, keeps, effect) not in decided:
            rng = random.Random(f"{key} {turn} {index} {keeps}")
            champion, candidate = simulate(BY_NAME[effect], 10, rng, noise)
            decided[turn, index, keeps, effect] = replay(
                rule, design, Arm(tuple(candidate)), Arm(tuple(champion))
            )
        return decided[turn, index, keeps, effect]

    return measure


def _speculative_set(
    key: str,
    walk_seed: int,
    n: int,
    hypotheses: int,
    knobs: int,
    good: set[str],
    noise: float,
    overheads: tuple[float, ...],
) -> dict[Speculation, list[float]]:
    """One knob set and walk: N = 1 and every speculation of N = n on the same keyed samples. Per
    speculation (with its overhead): [N = 1 wall, its true keeps, N = n wall, true keeps, other
    changes kept, other changes tried, slot time void, slot time available, N = 1's other changes kept
    and tried]. Raises AssertionError when a speculative arm decided anything else than the walk
    without speculation (or, with no speculation and no overhead, waited otherwise)."""
    one_trace: list[Decided] = []
    many_trace: list[Decided] = []
    rng = random.Random(0)  # unused: the keyed measures draw every sample
    one = _walk_arm(
        rng,
        walk_seed,
        1,
        hypotheses,
        knobs,
        good,
        noise,
        measure=_keyed_measure(f"{key} one", 1, good, noise),
        trace=one_trace,
    )
    measure = _keyed_measure(f"{key} many", n, good, noise)
    today = _walk_arm(rng, walk_seed, n, hypotheses, knobs, good, noise, measure=measure, trace=many_trace)
    walk = _walk_knobs(knobs)
    rows: dict[Speculation, list[float]] = {}
    for overhead in overheads:
        for how in SPECULATIONS:
            speculation = dataclasses.replace(how, overhead=overhead)
            arm = speculative_arm(
                KnobProposer(walk, walk_seed),
                {k.ident: 0 for k in walk},
                lambda p: _effect(p, good) == "3% better",
                measure,
                n,
                hypotheses // n,
                speculation,
            )
            if arm.decided != many_trace:
                raise AssertionError(f"{speculation.name} decided otherwise than the walk without it ({key})")
            if how.depth == 0 and overhead == 0 and arm.wall != today[0]:
                raise AssertionError(f"no speculation waited {arm.wall} pairs, the walk {today[0]} ({key})")
            rows[speculation] = [
                one[0] + overhead * len(one_trace),
                one[1],
                arm.wall,
                arm.kept_true,
                arm.kept_null,
                arm.tried_null,
                arm.void,
                n * arm.wall,
                one[2],
                one[3],
            ]
    return rows


def run_speculative_walk(
    runs: int, seed: int, noise: float, n: int = 4, overheads: tuple[float, ...] = (0.0, 1.0, 2.0)
) -> dict[str, float]:
    """Speculative turns on ``bench/parallel_pods.py``'s workload (``decisions_speculative``): the same
    decisions as today (checked turn by turn), timed with slots that run ahead. Per overhead and
    speculation: the ratio (pairs per true improvement kept, N = n over N = 1) over ``runs`` knob sets
    with its Monte-Carlo error from 20 batches, then the bench's configuration ``runs // 3`` times."""
    knobs, hypotheses, turns = 40, 40, 40 // n
    out: dict[str, float] = {}
    print(
        f"\nspeculative turns, same workload and decisions (checked turn by turn against the walk without "
        f"speculation), N = {n} / N = 1, {runs} knob sets; overhead: pairs a hypothesis pays in both arms"
    )
    batches: dict[Speculation, list[list[float]]] = {}
    for r in range(runs):
        good = _good_knobs(f"good {seed} {r}", knobs)
        rows = _speculative_set(f"set {seed} {r}", seed + r, n, hypotheses, knobs, good, noise, overheads)
        for variant, row in rows.items():
            acc = batches.setdefault(variant, [[0.0] * 10 for _ in range(20)])[r % 20]
            acc[:] = [a + b for a, b in zip(acc, row, strict=True)]
    for speculation, batch in batches.items():
        name = speculation.name
        t = [sum(b[j] for b in batch) for j in range(10)]
        ratio = (t[2] / t[3]) / (t[0] / t[1])
        error = _batch_error(batch, 2, 3)
        out[name] = ratio
        out[f"{name}, void"] = t[6] / t[7]
        print(
            f"  {name:69} ratio {ratio:.3f} ± {error:.3f}; pairs a turn {t[2] / (runs * turns):.2f}; "
            f"true keeps an arm {t[1] / runs:.2f} / {t[3] / runs:.2f}; other changes kept an arm "
            f"{t[8] / runs:.2f} / {t[4] / runs:.2f} ({t[8] / t[9]:.3f} / {t[4] / t[5]:.3f} of those tried); "
            f"slot time void {t[6] / t[7]:.1%}"
        )
    bench_seed = BENCH_SEED
    good = _good_knobs(f"good knobs {bench_seed}", knobs)
    ratios: dict[Speculation, list[float]] = {}
    for q in range(max(2, runs // 3)):
        sums: dict[Speculation, list[float]] = {}
        for pair in range(3):
            rows = _speculative_set(
                f"bench {seed} {q} {pair}", bench_seed + pair, n, hypotheses, knobs, good, noise, overheads
            )
            for variant, row in rows.items():
                sums[variant] = [a + b for a, b in zip(sums.get(variant, [0.0] * 10), row, strict=True)]
        for variant, s in sums.items():
            if s[1] and s[3]:
                ratios.setdefault(variant, []).append((s[2] / s[3]) / (s[0] / s[1]))
    print(f"  the bench's configuration (--pairs 3 --seed 7), {max(2, runs // 3)} simulated bench runs:")
    for speculation, values in ratios.items():
        name = speculation.name
        out[f"bench {name}"] = statistics.fmean(values)
        out[f"bench sd {name}"] = statistics.stdev(values)
        print(
            f"    {name:69} mean {statistics.fmean(values):.3f}, sd {statistics.stdev(values):.3f} a run, "
            f"at most 0.40 in {sum(v <= 0.40 for v in values) / len(values):.0%} of {len(values)}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--decisions", type=int, default=2000, help="simulated decisions per scenario")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--min-samples", type=int, default=3)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--real", type=int, default=0, help="turns of each real run (0: skip)")
    parser.add_argument(
        "--parallel", type=int, default=0, help="also simulate N parallel hypotheses (0: skip)"
    )
    parser.add_argument("--n", type=int, default=4, help="N of the sequential parallel-hypotheses scenarios")
    parser.add_argument(
        "--agent-cost", type=float, default=4.0, help="an agent's proposal, in metric samples"
    )
    parser.add_argument(
        "--pods-walk",
        type=int,
        default=0,
        help="also simulate bench/parallel_pods.py's workload (runs; 0: skip)",
    )
    parser.add_argument(
        "--overheads",
        type=float,
        nargs="+",
        default=[0.0, 1.0, 2.0],
        help="--pods-walk's speculative turns: a hypothesis's fixed cost in pairs, each simulated",
    )
    args = parser.parse_args(argv)
    run_simulation(args.decisions, args.samples, args.min_samples, args.noise, args.seed)
    run_parallel_sequential(args.decisions, args.samples, args.min_samples, args.noise, args.seed, args.n)
    run_stored(args.decisions, args.samples, args.min_samples, args.noise, args.seed)
    run_refinement(args.decisions, args.samples, args.min_samples, args.noise, args.seed)
    if args.parallel:
        run_parallel(
            args.decisions,
            args.samples,
            args.min_samples,
            args.noise,
            args.seed,
            args.parallel,
            args.agent_cost,
        )
    if args.pods_walk:
        run_pods_walk(args.pods_walk, args.seed, args.noise, args.n, tuple(args.overheads))
    if args.real:
        from decisions_real import run_real

        run_real(args.real, args.samples, args.noise)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""One turn: propose → policy check → validation → measurement → decision → keep or restore (docs/agent.md).

The decisions themselves are pure functions (``controller.engine``, ``controller.stats``); this module
performs the steps in order and stops at the first one that settles the turn. Whatever happens, the
candidate checkout ends exactly at the champion (restore) or at the new champion (keep) before the
decision is written, so a crash before the write re-runs the turn from a clean state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from controller.agents.base import last_line
from controller.agents.command import agent_command as preset_command
from controller.domain import events
from controller.domain.enums import (
    OUTCOME_OF_REASON,
    EventKind,
    Outcome,
    Reason,
    SampleArm,
    SequentialStop,
    TurnPhase,
    TurnStep,
)
from controller.domain.errors import CrucibleError
from controller.engine.candidate import HISTORY_LIMIT, HistoryLine, render_candidate
from controller.engine.conventions import author_identity, commit_message, kept_facts
from controller.engine.knobs import Proposal, apply
from controller.engine.policy import check_paths, evaluator_paths
from controller.engine.protocol import parse_agent_output
from controller.services.execution.context import Detached, RunContext
from controller.services.execution.measure import ArmRoot, Measurement, PairCheck, measure
from controller.services.execution.parallel import run_all
from controller.services.execution.progress import TurnProgress
from controller.services.execution.snapshots import Snapshot, clean_snapshot, mutations, snapshot
from controller.services.execution.validate import Validation, run_validation
from controller.services.views.reads import turn_view
from controller.stats import Arm, KeepRule, KeepVerdict, decide_hold, decide_keep, guard_check
from controller.stats.sequential import Look, LookAction, SequentialDesign, design_for, look
from controller.store.records import ChampionUpdate, RunRecord, TurnDecision, TurnRecord
from controller.workspace import ignored

EVENT_OF_OUTCOME: dict[Outcome, EventKind] = {
    Outcome.ACCEPTED: EventKind.ACCEPTED,
    Outcome.REJECTED: EventKind.REJECTED,
    Outcome.FAILED: EventKind.FAILED,
    Outcome.NO_CHANGE: EventKind.NO_CHANGE,
}


@dataclass
class TurnWork:
    """What a turn accumulates on its way to a decision."""

    number: int
    round: int
    started: float = field(default_factory=time.monotonic)
    hypothesis: str | None = None
    cost_usd: float = 0.0
    tokens: int = 0
    changed: dict[str, list[str]] = field(default_factory=dict)
    value: float | None = None
    p_value: float | None = None
    samples: list[float] = field(default_factory=list)
    reference: list[float] = field(default_factory=list)
    proposal: Proposal | None = None
    before: dict[str, Snapshot] = field(default_factory=dict)
    raw_samples: list[tuple[SampleArm, int, dict[str, float], bool]] = field(default_factory=list)
    # Fingerprints of the ignored files kept across turns (workspace.keep_ignored), before the agent ran.
    kept_before: dict[str, dict[str, ignored.Fingerprint]] = field(default_factory=dict)
    pairs: int | None = None
    stop: SequentialStop | None = None
    progress: TurnProgress | None = None  # the live view's events (step, samples)
    # Parallel hypotheses (ADR-0016): this hypothesis's index, and its verdict on its own.
    index: int | None = None
    verdict: KeepVerdict | None = None

    def step(self, step: TurnStep, arms: Sequence[SampleArm] = ()) -> None:
        if self.progress is not None:
            self.progress.step(step, arms)

    def changed_paths(self, composite: bool) -> tuple[str, ...]:
        out: list[str] = []
        for comp, paths in self.changed.items():
            out += [f"{comp}/{p}" if composite else p for p in paths]
        return tuple(sorted(out))


@dataclass(frozen=True)
class Settled:
    reason: Reason
    detail: str


class TurnStop(Exception):
    """A step settled the turn (or a parallel hypothesis) with ``settled``: nothing after it runs."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.settled = Settled(reason, detail)


def _propose(ctx: RunContext, work: TurnWork, proposal: Proposal | None) -> None:
    """Let the agent (or the knobs proposer) change the candidate workspace."""
    agent = ctx.spec.agent
    root = ctx.layout.workspace_root("candidate")
    work.step(TurnStep.PROPOSING)
    if proposal is not None:
        work.proposal = proposal
        work.hypothesis = proposal.hypothesis
        apply(proposal, root)
        return
    ctx.observer.step(f"turn {work.number}: agent running")
    protocol = {**ctx.agent_env, **ctx.protocol_env(work.number, work.round)}
    if work.index is not None:
        protocol["CRUCIBLE_PARALLEL_INDEX"] = str(work.index)
    result = ctx.executor.run(
        agent_command(ctx),
        cwd=root,
        timeout=agent.timeout,
        writable=[ctx.layout.arm_dir("candidate")],
        protocol=protocol,
        log=ctx.layout.log_file(work.number, "agent"),
    )
    report = parse_agent_output(result.matched_lines)
    work.hypothesis = ctx.executor.redact(report.hypothesis) if report.hypothesis else None
    work.cost_usd, work.tokens = report.cost_usd, report.tokens
    _refuse_violations(ctx)
    if result.cancelled:
        raise _cancelled(ctx, "while the agent was running")
    if result.timed_out:
        raise TurnStop(Reason.TIMEOUT, f"the agent timed out after {agent.timeout:g}s")
    if result.returncode != 0:
        said = last_line(result.stderr)
        cause = f": {result.start_problem}" if result.start_problem else f": {said}" if said else ""
        raise TurnStop(Reason.AGENT_FAILED, f"the agent exited {result.returncode}{cause}")


def agent_command(ctx: RunContext) -> str:
    """The agent's shell command: ``agent.command``, or the wrapper that runs ``agent.preset``'s CLI."""
    agent = ctx.spec.agent
    if agent.preset is None:
        assert agent.command is not None
        return agent.command
    return preset_command(
        agent,
        ctx.spec.spec_dir,
        sandboxed=ctx.executor.sandbox or ctx.contained,
        search_path=ctx.executor.scrubbed.env.get("PATH"),
    )


def _scan_kept(ctx: RunContext, work: TurnWork) -> None:
    """Fingerprint the kept ignored files of the candidate before the agent may touch them."""
    keep = ctx.spec.workspace.keep_ignored
    for comp in ctx.components:
        root = ctx.checkout("candidate", comp.name).path
        work.kept_before[comp.name] = ignored.scan(root, keep).kept if keep else {}


def _measured_tree_only(ctx: RunContext, work: TurnWork) -> None:
    """Make each arm exactly its committed tree plus the kept ignored paths (ADR 0007).

    Ignored files outside ``workspace.keep_ignored`` are removed from the candidate (an agent may have
    planted them) and from the champion when it is measured beside it (so both arms are alike). A kept ignored
    file the agent created, changed or removed cannot be undone cheaply, so the turn is refused and
    those files are deleted (the next measurement rebuilds them) rather than kept for later turns.
    """
    keep = ctx.spec.workspace.keep_ignored
    prefix = "{}/" if ctx.layout.composite else ""

    def tidy(arm: str, component: str) -> list[str]:
        root = ctx.checkout(arm, component).path
        found = ignored.scan(root, keep)
        ignored.remove(root, found.unkept)
        if arm != "candidate":
            return []
        changes = ignored.changed(work.kept_before.get(component, {}), found.kept)
        ignored.remove(root, changes)  # the restore keeps these: they must not poison later turns
        return [prefix.format(component) + path for path in changes]

    # The champion arm is measured only when interleaved; otherwise its stored samples stand in.
    arms = ("candidate", "champion") if ctx.spec.metric.interleave else ("candidate",)
    for comp in ctx.components:  # create the checkouts here, not in the threads below
        for arm in arms:
            ctx.checkout(arm, comp.name)
    calls: list[Callable[[], list[str]]] = [
        partial(tidy, arm, comp.name) for comp in ctx.components for arm in arms
    ]
    touched = [path for found in run_all(calls) for path in found]
    if touched:
        raise TurnStop(
            Reason.EVALUATOR_MUTATED,
            "the agent changed ignored files the measurement reads (workspace.keep_ignored): "
            + ", ".join(touched[:20]),
        )


def _cancelled(ctx: RunContext, when: str) -> TurnStop:
    """A command was stopped: by a cancel of the run, or because the run directory grew past
    ``budget.disk`` while it ran (then the loop's budget check decides whether the run goes on)."""
    if ctx.executor.disk_exceeded:
        ctx.executor.disk_exceeded = False
        return TurnStop(Reason.CANCELLED, f"stopped {when}: the run directory grew past budget.disk")
    return TurnStop(Reason.CANCELLED, f"cancelled {when}")


def _refuse_violations(ctx: RunContext) -> None:
    """A command changed a checkout's ``.git`` (undone already) or left processes that could not be
    killed: the turn is a policy violation, whatever it measured."""
    violations = ctx.executor.take_violations()
    if violations:
        raise TurnStop(Reason.POLICY_VIOLATION, "; ".join(violations[:10]))


def _check_policy(ctx: RunContext, work: TurnWork) -> None:
    commands = [ctx.spec.metric.command]
    if ctx.spec.validation is not None:
        commands.append(ctx.spec.validation.command)
    root = ctx.layout.workspace_root("candidate")
    named = evaluator_paths(commands, root)
    violations: list[str] = []
    for comp in ctx.components:
        co = ctx.checkout("candidate", comp.name)
        if co.head() != ctx.champion_heads[comp.name]:
            violations.append(
                f"{comp.name}: HEAD moved (the agent must not commit, reset or switch branches)"
            )
            continue
        status = co.status()
        work.before[comp.name] = (ctx.champion_heads[comp.name], status, co.digest(status))
        paths = sorted(status)
        if paths:
            work.changed[comp.name] = paths
        prefix = f"{comp.name}/" if ctx.layout.composite else ""
        mine = {p[len(prefix) :] for p in named if p.startswith(prefix)}
        verdict = check_paths(paths, mutable=comp.mutable, protected=comp.protected, evaluator_paths=mine)
        violations += [f"{prefix}{v}" for v in verdict.violations]
        violations += [f"{prefix}{p}: symlink leaving the repository" for p in co.escaping_symlinks(paths)]
    if violations:
        raise TurnStop(Reason.POLICY_VIOLATION, "; ".join(violations[:20]))
    if not work.changed:
        raise TurnStop(Reason.NO_DIFF, "the agent changed nothing")


def _validate(ctx: RunContext, work: TurnWork) -> None:
    if ctx.spec.validation is not None:
        work.step(TurnStep.VALIDATING)
    outcome = run_validation(ctx, "candidate", work.number, work.round)
    _refuse_violations(ctx)
    if outcome is Validation.CANCELLED:
        raise _cancelled(ctx, "during validation")
    if outcome is Validation.FAILED:
        retries = ctx.spec.validation.retries if ctx.spec.validation else 0
        cause = f": {ctx.executor.last_start_problem}" if ctx.executor.last_start_problem else ""
        raise TurnStop(Reason.VALIDATION_FAILED, f"validation failed {1 + retries} time(s){cause}")


def _measure_arms(
    ctx: RunContext, work: TurnWork, arms: list[ArmRoot], tag: str, after_pair: PairCheck | None = None
) -> Measurement:
    """Measure ``arms``; the raw samples are kept in ``work`` and stored with the decision."""
    ctx.observer.step(f"turn {work.number}: measuring {' vs '.join(a.arm for a in arms)}")
    work.step(TurnStep.MEASURING, [a.arm for a in arms])
    result = measure(
        ctx.executor,
        ctx.spec.metric,
        arms,
        protocol=ctx.protocol_env(work.number, work.round),
        log_prefix=ctx.layout.log_file(work.number, tag),
        after_pair=after_pair,
        on_sample=None if work.progress is None else work.progress.sample,
    )
    work.raw_samples += result.raw
    _refuse_violations(ctx)
    if result.cancelled:
        raise _cancelled(ctx, "during measurement")
    if result.timed_out:
        raise TurnStop(Reason.TIMEOUT, result.error or "metric timed out")
    if result.error is not None:
        raise TurnStop(Reason.METRIC_INVALID, result.error)
    return result


def _evaluate(ctx: RunContext, work: TurnWork) -> tuple[bool, str, Settled | None]:
    """Validation, measurement and the keep rule. Returns (keep, detail, settled-if-rejected)."""
    metric = ctx.spec.metric
    # The candidate's state was recorded by the policy check; nothing ran since. The champion arm is
    # clean at the champion heads by construction (restored after every keep and on open).
    _validate(ctx, work)
    arms = [ArmRoot(SampleArm.CANDIDATE, ctx.layout.workspace_root("candidate"))]
    if metric.interleave:
        arms.insert(0, ArmRoot(SampleArm.CHAMPION, ctx.layout.workspace_root("champion")))
    rule = ctx.keep_rule()
    # A parallel hypothesis is decided by the fixed rule, then Holm over the turn's N (ADR-0016).
    design = None if work.index is not None else _sequential_design(ctx, work)
    looks: list[Look] = []
    check = None if design is None else _pair_check(ctx, rule, design, looks)
    result = _measure_arms(ctx, work, arms, "metric", after_pair=check)
    if metric.interleave:
        after, champion_after = run_all(
            [partial(snapshot, ctx, "candidate"), partial(snapshot, ctx, "champion")]
        )
        mutated = mutations(work.before, after) + mutations(clean_snapshot(ctx), champion_after)
    else:
        mutated = mutations(work.before, snapshot(ctx, "candidate"))
    if mutated:
        raise TurnStop(Reason.EVALUATOR_MUTATED, "the evaluator changed " + ", ".join(mutated[:20]))
    work.step(TurnStep.DECIDING)
    guards = ctx.guard_names()
    candidate = result.arm(SampleArm.CANDIDATE, metric.name, guards)
    if metric.interleave:
        champion = result.arm(SampleArm.CHAMPION, metric.name, guards)
    else:
        assert ctx.champion_arm is not None
        champion = ctx.champion_arm
    work.samples = list(candidate.primary)
    work.reference = list(champion.primary)
    if work.round > 0 and ctx.round_rule is not None:
        return _evaluate_round(ctx, work, rule, candidate, champion)
    if looks:
        verdict = _sequential_verdict(ctx, work, rule, looks[-1], candidate, champion)
    else:
        verdict = decide_keep(rule, candidate, champion)
        if verdict.keep and rule.guards and work.index is None:  # parallel: only for the chosen one
            verdict = decide_keep(rule, candidate, champion, base_arm(ctx, work, champion))
    work.verdict = verdict
    work.value = verdict.candidate_median
    work.p_value = verdict.p_value
    if verdict.keep:
        return True, verdict.detail, None
    return False, verdict.detail, Settled(verdict.reason, verdict.detail)


def _sequential_design(ctx: RunContext, work: TurnWork) -> SequentialDesign | None:
    """The sequential design for a search turn, or None where the fixed rule decides: refinement
    rounds (holding a score is not an improvement test), ``interleave = false`` (no pairs) and
    ``confidence = 0`` (no test to stop on)."""
    metric = ctx.spec.metric
    if not (metric.sequential and metric.interleave and metric.confidence > 0):
        return None
    if work.round > 0 and ctx.round_rule is not None:
        return None
    return design_for(metric.min_samples, metric.samples, metric.confidence)


def _pair_check(ctx: RunContext, rule: KeepRule, design: SequentialDesign, looks: list[Look]) -> PairCheck:
    """After each pair from the first look on: decide, and stop measuring once a look settles it."""
    metric, guards = ctx.spec.metric.name, ctx.guard_names()

    def check(result: Measurement, pairs: int) -> bool:
        if pairs < design.min_pairs:
            return False
        candidate = result.arm(SampleArm.CANDIDATE, metric, guards)
        champion = result.arm(SampleArm.CHAMPION, metric, guards)
        looks.append(look(rule, design, candidate, champion))
        return looks[-1].action is not LookAction.CONTINUE

    return check


def _sequential_verdict(
    ctx: RunContext, work: TurnWork, rule: KeepRule, final: Look, candidate: Arm, champion: Arm
) -> KeepVerdict:
    """The last look's verdict; a keep must still pass the guards against the base (a third arm)."""
    assert final.verdict is not None
    work.pairs, work.stop, work.p_value = final.pairs, final.stop, final.p_value
    verdict = final.verdict
    if verdict.keep and rule.guards:
        failures = guard_check(rule, candidate, champion, base_arm(ctx, work, champion))
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
    return verdict


def base_arm(ctx: RunContext, work: TurnWork, champion: Arm) -> Arm:
    """The base commit measured as a third arm (only when a keep is near and the champion moved)."""
    if ctx.champion_heads == ctx.base_shas:
        return champion
    ctx.ensure_arm("base", ctx.base_shas)
    result = _measure_arms(ctx, work, [ArmRoot(SampleArm.BASE, ctx.layout.workspace_root("base"))], "base")
    return result.arm(SampleArm.BASE, ctx.spec.metric.name, ctx.guard_names())


def _evaluate_round(
    ctx: RunContext, work: TurnWork, rule: KeepRule, candidate: Arm, pr_head: Arm
) -> tuple[bool, str, Settled | None]:
    """A refinement turn is kept when it holds the score (docs/keep-rule.md), not only when it improves it."""
    assert ctx.round_rule is not None
    hold, first = ctx.round_rule.hold, ctx.round_rule.first_published
    verdict = decide_hold(rule, hold, candidate, pr_head, first)
    if verdict.keep and rule.guards:
        verdict = decide_hold(rule, hold, candidate, pr_head, first, base_arm(ctx, work, pr_head))
    work.value = verdict.candidate_median
    if verdict.keep:
        return True, verdict.detail, None
    return False, verdict.detail, Settled(verdict.reason, verdict.detail)


def settle_arms(ctx: RunContext, new_heads: dict[str, str] | None) -> None:
    """End a turn. After a rejection the candidate is restored exactly and the champion loses the
    ignored files (build caches) its measurement left, except ``workspace.keep_ignored``, so both arms
    start the next measurement alike; after a keep the champion arm moves to the new champion. The git
    work of the arms runs side by side.
    """
    keep_ignored = ctx.spec.workspace.keep_ignored
    calls: list[Callable[[], None]] = []
    for comp in ctx.components:
        candidate = ctx.checkout("candidate", comp.name)
        champion = ctx.checkout("champion", comp.name)
        old = ctx.champion_heads[comp.name]
        if new_heads is None:
            calls.append(partial(candidate.restore, old, keep_ignored))
            calls.append(partial(champion.clean, keep_ignored))
        elif new_heads[comp.name] != old:
            # After a keep both arms keep the caches their own measurement built (alike again);
            # only the champion moves, touching just the files that differ.
            calls.append(partial(champion.advance, new_heads[comp.name]))
    run_all(calls)


def _keep(ctx: RunContext, work: TurnWork) -> dict[str, str]:
    """Commit the candidate in each changed component; return the new champion heads."""
    heads = dict(ctx.champion_heads)
    baseline = ctx.ledger.get_run(ctx.run_id).baseline_value
    for comp in ctx.components:
        if comp.name not in work.changed:
            continue
        co = ctx.checkout("candidate", comp.name)
        facts = kept_facts(
            ctx.spec, ctx.run_id, comp.name, baseline, work.value, work.hypothesis, work.number
        )
        message = commit_message(ctx.spec.publish, facts)
        sha = co.commit_paths(work.changed[comp.name], message, author_identity(ctx.spec.publish))
        co.set_refs({"refs/crucible/champion": sha, f"refs/crucible/turns/{work.number}": sha})
        heads[comp.name] = sha
    return heads


def notify_champion(ctx: RunContext) -> None:
    """Tell the publisher (if any) about the champion; a forge outage must not stop the search."""
    if ctx.on_champion is None:
        return
    try:
        ctx.on_champion(ctx)
    except CrucibleError as exc:
        ctx.observer.warn(f"publishing failed (will retry after the next keep and at the end): {exc}")


def _hypothesis_lines(ctx: RunContext, history: list[HistoryLine]) -> list[HistoryLine]:
    """A parallel turn's line becomes one line per hypothesis (ADR-0016), so the agent sees what was
    superseded too, not only what was kept."""
    out: list[HistoryLine] = []
    for line in history:
        found = ctx.ledger.list_hypotheses(ctx.run_id, line.turn)
        out += [
            HistoryLine(
                line.turn, f"[#{h.index}] {h.hypothesis or ''}", str(h.outcome), str(h.reason), h.value
            )
            for h in found
        ] or [line]
    return out


def write_candidate_file(
    ctx: RunContext,
    round_number: int,
    turns: Sequence[TurnRecord] | None = None,
    decided_total: int | None = None,
    run: RunRecord | None = None,
) -> None:
    """CANDIDATE.md for the next turn: objective, scores and the bounded history (docs/agent.md).

    ``turns`` (the most recent ones) and ``decided_total`` save queries when the caller has them."""
    if run is None or turns is None or decided_total is None:  # the caller's reads are current
        snapshot = ctx.ledger.turn_snapshot(ctx.run_id, last=HISTORY_LIMIT)
        run = run or snapshot.run
        turns = snapshot.recent if turns is None else turns
        decided_total = sum(snapshot.counts.decided.values()) if decided_total is None else decided_total
    listed = turns
    history = [
        HistoryLine(t.number, t.hypothesis, str(t.outcome), str(t.reason), t.value)
        for t in listed
        if t.phase == TurnPhase.DECIDED
    ]
    earlier = max(0, decided_total - len(history))
    if ctx.spec.broker.parallel > 1:
        history = _hypothesis_lines(ctx, history)
    text = render_candidate(
        objective=ctx.spec.objective,
        metric_name=ctx.spec.metric.name,
        direction=str(ctx.direction),
        champion_value=run.champion_value,
        baseline_value=run.baseline_value,
        history=history,
        earlier=earlier,
        feedback=ctx.feedback,
        round_number=round_number,
    )
    ctx.layout.agent_dir.mkdir(parents=True, exist_ok=True)
    ctx.layout.candidate_file.write_text(text)
    ctx.layout.steer_file.touch()


def try_candidate(
    ctx: RunContext, work: TurnWork, proposal: Proposal | None
) -> tuple[bool, str, Settled | None]:
    """A turn's steps up to its verdict: propose, policy check, measured tree, validation, measurement
    and the keep rule; (keep, detail, settled-if-not-kept). The candidate checkout is left as the
    agent made it: the caller keeps or restores it. Shared by a single turn and by each parallel
    hypothesis; Detached when a detach (not a cancel) cut it off."""
    ctx.executor.take_violations()  # anything older belongs to a decided turn or the baseline
    try:
        _scan_kept(ctx, work)
        _propose(ctx, work, proposal)
        _check_policy(ctx, work)
        _measured_tree_only(ctx, work)
        return _evaluate(ctx, work)
    except TurnStop as stop:
        if stop.settled.reason is Reason.CANCELLED and ctx.detach.is_set():
            # Detaching (SIGTERM), not cancelling: the turn stays undecided and is run again from
            # its start by whoever continues the run (open_context reconciles the checkouts).
            raise Detached(f"turn {work.number} cut off by a detach") from stop
        return False, "", stop.settled


def run_turn(
    ctx: RunContext,
    number: int,
    round_number: int,
    proposal: Proposal | None,
    turns: Sequence[TurnRecord] | None = None,
    decided_total: int | None = None,
    run: RunRecord | None = None,
) -> TurnRecord:
    """Run turn ``number`` from its start and write its decision exactly once."""
    started = (EventKind.TURN_STARTED, events.TurnStartedPayload(turn=number, round=round_number).dump())
    ctx.ledger.start_turn(ctx.run_id, number, round_number, event=started)
    # No restore here: every turn ends restored or kept, and open_context reconciles after a crash.
    write_candidate_file(ctx, round_number, turns, decided_total, run)
    progress = TurnProgress(ctx.ledger, ctx.run_id, number, round_number, ctx.spec.metric.name)
    work = TurnWork(number, round_number, progress=progress)
    keep, detail, settled = try_candidate(ctx, work, proposal)
    heads = dict(ctx.champion_heads)
    champion: ChampionUpdate | None = None
    if keep and work.value is not None:
        heads = _keep(ctx, work)
        champion = ChampionUpdate(value=work.value, turn=number)
        reason = Reason.IMPROVED
    else:
        assert settled is not None
        reason, detail = settled.reason, settled.detail
        settle_arms(ctx, None)
    outcome = OUTCOME_OF_REASON[reason]
    decision = TurnDecision(
        outcome=outcome,
        reason=reason,
        value=work.value,
        p_value=work.p_value,
        hypothesis=work.hypothesis,
        changed_paths=work.changed_paths(ctx.layout.composite),
        commits={c: heads[c] for c in work.changed} if keep else {},
        cost_usd=work.cost_usd,
        tokens=work.tokens,
        duration_s=time.monotonic() - work.started,
        detail=ctx.executor.redact(detail),
        pairs=work.pairs,
        sequential_stop=work.stop,
    )
    payload = events.TurnDecidedPayload(
        turn=number,
        round=round_number,
        outcome=outcome,
        reason=reason,
        value=work.value,
        p_value=work.p_value,
        hypothesis=work.hypothesis,
        detail=decision.detail,
    )
    if work.stop is not None:
        payload = payload.model_copy(update={"pairs": work.pairs, "sequential_stop": work.stop})
    if work.proposal is not None:
        p = work.proposal
        change = events.KnobChange(file=p.knob.file, key=p.knob.key, old=p.old, new=p.new)
        payload = payload.model_copy(update={"proposal": change})
    kind = EVENT_OF_OUTCOME[outcome]
    record = ctx.ledger.decide_turn(
        ctx.run_id,
        number,
        decision,
        champion=champion,
        component_heads={c: heads[c] for c in work.changed} if keep else {},
        event=(kind, payload.dump()),
        samples=work.raw_samples,
    )
    if keep:
        settle_arms(ctx, heads)
        ctx.champion_heads = heads
        notify_champion(ctx)
        if ctx.spec.metric.interleave is False:
            ctx.champion_arm = ctx.arm_from_store(number, SampleArm.CANDIDATE)
    ctx.observer.turn_decided(turn_view(record, work.samples, work.reference).model_dump(mode="json"))
    return record

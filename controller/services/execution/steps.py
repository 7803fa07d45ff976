"""A turn's steps before its verdict: propose, policy check, the measured tree, validation, measurement.

Each step either records what it found in the turn's ``TurnWork`` or raises ``TurnStop`` with the
reason that settles the turn (``Reason``), so the caller (``turn.try_candidate``) stops at the first
step that decides; nothing here writes the record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from controller.agents.base import last_line
from controller.domain.enums import Reason, TurnStep
from controller.engine.knobs import Proposal, apply
from controller.engine.policy import check_paths, evaluator_paths
from controller.engine.protocol import parse_agent_output
from controller.services.execution import candidate_copy, champion_copy
from controller.services.execution.context import RunContext
from controller.services.execution.measure import ArmRoot, Measurement, PairCheck, measure
from controller.services.execution.parallel import run_all
from controller.services.execution.presets import run_preset
from controller.services.execution.validate import Validation, run_validation
from controller.services.execution.work import TurnStop, TurnWork
from controller.workspace import ignored, trackedstatus, treeprint


def propose(ctx: RunContext, work: TurnWork, proposal: Proposal | None) -> None:
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
    log = ctx.layout.log_file(work.number, "agent")
    detail: str | None = None
    if agent.preset is not None:  # the controller runs the CLI itself (``presets``)
        preset = run_preset(ctx, root, protocol, log)
        result, detail = preset.result, preset.detail
    else:
        assert agent.command is not None
        writable = [ctx.layout.arm_dir("candidate")]
        result = ctx.executor.run(
            agent.command, cwd=root, timeout=agent.timeout, writable=writable, protocol=protocol, log=log
        )
    report = parse_agent_output(result.matched_lines)
    work.hypothesis = ctx.executor.redact(report.hypothesis) if report.hypothesis else None
    work.cost_usd, work.tokens = report.cost_usd, report.tokens
    refuse_violations(ctx)
    if result.cancelled:
        raise cancelled(ctx, "while the agent was running")
    if result.timed_out:
        raise TurnStop(Reason.TIMEOUT, f"the agent timed out after {agent.timeout:g}s")
    if result.returncode != 0 and detail is not None:
        raise TurnStop(Reason.AGENT_FAILED, detail)
    if result.returncode != 0:
        said = last_line(result.stderr)
        cause = f": {result.start_problem}" if result.start_problem else f": {said}" if said else ""
        raise TurnStop(Reason.AGENT_FAILED, f"the agent exited {result.returncode}{cause}")


def scan_kept(ctx: RunContext, work: TurnWork) -> None:
    """The fingerprints of the candidate's kept ignored files before the agent may touch them (from
    where the last turn left the copy, ``candidate_copy``), and of the champion's copy if this context
    has not taken them yet (``champion_copy``)."""
    champion_copy.settle_once(ctx)
    for comp in ctx.components:
        work.kept_before[comp.name] = candidate_copy.kept_before(ctx, comp.name)


def measured_tree_only(ctx: RunContext, work: TurnWork) -> None:
    """Make each arm exactly its committed tree plus the kept ignored paths (ADR 0007).

    Ignored files outside ``workspace.keep_ignored`` are removed from the candidate (an agent may have
    planted them) and from the champion when it is measured beside it (so both arms are alike). A kept ignored
    file the agent created, changed or removed cannot be undone cheaply, so the turn is refused and
    those files are deleted (the next measurement rebuilds them) rather than kept for later turns.
    """
    keep = ctx.spec.workspace.keep_ignored
    prefix = "{}/" if ctx.layout.composite else ""

    def tidy(arm: str, component: str) -> list[str]:
        if arm == "champion" and component in work.champion_checked:
            return []  # the policy check's walk found it as crucible left it: nothing to remove
        root = ctx.checkout(arm, component).path
        listed = work.ignored_entries.get(component) if arm == "candidate" else None
        # The candidate's ignored files came with the policy check's status walk; nothing ran since.
        found = ignored.scan(root, keep) if listed is None else ignored.classify(root, listed, keep)
        ignored.remove(root, found.unkept)
        if arm != "candidate":
            return []
        work.tidied[component] = found.unkept
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


def cancelled(ctx: RunContext, when: str) -> TurnStop:
    """A command was stopped: by a cancel of the run, or because the run directory grew past
    ``budget.disk`` while it ran (then the loop's budget check decides whether the run goes on)."""
    if ctx.executor.disk_exceeded:
        ctx.executor.disk_exceeded = False
        return TurnStop(Reason.CANCELLED, f"stopped {when}: the run directory grew past budget.disk")
    return TurnStop(Reason.CANCELLED, f"cancelled {when}")


def refuse_violations(ctx: RunContext) -> None:
    """A command changed a checkout's ``.git`` (undone already) or left processes that could not be
    killed: the turn is a policy violation, whatever it measured."""
    violations = ctx.executor.take_violations()
    if violations:
        raise TurnStop(Reason.POLICY_VIOLATION, "; ".join(violations[:10]))


def check_policy(ctx: RunContext, work: TurnWork) -> None:
    """The agent's change against the spec's paths, and the champion's copy against what crucible left
    there (``champion_copy.repair``): one status walk per checkout, the two arms' walks side by side."""
    commands = [ctx.spec.metric.command]
    if ctx.spec.validation is not None:
        commands.append(ctx.spec.validation.command)
    named = evaluator_paths(commands, ctx.layout.workspace_root("candidate"))
    for comp in ctx.components:  # create the checkouts here, not in the threads below
        ctx.checkout("candidate", comp.name)
        ctx.checkout("champion", comp.name)
    calls: list[Callable[[], _Walk | list[str] | None]] = [
        *(partial(_walk_candidate, ctx, comp.name) for comp in ctx.components),
        *(partial(champion_copy.repair, ctx, comp.name) for comp in ctx.components),
    ]
    walks = run_all(calls)
    candidates = len(ctx.components)
    violations: list[str] = []
    for comp, walk in zip(ctx.components, walks[:candidates], strict=True):
        assert isinstance(walk, _Walk)
        prefix = f"{comp.name}/" if ctx.layout.composite else ""
        if walk.status is None:
            violations.append(
                f"{comp.name}: HEAD moved (the agent must not commit, reset or switch branches)"
            )
            continue
        work.ignored_entries[comp.name] = walk.ignored
        if walk.tree is not None:
            work.prints[comp.name] = walk.tree
        work.before[comp.name] = (ctx.champion_heads[comp.name], walk.status, walk.digest)
        paths = sorted(walk.status)
        if paths:
            work.changed[comp.name] = paths
        mine = {p[len(prefix) :] for p in named if p.startswith(prefix)}
        verdict = check_paths(paths, mutable=comp.mutable, protected=comp.protected, evaluator_paths=mine)
        violations += [f"{prefix}{v}" for v in verdict.violations]
        violations += [f"{prefix}{p}: symlink leaving the repository" for p in walk.escaping]
    for comp, repaired in zip(ctx.components, walks[candidates:], strict=True):
        assert not isinstance(repaired, _Walk)
        if repaired is not None:
            violations += repaired
            work.champion_checked.add(comp.name)
    if violations:
        raise TurnStop(Reason.POLICY_VIOLATION, "; ".join(violations[:20]))
    if not work.changed:
        raise TurnStop(Reason.NO_DIFF, "the agent changed nothing")


@dataclass(frozen=True)
class _Walk:
    """The candidate's status walk after the agent: None for a moved HEAD (nothing else is looked at)."""

    status: dict[str, str] | None
    ignored: list[str] = field(default_factory=list)
    digest: dict[str, str | None] = field(default_factory=dict)
    escaping: list[str] = field(default_factory=list)
    tree: treeprint.TreePrint | None = None


def _walk_candidate(ctx: RunContext, component: str) -> _Walk:
    """The candidate's status walk, and on a small tree its print (``TurnWork.prints``): what the walk
    after the measurement compares against. The print is taken first; where the tree holds tracked
    files only and the index is one crucible knows to match HEAD, the status is read from that print
    and the index in this process, as git would report it (``trackedstatus``, ADR 0052); else git walks
    and the print is brought up to the index its walk rewrote, so it stands for the tree git saw."""
    co = ctx.checkout("candidate", component)
    head = ctx.champion_heads[component]
    if co.head() != head:
        return _Walk(None)
    printed = ("candidate", component) not in ctx.unprinted
    tree = treeprint.take(co.path) if printed else None
    clean = ctx.clean_indexes.get(component)
    status = None
    if tree is not None and clean is not None and clean[0] == head and treeprint.at(tree, head):
        status = trackedstatus.derive(co.path, tree, clean[1])
    found: list[str] = []
    if status is None:
        status, found = co.status_and_ignored()
        tree = None if tree is None else treeprint.with_index(co.path, tree)
        if all(code[0] in " ?!" for code in status.values()):  # nothing staged: the index is HEAD's
            candidate_copy.index_matches(ctx, component, head)
    if printed and tree is None:  # too large (an installed node_modules, say), or unreadable
        ctx.unprinted.add(("candidate", component))  # git's from now on
    digest = co.digest(status)
    return _Walk(status, found, digest, co.escaping_symlinks(sorted(status)), tree)


def validate_candidate(ctx: RunContext, work: TurnWork) -> None:
    if ctx.spec.validation is not None:
        work.step(TurnStep.VALIDATING)
    outcome = run_validation(ctx, "candidate", work.number, work.round)
    refuse_violations(ctx)
    if outcome is Validation.CANCELLED:
        raise cancelled(ctx, "during validation")
    if outcome is Validation.FAILED:
        retries = ctx.spec.validation.retries if ctx.spec.validation else 0
        cause = f": {ctx.executor.last_start_problem}" if ctx.executor.last_start_problem else ""
        raise TurnStop(Reason.VALIDATION_FAILED, f"validation failed {1 + retries} time(s){cause}")


def measure_arms(
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
    refuse_violations(ctx)
    if result.cancelled:
        raise cancelled(ctx, "during measurement")
    if result.timed_out:
        raise TurnStop(Reason.TIMEOUT, result.error or "metric timed out")
    if result.error is not None:
        raise TurnStop(Reason.METRIC_INVALID, result.error)
    return result

"""Keeping a candidate, once for a turn of one candidate and for a turn of N hypotheses.

A kept change is committed in each component it changed (``commit_changed``), the arms are settled
(``settle_arms``), and once the ledger has the decision the run's champion moves (``champion_moved``):
its heads, the publisher told, and (without interleaving) its stored samples as the arm to beat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from controller.domain.enums import SampleArm
from controller.domain.errors import CrucibleError
from controller.engine.conventions import author_identity, commit_message, kept_facts
from controller.services.execution import candidate_copy, champion_copy
from controller.services.execution.context import RunContext
from controller.services.execution.parallel import run_all
from controller.services.execution.work import TurnWork
from controller.store.records import RunRecord, Sample

CHAMPION_REF = "refs/crucible/champion"
# Status codes of a tracked file changed in the working tree only (nothing staged, nothing new).
TRACKED_CHANGES = frozenset({" M", " D", " T"})
TURN_REF = "refs/crucible/turns/{turn}"


def champion_refs(turn: int, sha: str) -> dict[str, str]:
    """The refs a kept turn's commit is pinned by: the champion and the turn's own."""
    return {CHAMPION_REF: sha, TURN_REF.format(turn=turn): sha}


def settle_arms(
    ctx: RunContext,
    new_heads: Mapping[str, str] | None,
    changed: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """End a turn. After a rejection the candidate is restored exactly; after a keep the champion arm
    moves to the new champion. Either way the champion's copy then loses every file outside its commit
    but ``workspace.keep_ignored`` (the caches its measurement left), so both arms start the next
    measurement alike, and is fingerprinted for the check after the next agent (``champion_copy``).
    The git work of the arms runs side by side. ``changed``: the paths each kept commit changed, by
    component (the turn's ``TurnWork.changed``), which spare the moved copy its listing on a small tree.
    """
    calls: list[Callable[[], None]] = []
    for comp in ctx.components:
        ctx.checkout("candidate", comp.name)
        ctx.checkout("champion", comp.name)  # created here, not in the threads below
        old = ctx.champion_heads[comp.name]
        if new_heads is None:
            calls.append(partial(candidate_copy.settle, ctx, comp.name, old))
            calls.append(partial(champion_copy.settle, ctx, comp.name, old))
        else:
            # After a keep the candidate keeps the caches its own measurement built (fingerprinted
            # already, ``candidate_copy.committed``); the champion moves, touching just the files that
            # differ (the measurement's tidy removes the caches nobody keeps from both arms anyway).
            paths = None if changed is None else changed.get(comp.name)
            calls.append(partial(champion_copy.move, ctx, comp.name, new_heads[comp.name], paths))
    run_all(calls)


def paths_by_component(
    paths: Sequence[str], components: Sequence[str], composite: bool
) -> dict[str, list[str]]:
    """A decision's changed paths (``TurnWork.changed_paths``: "component/path" in a ``composite``
    layout, else the one component's own) by component, as ``settle_arms`` takes them."""
    if not composite:
        return {components[0]: list(paths)}
    out: dict[str, list[str]] = {}
    for path in paths:
        component, _, rel = path.partition("/")
        out.setdefault(component, []).append(rel)
    return out


def commit_changed(
    ctx: RunContext,
    work: TurnWork,
    hypothesis: str | None,
    refs: Callable[[str], dict[str, str]],
    run: RunRecord | None = None,
) -> dict[str, str]:
    """Commit the candidate in each component ``work`` changed, pin each commit with ``refs(sha)``
    (a restore moves HEAD, a ref keeps the commit), and return the commits by component. ``run``:
    the run as read before the turn, for its baseline (written once, before any turn), else read."""
    out: dict[str, str] = {}
    baseline = (
        run if run is not None and run.baseline_value is not None else ctx.ledger.get_run(ctx.run_id)
    ).baseline_value
    for comp in ctx.components:
        if comp.name not in work.changed:
            continue
        co = ctx.checkout("candidate", comp.name)
        facts = kept_facts(ctx.spec, ctx.run_id, comp.name, baseline, work.value, hypothesis, work.number)
        message = commit_message(ctx.spec.publish, facts)
        paths = work.changed[comp.name]
        codes = work.before[comp.name][1]  # the policy check's status of these paths
        tracked = all(codes.get(p) in TRACKED_CHANGES for p in paths)
        sha = co.commit_paths(paths, message, author_identity(ctx.spec.publish), tracked_only=tracked)
        candidate_copy.index_matches(ctx, comp.name, sha)  # a commit leaves the index as it committed
        co.set_refs(refs(sha))
        out[comp.name] = sha
    return out


def champion_moved(
    ctx: RunContext, turn: int, heads: Mapping[str, str], samples: Sequence[Sample] | None = None
) -> None:
    """After the ledger recorded turn ``turn`` as kept with ``heads``: the run's champion is there now,
    the publisher is told, and without interleaving the kept samples are the arm to beat (``samples``:
    the ones the decision stored, taken as they are instead of read back)."""
    ctx.champion.move(heads)
    notify_champion(ctx)
    if ctx.spec.metric.interleave is False:
        kept = SampleArm.CANDIDATE
        arm = ctx.arm_from_store(turn, kept) if samples is None else ctx.arm_of(samples, kept)
        ctx.champion.measured(arm)


def notify_champion(ctx: RunContext) -> None:
    """Tell the publisher (if any) about the champion; a forge outage must not stop the search."""
    on_champion = ctx.hooks.on_champion
    if on_champion is None:
        return
    try:
        on_champion(ctx)
    except CrucibleError as exc:
        ctx.observer.warn(f"publishing failed (will retry after the next keep and at the end): {exc}")

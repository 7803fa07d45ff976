"""Keeping a PR's history intact when its base or its branch moved under crucible (docs/github.md).

Two things can move under a published champion, and both are handled the same way: the champion's
change is applied three-way onto the moved commit, crucible makes a commit whose parents are the PR
head and that commit (so pushing it is a fast-forward and nothing anyone pushed is rewritten),
measures it, and records it as the component's champion.

- Base drift: the upstream base branch moved. The merge's parents are the PR head and the new base;
  on a conflict nothing is pushed and the PR body says ``needs rebase: <paths>``.
- An adopted head: a person pushed to the PR branch (``on_foreign_push = "adopt"``). The merge's
  parents are the adopted head and the champion; the body says whose commit it is built on, and on a
  conflict nothing is pushed and the PR says ``needs merge: <paths>`` until a later champion applies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from controller.config.spec import ComponentSpec
from controller.domain.enums import SampleArm
from controller.engine.conventions import author_identity, finish
from controller.forge.base import Forge
from controller.services.execution.context import RunContext
from controller.services.execution.measure import ArmRoot, measure
from controller.stats import median
from controller.store.ports import DriftRecords, RunReads
from controller.workspace.git import is_ancestor
from controller.workspace.push import fetch_commit


@dataclass(frozen=True)
class Applied:
    """The champion applied three-way onto another commit: the merge commit and its samples, or the
    conflicting paths, or why the merged code could not be measured."""

    head: str | None = None
    samples: tuple[float, ...] = ()
    conflicts: tuple[str, ...] = ()
    error: str | None = None

    @property
    def value(self) -> float:
        return median(list(self.samples))


def apply_onto(
    ctx: RunContext, records: RunReads, name: str, onto: str, parents: Sequence[str], message: str
) -> Applied:
    """Merge ``name``'s champion onto ``onto`` (objects only), commit it with ``parents`` and measure
    the workspace with it (in the run's current round, read from ``records``); the candidate arm is
    left at the champion heads when that fails."""
    clone = ctx.checkout("candidate", name)
    tree, conflicts = clone.merge_onto(onto, ctx.champion_heads[name])
    if tree is None:
        return Applied(conflicts=tuple(conflicts))
    publish = ctx.spec.publish
    merged = clone.commit_tree(tree, parents, finish(publish, name, message), author_identity(publish))
    ctx.ensure_arm("candidate", {**ctx.champion_heads, name: merged})
    result = measure(
        ctx.executor,
        ctx.spec.metric,
        [ArmRoot(SampleArm.CANDIDATE, ctx.layout.workspace_root("candidate"))],
        protocol=ctx.protocol_env(0, records.get_run(ctx.run_id).round),
        log_prefix=ctx.layout.logs / f"onto-{onto[:12]}.log",
    )
    if result.error is not None:
        ctx.ensure_arm("candidate", ctx.champion_heads)
        return Applied(head=merged, error=result.error)
    values = tuple(row[ctx.spec.metric.name] for row in result.samples[SampleArm.CANDIDATE])
    return Applied(head=merged, samples=values)


def _make_champion(ctx: RunContext, name: str, head: str) -> None:
    """The in-process side of a recorded head move: the champion ref, the heads, the champion arm."""
    ctx.checkout("candidate", name).set_refs({"refs/crucible/champion": head})
    ctx.champion.move({**ctx.champion_heads, name: head})
    ctx.ensure_arm("champion", ctx.champion_heads)


def follow_upstream(
    ctx: RunContext, records: DriftRecords, forge: Forge, component: ComponentSpec, notes: list[str]
) -> None:
    """Bring ``component`` onto its upstream base if that moved, recorded in ``records``; explain what
    happened in ``notes``."""
    upstream = component.upstream
    if upstream is None:
        return
    name = component.name
    branch = forge.repo(upstream).default_branch if component.base == "HEAD" else component.base
    now = forge.branch_sha(upstream, branch)
    old = ctx.base_shas[name]
    if now is None or now == old:
        return
    clone = ctx.checkout("candidate", name)
    new_base = fetch_commit(clone.path, forge.repo(upstream).clone_url, now, forge.git_auth_env(upstream))
    head = ctx.champion_heads[name]
    message = f"crucible: follow {branch} to {new_base[:12]}\n\nrun {ctx.run_id}: the candidate on it"
    applied = apply_onto(ctx, records, name, new_base, [head, new_base], message)
    if applied.conflicts:
        notes.append(
            f"needs rebase: {', '.join(applied.conflicts)} (upstream {branch} moved to {new_base[:12]})"
        )
        return
    if applied.error is not None or applied.head is None:
        notes.append(
            f"upstream {branch} moved to {new_base[:12]}, but the candidate on it fails: {applied.error}"
        )
        return
    merged, value = applied.head, applied.value
    event = {"component": name, "old_base": old, "new_base": new_base, "head": merged}
    records.follow_base(
        ctx.run_id,
        name,
        new_base=new_base,
        head_sha=merged,
        event={**event, "samples": list(applied.samples), "value": value},
    )
    ctx.champion.rebase(name, new_base)
    _make_champion(ctx, name, merged)
    notes.append(
        f"followed {branch} from {old[:12]} to {new_base[:12]} with {merged[:12]}; "
        f"re-measured there: {ctx.spec.metric.name} = {value:.6g}"
    )


@dataclass(frozen=True)
class Lineage:
    """Where a component's champion stands against a head someone else pushed to its PR branch.

    ``builds_on`` is true when the champion descends from the adopted head (so pushing it is a
    fast-forward); ``held`` says why not, when it does not: that sentence is the PR's note."""

    builds_on: bool
    held: str | None = None
    value: float | None = None  # measured for a champion just applied onto the adopted head


_UNSAFE = re.compile(r"[^\w .'-]+|_+")


def display_name(raw: str) -> str:
    """Pure: an author name tamed for a PR body, where it is someone else's free text: letters,
    digits, spaces and ``.'-`` only (no markup, no ``<!--`` that could fake crucible's markers, no
    ``@`` that would notify someone), at most 60 characters, ``someone`` when nothing is left."""
    return " ".join(_UNSAFE.sub("", raw).split())[:60].strip() or "someone"


def author_of(ctx: RunContext, name: str, sha: str) -> str:
    """The author name of commit ``sha`` in ``name``'s candidate clone, tamed for a PR body."""
    return display_name(ctx.checkout("candidate", name).author_name(sha))


def build_on_adopted(
    ctx: RunContext, records: DriftRecords, name: str, adopted: str, notes: list[str]
) -> Lineage:
    """Make ``name``'s champion descend from ``adopted``, a head someone else pushed to the PR branch.

    A champion that already descends from it needs nothing; one the adopted head already contains
    (a person pushed on top of it) is not pushed, the adopted head stays the PR. Otherwise the
    champion is applied three-way onto the adopted head, committed with the adopted head and the
    champion as parents, measured, and recorded as the champion in ``records`` (BUILT_ON_ADOPTED)."""
    clone = ctx.checkout("candidate", name)
    head = ctx.champion_heads[name]
    who = author_of(ctx, name, adopted)
    metric = ctx.spec.metric.name
    if is_ancestor(clone.path, adopted, head):
        return Lineage(builds_on=True)
    if is_ancestor(clone.path, head, adopted):
        held = (
            f"the PR head is {who}'s commit {adopted[:12]}, on top of the run's best; crucible has not "
            "measured it"
        )
        return Lineage(builds_on=False, held=held)
    message = f"crucible: build on {adopted[:12]}\n\nrun {ctx.run_id}: the candidate on {who}'s commit"
    applied = apply_onto(ctx, records, name, adopted, [adopted, head], message)
    if applied.conflicts:
        paths = ", ".join(applied.conflicts)
        held = (
            f"needs merge: {paths}: the run's best {head[:12]} does not apply onto {who}'s commit "
            f"{adopted[:12]}; nothing was pushed"
        )
        notes.append(held)
        return Lineage(builds_on=False, held=held)
    if applied.error is not None or applied.head is None:
        held = (
            f"the run's best {head[:12]} applied onto {who}'s commit {adopted[:12]} fails: "
            f"{applied.error}; nothing was pushed"
        )
        notes.append(held)
        return Lineage(builds_on=False, held=held)
    merged, value = applied.head, applied.value
    event = {"component": name, "adopted": adopted, "champion": head, "head": merged}
    records.build_on_adopted(
        ctx.run_id,
        name,
        head_sha=merged,
        value=value,
        event={**event, "samples": list(applied.samples), "value": value},
    )
    _make_champion(ctx, name, merged)
    notes.append(
        f"applied the run's best {head[:12]} onto {who}'s commit {adopted[:12]} as {merged[:12]}; "
        f"re-measured there: {metric} = {value:.6g}"
    )
    return Lineage(builds_on=True, value=value)

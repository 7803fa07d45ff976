"""What an evaluator may not change: HEAD, status and content digests of each checkout of an arm.

Validation and metric commands must leave tracked files and HEAD alone (docs/metric.md). Comparing a
snapshot taken before them with one taken after names the offending paths, at the cost of a status
scan per checkout rather than a hash of the whole tree. On a small tree, a walk in this process that
finds the tree as recorded before the commands ran stands in for that scan (ADR 0049): the snapshot is
then the one taken before, and anything the walk finds different is left to git as before.
"""

from __future__ import annotations

import dataclasses
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING

from controller.services.execution.context import RunContext
from controller.workspace import treeprint

if TYPE_CHECKING:  # ``work`` holds snapshots of this module's kind
    from controller.services.execution.work import TurnWork

Snapshot = tuple[str, dict[str, str], dict[str, str | None]]


def clean_snapshot(ctx: RunContext) -> dict[str, Snapshot]:
    """What the champion arm must look like: at the champion heads, nothing changed."""
    return {comp.name: (ctx.champion_heads[comp.name], {}, {}) for comp in ctx.components}


def snapshot(
    ctx: RunContext, arm: str, listed: dict[str, list[str]] | None = None, work: TurnWork | None = None
) -> dict[str, Snapshot]:
    """HEAD, status and content digests of every checkout of ``arm``: what an evaluator may not change.
    With ``listed``, the same walk also lists each checkout's ignored entries into it. With ``work``
    (the candidate, after its commands): a checkout whose tree is as the policy check's walk recorded it
    is ``work.before``'s snapshot, with no walk of git's; the champion's, as its clean print has it."""
    out = {}
    for comp in ctx.components:
        co = ctx.checkout(arm, comp.name)
        if arm == "candidate" and work is not None and _candidate_unchanged(ctx, work, comp.name, listed):
            out[comp.name] = work.before[comp.name]
            continue
        if arm == "champion" and _champion_unchanged(ctx, comp.name):
            out[comp.name] = (ctx.champion_heads[comp.name], {}, {})
            continue
        if listed is None:
            status = co.status()
        else:
            status, listed[comp.name] = co.status_and_ignored()
        out[comp.name] = (co.head(), status, co.digest(status))
    return out


def mutations(before: Mapping[str, Snapshot], after: Mapping[str, Snapshot]) -> list[str]:
    found: list[str] = []
    for comp, (head, status, digest) in before.items():
        head2, status2, digest2 = after[comp]
        if head2 != head:
            found.append(f"{comp}: HEAD moved")
        for path in sorted(set(status) | set(status2)):
            if status.get(path) != status2.get(path) or digest.get(path) != digest2.get(path):
                found.append(f"{comp}/{path}")
    return found


def _candidate_unchanged(
    ctx: RunContext, work: TurnWork, component: str, listed: dict[str, list[str]] | None
) -> bool:
    """Whether the candidate's tree is as the policy check's walk left it but for the ignored entries
    the measurement's tidy removed (which ``git status`` does not report), so git would find what it
    found then. ``listed`` gets the ignored entries git would list now: the walk's that are still there,
    an entry the tidy removed included if the measurement made it again as what it was (a file, or a
    directory: a ``__pycache__/``); made again as another kind, git is asked."""
    recorded = work.prints.get(component)
    if recorded is None or component not in work.before:
        return False
    tidied = work.tidied.get(component, ())
    now = treeprint.holds(ctx.checkout("candidate", component).path, recorded, gone=tidied)
    if now is not None and listed is not None:
        for entry in tidied:
            key = now.entries.get(entry.rstrip("/"))
            if key is not None and stat.S_ISDIR(key[0]) != entry.endswith("/"):
                now = None
                break
    if now is None:
        ctx.unprinted.add(("candidate", component))
        return False
    if listed is not None:
        entries = work.ignored_entries[component]
        listed[component] = [e for e in entries if e.rstrip("/") in now.entries]
    return True


def _champion_unchanged(ctx: RunContext, component: str) -> bool:
    """Whether the champion's copy is as a check found it clean at the champion's head (its print)."""
    head = ctx.champion_heads[component]
    known = ctx.champion_prints.get(component)
    if known is None or known.head != head or not known.clean or known.tree is None:
        return False
    if not treeprint.at(known.tree, head):
        return False
    now = treeprint.holds(ctx.checkout("champion", component).path, known.tree)
    if now is None:
        ctx.unprinted.add(("champion", component))
    ctx.champion_prints[component] = dataclasses.replace(known, tree=now, clean=now is not None)
    return now is not None

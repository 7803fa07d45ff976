"""The candidate's copy between turns: left as the commit plus its kept ignored files, and fingerprinted
where a turn ends, so the next turn needs no listing of its own before the agent.

The kept ignored files (``workspace.keep_ignored``, build caches) are inputs the agent may not write
(ADR 0007): the measurement's tidy compares them with a fingerprint taken before the agent
(``steps.scan_kept``). A turn lists them anyway where it ends: a rejected turn resets the copy and one
listing of its files outside the commit replaces ``git clean`` (``settle``, as ``champion_copy`` does for
the champion); a kept turn's walk after the measurement listed its ignored entries (``committed``). Those
kept entries are the next turn's fingerprint as long as nothing could have touched the copy since: the
candidate is still at the champion's head and no command ran (``Executor.commands_run``; a measurement
outside a turn, as when following an upstream, rebuilds the caches). Otherwise, and at a context's first
turn, the turn lists the copy itself. A stale fingerprint could only refuse a turn wrongly, never let a
change through: it holds the ctime and the inode, which no process sets back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from controller.services.execution.context import CopyPrint, RunContext
from controller.services.execution.work import TurnWork
from controller.workspace import ignored, trackedstatus, treeprint

# ``RunContext.unprinted``'s key for the candidate's print at a settle: only the names count there, so a
# measurement that writes into the copy does not make it useless, a tree too large for one does.
SETTLED = "candidate settled"


def settle(ctx: RunContext, component: str, head: str) -> None:
    """Leave ``component``'s candidate copy at commit ``head`` after a rejected turn: its tracked files
    put back, every file outside the commit removed but the kept ignored ones, which are fingerprinted.
    ``Checkout.restore`` with one listing in place of its ``git clean``; on a small tree the listing is
    the names the last settle's print does not have (``_outside``), and this one's is recorded."""
    co = ctx.checkout("candidate", component)
    co.reset(head)
    index_matches(ctx, component, head)
    keep = ctx.spec.workspace.keep_ignored
    entries = _outside(ctx, component, head)
    found = ignored.classify(co.path, ignored.others(co.path) if entries is None else entries, keep)
    ignored.remove(co.path, found.unkept)
    ctx.candidate_prints[component] = CopyPrint(head, found.kept, ctx.executor.commands_run)
    left = any(os.path.lexists(co.path / path.rstrip("/")) for path in found.unkept)  # not removable
    if left or (SETTLED, component) in ctx.unprinted:
        return
    tree = treeprint.take(co.path)
    if tree is None:  # too large (a kept node_modules, say): git lists it from now on
        ctx.unprinted.add((SETTLED, component))
    else:
        ctx.candidate_settled[component] = CopyPrint(head, found.kept, tree=tree, clean=True)


def _outside(ctx: RunContext, component: str, head: str) -> list[str] | None:
    """What ``git ls-files --others --directory`` would list in the candidate's copy just reset to
    ``head``, from the print the last settle took there (``ADR 0049``): that copy was the commit plus
    its kept files, and the reset put the commit back, so what is outside it now is the names the print
    does not have, plus the kept files it had (still kept, fingerprinted again). None (ask git) without
    such a print, or when a kept file became a directory (git would list what is in it instead)."""
    last = ctx.candidate_settled.pop(component, None)
    if last is None or last.tree is None or last.head != head or not treeprint.at(last.tree, head):
        return None
    root = ctx.checkout("candidate", component).path
    new = treeprint.added(root, last.tree)
    if new is None or any(
        os.path.isdir(root / path) and not os.path.islink(root / path) for path in last.kept
    ):
        return None
    return [*new, *last.kept]


def committed(ctx: RunContext, work: TurnWork, heads: Mapping[str, str]) -> None:
    """After ``work``'s change was committed at ``heads``: the candidate's kept ignored files, from the
    walk after the measurement (a commit changes no file), are the next turn's fingerprint. Nothing
    is removed: the next measurement's tidy drops the caches nobody keeps, as it always did."""
    if work.ignored_after is None:
        return
    keep = ctx.spec.workspace.keep_ignored
    for component, entries in work.ignored_after.items():
        root = ctx.checkout("candidate", component).path
        kept = ignored.classify(root, entries, keep).kept
        ctx.candidate_prints[component] = CopyPrint(heads[component], kept, work.listed_at)


def kept_before(ctx: RunContext, component: str) -> dict[str, ignored.Fingerprint]:
    """The fingerprints of ``component``'s kept ignored files before the agent runs: from the last
    turn's ``settle`` when nothing touched the copy since, else from a listing of the copy now."""
    keep = ctx.spec.workspace.keep_ignored
    known = ctx.candidate_prints.pop(component, None)  # one turn's: the agent is about to run
    if not keep:
        return {}
    fresh = known is not None and known.commands == ctx.executor.commands_run
    if fresh and known is not None and known.head == ctx.champion_heads[component]:
        return dict(known.kept)
    return ignored.scan(ctx.checkout("candidate", component).path, keep).kept


def index_matches(ctx: RunContext, component: str, head: str) -> None:
    """Record ``component``'s candidate index as one that matches commit ``head`` (after crucible's reset
    or commit there, or a status walk that found nothing staged), if ``trackedstatus`` reads it: the next
    policy check may then read the agent's change in this process (``RunContext.clean_indexes``)."""
    checksum = trackedstatus.index_checksum(ctx.checkout("candidate", component).path)
    if checksum is None:
        ctx.clean_indexes.pop(component, None)
    else:
        ctx.clean_indexes[component] = (head, checksum)

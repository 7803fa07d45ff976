"""The champion's copy between turns: what crucible leaves there, and what the agent must leave (issue 21).

The champion arm is measured beside each candidate, so an unsandboxed agent that writes into it steers
the comparison, and a write that stays there steers every later turn. A change to a tracked or an
untracked file shows in ``git status``; a planted *ignored* file does not, yet the measurement may read
it: a build output with a future mtime so the build skips it, a file in a kept cache
(``workspace.keep_ignored``), a stale ``__pycache__`` entry.

So the copy gets a fingerprint each time crucible leaves it for the next agent (``settle``: at the end of
every turn, after the champion's own measurement rebuilt its caches, and once before the first turn a
context plays): the copy is made the champion commit plus only its kept ignored files, and those are
fingerprinted (``ignored.Fingerprint``: ctime and inode included, which a process cannot forge). After
the agent (``repair``), the status walk the check runs anyway lists the ignored entries too (the same
walk, ``--ignored=matching``): any untracked or unkept ignored entry, any kept file whose fingerprint
moved, a changed tracked file or a moved HEAD is that turn's policy violation, and the copy is restored
at once (a changed kept file is deleted: the next measurement rebuilds it), so the measurement that
follows and every later turn see the champion as it is. Beyond that one walk per component the check
costs an ``lstat`` per kept ignored file; ``settle`` lists the copy's other files in place of the
``git clean`` it replaces.

On a small tree (``treeprint.MAX_ENTRIES``) the copy's whole working tree is recorded too (``CopyPrint.
tree``), and once a git walk found the copy clean with the tree as recorded (``CopyPrint.clean``), a walk
in this process that finds it unchanged stands in for git's (ADR 0049): in ``repair``, in ``settle``
after a rejected turn (nothing to list) and in ``move`` (the walk before the checkout proves the copy
clean, the one after it that only the commit's changed paths differ: no listing). Whatever such a walk
finds different goes through git as before, so what is reported, restored and kept is the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from controller.services.execution.context import CopyPrint, RunContext
from controller.workspace import ignored, treecopy, treeprint


def settle(ctx: RunContext, component: str, head: str) -> None:
    """Leave ``component``'s champion copy, at commit ``head``, for the next agent: every file outside
    the commit removed but the kept ignored ones (as ``git clean -ffdx -e <keep>`` does, in one
    listing), and those fingerprinted for ``repair``. Run where the copy last changed: after a turn's
    measurement, once the copy is restored or moved to the new champion. A clean copy whose tree did
    not change since it was recorded has nothing to remove and needs no listing."""
    known = _clean_print(ctx, component, head)
    if known is not None and known.tree is not None:
        now = treeprint.holds(ctx.checkout("champion", component).path, known.tree)
        if now is not None:
            ctx.champion_prints[component] = dataclasses.replace(known, tree=now)
            return
    _list(ctx, component, head)


def move(ctx: RunContext, component: str, new: str, changed: Sequence[str] | None) -> None:
    """Move ``component``'s champion copy to ``new``, the commit a kept turn made on its head, touching
    only the files that differ, then ``settle`` it. ``changed``: the paths the kept commit changed (the
    candidate's, as committed), None if not known. A clean, unchanged copy (a walk before the checkout)
    is the old commit plus its kept files, so after the checkout it is the new commit plus those kept
    files no changed path overwrote; a walk after it checks that nothing but ``changed`` differs, and
    its print is the copy's next. Otherwise it is listed as ``settle`` lists it."""
    co = ctx.checkout("champion", component)
    old = ctx.champion_heads[component]
    if new == old:
        settle(ctx, component, new)
        return
    known = _clean_print(ctx, component, old) if changed is not None else None
    before = None if known is None or known.tree is None else treeprint.holds(co.path, known.tree)
    copied = None
    clean = ctx.clean_indexes.get(component)
    if before is not None and clean is not None and clean[0] == new:
        copied = treecopy.advance(co.path, ctx.checkout("candidate", component).path, clean[1], new)
    if copied is None:
        co.advance(new)
    if known is not None and before is not None and changed is not None:
        paths = frozenset((*changed, *(copied or ())))
        after = treeprint.holds(co.path, before, changed=[*paths, treeprint.INDEX], head=new)
        if after is not None:
            kept = {p: f for p, f in known.kept.items() if p not in paths}
            ctx.champion_prints[component] = CopyPrint(new, kept, tree=after, clean=True)
            return
    _list(ctx, component, new)


def _clean_print(ctx: RunContext, component: str, head: str) -> CopyPrint | None:
    """The champion copy's print at ``head`` if a check proved its recorded tree clean."""
    known = ctx.champion_prints.get(component)
    if known is None or known.head != head or not known.clean or known.tree is None:
        return None
    return known if treeprint.at(known.tree, head) else None


def _list(ctx: RunContext, component: str, head: str) -> None:
    """``settle`` with git: the copy's files outside the commit listed, the unkept ones removed, the
    tree recorded (not yet proved clean: a listing does not look at tracked files)."""
    co = ctx.checkout("champion", component)
    found = ignored.classify(co.path, ignored.others(co.path), ctx.spec.workspace.keep_ignored)
    ignored.remove(co.path, found.unkept)
    tree = None if ("champion", component) in ctx.unprinted else treeprint.take(co.path)
    if tree is None:  # too large, or unreadable: git's from now on
        ctx.unprinted.add(("champion", component))
    ctx.champion_prints[component] = CopyPrint(head, found.kept, tree=tree)


def settle_once(ctx: RunContext) -> None:
    """Fingerprint each champion copy this context has not fingerprinted at the champion's current head
    (the first turn after it was built, or after the champion moved without a turn: a round taken over, a
    rebase): before the agent runs, never after."""
    for comp in ctx.components:
        known = ctx.champion_prints.get(comp.name)
        if known is None or known.head != ctx.champion_heads[comp.name]:
            settle(ctx, comp.name, ctx.champion_heads[comp.name])


def repair(ctx: RunContext, component: str) -> list[str] | None:
    """``component``'s champion copy as the agent left it, against its fingerprint: each change named (at
    most ten) and undone. Returns one violation if the agent changed it; none if it did not, and the
    copy is then exactly what ``settle`` left (the commit, no untracked or unkept ignored entry, the
    kept files as fingerprinted), so the measurement's tidy has nothing to remove there
    (``steps.measured_tree_only``); None if there is no copy to look at. Call ``ctx.checkout`` for it
    first: this runs beside the candidate's check, in another thread."""
    keep = ctx.spec.workspace.keep_ignored
    co = ctx.checkout("champion", component)
    if not (co.path / ".git").exists():  # no champion copy in this process (nothing to change)
        return None
    head = ctx.champion_heads[component]
    known = ctx.champion_prints.get(component)
    tree = known.tree if known is not None and known.head == head else None
    now = None if tree is None or not treeprint.at(tree, head) else treeprint.holds(co.path, tree)
    if now is not None and known is not None and known.clean:
        ctx.champion_prints[component] = dataclasses.replace(known, tree=now)
        return []  # unchanged since a check found it clean: git would find it clean again
    moved = co.head() != head
    status, ignored_entries = co.status_and_ignored()
    tracked = sorted(p for p, code in status.items() if code != "??")
    untracked = [p for p, code in status.items() if code == "??"]
    found = ignored.classify(co.path, untracked + ignored_entries, keep)
    kept_changes = ignored.changed(known.kept, found.kept) if known and known.head == head else []
    hidden = set(ignored_entries)
    paths = tracked + [f"{p} (ignored)" if p in hidden else p for p in sorted(found.unkept)]
    paths += [f"{p} (ignored, kept)" for p in kept_changes]
    if not moved and not paths:
        if known is not None and known.head == head:
            # The tree was as recorded before git's walk (``now``) and is still after it, but for the
            # index, which ``git status`` rewrites: the tree git proved clean is recorded, proved so.
            after = None if now is None else treeprint.holds(co.path, now, changed=[treeprint.INDEX])
            ctx.champion_prints[component] = dataclasses.replace(known, tree=after, clean=after is not None)
        return []
    name = f"{component}/" if ctx.layout.composite else ""
    what = ["HEAD moved"] if moved else [f"{name}{p}" for p in paths[:10]]
    co.restore(head, keep)
    ignored.remove(co.path, kept_changes)  # cannot be undone: the next measurement rebuilds them
    if known is not None:
        unchanged = {p: f for p, f in known.kept.items() if p not in set(kept_changes)}
        ctx.champion_prints[component] = CopyPrint(head, unchanged)
    return [f"the agent changed the champion's copy (restored): {', '.join(what)}"]

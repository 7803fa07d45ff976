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
"""

from __future__ import annotations

from controller.services.execution.context import CopyPrint, RunContext
from controller.workspace import ignored


def settle(ctx: RunContext, component: str, head: str) -> None:
    """Leave ``component``'s champion copy, at commit ``head``, for the next agent: every file outside
    the commit removed but the kept ignored ones (as ``git clean -ffdx -e <keep>`` does, in one
    listing), and those fingerprinted for ``repair``. Run where the copy last changed: after a turn's
    measurement, once the copy is restored or moved to the new champion."""
    co = ctx.checkout("champion", component)
    found = ignored.classify(co.path, ignored.others(co.path), ctx.spec.workspace.keep_ignored)
    ignored.remove(co.path, found.unkept)
    ctx.champion_prints[component] = CopyPrint(head, found.kept)


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
    moved = co.head() != head
    status, ignored_entries = co.status_and_ignored()
    tracked = sorted(p for p, code in status.items() if code != "??")
    untracked = [p for p, code in status.items() if code == "??"]
    now = ignored.classify(co.path, untracked + ignored_entries, keep)
    known = ctx.champion_prints.get(component)
    kept_changes = ignored.changed(known.kept, now.kept) if known and known.head == head else []
    hidden = set(ignored_entries)
    paths = tracked + [f"{p} (ignored)" if p in hidden else p for p in sorted(now.unkept)]
    paths += [f"{p} (ignored, kept)" for p in kept_changes]
    if not moved and not paths:
        return []
    name = f"{component}/" if ctx.layout.composite else ""
    what = ["HEAD moved"] if moved else [f"{name}{p}" for p in paths[:10]]
    co.restore(head, keep)
    ignored.remove(co.path, kept_changes)  # cannot be undone: the next measurement rebuilds them
    if known is not None:
        unchanged = {p: f for p, f in known.kept.items() if p not in set(kept_changes)}
        ctx.champion_prints[component] = CopyPrint(head, unchanged)
    return [f"the agent changed the champion's copy (restored): {', '.join(what)}"]

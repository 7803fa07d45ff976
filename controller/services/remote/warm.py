"""A warm hypothesis pod's run context, kept from one hypothesis of its round to the next (ADR-0047).

ADR-0040 measured where a warm pod's hypothesis spends its time: 0.3-0.43 s of each went to building
its ``RunContext`` afresh (``context`` in the pod's log), mostly restoring both arms' checkouts to the
champion with every ignored file removed, and, in the turn, fingerprinting the champion's copy again
before the agent. A loop pod (N = 1) does that once per round and keeps the context between turns; a
warm pod now does the same between the hypotheses it is handed, and refreshes only what changes:

- **the ledger**: each hypothesis comes with its own token (ADR-0034), so with its own HTTP ledger;
  the context's is swapped (``dataclasses.replace`` shares the checkouts, the copies' fingerprints,
  the executor and the champion with the context it copies);
- **the champion**, when another pod's hypothesis was kept since: both arms are restored to the new
  heads (``RunContext.ensure_arm``: the commit, every file outside it removed but ``keep_ignored``) and
  the champion moves; the fingerprints taken at the old head are then re-taken by their owners, who
  compare heads before they trust one (``champion_copy.settle_once``, ``candidate_copy.kept_before``).

Nothing else needs refreshing when the champion did not move: the previous hypothesis ended with
``settle_arms`` (the candidate reset and cleaned to the champion, the champion's copy cleaned and
fingerprinted), the state a loop pod starts its next turn from. A hypothesis that raised ended the pod
(ADR-0034, decision 5), so no context outlives a failure. What could differ within a slot's life and is
fixed in a context (the spec's text, the bases, the round) is the ``key``: another key builds afresh.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping

from controller.services.execution.context import RunContext
from controller.store.ledger import Ledger

__all__ = ["WarmContext"]


class WarmContext:
    """The context a warm pod's hypotheses share (module docstring). One per pod, used by one thread."""

    def __init__(self) -> None:
        self._ctx: RunContext | None = None
        self._key: Hashable = None
        self.built = 0  # contexts built: one per round, unless the key changed

    def context(
        self, key: Hashable, build: Callable[[], RunContext], ledger: Ledger, heads: Mapping[str, str]
    ) -> RunContext:
        """The context for a hypothesis with ``ledger`` starting from the champion at ``heads``:
        ``build()`` (which must use both) the first time and whenever ``key`` differs from the last."""
        if self._ctx is None or key != self._key:
            self._ctx, self._key = build(), key
            self.built += 1
            return self._ctx
        ctx = dataclasses.replace(self._ctx, ledger=ledger)
        if dict(ctx.champion_heads) != dict(heads):
            for arm in ("candidate", "champion"):
                ctx.ensure_arm(arm, heads)
            ctx.champion.move(heads)
        self._ctx = ctx
        return ctx

    def forget(self) -> None:
        """The next hypothesis builds its context afresh: the last one stopped where its arms may be
        anything (its token was refused mid-way, ADR-0051)."""
        self._ctx, self._key = None, None

"""Speculative turns of parallel hypotheses, simulated: the timing part of ``bench/decisions.py --pods-walk``.

Today a turn of N hypotheses waits for the slowest of its N measurements before the next turn starts,
so three of the four warm pods idle while the fourth finishes. Speculation changes only the timing: a
slot (a warm pod) whose hypothesis ended starts one of the next turn's at once, against the champion as
it stands, while the turns before are still undecided. Turns are still decided in order, each when its
N hypotheses ended, by the same functions (the looks, then Holm over the N, one kept at most). A turn
that keeps nothing leaves the champion where it was, so the next turn's hypotheses were proposed from
the same state and measured against the same champion as today: their samples and decisions are
today's. A keep voids every started (or finished) hypothesis of the later turns, whose slot time is
lost, and those turns are proposed again from the new champion.

The walk here is an event simulation of one arm: N slots, each running one hypothesis at a time for its
fixed overhead plus its pairs (the unit of time, as in the rest of ``--pods-walk``); a free slot takes
the first unstarted hypothesis in (turn, index) order, proposing a new turn when the started ones run
out, with the undecided turns before it counted as measured and not kept (what the knobs walk will see
if none of them keeps). Two choices the design leaves open are parameters (``Speculation``):

- ``depth``: how many turns a slot may start beyond the oldest undecided one (0 is today's rule, None
  unlimited: turn t + 3 can start while t waits for its slowest hypothesis);
- ``cancel``: whether a keep stops the void hypotheses in flight (a signal from the controller to the
  pods, reaching them ``latency`` pairs later) or lets them run out (their reports discarded), the slot
  staying busy meanwhile.

What the simulation leaves out: the controller's own time to decide a turn and hand out work (part of
the fixed overhead at best), and anything a proposal costs (the knobs walk's are free; an agent's are
not, and an agent told about the undecided turns would propose differently from one that is not).

The decisions are the caller's: ``measure`` gives the decided look of a hypothesis from its turn, index,
the keeps before it and its proposal, and must draw its samples from those alone, so that the same
hypothesis has the same samples however the slots were timed. ``bench/decisions.py`` then checks that
every speculative arm decided exactly what the same walk without speculation decided.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.engine.knobs import KnobProposer, Proposal
from controller.stats.holm import Contender, choose
from controller.stats.sequential import Look

# (turn, index, keeps decided before the hypothesis was proposed, the proposal) -> its decided look.
Measure = Callable[[int, int, int, Proposal], Look]
# One decided turn as the walk records it: its number, each hypothesis's (knob key, new value, pairs),
# and the kept index.
Decided = tuple[int, tuple[tuple[str, Any, int], ...], int | None]


@dataclass(frozen=True)
class Speculation:
    """How a speculative arm runs: ``depth`` turns ahead of the oldest undecided one at most (0: no
    speculation, today's rule; None: unlimited); at a keep, ``cancel`` the void hypotheses in flight
    (each stopping ``latency`` pairs later, or at its end if sooner) or let them run out; and each
    hypothesis's fixed ``overhead`` in pairs (a pod's fetch, context and report, paid per hypothesis
    whatever the rule)."""

    depth: int | None
    cancel: bool = True
    latency: float = 0.0
    overhead: float = 0.0

    @property
    def name(self) -> str:
        if self.depth == 0:
            how = "no speculation (today's rule)"
        else:
            ahead = "unlimited" if self.depth is None else f"{self.depth} turn{'s' * (self.depth > 1)} ahead"
            stop = (
                "run out"
                if not self.cancel
                else f"cancel {self.latency:g} pair late"
                if self.latency
                else "cancel"
            )
            how = f"speculative, {ahead}, {stop} at a keep"
        return f"overhead {self.overhead:g}, {how}"


@dataclass
class ArmResult:
    """What one arm did: ``wall`` pairs until its last turn was decided, the bench's counts, the slot
    time spent on hypotheses that were decided (``busy``) and on hypotheses a keep voided (``void``),
    and the decided turns in order (``decided``), for the equality check."""

    wall: float = 0.0
    kept_true: int = 0
    kept_null: int = 0
    tried_null: int = 0
    busy: float = 0.0
    void: float = 0.0
    decided: list[Decided] = field(default_factory=list)


@dataclass
class _Hypothesis:
    index: int
    proposal: Proposal
    look: Look
    slot: int
    start: float
    end: float


@dataclass
class _Turn:
    number: int
    keeps: int  # keeps decided when it was proposed: part of its samples' key
    proposals: list[Proposal]
    started: list[_Hypothesis] = field(default_factory=list)

    def decidable(self, now: float) -> bool:
        return len(self.started) == len(self.proposals) and all(h.end <= now for h in self.started)


def speculative_arm(
    proposer: KnobProposer,
    start: Mapping[tuple[str, str], Any],
    is_true: Callable[[Proposal], bool],
    measure: Measure,
    n: int,
    turns: int,
    speculation: Speculation,
    alpha: float = 0.05,
) -> ArmResult:
    """One arm of ``turns`` turns of ``n`` hypotheses on ``n`` slots, timed as ``speculation`` says and
    decided as the loop decides (Holm over each turn's looks at ``alpha``). ``is_true`` tells a true
    improvement from any other change, for the bench's counts."""
    out = ArmResult()
    current = dict(start)
    history: list[tuple[Proposal, bool]] = []
    pending: list[_Turn] = []  # the undecided turns, oldest first: numbers len(out.decided), ...
    keeps = 0
    free_at = [0.0] * n
    now = 0.0

    def next_turn() -> _Turn | None:
        """The turn whose hypothesis a free slot starts next, proposing a new one if allowed."""
        for turn in pending:
            if len(turn.started) < len(turn.proposals):
                return turn
        number = len(out.decided) + len(pending)
        if number >= turns or (speculation.depth is not None and len(pending) > speculation.depth):
            return None
        walked = history + [(p, False) for turn in pending for p in turn.proposals]
        proposals = proposer.next_proposals(current, walked, n)
        if not proposals:
            return None
        pending.append(_Turn(number, keeps, proposals))
        return pending[-1]

    while len(out.decided) < turns:
        while pending and pending[0].decidable(now) and len(out.decided) < turns:
            turn = pending.pop(0)
            looks = [h.look for h in turn.started]
            kept = choose([Contender(i, d.verdict) for i, d in enumerate(looks)], alpha, len(looks)).kept
            out.decided.append(
                (
                    turn.number,
                    tuple((h.proposal.knob.key, h.proposal.new, h.look.pairs) for h in turn.started),
                    kept,
                )
            )
            out.busy += sum(h.end - h.start for h in turn.started)
            out.tried_null += sum(not is_true(p) for p in turn.proposals)
            history += [(p, i == kept) for i, p in enumerate(turn.proposals)]
            if kept is None:
                continue
            chosen = turn.proposals[kept]
            current[chosen.knob.ident] = chosen.new
            keeps += 1
            out.kept_true += is_true(chosen)
            out.kept_null += not is_true(chosen)
            for void in (h for later in pending for h in later.started):
                stop = now + speculation.latency
                if speculation.cancel and void.end > stop:
                    out.void += stop - void.start
                    free_at[void.slot] = stop
                else:
                    out.void += void.end - void.start
            pending.clear()
        if len(out.decided) == turns:
            break
        for slot in range(n):
            if free_at[slot] > now:
                continue
            taken = next_turn()
            if taken is None:
                break
            index = len(taken.started)
            proposal = taken.proposals[index]
            look = measure(taken.number, index, taken.keeps, proposal)
            end = now + speculation.overhead + look.pairs
            taken.started.append(_Hypothesis(index, proposal, look, slot, now, end))
            free_at[slot] = end
        later = [t for t in free_at if t > now]
        if not later:
            break  # the walk ran out of proposals and nothing is in flight
        now = min(later)
    out.wall = now
    return out

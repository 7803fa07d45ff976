"""The built-in deterministic proposer, ``builtin = "knobs"`` (docs/spec.md, docs/agent.md).

Instead of running an agent, a run may walk a declared surface of configuration knobs, one
knob changed per turn. The walk must be reproducible: the same seed and the same keep/reject
outcomes replay the same proposals, and ``resume`` after a crash must propose exactly what the
dead controller would have. So the proposer keeps no state of its own: ``next_proposal`` is a
pure function of the seed (through the knob order and step directions ``__init__`` derives from
it), the current knob values, and the stored history of ``(proposal, kept)`` pairs.

The walk, from the current state (the tuple of all knob values):

* **Breadth before depth.** Each knob ranks its candidates by distance from its current value
  along the sorted candidate list (numbers are sorted; other candidates keep their declared
  order): one step in the knob's seed-chosen direction first, then one step the other way,
  then two steps, and so on. Rank 0 of every knob (in a seed-shuffled knob order) comes before
  rank 1 of any knob, so with three knobs the first three proposals touch three knobs.
* **No repeats.** A proposal is skipped when the state it would produce has already been
  measured in this run: the starting state, every state a proposal produced (kept or not),
  and the current state. This covers "a (knob, value) pair is never proposed twice from the
  same state" and also stops the walk from proposing to undo a kept change, or from re-measuring
  a state reached before by another route. After a kept proposal, the neighbourhood of the new
  state is explored afresh.
* **Exhaustion.** ``next_proposal`` returns None once every neighbour of the current state has
  been measured; the caller then stops the run with ``exhausted``. Every proposal adds a new
  state to a finite set, so a run proposes at most (number of states - 1) times, where the
  number of states is the product over knobs of (distinct candidates plus the starting value).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from controller.engine.knobfiles import Scalar, read_knob, write_knob

KnobId = tuple[str, str]
"""A knob's identity: (file relative to the workspace root, dotted key)."""

_Canon = tuple[bool, Scalar]
"""A value as the proposer compares it: 64 equals 64.0, but True does not equal 1."""

_State = tuple[_Canon, ...]


@dataclass(frozen=True)
class Knob:
    """One declared knob: a scalar at ``key`` in ``file`` and the values it may take."""

    file: str
    key: str
    candidates: tuple[Scalar, ...]

    @property
    def ident(self) -> KnobId:
        return (self.file, self.key)


@dataclass(frozen=True)
class Proposal:
    """One turn's change: set ``knob`` from ``old`` to ``new``; ``hypothesis`` describes it."""

    knob: Knob
    old: Scalar
    new: Scalar
    hypothesis: str


def describe(knob: Knob, old: Scalar, new: Scalar) -> str:
    """The hypothesis line of a proposal: ``set cache.size_mb in config/cache.toml: 64 -> 128``."""
    return f"set {knob.key} in {knob.file}: {_show(old)} -> {_show(new)}"


class KnobProposer:
    """Proposes one knob change per turn; see the module docstring for the walk."""

    def __init__(self, knobs: Sequence[Knob], seed: int) -> None:
        ids = [knob.ident for knob in knobs]
        duplicates = sorted({ident for ident in ids if ids.count(ident) > 1})
        if duplicates:
            raise ValueError(f"knobs declared twice: {duplicates}")
        self._knobs = tuple(knobs)
        self._index = {ident: i for i, ident in enumerate(ids)}
        self._candidates = tuple(_distinct(knob.candidates) for knob in knobs)
        rng = random.Random(seed)
        order = list(range(len(self._knobs)))
        rng.shuffle(order)
        self._order = tuple(order)
        self._up_first = tuple(rng.random() < 0.5 for _ in self._knobs)

    def next_proposal(
        self, current: Mapping[KnobId, Scalar], history: Sequence[tuple[Proposal, bool]]
    ) -> Proposal | None:
        """The next change to try from ``current``, or None when its neighbourhood is exhausted.

        ``current`` maps every knob's (file, key) to its value in the champion's state;
        ``history`` holds every earlier proposal of the run in order, with whether it was kept.
        Proposals are matched to knobs by (file, key), so a history rebuilt from storage works.
        Raises ValueError if ``current`` lacks a knob.
        """
        values = self._current_values(current)
        state = tuple(_canon(value) for value in values)
        measured = self._measured_states(state, history)
        ladders = [self._ladder(i, values[i]) for i in range(len(self._knobs))]
        depth = max((len(ladder) for ladder in ladders), default=0)
        for rank, i in itertools.product(range(depth), self._order):
            if rank >= len(ladders[i]):
                continue
            new = ladders[i][rank]
            if _with(state, i, _canon(new)) not in measured:
                knob = self._knobs[i]
                return Proposal(knob, values[i], new, describe(knob, values[i], new))
        return None

    def next_proposals(
        self, current: Mapping[KnobId, Scalar], history: Sequence[tuple[Proposal, bool]], count: int
    ) -> list[Proposal]:
        """Up to ``count`` distinct changes for one turn's parallel hypotheses (index 0 first).

        Each is what ``next_proposal`` would give if the ones before it had been measured and not
        kept, so they are distinct states, the first equals the single proposal, and the walk stays a
        pure function of the seed and the history (a resume proposes the same ones). Fewer than
        ``count`` (possibly none) when the neighbourhood runs out.
        """
        walked = list(history)
        found: list[Proposal] = []
        while len(found) < count:
            proposal = self.next_proposal(current, walked)
            if proposal is None:
                break
            found.append(proposal)
            walked.append((proposal, False))
        return found

    def _current_values(self, current: Mapping[KnobId, Scalar]) -> list[Scalar]:
        missing = [knob.ident for knob in self._knobs if knob.ident not in current]
        if missing:
            raise ValueError(f"no current value for knobs {missing}")
        return [current[knob.ident] for knob in self._knobs]

    def _measured_states(self, current: _State, history: Sequence[tuple[Proposal, bool]]) -> set[_State]:
        """Every state measured so far: the start, each proposal's result, and ``current``."""
        steps = [(self._index.get(p.knob.ident), p, kept) for p, kept in history]
        start = list(current)
        for i, proposal, kept in reversed(steps):
            if i is not None and kept:
                start[i] = _canon(proposal.old)
        state: _State = tuple(start)
        measured = {state, current}
        for i, proposal, kept in steps:
            if i is None:
                continue
            result = _with(state, i, _canon(proposal.new))
            measured.add(result)
            if kept:
                state = result
        return measured

    def _ladder(self, i: int, value: Scalar) -> list[Scalar]:
        """Knob ``i``'s candidates other than ``value``, nearest first, alternating directions."""
        candidates = self._candidates[i]
        if _is_number(value) and all(_is_number(c) for c in candidates):
            ordered = sorted(candidates, key=float)
            up = [c for c in ordered if float(c) > float(value)]
            down = [c for c in reversed(ordered) if float(c) < float(value)]
        else:
            keys = [_canon(c) for c in candidates]
            pos = keys.index(_canon(value)) if _canon(value) in keys else -1
            up = list(candidates[pos + 1 :])
            down = list(reversed(candidates[:pos])) if pos >= 0 else []
        first, second = (up, down) if self._up_first[i] else (down, up)
        pairs = itertools.zip_longest(first, second)
        return [c for pair in pairs for c in pair if c is not None]


def apply(proposal: Proposal, root: Path) -> None:
    """Write the proposal's new value into ``root / proposal.knob.file``."""
    write_knob(root / proposal.knob.file, proposal.knob.key, proposal.new)


def current_values(knobs: Sequence[Knob], root: Path) -> dict[KnobId, Scalar]:
    """Read every knob's value under ``root``: the ``current`` argument of ``next_proposal``."""
    return {knob.ident: read_knob(root / knob.file, knob.key) for knob in knobs}


def _canon(value: Scalar) -> _Canon:
    return (isinstance(value, bool), value)


def _is_number(value: Scalar) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _distinct(values: Sequence[Scalar]) -> tuple[Scalar, ...]:
    seen: set[_Canon] = set()
    kept: list[Scalar] = []
    for value in values:
        if _canon(value) not in seen:
            seen.add(_canon(value))
            kept.append(value)
    return tuple(kept)


def _with(state: _State, i: int, value: _Canon) -> _State:
    return (*state[:i], value, *state[i + 1 :])


def _show(value: Scalar) -> str:
    if isinstance(value, bool | str):
        return json.dumps(value)
    return repr(value)

"""The built-in knobs proposer: deterministic, breadth first, finite, replayable from history."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.engine.knobfiles import Scalar, read_knob
from controller.engine.knobs import Knob, KnobId, KnobProposer, Proposal, apply, current_values, describe

SIZE = Knob("config/cache.toml", "cache.size_mb", (64, 128, 256, 512, 1024))
THREADS = Knob("config/app.yaml", "workers.threads", (1, 2, 4, 8))
POLICY = Knob("config/app.json", "cache.policy", ("lru", "lfu", "fifo"))
KNOBS = (SIZE, THREADS, POLICY)
START: dict[KnobId, Scalar] = {SIZE.ident: 256, THREADS.ident: 2, POLICY.ident: "lfu"}

History = list[tuple[Proposal, bool]]
Keep = Callable[[dict[KnobId, Scalar], Proposal], bool]


def simulate(proposer: KnobProposer, start: dict[KnobId, Scalar], keep: Keep, limit: int = 500) -> History:
    """Drive the proposer to exhaustion as the engine would; fail if it runs past ``limit``."""
    current = dict(start)
    history: History = []
    while (proposal := proposer.next_proposal(current, history)) is not None:
        assert len(history) < limit, "the proposer did not exhaust"
        assert proposal.old == current[proposal.knob.ident]
        kept = keep(current, proposal)
        history.append((proposal, kept))
        if kept:
            current[proposal.knob.ident] = proposal.new
    return history


def reject_all(_current: dict[KnobId, Scalar], _proposal: Proposal) -> bool:
    return False


TARGET: dict[KnobId, Scalar] = {SIZE.ident: 1024, THREADS.ident: 8, POLICY.ident: "fifo"}


def cost(state: dict[KnobId, Scalar]) -> float:
    """A separable objective whose only optimum is TARGET."""
    size, threads = state[SIZE.ident], state[THREADS.ident]
    assert isinstance(size, int) and isinstance(threads, int)
    policy = ["lru", "lfu", "fifo"].index(str(state[POLICY.ident]))
    return abs(math.log2(size) - 10) + abs(math.log2(threads) - 3) + (2 - policy)


def keep_if_better(current: dict[KnobId, Scalar], proposal: Proposal) -> bool:
    return cost({**current, proposal.knob.ident: proposal.new}) < cost(current)


def moves(history: History) -> list[tuple[str, Scalar, Scalar]]:
    return [(p.knob.key, p.old, p.new) for p, _ in history]


def test_same_seed_and_outcomes_replay_the_same_sequence() -> None:
    first = simulate(KnobProposer(KNOBS, seed=7), START, keep_if_better)
    second = simulate(KnobProposer(KNOBS, seed=7), START, keep_if_better)
    assert first == second
    assert len(first) > 3


def test_different_seeds_give_different_orders() -> None:
    orders = {tuple(moves(simulate(KnobProposer(KNOBS, seed), START, reject_all))) for seed in range(10)}
    assert len(orders) > 1
    assert moves(simulate(KnobProposer(KNOBS, 1), START, reject_all)) != moves(
        simulate(KnobProposer(KNOBS, 2), START, reject_all)
    )


@pytest.mark.parametrize("seed", range(6))
def test_breadth_before_depth(seed: int) -> None:
    history = simulate(KnobProposer(KNOBS, seed), START, reject_all)
    assert len({p.knob.ident for p, _ in history[:3]}) == 3
    # Every knob's nearest neighbours come before anything two steps away.
    first_six = {(p.knob.key, p.new) for p, _ in history[:6]}
    assert first_six == {
        ("cache.size_mb", 128),
        ("cache.size_mb", 512),
        ("workers.threads", 1),
        ("workers.threads", 4),
        ("cache.policy", "lru"),
        ("cache.policy", "fifo"),
    }
    steps = [abs(p.knob.candidates.index(p.new) - p.knob.candidates.index(p.old)) for p, _ in history]
    assert steps == [1] * 6 + [2] * 3


def test_all_rejected_tries_every_other_value_once_then_stops() -> None:
    history = simulate(KnobProposer(KNOBS, seed=3), START, reject_all)
    pairs = [(p.knob.ident, p.new) for p, _ in history]
    expected = {(k.ident, v) for k in KNOBS for v in k.candidates if v != START[k.ident]}
    assert len(pairs) == len(set(pairs)) == len(expected) == 4 + 3 + 2
    assert set(pairs) == expected
    assert all(p.old == START[p.knob.ident] for p, _ in history)


@pytest.mark.parametrize("seed", range(5))
def test_hill_climb_exhausts_within_the_state_space_at_the_optimum(seed: int) -> None:
    history = simulate(KnobProposer(KNOBS, seed), START, keep_if_better)
    states = 5 * 4 * 3
    assert len(history) < states
    final = dict(START)
    for proposal, kept in history:
        if kept:
            final[proposal.knob.ident] = proposal.new
    assert final == TARGET
    assert any(kept for _, kept in history)


def test_never_proposes_a_measured_state_again() -> None:
    history = simulate(KnobProposer(KNOBS, seed=11), START, keep_if_better)
    current = dict(START)
    seen = [tuple(sorted(current.items()))]
    for proposal, kept in history:
        result = {**current, proposal.knob.ident: proposal.new}
        key = tuple(sorted(result.items()))
        assert key not in seen, f"re-measured {proposal.hypothesis}"
        seen.append(key)
        if kept:
            current = result


def test_after_a_keep_the_new_neighbourhood_is_explored_without_undoing_it() -> None:
    proposer = KnobProposer([SIZE], seed=0)
    current: dict[KnobId, Scalar] = {SIZE.ident: 256}
    first = proposer.next_proposal(current, [])
    assert first is not None and first.new in (128, 512)
    current[SIZE.ident] = first.new
    after = proposer.next_proposal(current, [(first, True)])
    assert after is not None
    assert after.old == first.new
    assert after.new != 256  # the state it came from was measured already
    assert abs(SIZE.candidates.index(after.new) - SIZE.candidates.index(first.new)) == 1


def test_resume_reproduces_every_next_proposal_from_stored_history() -> None:
    history = simulate(KnobProposer(KNOBS, seed=5), START, keep_if_better)
    current = dict(START)
    for step, (proposal, kept) in enumerate(history):
        fresh = KnobProposer(KNOBS, seed=5)  # a restarted controller
        assert fresh.next_proposal(dict(current), history[:step]) == proposal
        if kept:
            current[proposal.knob.ident] = proposal.new
    assert KnobProposer(KNOBS, seed=5).next_proposal(current, history) is None


def test_history_rebuilt_from_storage_matches_by_file_and_key() -> None:
    proposer = KnobProposer([SIZE], seed=2)
    first = proposer.next_proposal({SIZE.ident: 256}, [])
    assert first is not None
    # As loaded back from JSON: a Knob without candidates and numbers that became floats.
    stored = Proposal(Knob(SIZE.file, SIZE.key, ()), float(first.old), float(first.new), first.hypothesis)
    again = proposer.next_proposal({SIZE.ident: 256}, [(stored, False)])
    assert again is not None
    assert again.new != first.new


def test_value_outside_the_candidates_starts_from_the_nearest() -> None:
    proposer = KnobProposer([SIZE], seed=0)
    history = simulate(proposer, {SIZE.ident: 300}, reject_all)
    assert {p.new for p, _ in history[:2]} == {256, 512}
    assert len(history) == 5
    assert [p.new for p, _ in history[2:4]] in ([128, 1024], [1024, 128])


def test_non_numeric_candidates_keep_declared_order() -> None:
    history = simulate(KnobProposer([POLICY], seed=0), {POLICY.ident: "lru"}, reject_all)
    assert [p.new for p, _ in history] == ["lfu", "fifo"]
    unknown = simulate(KnobProposer([POLICY], seed=0), {POLICY.ident: "arc"}, reject_all)
    assert [p.new for p, _ in unknown] == ["lru", "lfu", "fifo"]


def test_bools_are_not_numbers_and_duplicates_collapse() -> None:
    flag = Knob("c.toml", "a.flag", (True, False, True))
    history = simulate(KnobProposer([flag], seed=0), {flag.ident: 1}, reject_all)
    assert sorted(p.new for p, _ in history) == [False, True]
    floats = Knob("c.toml", "a.ratio", (0.5, 1, 1.0, 2.0))
    history = simulate(KnobProposer([floats], seed=0), {floats.ident: 1}, reject_all)
    assert sorted(p.new for p, _ in history) == [0.5, 2.0]


def test_nothing_to_propose() -> None:
    assert KnobProposer([], seed=1).next_proposal({}, []) is None
    single = Knob("c.toml", "a", (3,))
    assert KnobProposer([single], seed=1).next_proposal({single.ident: 3}, []) is None


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        KnobProposer([SIZE, Knob(SIZE.file, SIZE.key, (1,))], seed=0)
    with pytest.raises(ValueError, match="no current value"):
        KnobProposer(KNOBS, seed=0).next_proposal({SIZE.ident: 64}, [])


def test_hypothesis_text() -> None:
    assert describe(SIZE, 64, 128) == "set cache.size_mb in config/cache.toml: 64 -> 128"
    assert describe(POLICY, "lru", "lfu") == 'set cache.policy in config/app.json: "lru" -> "lfu"'
    assert describe(Knob("f.yaml", "on", ()), True, False) == "set on in f.yaml: true -> false"
    proposal = KnobProposer([SIZE], seed=0).next_proposal({SIZE.ident: 64}, [])
    assert proposal is not None
    assert proposal.hypothesis == "set cache.size_mb in config/cache.toml: 64 -> 128"


def test_apply_and_current_values_use_the_knob_files(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "cache.toml").write_text("[cache]\nsize_mb = 256  # MB\n")
    (tmp_path / "config" / "app.yaml").write_text("workers:\n  threads: 2\n")
    (tmp_path / "config" / "app.json").write_text('{"cache": {"policy": "lfu"}}\n')
    current = current_values(KNOBS, tmp_path)
    assert current == START
    proposal = KnobProposer(KNOBS, seed=4).next_proposal(current, [])
    assert proposal is not None
    apply(proposal, tmp_path)
    assert read_knob(tmp_path / proposal.knob.file, proposal.knob.key) == proposal.new
    assert current_values(KNOBS, tmp_path) == {**START, proposal.knob.ident: proposal.new}


# --- parallel hypotheses ------------------------------------------------------------------------------


def test_parallel_proposals_are_distinct_and_the_first_is_the_single_proposal() -> None:
    proposer = KnobProposer(KNOBS, seed=3)
    single = proposer.next_proposal(START, [])
    several = proposer.next_proposals(START, [], 4)
    assert len(several) == 4 and several[0] == single
    states = {(p.knob.ident, p.new) for p in several}
    assert len(states) == 4
    # Breadth first still: the first three touch three different knobs.
    assert len({p.knob.ident for p in several[:3]}) == 3


def test_parallel_proposals_replay_from_history_and_stop_at_exhaustion() -> None:
    proposer = KnobProposer((POLICY,), seed=1)
    start: dict[KnobId, Scalar] = {POLICY.ident: "lfu"}
    first = proposer.next_proposals(start, [], 4)
    assert [p.new for p in first] == [
        p.new for p in KnobProposer((POLICY,), seed=1).next_proposals(start, [], 4)
    ]
    assert len(first) == 2  # lru and fifo are the only other values
    history = [(p, False) for p in first]
    assert proposer.next_proposals(start, history, 4) == []

"""``run_turn`` and ``play_turns`` called directly: every reason a single turn can end with, a
refinement round's turns and round 0's search through the one ``play_turns``, and the frozen round
environment (the champion moves through its own object; the driver's hooks are handed in).

The round engine is driven here without the run loop, the CLI or a server: a real git repository, a
real SQLite store (the ledger) and real shell commands without a sandbox, one turn at a time. The
reasons a parallel turn or a remote round adds (``superseded``, ``lost``) are decided elsewhere
(``hypotheses``, ``remote_rounds``) and tested there.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.config.units import Tolerance
from controller.domain.enums import Outcome, Reason, RunStatus, StopReason
from controller.engine.candidate import HISTORY_LIMIT
from controller.services.execution.baseline import run_baseline
from controller.services.execution.context import Hooks, RoundRule, RunContext
from controller.services.execution.liveness import Heartbeat
from controller.services.execution.loop import Search, budgets_of, run_loop
from controller.services.execution.play import Refinement, play_turns
from controller.services.execution.runs import create_run, open_context
from controller.services.execution.turn import run_turn
from controller.store.records import TurnRecord
from controller.store.store import Store
from tests.support.fixtures import migrated_sqlite_url
from tests.support.waiting import wait_until

BASE = """
objective = "unit-test the round engine"
turns = {turns}
[agent]
command = '''{agent}'''
timeout = {agent_timeout}
[sandbox]
mode = "none"
[metric]
command = '''{metric}'''
name = "m"
direction = "maximize"
samples = {samples}
warmups = 0
confidence = {confidence}
sequential = false
{extra}
[[component]]
name = "app"
repo = "{repo}"
base = "main"
mutable = ["src/**"]
"""

# The evaluator's scripts are committed outside ``mutable``: the agent may change only src/.
SCRIPTS = {
    "bench.sh": 'echo "METRIC m=$(cat src/value.txt)"\n',
    "guard.sh": 'g=1; [ -f src/guard.txt ] && g=$(cat src/guard.txt); echo "METRIC g=$g"\n',
    "check.sh": "grep -qx 10 src/value.txt\n",
    "tamper.sh": "grep -qx 10 src/value.txt || echo tampered >> README\n",
}
METRIC = "sh bench.sh"


@pytest.fixture
def stores() -> dict[str, Store]:
    """The store of each run ``engine`` opened, by run id: the round environment holds only the
    ledger, so a test that claims a lease (a port of the store) takes the store from here."""
    return {}


@pytest.fixture
def engine(
    tmp_path: Path, repo_factory: Callable[..., Path], stores: dict[str, Store]
) -> Iterator[Callable[..., RunContext]]:
    """A context opened on a fresh run whose baseline (value 10) is measured; its store closes after."""

    def make(
        agent: str,
        *,
        metric: str = METRIC,
        samples: int = 1,
        confidence: float = 0.0,
        extra: str = "",
        turns: int = 5,
        agent_timeout: float = 5,
        hooks: Hooks | None = None,
    ) -> RunContext:
        repo = repo_factory({"src/value.txt": "10\n", "README": "hello\n", **SCRIPTS})
        spec_path = tmp_path / "crucible.toml"
        text = BASE.format(
            agent=agent,
            metric=metric,
            samples=samples,
            confidence=confidence,
            extra=extra,
            repo=repo,
            turns=turns,
            agent_timeout=agent_timeout,
        )
        spec_path.write_text(text)
        spec = load_spec(spec_path)
        settings = Settings(home=tmp_path / "home", database_url=migrated_sqlite_url(tmp_path / "c.db"))
        store = Store.open(settings.database_url, upgrade=True)
        run_id = create_run(store, spec, text, spec_path)
        stores[run_id] = store
        ctx = open_context(settings, store, run_id, spec, environ={"PATH": "/usr/bin:/bin"}, hooks=hooks)
        assert run_baseline(ctx) is None
        return ctx

    yield make
    for store in stores.values():
        store.close()


CASES = [
    pytest.param("echo 11 > src/value.txt", {}, Reason.IMPROVED, id="improved"),
    pytest.param("echo 9 > src/value.txt", {}, Reason.NOT_IMPROVED, id="not_improved"),
    pytest.param(
        "echo 11 > src/value.txt", {"samples": 3, "confidence": 0.99}, Reason.NOT_SIGNIFICANT, id="not_sig"
    ),
    pytest.param(
        "echo 11 > src/value.txt; echo 5 > src/guard.txt",
        {
            "metric": "sh bench.sh; sh guard.sh",
            "extra": '[[metric.guard]]\nname = "g"\ndirection = "minimize"',
        },
        Reason.GUARD_REGRESSED,
        id="guard_regressed",
    ),
    pytest.param(
        "echo 11 > src/value.txt",
        {"extra": '[validation]\ncommand = "sh check.sh"\nretries = 0'},
        Reason.VALIDATION_FAILED,
        id="validation_failed",
    ),
    pytest.param("echo changed > README", {}, Reason.POLICY_VIOLATION, id="policy_violation"),
    pytest.param(
        "echo 11 > src/value.txt",
        {"metric": "sh bench.sh; sh tamper.sh"},
        Reason.EVALUATOR_MUTATED,
        id="evaluator_mutated",
    ),
    pytest.param("echo oops > src/value.txt", {}, Reason.METRIC_INVALID, id="metric_invalid"),
    pytest.param("exit 3", {}, Reason.AGENT_FAILED, id="agent_failed"),
    # 1 s, not the 5 s the other cases may take on a loaded machine: this case waits it out in full.
    pytest.param("sleep 30", {"agent_timeout": 1}, Reason.TIMEOUT, id="timeout"),
    pytest.param("true", {}, Reason.NO_DIFF, id="no_diff"),
]


@pytest.mark.parametrize(("agent", "options", "reason"), CASES)
def test_a_turn_ends_with_each_reason(
    engine: Callable[..., RunContext], agent: str, options: dict[str, object], reason: Reason
) -> None:
    ctx = engine(agent, **options)
    base = dict(ctx.champion_heads)
    record = run_turn(ctx, 1, 0, None)
    assert record.reason is reason, record.detail
    candidate = ctx.checkout("candidate", "app")
    if reason is Reason.IMPROVED:
        assert ctx.champion_heads != base
        assert record.commits == {"app": ctx.champion_heads["app"]}
        assert ctx.ledger.get_run(ctx.run_id).champion_value == 11.0
    else:
        # Not kept: the champion stands and the candidate is exactly at it again.
        assert ctx.champion_heads == base and record.commits == {}
        assert candidate.head() == base["app"] and candidate.status() == {}


def test_a_cancelled_turn_is_a_failure_and_leaves_the_champion(
    engine: Callable[..., RunContext], tmp_path: Path
) -> None:
    started = tmp_path / "agent-started"
    ctx = engine(f"echo 11 > src/value.txt; touch {started}; sleep 30")

    def cancel_once_started() -> None:
        wait_until(started.exists, what="the agent to start")
        ctx.executor.cancel.set()

    canceller = threading.Thread(target=cancel_once_started, daemon=True)
    canceller.start()
    record = run_turn(ctx, 1, 0, None)
    canceller.join()
    assert (record.reason, record.outcome) == (Reason.CANCELLED, Outcome.FAILED)
    assert ctx.ledger.get_run(ctx.run_id).champion_value == 10.0


def test_play_turns_stops_at_the_first_turn_that_holds_the_score(engine: Callable[..., RunContext]) -> None:
    # Turn 1 loses more than the hold allows, turn 2 holds (9.5 is within 1 of 10): the round keeps it.
    agent = 'if [ "$CRUCIBLE_TURN" = 1 ]; then echo 5; else echo 9.5; fi > src/value.txt'
    ctx = engine(agent)
    rule = RoundRule(hold=Tolerance(1.0, relative=False), first_published=10.0)
    played = play_turns(ctx, 1, Refinement(3), round_rule=rule, feedback=())
    assert played.kept and not played.cut_off
    turns = ctx.ledger.turn_snapshot(ctx.run_id, last=5).recent
    assert [(t.number, t.round, t.outcome) for t in turns] == [
        (1, 1, Outcome.REJECTED),
        (2, 1, Outcome.ACCEPTED),
    ]


def test_play_turns_without_a_keep_reports_the_last_detail(engine: Callable[..., RunContext]) -> None:
    ctx = engine("true")
    played = play_turns(ctx, 1, Refinement(2), round_rule=None, feedback=())
    assert not played.kept and not played.cut_off
    assert played.detail == "the agent changed nothing"


def test_play_turns_cut_off_by_a_cancel_says_so(engine: Callable[..., RunContext]) -> None:
    ctx = engine("echo 11 > src/value.txt")
    ctx.executor.cancel.set()
    assert play_turns(ctx, 1, Refinement(2), round_rule=None, feedback=()).cut_off
    assert list(ctx.ledger.turn_snapshot(ctx.run_id, last=5).recent) == []


def test_a_failure_bound_beyond_the_turns_read_each_turn_still_stops_the_run_at_it(
    engine: Callable[..., RunContext], stores: dict[str, Store]
) -> None:
    """The loop reads the last HISTORY_LIMIT + 1 turns each turn, not max_consecutive_failures of them
    (issue 23: no per-turn read that grows with the bound); a streak longer than that window is read
    back only while it lasts, and the run still stops exactly at the bound."""
    bound = HISTORY_LIMIT + 4
    ctx = engine("exit 3", extra=f"[budget]\nmax_consecutive_failures = {bound}", turns=bound + 5)
    ctx_turns = bound + 5

    result = run_loop(ctx, leases=stores[ctx.run_id])

    assert result.stop_reason is StopReason.CONSECUTIVE_FAILURES
    snapshot = ctx.ledger.turn_snapshot(ctx.run_id, last=ctx_turns)
    assert [t.reason for t in snapshot.recent] == [Reason.AGENT_FAILED] * bound


def test_run_loop_claims_a_lease_only_from_the_leases_it_is_given(engine: Callable[..., RunContext]) -> None:
    """The round environment holds no store: a loop that holds no lease and was given nowhere to
    claim one refuses, naming the run, before it touches the record."""
    ctx = engine("echo 11 > src/value.txt")
    with pytest.raises(ValueError, match=ctx.run_id):
        run_loop(ctx)
    assert ctx.ledger.get_run(ctx.run_id).status is RunStatus.PENDING
    assert ctx.ledger.turn_snapshot(ctx.run_id, last=1).counts.highest == 0


def test_round_0_is_played_by_play_turns_with_the_search_planner(engine: Callable[..., RunContext]) -> None:
    # Turn 1 improves (10 -> 11); turns 2-5 write 11 again and change nothing; the budget (5 turns)
    # ends the search, which, handed over, leaves the run running for the feedback watch.
    ctx = engine("echo 11 > src/value.txt")
    search = Search(ctx, budgets_of(ctx), hand_over=True)
    played = play_turns(ctx, 0, search)
    assert played.kept and not played.cut_off
    assert search.stop is not None
    assert (search.stop.status, search.stop.stop_reason) == (RunStatus.RUNNING, StopReason.MAX_TURNS)
    turns = ctx.ledger.turn_snapshot(ctx.run_id, last=10).recent
    assert [(t.number, t.round, t.reason) for t in turns] == [
        (1, 0, Reason.IMPROVED),
        *[(n, 0, Reason.NO_DIFF) for n in range(2, 6)],
    ]


def test_the_search_planner_stops_the_run_on_a_cancel(engine: Callable[..., RunContext]) -> None:
    ctx = engine("echo 11 > src/value.txt")
    ctx.executor.cancel.set()
    search = Search(ctx, budgets_of(ctx), hand_over=False)
    played = play_turns(ctx, 0, search)
    assert played.cut_off and search.stop is not None
    assert (search.stop.status, search.stop.stop_reason) == (RunStatus.CANCELLED, StopReason.CANCELLED)
    assert ctx.ledger.get_run(ctx.run_id).status is RunStatus.CANCELLED


def test_the_champion_moves_through_its_own_object_and_the_hooks_are_handed_in(
    engine: Callable[..., RunContext], stores: dict[str, Store]
) -> None:
    told: list[dict[str, str]] = []
    ctx = engine(
        'if [ "$CRUCIBLE_TURN" = 1 ]; then echo 11; else echo 9; fi > src/value.txt',
        hooks=Hooks(on_champion=lambda c: told.append(dict(c.champion_heads))),
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.spec = ctx.spec  # type: ignore[misc]
    base = dict(ctx.champion_heads)
    kept = run_turn(ctx, 1, 0, None)
    assert kept.reason is Reason.IMPROVED
    assert dict(ctx.champion.heads) == {**base, **kept.commits} != base
    assert told == [dict(ctx.champion.heads)], "the driver's hook is told once, after the keep"
    rejected = run_turn(ctx, 2, 0, None)
    assert rejected.reason is Reason.NOT_IMPROVED and len(told) == 1
    # run_loop hands the rounds a lease it claims itself: a copy sharing the champion and checkouts.
    leased = ctx.with_lease(Heartbeat(stores[ctx.run_id], ctx.run_id, cancel=threading.Event()))
    assert leased.hooks.lease is not None and ctx.hooks.lease is None
    assert leased.champion is ctx.champion and leased.hooks.on_champion is ctx.hooks.on_champion
    assert leased.checkout("candidate", "app") is ctx.checkout("candidate", "app")


# Turn by turn: kept, worse, the agent fails, kept again, no change, a policy violation; each reports
# a cost, so the run's sums move with every decision.
MIXED = """echo "COST usd=0.25 tokens=$CRUCIBLE_TURN"
case $CRUCIBLE_TURN in
1) echo 11 > src/value.txt ;;
2) echo 9 > src/value.txt ;;
3) exit 3 ;;
4) echo 12 > src/value.txt ;;
6) echo changed > README ;;
esac"""


@pytest.mark.parametrize("parallel", [1, 2])
def test_the_search_carries_the_stores_snapshot_forward_from_each_decision(
    engine: Callable[..., RunContext], parallel: int
) -> None:
    """The search reads the turn snapshot once (ADR-0050) and derives the next from each decision: after
    every turn of a run with every kind of outcome, and a cut-off turn to finish first, what it holds is
    what the store gives (the lease fields and ``updated_at``, which the loop reads nowhere, aside).
    With two hypotheses a turn, both run the same script, so the turns come to the same reasons."""
    ctx = engine(MIXED, turns=6, extra=f"[broker]\nparallel = {parallel}")
    ctx.ledger.start_turn(ctx.run_id, 1, 0)  # cut off before its decision: the search finishes it first
    search = Search(ctx, budgets_of(ctx), hand_over=True)  # the budget's stop then writes nothing
    compared: list[int] = []
    decided = search.decided

    def checked(ctx: RunContext, record: TurnRecord) -> bool:
        stop = decided(ctx, record)
        assert search.known is not None
        stored = ctx.ledger.turn_snapshot(ctx.run_id, last=search.window)
        run = dataclasses.replace(
            search.known.run,
            updated_at=stored.run.updated_at,
            lease_owner=stored.run.lease_owner,
            lease_expires_at=stored.run.lease_expires_at,
        )
        assert dataclasses.replace(search.known, run=run) == stored
        compared.append(record.number)
        return stop

    search.decided = checked  # type: ignore[method-assign]
    play_turns(ctx, 0, search)

    assert compared == [1, 2, 3, 4, 5, 6]
    reasons = [t.reason for t in ctx.ledger.turn_snapshot(ctx.run_id, last=10).recent]
    assert reasons == [
        Reason.IMPROVED,
        Reason.NOT_IMPROVED,
        Reason.AGENT_FAILED,
        Reason.IMPROVED,
        Reason.NO_DIFF,
        Reason.POLICY_VIOLATION,
    ]
    run = ctx.ledger.get_run(ctx.run_id)
    assert (run.champion_value, run.champion_turn, run.tokens) == (12.0, 4, 21 * parallel)

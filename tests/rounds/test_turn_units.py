"""``run_turn`` and ``play_turns`` as units: a fake executor (``ScriptedExecutor``: the commands are
Python functions) and a fake ledger (``MemoryLedger``), every reason a turn can end with.

The fakes pass the contracts of the real parts (``tests/services/test_executor_contract.py``,
``tests/ledger``), so what is tested here is the round engine itself: which reason each step settles a
turn with, what is written (exactly one decision, its samples, the champion), and where the candidate
checkout is left. The checkouts stay real git repositories (the keep commits and restores in them);
``test_turn_engine.py`` plays the same reasons end to end with shell commands and SQLite.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.config.units import Tolerance
from controller.domain.enums import (
    OUTCOME_OF_REASON,
    EventKind,
    Outcome,
    Reason,
    RunStatus,
    StopReason,
    TurnPhase,
)
from controller.services.execution.baseline import run_baseline
from controller.services.execution.context import Detached, Hooks, RoundRule, RunContext
from controller.services.execution.loop import Search, budgets_of
from controller.services.execution.play import Refinement, TurnPlan, play_turns
from controller.services.execution.runs import build_context
from controller.services.execution.turn import run_turn
from controller.services.execution.work import EVENT_OF_OUTCOME
from controller.store.records import ComponentRecord, NewRun
from controller.workspace.git import resolve_ref
from controller.workspace.overwrite import write_over
from tests.support.memory_ledger import MemoryLedger
from tests.support.scripted_executor import Call, Program, Reply, ScriptedExecutor

SPEC = """
objective = "unit-test the round engine"
turns = 5
[agent]
command = "agent"
timeout = 5
[sandbox]
mode = "none"
[metric]
command = "{metric}"
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


def _value(call: Call) -> str:
    return (call.cwd / "src" / "value.txt").read_text().strip()


def _metric(call: Call) -> Reply:
    return Reply(stdout=f"METRIC m={_value(call)}\n")


def _metric_and_guard(call: Call) -> Reply:
    guard = call.cwd / "src" / "guard.txt"
    g = guard.read_text().strip() if guard.exists() else "1"
    return Reply(stdout=f"METRIC m={_value(call)}\nMETRIC g={g}\n")


def _tampering_metric(call: Call) -> Reply:
    """Measures, then changes a tracked file when the value is not the base's (a bad evaluator)."""
    if _value(call) != "10":
        with (call.cwd / "README").open("a") as readme:
            readme.write("tampered\n")
    return _metric(call)


def _validation(call: Call) -> Reply:
    return Reply(returncode=0 if _value(call) == "10" else 1)


def writes(value: str, path: str = "src/value.txt") -> Program:
    """An agent that writes ``value`` to ``path`` of the candidate."""

    def agent(call: Call) -> Reply:
        (call.cwd / path).write_text(f"{value}\n")
        return Reply(stdout="HYPOTHESIS: write it\n")

    return agent


def _improves_but_regresses_the_guard(call: Call) -> Reply:
    writes("5", "src/guard.txt")(call)
    return writes("11")(call)


def _commits(call: Call) -> Reply:
    """An agent that commits its change: HEAD moves, which a turn refuses."""
    (call.cwd / "src" / "value.txt").write_text("11\n")
    git = ["git", "-C", str(call.cwd), "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run([*git, "commit", "-qam", "sneak"], check=True)
    return Reply()


def _tampers_git(call: Call) -> Reply:
    with (call.cwd / ".git" / "config").open("a") as config:
        config.write("[core]\n\tfsmonitor = evil\n")
    (call.cwd / "src" / "value.txt").write_text("11\n")
    return Reply()


@dataclasses.dataclass
class Engine:
    """A run opened on the fakes, its baseline (10) measured."""

    ctx: RunContext
    ledger: MemoryLedger
    executor: ScriptedExecutor


@pytest.fixture
def engine(tmp_path: Path, repo_factory: Callable[..., Path]) -> Iterator[Callable[..., Engine]]:
    def make(
        agent: Program,
        *,
        metric: Program = _metric,
        samples: int = 1,
        confidence: float = 0.0,
        extra: str = "",
        hooks: Hooks | None = None,
        cancel: threading.Event | None = None,
        more: Mapping[str, Program] | None = None,
        files: Mapping[str, str] | None = None,
    ) -> Engine:
        repo = repo_factory({"src/value.txt": "10\n", "README": "hello\n", **(files or {})})
        text = SPEC.format(metric="metric", samples=samples, confidence=confidence, extra=extra, repo=repo)
        (tmp_path / "crucible.toml").write_text(text)
        spec = load_spec(tmp_path / "crucible.toml")
        ledger = MemoryLedger()
        base = resolve_ref(repo, "main")
        ledger.create_run(
            NewRun("r1", text, spec.fingerprint(), None, spec.objective, "m", "maximize", 5),
            [ComponentRecord("r1", "app", str(repo), "main", base, base)],
        )
        ledger.set_run_status("r1", RunStatus.RUNNING)
        ctx = build_context(
            Settings(home=tmp_path / "home", database_url="sqlite://"),
            ledger,
            "r1",
            spec,
            base_shas={"app": base},
            heads={"app": base},
            environ={"PATH": "/usr/bin:/bin"},
            cancel=cancel,
            hooks=hooks,
        )
        script = {"agent": agent, "metric": metric, "validate": _validation, **(more or {})}
        executor = ScriptedExecutor.replacing(ctx.executor, script)
        ctx = dataclasses.replace(ctx, executor=executor)
        assert run_baseline(ctx) is None
        return Engine(ctx, ledger, executor)

    yield make


GUARD = '[[metric.guard]]\nname = "g"\ndirection = "minimize"'
VALIDATION = '[validation]\ncommand = "validate"\nretries = 1'

CASES = [
    pytest.param(writes("11"), {}, Reason.IMPROVED, id="improved"),
    pytest.param(writes("9"), {}, Reason.NOT_IMPROVED, id="not_improved"),
    pytest.param(
        writes("11"), {"samples": 3, "confidence": 0.99}, Reason.NOT_SIGNIFICANT, id="not_significant"
    ),
    pytest.param(
        _improves_but_regresses_the_guard,
        {"metric": _metric_and_guard, "extra": GUARD},
        Reason.GUARD_REGRESSED,
        id="guard_regressed",
    ),
    pytest.param(writes("11"), {"extra": VALIDATION}, Reason.VALIDATION_FAILED, id="validation_failed"),
    pytest.param(writes("changed", "README"), {}, Reason.POLICY_VIOLATION, id="policy_violation"),
    pytest.param(_commits, {}, Reason.POLICY_VIOLATION, id="policy_violation_head_moved"),
    pytest.param(_tampers_git, {}, Reason.POLICY_VIOLATION, id="policy_violation_git_tampered"),
    pytest.param(
        writes("11"), {"metric": _tampering_metric}, Reason.EVALUATOR_MUTATED, id="evaluator_mutated"
    ),
    pytest.param(writes("oops"), {}, Reason.METRIC_INVALID, id="metric_invalid"),
    pytest.param(
        lambda _c: Reply(returncode=3, stderr="no luck\n"), {}, Reason.AGENT_FAILED, id="agent_failed"
    ),
    pytest.param(lambda _c: Reply(overruns=True), {}, Reason.TIMEOUT, id="timeout"),
    pytest.param(lambda _c: Reply(), {}, Reason.NO_DIFF, id="no_diff"),
]


@pytest.mark.parametrize(("agent", "options", "reason"), CASES)
def test_a_turn_ends_with_each_reason(
    engine: Callable[..., Engine], agent: Program, options: dict[str, object], reason: Reason
) -> None:
    e = engine(agent, **options)
    ctx, base = e.ctx, dict(e.ctx.champion_heads)
    record = run_turn(ctx, 1, 0, None)
    assert record.reason is reason, record.detail
    assert record.phase is TurnPhase.DECIDED and record.outcome is OUTCOME_OF_REASON[reason]
    kinds = [ev.kind for ev in e.ledger.list_events("r1")]
    decision = EVENT_OF_OUTCOME[record.outcome]
    assert kinds.count(EventKind.TURN_STARTED) == 1 and kinds.count(decision) == 1 and kinds[-1] is decision
    assert e.ledger.list_events("r1")[-1].payload["reason"] == str(reason)
    candidate = ctx.checkout("candidate", "app")
    if reason is Reason.IMPROVED:
        assert record.commits == {"app": ctx.champion_heads["app"]} and ctx.champion_heads != base
        assert e.ledger.get_run("r1").champion_value == 11.0
        assert e.ledger.list_components("r1")[0].head_sha == ctx.champion_heads["app"]
    else:
        assert ctx.champion_heads == base and record.commits == {}
        assert e.ledger.get_run("r1").champion_value == 10.0
    # Kept or not, the candidate is exactly at the champion again, its .git as it was.
    assert candidate.head() == ctx.champion_heads["app"] and candidate.status() == {}
    assert "fsmonitor" not in (candidate.git_dir / "config").read_text()


def test_the_agent_is_given_the_protocol_and_its_failure_is_quoted(engine: Callable[..., Engine]) -> None:
    e = engine(lambda _c: Reply(returncode=3, stderr="first\nno luck\n"))
    record = run_turn(e.ctx, 1, 0, None)
    assert record.detail == "the agent exited 3: no luck"
    agent = next(call for call in e.executor.calls if call.command == "agent")
    assert (agent.env["CRUCIBLE_TURN"], agent.env["CRUCIBLE_ROUND"]) == ("1", "0")
    assert agent.cwd == e.ctx.layout.workspace_root("candidate")


def test_a_validation_is_retried_before_the_turn_fails(engine: Callable[..., Engine]) -> None:
    e = engine(writes("11"), extra=VALIDATION)
    record = run_turn(e.ctx, 1, 0, None)
    assert record.detail == "validation failed 2 time(s)"
    # Once for the baseline, twice for the candidate (retries = 1); no measurement after it fails.
    assert [c.command for c in e.executor.calls].count("validate") == 3
    assert [c.command for c in e.executor.calls][-1] == "validate"


def test_a_cancel_while_the_agent_runs_fails_the_turn_and_keeps_the_champion(
    engine: Callable[..., Engine],
) -> None:
    cancel = threading.Event()

    def agent(call: Call) -> Reply:
        writes("11")(call)
        cancel.set()  # the operator cancels while the agent is at work
        return Reply(blocks=True)

    e = engine(agent, cancel=cancel)
    record = run_turn(e.ctx, 1, 0, None)
    assert (record.reason, record.outcome) == (Reason.CANCELLED, Outcome.FAILED)
    assert record.detail == "cancelled while the agent was running"
    assert e.ledger.get_run("r1").champion_value == 10.0
    assert e.ctx.checkout("candidate", "app").status() == {}


def test_a_run_directory_past_its_disk_budget_stops_the_turn_saying_so(engine: Callable[..., Engine]) -> None:
    holder: list[ScriptedExecutor] = []

    def agent(call: Call) -> Reply:
        writes("11")(call)
        holder[0].disk_exceeded = True  # what the executor's disk watch does
        holder[0].cancel.set()
        return Reply(blocks=True)

    e = engine(agent)
    holder.append(e.executor)
    record = run_turn(e.ctx, 1, 0, None)
    assert record.reason is Reason.CANCELLED
    assert record.detail == "stopped while the agent was running: the run directory grew past budget.disk"
    assert not e.executor.disk_exceeded


def test_a_detach_leaves_the_turn_undecided_for_whoever_continues_the_run(
    engine: Callable[..., Engine],
) -> None:
    cancel, detach = threading.Event(), threading.Event()

    def agent(call: Call) -> Reply:
        detach.set()  # SIGTERM: the controller detaches, cancelling the command it was running
        cancel.set()
        return Reply(blocks=True)

    e = engine(agent, cancel=cancel, hooks=Hooks(detach=detach))
    with pytest.raises(Detached):
        run_turn(e.ctx, 1, 0, None)
    snapshot = e.ledger.turn_snapshot("r1", last=5)
    assert snapshot.counts.started == (1,) and dict(snapshot.counts.decided) == {}


def test_a_secret_in_the_agents_failure_is_redacted_in_the_decision(
    engine: Callable[..., Engine],
) -> None:
    e = engine(lambda _c: Reply(returncode=1, stderr="token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n"))
    e.executor.scrubbed = dataclasses.replace(
        e.executor.scrubbed, secrets=("ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",)
    )
    record = run_turn(e.ctx, 1, 0, None)
    assert "ghp_" not in record.detail and "ghp_" not in str(e.ledger.list_events("r1")[-1].payload)


def test_a_refinement_round_stops_at_the_first_turn_that_holds_the_score(
    engine: Callable[..., Engine],
) -> None:
    # Turn 1 loses more than the hold allows, turn 2 holds (9.5 is within 1 of 10): the round keeps it.
    e = engine(lambda call: writes("5" if call.env["CRUCIBLE_TURN"] == "1" else "9.5")(call))
    rule = RoundRule(hold=Tolerance(1.0, relative=False), first_published=10.0)
    played = play_turns(e.ctx, 1, Refinement(3), round_rule=rule, feedback=())
    assert played.kept and not played.cut_off
    turns = e.ledger.turn_snapshot("r1", last=5).recent
    assert [(t.number, t.round, t.reason) for t in turns] == [
        (1, 1, Reason.NOT_IMPROVED),
        (2, 1, Reason.IMPROVED),
    ]


def test_a_refinement_round_without_a_keep_reports_its_last_detail(engine: Callable[..., Engine]) -> None:
    e = engine(lambda _c: Reply())
    played = play_turns(e.ctx, 1, Refinement(2), round_rule=None, feedback=())
    assert (played.kept, played.cut_off, played.detail) == (False, False, "the agent changed nothing")
    assert e.ledger.turn_snapshot("r1", last=5).counts.decided == {1: 2}


def test_a_refinement_round_cut_off_by_a_cancel_says_so_and_plays_nothing(
    engine: Callable[..., Engine],
) -> None:
    e = engine(writes("11"))
    e.executor.cancel.set()
    assert play_turns(e.ctx, 1, Refinement(2), round_rule=None, feedback=()).cut_off
    assert e.ledger.turn_snapshot("r1", last=5).recent == ()


class _Parallel:
    """A planner of one turn of two hypotheses (round 0 with ``broker.parallel = 2``)."""

    def __init__(self) -> None:
        self.played = False

    def next_turn(self, ctx: RunContext) -> TurnPlan | None:
        if self.played:
            return None
        self.played = True
        return TurnPlan(1, parallel=2)

    def decided(self, ctx: RunContext, record: object) -> bool:
        return True


def test_a_turn_of_two_hypotheses_keeps_the_better_one_and_supersedes_the_other(
    engine: Callable[..., Engine],
) -> None:
    e = engine(lambda call: writes("11" if call.env["CRUCIBLE_PARALLEL_INDEX"] == "0" else "12")(call))
    played = play_turns(e.ctx, 0, _Parallel())
    assert played.kept
    found = e.ledger.list_hypotheses("r1", 1)
    assert [(h.index, h.reason) for h in found] == [(0, Reason.SUPERSEDED), (1, Reason.IMPROVED)]
    assert e.ledger.get_run("r1").champion_value == 12.0
    assert e.ctx.checkout("candidate", "app").status() == {}


def test_round_0_is_played_by_play_turns_with_the_search_planner(engine: Callable[..., Engine]) -> None:
    # Turn 1 improves (10 -> 11); turns 2-5 write 11 again and change nothing; the budget (5 turns) ends
    # the search, which, handed over, leaves the run running for the feedback watch.
    e = engine(writes("11"))
    search = Search(e.ctx, budgets_of(e.ctx), hand_over=True)
    played = play_turns(e.ctx, 0, search)
    assert played.kept and not played.cut_off and search.stop is not None
    assert (search.stop.status, search.stop.stop_reason) == (RunStatus.RUNNING, StopReason.MAX_TURNS)
    turns = e.ledger.turn_snapshot("r1", last=10).recent
    assert [(t.number, t.reason) for t in turns] == [
        (1, Reason.IMPROVED),
        *[(n, Reason.NO_DIFF) for n in range(2, 6)],
    ]


def test_the_search_planner_stops_the_run_on_a_cancel(engine: Callable[..., Engine]) -> None:
    e = engine(writes("11"))
    e.executor.cancel.set()
    search = Search(e.ctx, budgets_of(e.ctx), hand_over=False)
    assert play_turns(e.ctx, 0, search).cut_off and search.stop is not None
    assert e.ledger.get_run("r1").status is RunStatus.CANCELLED


def test_a_turn_a_crash_cut_off_is_played_again_under_its_number_and_decided_once(
    engine: Callable[..., Engine],
) -> None:
    e = engine(writes("11"))
    e.ledger.start_turn("r1", 1, 1)  # the attempt a crash cut off before its decision
    played = play_turns(e.ctx, 1, Refinement(1), round_rule=None, feedback=())
    assert played.kept
    snapshot = e.ledger.turn_snapshot("r1", last=5)
    assert [(t.number, t.round, t.reason) for t in snapshot.recent] == [(1, 1, Reason.IMPROVED)]
    assert snapshot.counts.started == ()


KEEP_CACHE = '[workspace]\nkeep_ignored = ["cache/"]'


def _caching_metric(call: Call) -> Reply:
    """A build the metric runs: cache/value (ignored, kept across turns) is made once per copy."""
    cache = call.cwd / "cache" / "value"
    if not cache.exists():
        cache.parent.mkdir(exist_ok=True)
        cache.write_text(_value(call))
    return _metric(call)


def _writes_and_plants(plan: Mapping[int, tuple[str, bool]]) -> Program:
    """Turn n writes ``plan[n][0]`` and, when ``plan[n][1]``, rewrites the candidate's kept cache too."""

    def agent(call: Call) -> Reply:
        value, plant = plan[int(call.env["CRUCIBLE_TURN"])]
        writes(value)(call)
        if plant:
            (call.cwd / "cache" / "value").write_text("99\n")
        return Reply(stdout="HYPOTHESIS: write it\n")

    return agent


def test_a_kept_cache_the_agent_rewrites_is_caught_after_a_rejected_and_after_a_kept_turn(
    engine: Callable[..., Engine],
) -> None:
    # The fingerprint the agent is checked against comes from where the last turn left the candidate
    # (its listing at the end of a rejected turn, and beside the champion's move after a keep).
    plan = {1: ("9", False), 2: ("11", True), 3: ("11", False), 4: ("12", True), 5: ("12", False)}
    plan[6] = ("13", False)
    e = engine(
        _writes_and_plants(plan), metric=_caching_metric, extra=KEEP_CACHE, files={".gitignore": "cache/\n"}
    )
    records = [run_turn(e.ctx, n, 0, None) for n in plan]
    assert [r.reason for r in records] == [
        Reason.NOT_IMPROVED,  # the candidate builds its cache; the turn ends with it fingerprinted
        Reason.EVALUATOR_MUTATED,  # after a rejected turn
        Reason.IMPROVED,  # the cache rebuilt by this turn's measurement is not blamed on its agent
        Reason.EVALUATOR_MUTATED,  # after a kept turn
        Reason.IMPROVED,
        Reason.IMPROVED,  # after a kept turn, its cache as the kept turn's walk fingerprinted it
    ]
    assert "cache/value" in records[1].detail and "cache/value" in records[3].detail


def test_a_command_between_turns_is_not_blamed_on_the_next_agent(engine: Callable[..., Engine]) -> None:
    # A measurement outside a turn (following an upstream, say) rebuilds the candidate's kept cache:
    # the fingerprint the last turn left is stale then, and the next agent is checked against a new one.
    def rebuild(call: Call) -> Reply:
        cache = call.cwd / "cache" / "value"
        cache.unlink()
        cache.write_text("rebuilt\n")
        return Reply()

    e = engine(
        _writes_and_plants({1: ("9", False), 2: ("11", False)}),
        metric=_caching_metric,
        extra=KEEP_CACHE,
        files={".gitignore": "cache/\n"},
        more={"rebuild": rebuild},
    )
    assert run_turn(e.ctx, 1, 0, None).reason is Reason.NOT_IMPROVED  # writes 9
    root = e.ctx.layout.workspace_root("candidate")
    e.executor.run("rebuild", cwd=root, timeout=5, writable=[root], protocol={})
    assert run_turn(e.ctx, 2, 0, None).reason is Reason.IMPROVED  # writes 11, cache untouched by it


def test_candidate_md_is_written_over_in_place_and_cut_to_its_length(tmp_path: Path) -> None:
    """CANDIDATE.md is rewritten each turn in place (ADR-0050): a shorter brief after a longer one
    leaves nothing of the longer, and a multi-byte text arrives whole."""
    path = tmp_path / "CANDIDATE.md"
    write_over(path, ("long line\n" * 500).encode(), flags=os.O_CREAT)
    inode = path.stat().st_ino
    write_over(path, "short é\n".encode())
    assert path.read_text(encoding="utf-8") == "short é\n"
    assert path.stat().st_ino == inode

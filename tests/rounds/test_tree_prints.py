"""The walks that stand in for git's on a small tree (ADR 0049), in real turns: the champion's copy after
the agent and after its move, the candidate after its measurement.

A walk of this process that finds the tree as recorded is taken for git's answer; anything it finds
different goes through git's walk as before. So each change below, made where only the walk looks
first, must end the turn exactly as it did when git always looked: the same reason, the same paths
named, the copy restored. The engine is ``test_turn_units``'s (real checkouts, commands played by
Python functions), its metric not measuring the champion beside each candidate unless said.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.domain.enums import Reason
from controller.services.execution import candidate_copy
from controller.services.execution.keep import paths_by_component
from controller.services.execution.play import play_turns
from controller.services.execution.turn import run_turn
from controller.workspace import ignored, treeprint
from controller.workspace.checkout import Checkout
from tests.rounds.test_turn_units import (  # noqa: F401 (engine: the fixture)
    Engine,
    _Parallel,
    engine,
    writes,
)
from tests.support.scripted_executor import Call, Program, Reply

FILES = {"other.txt": "other\n", ".gitignore": "*.log\nbuild/\n"}
ONE_ARM = "interleave = false"
KEPT_BUT_TURN_3 = [Reason.IMPROVED, Reason.IMPROVED, Reason.POLICY_VIOLATION, Reason.IMPROVED]


def _champion_of(call: Call) -> Path:
    return Path(str(call.cwd).replace("/arms/candidate", "/arms/champion"))


def _same_size_same_mtime(path: Path, text: str) -> None:
    info = path.stat()
    path.write_text(text)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def _swap_link(root: Path) -> None:
    (root / "src" / "link").unlink()
    (root / "src" / "link").write_text("value.txt")  # what the link held, as a file


def _rename_over(root: Path) -> None:
    (root / ".tmp").write_text("OTHER\n")
    os.replace(root / ".tmp", root / "other.txt")


def _stage(root: Path) -> None:
    git = ["git", "-C", str(root)]
    blob = subprocess.run([*git, "hash-object", "-w", "--stdin"], input=b"staged\n", capture_output=True)
    sha = blob.stdout.decode().strip()
    subprocess.run([*git, "update-index", "--cacheinfo", f"100644,{sha},other.txt"], check=True)


# What the agent does to the champion's copy, and what the violation names.
TAMPERING: dict[str, tuple[Callable[[Path], object], str]] = {
    "same size, mtime restored": (lambda r: _same_size_same_mtime(r / "other.txt", "OTHER\n"), "other.txt"),
    "new untracked file": (lambda r: (r / "extra.txt").write_text("x\n"), "extra.txt"),
    "new ignored file": (lambda r: (r / "junk.log").write_text("x\n"), "junk.log (ignored)"),
    "deleted file": (lambda r: (r / "other.txt").unlink(), "other.txt"),
    "chmod": (lambda r: (r / "other.txt").chmod(0o755), "other.txt"),
    "symlink swapped for a file": (_swap_link, "src/link"),
    "file replaced by rename": (_rename_over, "other.txt"),
    "change staged in the index": (_stage, "other.txt"),
}


def _improving(tamper_at: int, tamper: Callable[[Path], object] | None = None) -> Program:
    """Turn n writes 10 + n (each turn improves, so each is kept and the champion's copy moves; turn 1
    adds a symlink too) and leaves an ignored build output (which the measurement's tidy removes); at
    turn ``tamper_at`` it also applies ``tamper`` to the champion's copy."""

    def agent(call: Call) -> Reply:
        turn = int(call.env["CRUCIBLE_TURN"])
        writes(str(10 + turn))(call)
        (call.cwd / "build").mkdir(exist_ok=True)
        (call.cwd / "build" / "out.o").write_text(f"{turn}\n")
        if turn == 1:
            os.symlink("value.txt", call.cwd / "src" / "link")
        if turn == tamper_at and tamper is not None:
            tamper(_champion_of(call))
        return Reply(stdout="HYPOTHESIS: higher\n")

    return agent


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The checkouts git's status walk ran in, in order (a spy: git still runs)."""
    seen: list[Path] = []
    original = Checkout.status_and_ignored

    def spy(self: Checkout, *, ignored: bool = True) -> tuple[dict[str, str], list[str]]:
        seen.append(self.path)
        return original(self, ignored=ignored)

    monkeypatch.setattr(Checkout, "status_and_ignored", spy)
    yield seen


@pytest.mark.parametrize("tampering", list(TAMPERING.values()), ids=list(TAMPERING))
def test_a_change_to_the_champions_copy_is_caught_where_the_walk_looks_first(
    engine: Callable[..., Engine],  # noqa: F811
    tampering: tuple[Callable[[Path], object], str],
) -> None:
    tamper, named = tampering
    e = engine(_improving(3, tamper), extra=ONE_ARM, files=FILES)
    champion = e.ctx.layout.workspace_root("champion")
    records = [run_turn(e.ctx, n, 0, None) for n in (1, 2)]
    assert [r.reason for r in records] == [Reason.IMPROVED, Reason.IMPROVED]
    known = e.ctx.champion_prints["app"]
    assert known.clean and known.tree is not None, "turn 3's check starts with the walk"
    records += [run_turn(e.ctx, n, 0, None) for n in (3, 4)]
    assert [r.reason for r in records[2:]] == [Reason.POLICY_VIOLATION, Reason.IMPROVED], records[2].detail
    assert f"the agent changed the champion's copy (restored): {named}" in (records[2].detail or "")
    assert Checkout.open(champion).status() == {}
    assert (champion / "other.txt").read_text() == "other\n"
    assert ignored.others(champion) == []


def test_a_kept_turn_on_a_small_tree_walks_with_git_once(
    engine: Callable[..., Engine],  # noqa: F811
    walks: list[Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From the second turn on, git walks the candidate once (the policy check's) and lists nothing: the
    champion's check, its listing after the move and the candidate's check after the measurement are
    walks of this process that found nothing."""
    listings: list[Path] = []
    original = ignored.others
    monkeypatch.setattr(ignored, "others", lambda root: listings.append(root) or original(root))
    e = engine(_improving(0), extra=ONE_ARM, files=FILES)
    candidate = e.ctx.layout.workspace_root("candidate")
    assert run_turn(e.ctx, 1, 0, None).reason is Reason.IMPROVED  # the champion's copy is proved clean
    walks.clear()
    listings.clear()
    assert [run_turn(e.ctx, n, 0, None).reason for n in (2, 3, 4)] == [Reason.IMPROVED] * 3
    assert walks == [candidate] * 3
    assert listings == []


def test_a_large_tree_is_walked_by_git_as_before(
    engine: Callable[..., Engine],  # noqa: F811
    walks: list[Path],
    prints: list[Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ``MAX_ENTRIES`` every check is git's, as before, and once a print could not be taken none is
    tried again in the context."""
    monkeypatch.setattr(treeprint, "MAX_ENTRIES", 3)  # the repository has 4 files
    tamper, named = TAMPERING["same size, mtime restored"]
    e = engine(_improving(3, tamper), extra=ONE_ARM, files=FILES)
    walks.clear()  # the baseline's
    assert run_turn(e.ctx, 1, 0, None).reason is Reason.IMPROVED
    assert e.ctx.unprinted == {("candidate", "app"), ("champion", "app")}
    prints.clear()
    records = [run_turn(e.ctx, n, 0, None) for n in (2, 3, 4)]
    assert [r.reason for r in records] == KEPT_BUT_TURN_3[1:]
    assert named in (records[1].detail or "")
    assert e.ctx.champion_prints["app"].tree is None
    champion = e.ctx.layout.workspace_root("champion")
    candidate = e.ctx.layout.workspace_root("candidate")
    assert prints == [candidate], "none tried again but the rejected turn's settle's, once"
    assert (candidate_copy.SETTLED, "app") in e.ctx.unprinted
    assert walks.count(champion) == 4, "the check after each agent, by git"
    assert walks.count(candidate) == 7, "the policy check's and the one after each measurement (not turn 3's)"


def _tampering_metric(change: Callable[[Path], object], arm: str = "candidate") -> Program:
    """A metric that measures, then applies ``change`` to the checkout of ``arm`` it runs in (a bad
    evaluator); the candidate's value is what the agent wrote."""

    def metric(call: Call) -> Reply:
        value = (call.cwd / "src" / "value.txt").read_text().strip()
        if f"/arms/{arm}" in str(call.cwd):
            change(call.cwd)
        return Reply(stdout=f"METRIC m={value}\n")

    return metric


# What the metric does to the checkout it measures, and the reason the turn ends with (as git decides:
# an ignored file is not the evaluator's mutation).
METRIC_CHANGES: dict[str, tuple[Callable[[Path], object], Reason]] = {
    "rewrites the agent's change, same size and mtime": (
        lambda r: _same_size_same_mtime(r / "src" / "value.txt", "99\n"),
        Reason.EVALUATOR_MUTATED,
    ),
    "chmods a tracked file": (lambda r: (r / "README").chmod(0o755), Reason.EVALUATOR_MUTATED),
    "deletes a tracked file": (lambda r: (r / "README").unlink(), Reason.EVALUATOR_MUTATED),
    "writes an untracked file": (lambda r: (r / "out.txt").write_text("x\n"), Reason.EVALUATOR_MUTATED),
    "replaces a file by rename": (lambda r: _rename_over(r), Reason.EVALUATOR_MUTATED),
    "stages a change": (_stage, Reason.EVALUATOR_MUTATED),
    "writes an ignored file": (lambda r: (r / "run.log").write_text("x\n"), Reason.IMPROVED),
}


@pytest.mark.parametrize("arm", ["candidate", "champion"])
@pytest.mark.parametrize("change", list(METRIC_CHANGES.values()), ids=list(METRIC_CHANGES))
def test_the_evaluators_change_is_caught_where_the_walk_looks_first(
    engine: Callable[..., Engine],  # noqa: F811
    change: tuple[Callable[[Path], object], Reason],
    arm: str,
) -> None:
    """At turn 2 (the champion's copy proved clean by then), the metric changes the arm it measures;
    both arms are measured."""
    act, reason = change
    metric = _tampering_metric(lambda r: act(r) if _turn(r) == 2 else None, arm)
    e = engine(_improving(0), metric=metric, files=FILES)
    records = [run_turn(e.ctx, n, 0, None) for n in (1, 2)]
    assert records[0].reason is Reason.IMPROVED
    assert records[1].reason is reason, records[1].detail


def _turn(root: Path) -> int:
    """The turn the checkout at ``root`` is measured in, from the value the agent wrote (10 + turn): the
    champion's copy holds the last kept one (turn - 1)."""
    value = int((root / "src" / "value.txt").read_text())
    return value - 10 + (1 if "/arms/champion" in str(root) else 0)


def _rewrite_and_plant(champion: Path) -> None:
    _same_size_same_mtime(champion / "other.txt", "OTHER\n")
    (champion / "planted.txt").write_text("x\n")


@pytest.mark.parametrize("write", [_rewrite_and_plant, _stage], ids=["rewrite and plant", "stage"])
def test_a_write_into_the_champions_copy_after_its_check_is_found_by_the_next_check(
    engine: Callable[..., Engine],  # noqa: F811
    write: Callable[[Path], object],
) -> None:
    """The candidate's metric (not sandboxed) writes into the champion's copy after the policy check
    found it clean: the walk before the move sees it, the copy is listed and checked by git, and the next
    turn's check names the tracked file (an untracked one is removed by the listing), as before. A change
    staged in the index only is seen by the walk before the checkout, not after it (the checkout
    rewrites the index)."""

    def metric(call: Call) -> Reply:
        value = (call.cwd / "src" / "value.txt").read_text().strip()
        if value == "12":
            write(_champion_of(call))
        return Reply(stdout=f"METRIC m={value}\n")

    e = engine(_improving(0), metric=metric, extra=ONE_ARM, files=FILES)
    records = [run_turn(e.ctx, n, 0, None) for n in (1, 2, 3, 4)]
    assert [r.reason for r in records] == KEPT_BUT_TURN_3
    assert "champion's copy (restored): other.txt" in (records[2].detail or "")
    champion = e.ctx.layout.workspace_root("champion")
    assert not (champion / "planted.txt").exists()


def test_the_kept_caches_listed_after_a_measurement_the_walk_stood_in_for_are_the_next_fingerprint(
    engine: Callable[..., Engine],  # noqa: F811
    walks: list[Path],
) -> None:
    """With ``workspace.keep_ignored``, a kept turn's candidate hands its ignored entries, listed after the
    measurement, to the next turn as the fingerprint its agent is checked against. Where the walk stood
    in for git's, they are the policy check's but those the tidy removed (the agent's build output): an
    honest next turn is not refused, and a rewrite of the kept cache is."""

    def caching_metric(call: Call) -> Reply:
        cache = call.cwd / "cache" / "value"
        if not cache.exists():
            cache.parent.mkdir(exist_ok=True)
            cache.write_text("built\n")
        return Reply(stdout=f"METRIC m={(call.cwd / 'src' / 'value.txt').read_text().strip()}\n")

    def agent(call: Call) -> Reply:
        turn = int(call.env["CRUCIBLE_TURN"])
        _improving(0)(call)
        if turn == 4:
            (call.cwd / "cache" / "value").write_text("99\n")
        return Reply(stdout="HYPOTHESIS: higher\n")

    files = {**FILES, ".gitignore": "*.log\nbuild/\ncache/\n"}
    e = engine(
        agent, metric=caching_metric, extra=f'{ONE_ARM}\n[workspace]\nkeep_ignored = ["cache/"]', files=files
    )
    candidate = e.ctx.layout.workspace_root("candidate")
    assert run_turn(e.ctx, 1, 0, None).reason is Reason.IMPROVED  # its measurement builds the cache
    walks.clear()
    records = [run_turn(e.ctx, n, 0, None) for n in (2, 3, 4, 5)]
    expected = [Reason.IMPROVED, Reason.IMPROVED, Reason.EVALUATOR_MUTATED, Reason.IMPROVED]
    assert [r.reason for r in records] == expected, [r.detail for r in records]
    assert "cache/value" in (records[2].detail or "")
    assert walks[:2] == [candidate, candidate], "turns 2 and 3: the policy check's walk only"


@pytest.fixture
def prints(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The checkouts a print was taken or checked in, in order (a spy: the walks still run)."""
    seen: list[Path] = []
    take, holds = treeprint.take, treeprint.holds

    def taking(root: Path, limit: int | None = None) -> treeprint.TreePrint | None:
        seen.append(root)
        return take(root, limit)

    def checking(root: Path, print_: treeprint.TreePrint, **kwargs: Any) -> treeprint.TreePrint | None:
        seen.append(root)
        return holds(root, print_, **kwargs)

    monkeypatch.setattr(treeprint, "take", taking)
    monkeypatch.setattr(treeprint, "holds", checking)
    yield seen


def _building_metric(output: str) -> Program:
    """A metric that writes ``output`` (an ignored build output) in the checkout it measures."""

    def metric(call: Call) -> Reply:
        (call.cwd / output).parent.mkdir(parents=True, exist_ok=True)
        (call.cwd / output).write_text("built\n")
        return Reply(stdout=f"METRIC m={(call.cwd / 'src' / 'value.txt').read_text().strip()}\n")

    return metric


def test_a_build_output_the_tidy_removed_and_the_measurement_made_again_keeps_the_walk(
    engine: Callable[..., Engine],  # noqa: F811
    walks: list[Path],
) -> None:
    """The agent leaves ``build/`` (ignored, not kept: the tidy removes it) and the metric builds it
    again: ``git status`` would not report it, so the walk after the measurement still stands in."""
    e = engine(_improving(0), metric=_building_metric("build/out.o"), extra=ONE_ARM, files=FILES)
    candidate = e.ctx.layout.workspace_root("candidate")
    assert run_turn(e.ctx, 1, 0, None).reason is Reason.IMPROVED
    walks.clear()
    assert [run_turn(e.ctx, n, 0, None).reason for n in (2, 3)] == [Reason.IMPROVED] * 2
    assert walks == [candidate] * 2


def test_a_measurement_that_writes_where_a_print_expects_nothing_stops_the_walks(
    engine: Callable[..., Engine],  # noqa: F811
    walks: list[Path],
    prints: list[Path],
) -> None:
    """Both arms measured by a metric that writes a log (ignored) into each: the walks after the first
    measurement find it and git decides as before; from then on this context spends no walk on either
    arm's tree."""
    e = engine(_improving(0), metric=_building_metric("logs/run.log"), files=FILES)
    champion = e.ctx.layout.workspace_root("champion")
    candidate = e.ctx.layout.workspace_root("candidate")
    assert [run_turn(e.ctx, n, 0, None).reason for n in (1, 2)] == [Reason.IMPROVED] * 2
    assert e.ctx.unprinted == {("candidate", "app"), ("champion", "app")}
    walks.clear()
    prints.clear()
    assert [run_turn(e.ctx, n, 0, None).reason for n in (3, 4)] == [Reason.IMPROVED] * 2
    assert prints == []
    assert walks.count(candidate) == 4 and walks.count(champion) == 4, "git walks each arm twice a turn"


def test_an_entry_the_measurement_made_again_as_another_kind_is_listed_by_git(
    engine: Callable[..., Engine],  # noqa: F811
) -> None:
    """At turn 2 the agent leaves a file ``target`` (ignored, not kept: the tidy removes it) and the
    metric builds the directory ``target/`` with a cache the spec keeps (``target/cache``): git lists it,
    and it is the next turn's fingerprint (an honest turn 3 is not refused)."""

    def agent(call: Call) -> Reply:
        _improving(0)(call)
        if call.env["CRUCIBLE_TURN"] == "2":
            (call.cwd / "target").write_text("a file\n")
        return Reply(stdout="HYPOTHESIS: higher\n")

    def metric(call: Call) -> Reply:
        value = (call.cwd / "src" / "value.txt").read_text().strip()
        if value == "12":
            (call.cwd / "target" / "cache").mkdir(parents=True)
            (call.cwd / "target" / "cache" / "value").write_text("built\n")
        return Reply(stdout=f"METRIC m={value}\n")

    files = {**FILES, ".gitignore": "*.log\nbuild/\ntarget\n"}
    extra = f'{ONE_ARM}\n[workspace]\nkeep_ignored = ["target/cache"]'
    e = engine(agent, metric=metric, extra=extra, files=files)
    records = [run_turn(e.ctx, n, 0, None) for n in (1, 2, 3)]
    assert [r.reason for r in records] == [Reason.IMPROVED] * 3, [r.detail for r in records]


def test_a_kept_hypothesis_moves_the_champions_copy_without_a_listing(
    engine: Callable[..., Engine],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn of two hypotheses: the champion's copy is listed once, before the first agent; the
    winner's changed paths (its report's) let the move be checked by the walks."""
    listings: list[Path] = []
    original = ignored.others
    monkeypatch.setattr(ignored, "others", lambda root: listings.append(root) or original(root))
    e = engine(lambda call: writes("11" if call.env["CRUCIBLE_PARALLEL_INDEX"] == "0" else "12")(call))
    champion = e.ctx.layout.workspace_root("champion")
    assert play_turns(e.ctx, 0, _Parallel()).kept
    assert listings.count(champion) == 1
    known = e.ctx.champion_prints["app"]
    assert known.clean and known.head == e.ctx.champion_heads["app"]
    assert (champion / "src" / "value.txt").read_text() == "12\n"


def test_a_decisions_changed_paths_by_component() -> None:
    assert paths_by_component(["src/a", "b"], ["app"], composite=False) == {"app": ["src/a", "b"]}
    split = paths_by_component(["api/src/a", "web/b", "api/c"], ["api", "web"], composite=True)
    assert split == {"api": ["src/a", "c"], "web": ["b"]}


def test_a_print_taken_at_another_head_is_not_used(engine: Callable[..., Engine]) -> None:  # noqa: F811
    """The champion moves without its copy (a round taken over, say: the copy is still at the old head
    and unchanged, so a walk would find it as recorded): the check is git's, and names the HEAD."""
    e = engine(_improving(0), extra=ONE_ARM, files=FILES)
    assert [run_turn(e.ctx, n, 0, None).reason for n in (1, 2)] == [Reason.IMPROVED] * 2
    old = e.ctx.champion_heads["app"]
    candidate = Checkout.open(e.ctx.layout.workspace_root("candidate"))
    tree = subprocess.run(
        ["git", "-C", str(candidate.path), "rev-parse", f"{old}^{{tree}}"], capture_output=True, check=True
    )
    moved = candidate.commit_tree(tree.stdout.decode().strip(), [old], "elsewhere")
    e.ctx.champion.move({"app": moved})
    record = run_turn(e.ctx, 3, 0, None)
    assert record.reason is Reason.POLICY_VIOLATION
    assert "champion's copy (restored): HEAD moved" in (record.detail or "")
    assert Checkout.open(e.ctx.layout.workspace_root("champion")).head() == moved


def _leaves(turn: int) -> Callable[[Path], object]:
    """What the agent of a rejected turn leaves in the candidate, turn by turn."""

    def untracked(root: Path) -> None:
        (root / "src" / "notes.txt").write_text("x\n")
        (root / "empty" / "deeper").mkdir(parents=True)

    def ignored_files(root: Path) -> None:
        (root / "debug.log").write_text("x\n")
        (root / "build").mkdir(exist_ok=True)
        (root / "build" / "out.o").write_text(f"{turn}\n")

    def deleted_leaving_its_directory(root: Path) -> None:
        (root / "docs" / "guide.md").unlink()  # outside mutable: a policy violation, settled all the same
        (root / "src" / "new").mkdir()
        (root / "src" / "new" / "f.txt").write_text("x\n")

    return [untracked, ignored_files, deleted_leaving_its_directory][turn % 3]


def test_a_rejected_turns_listing_is_the_names_the_last_settle_did_not_leave(
    engine: Callable[..., Engine],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rejected turns (the agent writes the base's value) that leave untracked files, empty directories,
    ignored files and a deleted tracked file, beside a kept cache the metric builds (``node_modules``,
    kept by default): after the first, each settle lists the copy from the last one's print, not with
    git, and leaves it as git's listing would (the commit and the kept files only)."""
    listings: list[Path] = []
    original = ignored.others
    monkeypatch.setattr(ignored, "others", lambda root: listings.append(root) or original(root))

    def agent(call: Call) -> Reply:
        turn = int(call.env["CRUCIBLE_TURN"])
        writes("10" if turn > 1 else "9")(call)
        _leaves(turn)(call.cwd)
        return Reply(stdout="HYPOTHESIS: same\n")

    files = {**FILES, "docs/guide.md": "g\n", ".gitignore": "*.log\nbuild/\nnode_modules/\n"}
    e = engine(agent, metric=_building_metric("node_modules/pkg/index.js"), extra=ONE_ARM, files=files)
    candidate = e.ctx.layout.workspace_root("candidate")
    assert run_turn(e.ctx, 1, 0, None).reason is Reason.NOT_IMPROVED
    listings.clear()
    for n in range(2, 8):
        record = run_turn(e.ctx, n, 0, None)
        assert record.reason in (Reason.NOT_IMPROVED, Reason.NO_DIFF, Reason.POLICY_VIOLATION), record.detail
        assert Checkout.open(candidate).status() == {}
        left = ignored.classify(candidate, original(candidate), e.ctx.spec.workspace.keep_ignored)
        assert left.unkept == (), f"turn {n}"
        assert dict(left.kept) == dict(e.ctx.candidate_prints["app"].kept), f"turn {n}"
    assert candidate not in listings
    assert (candidate / "node_modules" / "pkg" / "index.js").exists(), "the kept cache stays"

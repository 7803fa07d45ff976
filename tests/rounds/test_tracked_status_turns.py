"""The candidate's policy check read in this process (ADR 0052), in real turns.

On a small tree of tracked files only, after crucible's own commit or reset, the check reads the
agent's change from the index and a walk, with no ``git status``. Each turn below must end exactly
as it did when git always looked: the same reason, the same paths, the same commit. The engine is
``test_turn_units``'s (real checkouts, commands played by Python functions).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from controller.domain.enums import Reason
from controller.services.execution.turn import run_turn
from controller.workspace import trackedstatus
from controller.workspace.checkout import Checkout
from tests.rounds.test_tree_prints import walks  # noqa: F401 (the fixture: git status walks, spied)
from tests.rounds.test_turn_units import Engine, engine  # noqa: F401 (engine: the fixture)
from tests.support.scripted_executor import Call, Program, Reply

ONE_ARM = "interleave = false"


def _agent(extra: Callable[[Path, int], object] | None = None) -> Program:
    """Turn n writes 10 + n (each turn improves, so each is kept), then applies ``extra``."""

    def agent(call: Call) -> Reply:
        turn = int(call.env["CRUCIBLE_TURN"])
        (call.cwd / "src" / "value.txt").write_text(f"{10 + turn}\n")
        if extra is not None:
            extra(call.cwd, turn)
        return Reply(stdout="HYPOTHESIS: higher\n")

    return agent


def test_a_kept_turns_check_runs_no_git_walk_and_decides_as_git(
    engine: Callable[..., Engine],  # noqa: F811
    walks: list[Path],  # noqa: F811
) -> None:
    """Every check is this process's (the candidate's index is recorded where git made the checkout,
    then at each commit), and what it found is what git commits."""
    e = engine(_agent(), extra=ONE_ARM, files={"src/tool.sh": "#!/bin/sh\n"})
    candidate = e.ctx.layout.workspace_root("candidate")
    walks.clear()
    records = [run_turn(e.ctx, n, 0, None) for n in (1, 2, 3, 4)]
    assert [r.reason for r in records] == [Reason.IMPROVED] * 4
    assert walks.count(candidate) == 0
    assert [r.changed_paths for r in records] == [("src/value.txt",)] * 4
    co = Checkout.open(candidate)
    recorded = e.ctx.clean_indexes["app"]  # the index the last commit left, recorded as matching it
    assert recorded == (records[3].commits["app"], trackedstatus.index_checksum(candidate))
    staged = subprocess.run(["git", "-C", str(candidate), "diff", "--cached", "--quiet", "HEAD"])
    assert staged.returncode == 0, "the recorded index is HEAD's"
    assert co.status() == {}
    assert (candidate / "src" / "value.txt").read_text() == "14\n"
    assert co.changed_files(records[2].commits["app"], records[3].commits["app"]) == ["src/value.txt"]


# What the agent does besides its change at turn 3, how the turn ends, and whether git walks for it.
CHANGES: dict[str, tuple[Callable[[Path], object], Reason, str | None, bool]] = {
    "a file outside the mutable paths": (
        lambda r: (r / "README").write_text("HELLO\n"),
        Reason.POLICY_VIOLATION,
        "README",
        False,
    ),
    "deletes a file outside them": (
        lambda r: (r / "README").unlink(),
        Reason.POLICY_VIOLATION,
        "README",
        False,
    ),
    "chmod +x of a mutable file": (
        lambda r: (r / "src" / "tool.sh").chmod(0o755),
        Reason.IMPROVED,
        None,
        False,
    ),
    "a tracked symlink out of the tree": (
        lambda r: ((r / "src" / "link").unlink(), os.symlink("/etc/passwd", r / "src" / "link")),
        Reason.POLICY_VIOLATION,
        "src/link: symlink leaving the repository",
        False,
    ),
    "a new file": (lambda r: (r / "src" / "new.txt").write_text("x\n"), Reason.IMPROVED, None, True),
}


@pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
def test_the_check_read_in_process_decides_as_git_would(
    engine: Callable[..., Engine],  # noqa: F811
    walks: list[Path],  # noqa: F811
    change: tuple[Callable[[Path], object], Reason, str | None, bool],
) -> None:
    act, reason, named, by_git = change

    def extra(root: Path, turn: int) -> None:
        if turn == 1:
            os.symlink("value.txt", root / "src" / "link")
        if turn == 3:
            act(root)

    e = engine(_agent(extra), extra=ONE_ARM, files={"src/tool.sh": "#!/bin/sh\n"})
    candidate = e.ctx.layout.workspace_root("candidate")
    records = [run_turn(e.ctx, n, 0, None) for n in (1, 2)]
    walks.clear()
    records += [run_turn(e.ctx, n, 0, None) for n in (3, 4)]
    assert [r.reason for r in records] == [Reason.IMPROVED] * 2 + [reason, Reason.IMPROVED], records[2].detail
    if named is not None:
        assert named in (records[2].detail or "")
    assert walks.count(candidate) == (1 if by_git else 0)
    assert Checkout.open(candidate).status() == {}


def test_a_kept_turn_moves_the_champions_copy_without_a_checkout(
    engine: Callable[..., Engine],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From the second keep on, the champion's copy is moved by copying the candidate's checked files
    (ADR 0052, decision 6): no ``git checkout``, and git finds the copy exactly at the kept commit."""
    checkouts: list[Path] = []
    original = Checkout.advance

    def advance(self: Checkout, sha: str, keep_ignored: Sequence[str] | None = None) -> None:
        checkouts.append(self.path)
        original(self, sha, keep_ignored)

    monkeypatch.setattr(Checkout, "advance", advance)

    def extra(root: Path, turn: int) -> None:
        if turn == 2:
            (root / "src" / "deep").mkdir()
            (root / "src" / "deep" / "new.txt").write_text("new\n")
        if turn == 3:
            (root / "src" / "tool.sh").chmod(0o755)
            os.symlink("value.txt", root / "src" / "link")
        if turn == 4:
            (root / "src" / "deep" / "new.txt").unlink()

    e = engine(_agent(extra), extra=ONE_ARM, files={"src/tool.sh": "#!/bin/sh\n"})
    champion = e.ctx.layout.workspace_root("champion")
    assert run_turn(e.ctx, 1, 0, None).reason is Reason.IMPROVED
    checkouts.clear()
    records = [run_turn(e.ctx, n, 0, None) for n in (2, 3, 4)]
    assert [r.reason for r in records] == [Reason.IMPROVED] * 3
    assert checkouts == []
    co = Checkout.open(champion)
    assert co.head() == records[2].commits["app"]
    assert co.status_and_ignored() == ({}, [])
    assert not (champion / "src" / "deep").exists(), "the emptied directory is gone, as git leaves it"
    assert os.readlink(champion / "src" / "link") == "value.txt"
    assert (champion / "src" / "tool.sh").stat().st_mode & 0o100
    tree = subprocess.run(["git", "-C", str(champion), "ls-files", "-s"], capture_output=True, check=True)
    cand = subprocess.run(
        ["git", "-C", str(e.ctx.layout.workspace_root("candidate")), "ls-files", "-s"],
        capture_output=True,
        check=True,
    )
    assert tree.stdout == cand.stdout

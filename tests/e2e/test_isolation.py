"""Isolation through the CLI (issue 2, "Must hold" 4-6): a misbehaving agent leaves no trace, an evaluator
that edits tracked files fails the baseline, a timed-out agent dies with its whole process group, and the
user's checkout is never touched."""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.conftest import (
    Project,
    assert_checkout_at,
    assert_user_checkout_unchanged,
    ok_run,
    outcomes,
    user_checkout_state,
)
from tests.support.waiting import wait_until

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]

# Turn 1 is a kept improvement (so the champion is not the base); turn 2 improves the metric too, leaves an
# untracked and an ignored file behind, and then misbehaves in the way the test names.
AGENT_TEMPLATE = """\
if [ "$CRUCIBLE_TURN" = 1 ]; then echo 8 > src/value.txt; echo "HYPOTHESIS: good"; exit 0; fi
echo 1 > src/value.txt
echo new > src/new.txt
mkdir -p src/deep/er && echo x > src/deep/er/file.txt
echo noise > src/debug.log
echo "HYPOTHESIS: misbehave"
{misbehaviour}
"""

MISBEHAVIOURS = {
    "edits-protected": "echo 'echo METRIC score=0' > tools/bench.sh",
    "adds-outside-mutable": "mkdir -p docs && echo leak > docs/new.md",
    "commits": "git add -A && git -c user.name=a -c user.email=b commit -qm sneaky && git branch sneaky\n"
    "exit $?",
    "exits-non-zero": "exit 7",
}

EXPECTED = {
    ("edits-protected", "none"): ("rejected", "policy_violation"),
    ("edits-protected", "bwrap"): ("rejected", "policy_violation"),
    ("adds-outside-mutable", "none"): ("rejected", "policy_violation"),
    ("adds-outside-mutable", "bwrap"): ("rejected", "policy_violation"),
    # Without a sandbox the commit succeeds and HEAD moves; inside it .git is read-only, git fails, the agent
    # exits non-zero. Either way the turn must leave no trace.
    ("commits", "none"): ("rejected", "policy_violation"),
    ("commits", "bwrap"): ("failed", "agent_failed"),
    ("exits-non-zero", "none"): ("failed", "agent_failed"),
    ("exits-non-zero", "bwrap"): ("failed", "agent_failed"),
}


@pytest.mark.parametrize("mode", ["none", "bwrap"])
@pytest.mark.parametrize("misbehaviour", sorted(MISBEHAVIOURS))
def test_misbehaving_agent_leaves_no_trace(project: Project, misbehaviour: str, mode: str) -> None:
    project.make(agent=AGENT_TEMPLATE.format(misbehaviour=MISBEHAVIOURS[misbehaviour]))
    project.write_spec(turns=2, sandbox={"mode": mode})
    before = user_checkout_state(project.repo)

    view = ok_run(project.loop())

    assert outcomes(view) == [("accepted", "improved"), EXPECTED[(misbehaviour, mode)]]
    kept, bad = view["turns"]
    assert bad["value"] is None and bad["samples"] == [], "a turn that misbehaved must not be measured"
    assert bad["commit"] is None
    assert view["best"] == {"value": 8.0, "turn": 1}
    champion = kept["commit"]
    assert view["components"][0]["head_sha"] == champion
    candidate = project.checkout(view["run_id"])
    assert_checkout_at(candidate, champion)
    assert_checkout_at(project.checkout(view["run_id"], "champion"), champion)
    refs = git(candidate, "for-each-ref", "--format=%(refname)").split()
    assert refs and all(r.startswith("refs/crucible/") for r in refs), refs
    assert "src/debug.log" not in view["components"][0]["diff"]
    assert_user_checkout_unchanged(before, project.repo)


def test_user_index_with_stale_stat_cache_is_not_rewritten(project: Project) -> None:
    project.make(agent="echo 9 > src/value.txt\n")
    project.write_spec(turns=1)
    # The user touched a tracked file without changing it (a build tool, an editor): the index's stat
    # cache is now stale, and any `git status` that may take the index lock rewrites the index.
    notes = project.repo / "src" / "notes.txt"
    old = notes.stat().st_mtime_ns
    os.utime(notes, ns=(old + 5_000_000_000, old + 5_000_000_000))
    before = user_checkout_state(project.repo)

    view = ok_run(project.loop())

    assert outcomes(view) == [("accepted", "improved")]
    assert_user_checkout_unchanged(before, project.repo)


@pytest.mark.parametrize("evaluator", ["metric", "validation"])
def test_evaluator_that_edits_a_tracked_file_fails_the_baseline(project: Project, evaluator: str) -> None:
    vandal = "echo edited >> src/notes.txt\n"
    project.make(
        {
            "tools/bench.sh": (vandal if evaluator == "metric" else "") + "echo METRIC score=3\n",
            "tools/check.sh": vandal if evaluator == "validation" else "true\n",
        },
        agent="echo 1 > src/value.txt\n",
    )
    project.write_spec(turns=2, validation={"command": "sh tools/check.sh", "retries": 0})
    before = user_checkout_state(project.repo)

    result = project.loop()

    assert result.code == 1, result.describe()
    view = result.json
    assert (view["status"], view["stop_reason"]) == ("failed", "baseline_failed")
    assert view["baseline"]["value"] is None and view["best"] is None and view["turns"] == []
    assert "src/notes.txt" in view["message"]
    assert "src/notes.txt" in result.stderr
    assert_user_checkout_unchanged(before, project.repo)


def _survivors(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``marker``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            state = Path(f"/proc/{entry.name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


HANG_SH = """\
trap '' TERM
(sleep "$1" &)
sleep "$1" &
sleep "$1"
"""


@pytest.mark.parametrize("mode", ["none", "bwrap"])
def test_timed_out_agent_is_killed_with_its_whole_process_group(project: Project, mode: str) -> None:
    marker = f"4000.{secrets.randbelow(10**9):09d}"  # a unique `sleep` argument to find the processes by
    project.make({"tools/hang.sh": HANG_SH})
    project.write_spec(
        turns=1, sandbox={"mode": mode}, agent={"command": f"sh tools/hang.sh {marker}", "timeout": "1s"}
    )
    before = user_checkout_state(project.repo)

    try:
        view = ok_run(project.loop())
        # SIGKILL has been sent when the CLI exits; give the kernel a moment to finish the exits it queued.
        gone = "the timed-out agent's processes to go"
        wait_until(lambda: _survivors(marker) == [], what=gone, timeout=5.0)
    finally:
        for pid in _survivors(marker):
            os.kill(pid, signal.SIGKILL)

    assert outcomes(view) == [("failed", "timeout")]
    assert_checkout_at(project.checkout(view["run_id"]), project.base_sha())
    assert_user_checkout_unchanged(before, project.repo)

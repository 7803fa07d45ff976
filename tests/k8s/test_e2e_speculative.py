"""Speculative turns through the real control plane (ADR-0051).

A ``parallel = 3`` knobs round in warm hypothesis pods that speculate: a slot whose hypothesis of turn
t reported while another still measures takes its hypothesis of turn t+1 at once. The metric holds
turn 1's third hypothesis until the test opens a gate, so the other two slots are free before turn 1
is decided; it writes a line per finished run to a log outside the repository (the pods are local
processes of the process node, so they share this machine's files). Each test compares the run with
the same spec through the local broker (no speculation there): the same decisions and hypotheses.

- turn 1 keeps nothing: the hypotheses of turn 2 the free slots measured before turn 1 was decided
  are the ones recorded (one offer and one take each, no second measurement), and nothing of turn 2
  is in the record before turn 1 is decided;
- turn 1 keeps: the hypotheses of turn 2 taken ahead are void (the champion moved). Their first run
  is held until killed: the pods stop them when the controller withdraws them, and measure turn 2's
  replanned hypotheses against the new champion.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from controller.domain.enums import RunStatus, TurnPhase
from tests.api.sqlite_only import SQLITE_ONLY
from tests.k8s.conftest import ControlPlane, wait_until
from tests.k8s.test_e2e_hypotheses import Sides, _create, _decisions, _grants
from tests.k8s.test_e2e_hypotheses import metric_gate as metric_gate  # the fixtures
from tests.k8s.test_e2e_hypotheses import sides as sides

pytestmark = pytest.mark.slow

# The knobs round's metric, (a - 4)^2 + 1, with the test's controls in ``ctl`` (outside the repo),
# for the run named in ``ctl/run`` only: turn 1's run of ``hold`` waits for ``ctl/gate``; the first
# run of each turn-2 value, when ``ctl/hold-next`` exists, waits until it is killed (60 s at most).
METRIC = """
import json, os, pathlib, time
a = json.load(open("conf.json"))["a"]
turn = int(os.environ["CRUCIBLE_TURN"])
ctl = pathlib.Path({ctl!r})
mine = (ctl / "run").exists() and (ctl / "run").read_text() == os.environ["CRUCIBLE_RUN_ID"]
if mine and turn == 1 and a == {hold}:
    for _ in range(6000):
        if (ctl / "gate").exists():
            break
        time.sleep(0.05)
first = ctl / f"seen-{{turn}}-{{a}}"
if mine and turn == 2 and (ctl / "hold-next").exists() and not first.exists():
    first.touch()
    for _ in range(1200):
        time.sleep(0.05)
with open(ctl / "log", "a") as log:
    log.write(f"{{turn}} {{a}}\\n")
print(f"METRIC m={{(a - 4) ** 2 + 1}}")
"""


@pytest.fixture
def speculative() -> bool:
    return True


@pytest.fixture
def start() -> int:
    """The knob's value at the start (the walk with seed 11 proposes from it, nearest first)."""
    return 4


@pytest.fixture
def repo_files(tmp_path: Path, start: int) -> dict[str, str]:
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    # The third hypothesis of turn 1 is held: from 4 the walk proposes 5, 3, 6; from 1, 2, 3, 4.
    hold = {4: 6, 1: 4}[start]
    return {"conf.json": json.dumps({"a": start}), "bench.py": METRIC.format(ctl=str(ctl), hold=hold)}


def _ctl(sides: Sides) -> Path:
    return sides.settings.home.parent / "ctl"


def _runs(ctl: Path) -> list[str]:
    log = ctl / "log"
    return log.read_text().splitlines() if log.exists() else []


def _drive(sides: Sides, run_id: str) -> tuple[threading.Thread, list[RunStatus]]:
    results: list[RunStatus] = []
    driver = threading.Thread(target=lambda: results.append(sides.remote.drive(run_id).status))
    driver.start()
    return driver, results


def _local_then_remote(
    sides: Sides, *, hold_next: bool = False
) -> tuple[Path, str, str, threading.Thread, list[RunStatus]]:
    """The spec run to its end locally (the decisions the pods must match), then the same spec started
    on the control plane, its driver in a thread: the control directory, both run ids, the driver and
    its result. ``hold_next``: turn 2's runs wait until killed (the metric script's ``hold-next``)."""
    ctl = _ctl(sides)
    local_id = _create(sides.local, sides.spec_path)
    assert sides.local.drive(local_id).status is RunStatus.COMPLETED
    remote_id = _create(sides.remote, sides.spec_path)
    (ctl / "run").write_text(remote_id)
    (ctl / "log").unlink()  # the local run's lines
    if hold_next:
        (ctl / "hold-next").touch()
    driver, results = _drive(sides, remote_id)
    return ctl, local_id, remote_id, driver, results


@SQLITE_ONLY
def test_a_turn_that_keeps_nothing_records_the_next_turns_hypotheses_its_free_pods_measured_ahead(
    sides: Sides, control_plane: ControlPlane
) -> None:
    ctl, local_id, remote_id, driver, results = _local_then_remote(sides)

    def measured_ahead() -> bool:  # turn 2 is 2 and 1 (the walk's last values), three runs each
        runs = _runs(ctl)
        return runs.count("2 2") == 3 and runs.count("2 1") == 3

    wait_until(measured_ahead, what="turn 2's hypotheses measured by the free pods", timeout=240)
    # Turn 1 is still open (its third hypothesis is held), and turn 2 is nowhere in the record.
    assert [(t.number, t.phase) for t in sides.store.list_turns(remote_id)] == [(1, TurnPhase.STARTED)]
    assert sides.store.list_hypotheses(remote_id, 2) == []
    (ctl / "gate").touch()
    driver.join(timeout=240)
    assert results == [RunStatus.COMPLETED]
    assert _decisions(sides.store, remote_id) == _decisions(sides.store, local_id)
    assert [t.number for t in sides.store.list_turns(remote_id)] == [1, 2], "the walk is exhausted"
    assert not any(t.commits for t in sides.store.list_turns(remote_id)), "nothing beats a = 4"
    # What was measured ahead is what turn 2 recorded: one offer and one take each, never measured again.
    scopes = [g["hypothesis"] for g in _grants(sides, remote_id) if "hypothesis" in g]
    assert sorted(s["index"] for s in scopes if s["turn"] == 2) == [0, 0, 1, 1]
    assert _runs(ctl).count("2 2") == 3 and _runs(ctl).count("2 1") == 3


@SQLITE_ONLY
@pytest.mark.parametrize("start", [1])
def test_a_keep_voids_the_next_turns_hypotheses_taken_ahead_and_their_pods_stop_them(
    sides: Sides, control_plane: ControlPlane
) -> None:
    ctl, local_id, remote_id, driver, results = _local_then_remote(sides, hold_next=True)

    def held_ahead() -> bool:  # the free slots run turn 2's 5 and 6 (held) while turn 1 waits for 4
        return (ctl / "seen-2-5").exists() and (ctl / "seen-2-6").exists()

    wait_until(held_ahead, what="turn 2's hypotheses taken ahead by the free pods", timeout=240)
    assert [(t.number, t.phase) for t in sides.store.list_turns(remote_id)] == [(1, TurnPhase.STARTED)]
    (ctl / "gate").touch()  # turn 1 keeps a = 4: what was taken ahead is void
    driver.join(timeout=240)
    assert results == [RunStatus.COMPLETED]
    assert _decisions(sides.store, remote_id) == _decisions(sides.store, local_id)
    turns = sides.store.list_turns(remote_id)
    assert [t.number for t in turns] == [1, 2] and turns[0].commits, "turn 1 keeps 4"
    # The held runs were killed (they never logged), and turn 2 was measured against the new champion.
    runs = [line for line in _runs(ctl) if line.startswith("2 ")]
    assert sorted(runs) == ["2 5"] * 3 + ["2 6"] * 3, runs
    heads = {c.name: c.head_sha for c in sides.store.list_components(remote_id)}
    grants = [g for g in _grants(sides, remote_id) if g.get("hypothesis", {}).get("turn") == 2]
    ahead = [g for g in grants if g["heads"] != heads]
    assert len(ahead) == 4, "two offered ahead and taken, against the champion before the keep"
    assert len(grants) == 8, "then offered again and taken against the new champion"

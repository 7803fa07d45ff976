"""``kill -9`` in the middle of a parallel turn (ADR-0016), then ``crucible resume``: the turn runs again
from its start, the hypotheses its cut-off attempt reported are forgotten (none is reported twice), and
every turn is decided once with all of its hypotheses."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from controller.domain.enums import RunStatus, TurnPhase
from tests.conftest import git
from tests.recovery.conftest import (
    DECISION_KINDS,
    SPEC,
    Lab,
    assert_checkout_clean_at,
    events,
    is_running,
    turns_table,
)

pytestmark = pytest.mark.slow

# Hypothesis i of turn t writes 10 - 2t - i: both improve, index 1 more; it hangs once where armed.
AGENT_SH = """\
. tools/crash.sh
witness "agent:$CRUCIBLE_TURN.$CRUCIBLE_PARALLEL_INDEX"
echo $((10 - 2 * CRUCIBLE_TURN - CRUCIBLE_PARALLEL_INDEX)) > src/value.txt
echo "HYPOTHESIS: turn $CRUCIBLE_TURN index $CRUCIBLE_PARALLEL_INDEX"
hang_once "agent:$CRUCIBLE_TURN.$CRUCIBLE_PARALLEL_INDEX"
"""


def test_a_parallel_turn_cut_off_after_one_report_is_run_again_from_its_start(lab: Lab) -> None:
    (lab.repo / "tools/agent.sh").write_text(AGENT_SH)
    git(lab.repo, "commit", "-qam", "an agent that reads its parallel index")
    lab.spec_path.write_text(SPEC + "\n[broker]\nparallel = 2\n")
    lab.hang_at("agent:2.1")  # turn 2's hypothesis 0 is reported by then

    controller = lab.loop()
    run_id = controller.run_id()
    hung = lab.wait_hung(controller)
    with lab.store() as store:
        reported = [h.index for h in store.list_hypotheses(run_id, 2)]
    os.kill(controller.proc.pid, signal.SIGKILL)
    controller.proc.wait(timeout=30)
    assert reported == [0], "the premise: one hypothesis of the cut-off turn was reported"
    with lab.store() as store:
        assert store.get_run(run_id).status == RunStatus.RUNNING
        assert store.get_turn(run_id, 2).phase == TurnPhase.STARTED

    resumed = lab.cli("resume", run_id, "--json")

    assert resumed.code == 0, resumed.describe()
    view = resumed.json
    assert len(view["turns"]) == 4
    for turn in view["turns"]:
        assert [(h["index"], h["hypothesis"]) for h in turn["hypotheses"]] == [
            (0, f"turn {turn['turn']} index 0"),
            (1, f"turn {turn['turn']} index 1"),
        ]
        assert [h["reason"] for h in turn["hypotheses"]] == ["superseded", "improved"]
    assert view["best"] == {"value": 1.0, "turn": 4}
    stream = events(lab, run_id)
    decided = Counter(e["turn"] for e in stream if e["kind"] in DECISION_KINDS)
    assert decided == {1: 1, 2: 1, 3: 1, 4: 1}
    assert Counter(e["turn"] for e in stream if e["kind"] == "turn_started")[2] == 2, "turn 2 ran again"
    tsv = turns_table(lab, run_id).splitlines()
    assert len(tsv) == 1 + 4 * 3, "a row per turn and per hypothesis, none twice"
    assert not is_running(hung)
    champion = view["components"][0]["head_sha"]
    assert_checkout_clean_at(lab.checkout(run_id, "candidate"), champion)
    assert_checkout_clean_at(lab.checkout(run_id, "champion"), champion)

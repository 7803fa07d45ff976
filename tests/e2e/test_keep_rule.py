"""The keep rule through the CLI (issue 2, "Must hold" 2-3): guards are checked against the base commit, and
interleaved measurement cancels a drifting machine that fools a comparison with stored samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import Project, ok_run, outcomes

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]

GUARD_BENCH = """\
printf 'METRIC score=%s\\n' "$(cat src/value.txt)"
printf 'METRIC mem=%s\\n' "$(cat src/mem.txt)"
"""

# Each turn starts from the champion: one point better on the score, one MB worse on memory.
CREEP_AGENT = """\
v=$(cat src/value.txt); m=$(cat src/mem.txt)
echo $((v - 1)) > src/value.txt
echo $((m + 1)) > src/mem.txt
echo "HYPOTHESIS: trade one MB for one point"
"""


def test_guard_catches_regressions_that_add_up_against_the_base(project: Project) -> None:
    project.make(
        {"tools/bench.sh": GUARD_BENCH, "src/value.txt": "100\n", "src/mem.txt": "100\n"}, agent=CREEP_AGENT
    )
    project.write_spec(
        turns=6,
        metric={"guard": [{"name": "mem", "direction": "minimize", "tolerance": 4.5}]},
    )

    view = ok_run(project.loop())

    # +1 MB per turn is within 4.5 of the champion every time; against the base it is +5 at turn 5.
    assert outcomes(view) == [("accepted", "improved")] * 4 + [("rejected", "guard_regressed")] * 2
    assert [t["value"] for t in view["turns"]] == [99.0, 98.0, 97.0, 96.0, 95.0, 95.0]
    assert view["best"] == {"value": 96.0, "turn": 4}
    assert "mem" in view["turns"][4]["detail"]
    assert "+mem" not in view["components"][0]["diff"]
    assert "+104" in view["components"][0]["diff"], "the champion keeps mem at 104 (base + 4)"


# A noisy metric on a drifting machine: every measurement reads 0.5 lower than the one before (so, for a
# minimize metric, whatever is measured later looks better), plus Gaussian noise (sd 0.5) seeded by the
# measurement's index so the run is deterministic. The agent's change (a line in src/notes.txt) has no effect.
DRIFT_PY = """\
import os, random
from pathlib import Path

counter = Path(os.environ["E2E_DRIFT_COUNTER"])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
print(f"METRIC score={100.0 - 0.5 * n + random.Random(n).gauss(0.0, 0.5):.6f}")
"""


@pytest.mark.parametrize(
    ("interleave", "expected"),
    [
        # Champion and candidate alternate A B B A …: the drift hits both alike and nothing is kept.
        pytest.param(True, "rejected", id="interleaved"),
        # The candidate is compared with samples stored earlier: the drift alone makes it look better.
        pytest.param(False, "accepted", id="stored-reference"),
    ],
)
def test_drift_fools_only_the_comparison_with_stored_samples(
    project: Project, tmp_path: Path, interleave: bool, expected: str
) -> None:
    counter = tmp_path / "drift-counter"
    project.make({"tools/drift.py": DRIFT_PY}, agent='echo "tweak $CRUCIBLE_TURN" >> src/notes.txt\n')
    project.write_spec(
        turns=2,
        sandbox={"mode": "none"},  # the counter lives outside the workspace
        agent={"env_allow": ["E2E_DRIFT_COUNTER"]},
        metric={
            "command": "python3 tools/drift.py",
            "samples": 6,
            "confidence": 0.95,
            "interleave": interleave,
            "sequential": False,  # the fixed rule: every arm gets its six samples (counted below)
        },
    )

    view = ok_run(project.loop(env={"E2E_DRIFT_COUNTER": str(counter)}))

    measured = 6 + 2 * (12 if interleave else 6)
    assert int(counter.read_text()) == measured, "every sample must be one metric run, warmups = 0"
    assert [t["outcome"] for t in view["turns"]] == [expected, expected]
    for turn in view["turns"]:
        assert len(turn["samples"]) == 6
        assert len(turn["reference_samples"]) == (6 if interleave else 0)
    if interleave:
        assert all(t["commit"] is None for t in view["turns"])
        component = view["components"][0]
        assert component["head_sha"] == component["base_sha"] and component["diff"] == ""
        assert all(t["reason"] in ("not_improved", "not_significant") for t in view["turns"])
    else:
        assert view["best"] is not None and view["best"]["turn"] == 2
        assert all(t["p_value"] is not None and t["p_value"] < 0.05 for t in view["turns"])

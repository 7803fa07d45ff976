"""Sequential measurement through the CLI (issue 15): a clear improvement is kept before the maximum
sample count, a clearly worse change is given up early, and every turn says how many pairs it used and why
it stopped, in ``--json``, in ``runs show`` and in ``runs show --tsv``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import Project, ok_run

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]

# A noisy metric: the value in src/value.txt plus 1% Gaussian noise, seeded by a counter of metric runs
# kept outside the workspace, so the run is deterministic; a slow drift (0.1% a run) on top.
NOISY_PY = """\
import os, random
from pathlib import Path

counter = Path(os.environ["E2E_SEQ_COUNTER"])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
value = float(Path("src/value.txt").read_text())
print(f"METRIC score={value * (1 - 0.001 * n) * (1 + random.Random(n).gauss(0.0, 0.01)):.6f}")
"""

# Turn 1 cuts the score by 10% (clearly better); turn 2 puts it back up (clearly worse).
AGENT = """\
case "$CRUCIBLE_TURN" in
  1) echo 90 > src/value.txt; echo "HYPOTHESIS: ten percent less" ;;
  *) echo 99 > src/value.txt; echo "HYPOTHESIS: ten percent more" ;;
esac
"""


def test_sequential_turns_stop_early_and_say_why(project: Project, tmp_path: Path) -> None:
    counter = tmp_path / "seq-counter"
    project.make({"tools/noisy.py": NOISY_PY, "src/value.txt": "100\n"}, agent=AGENT)
    project.write_spec(
        turns=2,
        sandbox={"mode": "none"},  # the counter lives outside the workspace
        agent={"env_allow": ["E2E_SEQ_COUNTER"]},
        metric={"command": "python3 tools/noisy.py", "samples": 10, "confidence": 0.95, "interleave": True},
    )
    env = {"E2E_SEQ_COUNTER": str(counter)}

    view = ok_run(project.loop(env=env))

    kept, worse = view["turns"]
    assert (kept["outcome"], kept["sequential_stop"]) == ("accepted", "kept early")
    assert 3 <= kept["pairs"] < 10 and len(kept["samples"]) == kept["pairs"] == len(kept["reference_samples"])
    assert kept["p_value"] is not None and kept["p_value"] < 0.05
    assert (worse["outcome"], worse["sequential_stop"]) == ("rejected", "rejected early")
    assert worse["pairs"] == 3 and len(worse["samples"]) == 3
    baseline_runs = 10  # the baseline is measured `samples` times on its own
    assert int(counter.read_text()) == baseline_runs + 2 * (kept["pairs"] + worse["pairs"]), (
        "each pair is two metric runs and nothing is measured after a look decides"
    )

    shown = project.cli("runs", "show", view["run_id"], env=env)
    assert shown.code == 0, shown.stderr
    assert f"{kept['pairs']} early" in shown.stdout
    header, first, _second = project.tsv(view["run_id"]).splitlines()
    columns = dict(zip(header.split("\t"), first.split("\t"), strict=True))
    assert (columns["pairs"], columns["sequential_stop"]) == (str(kept["pairs"]), "kept early")


def test_sequential_false_keeps_the_fixed_sample_count(project: Project, tmp_path: Path) -> None:
    counter = tmp_path / "seq-counter"
    project.make({"tools/noisy.py": NOISY_PY, "src/value.txt": "100\n"}, agent=AGENT)
    project.write_spec(
        turns=1,
        sandbox={"mode": "none"},
        agent={"env_allow": ["E2E_SEQ_COUNTER"]},
        metric={
            "command": "python3 tools/noisy.py",
            "samples": 4,
            "confidence": 0.95,
            "interleave": True,
            "sequential": False,
        },
    )

    view = ok_run(project.loop(env={"E2E_SEQ_COUNTER": str(counter)}))

    (turn,) = view["turns"]
    assert turn["outcome"] == "accepted" and len(turn["samples"]) == 4
    assert turn["pairs"] is None and turn["sequential_stop"] is None
    assert int(counter.read_text()) == 4 + 2 * 4

"""Turn outcomes through the CLI (issue 2, "Must hold" 1): equal is not better, nothing is no change, a
failing validation beats an improving metric, and an invalid metric is never a baseline or a best."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Project, assert_checkout_at, ok_run, outcomes

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]

OUTCOME_AGENT = """\
case "$CRUCIBLE_TURN" in
  1) echo "more notes" >> src/notes.txt; echo "HYPOTHESIS: notes only" ;;
  2) echo "HYPOTHESIS: change nothing" ;;
  3) echo 5 > src/value.txt; touch src/broken; echo "HYPOTHESIS: faster but broken" ;;
  4) echo 7 > src/value.txt; echo "HYPOTHESIS: faster" ;;
esac
"""

CHECK_SH = "test ! -e src/broken\n"

# The metric prints what src/value.txt says, or one of the invalid outputs docs/metric.md names.
MODAL_BENCH = """\
v=$(cat src/value.txt)
case "$v" in
  missing) echo "METRIC other=1" ;;
  duplicate) echo "METRIC score=1"; echo "METRIC score=2" ;;
  *) printf 'METRIC score=%s\\n' "$v" ;;
esac
"""


@pytest.mark.parametrize(
    "metric",
    [
        pytest.param({"samples": 1, "confidence": 0.0, "interleave": False}, id="deterministic"),
        pytest.param({"samples": 3, "confidence": 0.95, "interleave": True}, id="interleaved-3v3"),
    ],
)
def test_equal_is_not_improved_nothing_is_no_diff_and_validation_rejects(
    project: Project, metric: dict[str, Any]
) -> None:
    project.make({"tools/check.sh": CHECK_SH}, agent=OUTCOME_AGENT)
    project.write_spec(
        turns=4, metric=metric, validation={"command": "sh tools/check.sh", "retries": 1, "timeout": "30s"}
    )

    view = ok_run(project.loop())

    assert outcomes(view) == [
        ("rejected", "not_improved"),
        ("no_change", "no_diff"),
        ("rejected", "validation_failed"),
        ("accepted", "improved"),
    ]
    first, second, third, fourth = view["turns"]
    assert first["value"] == 10.0 and first["changed_paths"] == ["src/notes.txt"]
    assert first["commit"] is None
    assert second["changed_paths"] == [] and second["value"] is None
    assert third["value"] is None, "a candidate that fails validation must not be measured"
    assert third["commit"] is None
    assert fourth["value"] == 7.0 and fourth["commit"]
    assert view["best"] == {"value": 7.0, "turn": 4}
    logs = project.run_dir(view["run_id"]) / "logs"
    assert (logs / "turn-0003-validation-1.log").is_file()
    assert (logs / "turn-0003-validation-2.log").is_file(), "validation.retries = 1 means a second attempt"
    assert view["components"][0]["head_sha"] == fourth["commit"]
    assert_checkout_at(project.checkout(view["run_id"]), fourth["commit"])


def test_invalid_metrics_fail_the_turn_and_never_become_best(project: Project) -> None:
    agent = """\
case "$CRUCIBLE_TURN" in
  1) echo missing > src/value.txt ;;
  2) echo duplicate > src/value.txt ;;
  3) echo NaN > src/value.txt ;;
  4) echo -inf > src/value.txt ;;
  5) echo 4 > src/value.txt ;;
esac
"""
    project.make({"tools/bench.sh": MODAL_BENCH}, agent=agent)
    project.write_spec(turns=5)

    view = ok_run(project.loop())

    assert outcomes(view) == [("failed", "metric_invalid")] * 4 + [("accepted", "improved")]
    for turn in view["turns"][:4]:
        assert turn["value"] is None and turn["samples"] == [] and turn["commit"] is None
    details = " | ".join(t["detail"] for t in view["turns"][:4])
    for word in ("missing", "2 times", "not finite"):
        assert word in details
    # -inf would beat everything for a minimize metric: only the valid turn may be best.
    assert view["best"] == {"value": 4.0, "turn": 5}
    assert view["baseline"] == {"value": 10.0, "samples": [10.0]}


@pytest.mark.parametrize("mode", ["missing", "duplicate", "nan", "inf"])
def test_invalid_baseline_fails_the_run(project: Project, mode: str) -> None:
    project.make(
        {"tools/bench.sh": MODAL_BENCH, "src/value.txt": f"{mode}\n"}, agent="echo 1 > src/value.txt\n"
    )
    project.write_spec(turns=2)

    result = project.loop()

    assert result.code == 1, result.describe()
    view = result.json
    assert view["status"] == "failed" and view["stop_reason"] == "baseline_failed"
    assert view["baseline"] == {"value": None, "samples": []}
    assert view["best"] is None
    assert view["turns"] == [], "no turn may run on an invalid baseline"
    assert "baseline failed" in result.stderr
    kinds = [event["kind"] for event in project.events(view["run_id"])]
    assert "baseline" not in kinds and kinds[-1] == "completed"

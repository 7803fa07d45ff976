"""What is measured is the committed tree (issue 11, section 1; docs/metric.md).

An agent cannot change the evaluator, so it changes what the evaluator *reads*: ``git status`` does not show
ignored files, and a planted ``__pycache__/evallib.cpython-311.pyc`` whose header carries the protected
``evallib.py``'s real mtime and size is loaded by Python instead of the source. The patch and the PR would
hold only a blank line, yet the score would be whatever the planted bytecode returns. These tests run that
attack through the real CLI, with bubblewrap and without, and check that a kept score is the one a fresh
clone of the kept commit measures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git
from tests.e2e.conftest import Project, ok_run, outcomes

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]

EVALLIB = 'def score():\n    return float(open("src/value.txt").read())\n'
BENCH_PY = (
    'import sys\nsys.path.insert(0, "tools")\nimport evallib\nprint(f"METRIC score={evallib.score()}")\n'
)

# Plants bytecode for tools/evallib.py compiled from ``return 1.0``, stamped with the real source's mtime and
# size, so Python's timestamp check accepts it. The interpreter is the one the metric runs (same PATH).
PLANT_PY = r"""
import importlib.util, marshal, os, struct, sys
source = "tools/evallib.py"
code = compile("def score():\n    return 1.0\n", source, "exec")
info = os.stat(source)
header = importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, int(info.st_mtime) & 0xFFFFFFFF, info.st_size)
target = importlib.util.cache_from_source(source)
os.makedirs(os.path.dirname(target), exist_ok=True)
with open(target, "wb") as handle:
    handle.write(header + marshal.dumps(code))
"""


def _files(agent_body: str) -> dict[str, str]:
    return {
        "tools/evallib.py": EVALLIB,
        "tools/bench.py": BENCH_PY,
        "tools/plant.py": PLANT_PY,
        "tools/agent.sh": agent_body,
    }


def _spec(project: Project, mode: str, **changes: object) -> None:
    python = sys.executable
    project.write_spec(
        sandbox={"mode": mode},
        metric={"command": f"{python} tools/bench.py"},
        agent={"command": f"PY={python} sh tools/agent.sh"},
        **changes,
    )


@pytest.mark.parametrize("mode", ["none", "bwrap"])
def test_planted_bytecode_is_not_measured(project: Project, mode: str) -> None:
    # The agent's only tracked change is a blank line; the score would come from the planted bytecode.
    project.make(_files('printf "\\n" >> src/value.txt\n"$PY" tools/plant.py\n'))
    _spec(project, mode)

    view = ok_run(project.loop())

    assert outcomes(view) == [("rejected", "not_improved")], view["turns"]
    assert view["turns"][0]["value"] == 10.0
    assert view["best"] is None


@pytest.mark.parametrize("mode", ["none", "bwrap"])
def test_changed_keep_ignored_cache_is_evaluator_mutated(project: Project, mode: str) -> None:
    # A cache the spec keeps across turns is an input the agent's turn may not have written.
    # Turn 2 is honest (a blank line only): the poisoned cache must not survive into its measurement.
    agent = 'printf "\\n" >> src/value.txt\nif [ "$CRUCIBLE_TURN" = 1 ]; then "$PY" tools/plant.py; fi\n'
    project.make(_files(agent))
    _spec(project, mode, turns=2, workspace={"keep_ignored": ["__pycache__"]})

    view = ok_run(project.loop())

    assert outcomes(view) == [("rejected", "evaluator_mutated"), ("rejected", "not_improved")], view["turns"]
    assert "tools/__pycache__/evallib" in view["turns"][0]["detail"]
    assert view["turns"][0]["value"] is None
    assert view["turns"][1]["value"] == 10.0


def test_kept_score_reproduces_on_a_fresh_clone(project: Project, tmp_path: Path) -> None:
    # An honest improvement (10 -> 8) plus a plant that would report 1.0: what is kept must be the 8.
    project.make(_files('echo 8 > src/value.txt\n"$PY" tools/plant.py\n'))
    _spec(project, "none")

    view = ok_run(project.loop())

    assert outcomes(view) == [("accepted", "improved")]
    kept = view["turns"][0]["commit"]
    fresh = tmp_path / "fresh"
    candidate = project.checkout(view["run_id"])
    git(tmp_path, "clone", "-q", "--no-checkout", str(candidate), str(fresh))
    git(fresh, "checkout", "-q", "--detach", kept)
    out = subprocess.run(
        [sys.executable, "tools/bench.py"], cwd=fresh, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == f"METRIC score={view['best']['value']}"
    assert view["best"] == {"value": 8.0, "turn": 1}

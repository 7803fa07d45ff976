"""Self-repair of the champion's copy (issue 21, deliverable 5).

An unsandboxed agent that writes into the champion arm's checkout used to get that turn and every
later one rejected as ``evaluator_mutated`` (blaming the metric), since nothing repaired the copy.
Now the champion's copy is checked after the agent ran (HEAD and one status walk, which lists the
ignored entries too, against the fingerprint taken when crucible last left the copy) and restored:
the change is that turn's ``policy_violation`` and later turns are decided as usual. A real run:
git repository, the local broker, SQLite, a shell agent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.brokers.local import LocalBroker
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import Reason, RunStatus
from controller.store import Store
from controller.store.records import TurnRecord
from controller.wiring import compose_service
from tests.conftest import make_repo
from tests.support.fixtures import migrated_sqlite_url

pytestmark = pytest.mark.slow

# Lowers value.txt each turn; on turn 1 it also writes into the champion's copy (its sibling arm).
AGENT = """\
v=$(cat value.txt)
echo $((v - 1)) > value.txt
echo "HYPOTHESIS: lower it to $((v - 1))"
if [ "$CRUCIBLE_TURN" = "1" ]; then
  champion=$(pwd | sed 's#/arms/candidate#/arms/champion#')
  [ "$champion" != "$(pwd)" ] && echo 0 > "$champion/value.txt"
fi
"""

SPEC = """
objective = "lower the value"
turns = 3
[agent]
command = "sh {agent}"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC value=$(cat value.txt)"
name = "value"
direction = "minimize"
samples = 1
warmups = 0
confidence = 0
interleave = true
[[component]]
name = "app"
repo = "."
mutable = ["value.txt"]
"""


# A make-like build the metric runs: build/value (ignored, kept across turns) is rebuilt only when
# value.txt is newer, so a planted build output with a future mtime is what the metric reads.
MEASURE = """\
if [ ! -f build/value ] || [ value.txt -nt build/value ]; then
  mkdir -p build && cp value.txt build/value
fi
echo "METRIC value=$(cat build/value)"
"""

# Turn 1 makes the value worse and plants a build output in the champion's copy that makes the
# champion look far worse; turn 2 lowers it honestly but plants bytecode there; later turns lower it.
PLANTER = """\
v=$(cat value.txt)
champion=$(pwd | sed 's#/arms/candidate#/arms/champion#')
[ "$champion" = "$(pwd)" ] && exit 3
case "$CRUCIBLE_TURN" in
  1) echo $((v + 1)) > value.txt
     echo 100 > "$champion/build/value" && touch -d 2099-01-01 "$champion/build/value" ;;
  2) echo $((v - 1)) > value.txt
     mkdir -p "$champion/__pycache__" && echo junk > "$champion/__pycache__/value.cpython-311.pyc" ;;
  *) echo $((v - 1)) > value.txt ;;
esac
echo "HYPOTHESIS: value $(cat value.txt)"
"""

PLANTED_SPEC = """
objective = "lower the value"
turns = 4
[agent]
command = "sh {agent}"
[sandbox]
mode = "none"
[metric]
command = "sh measure.sh"
name = "value"
direction = "minimize"
samples = 1
warmups = 0
confidence = 0
interleave = true
[workspace]
keep_ignored = ["build/"]
[[component]]
name = "app"
repo = "."
mutable = ["value.txt"]
"""


def _no_forge(spec: object) -> object:
    raise AssertionError("this run does not publish")


def _drive(tmp_path: Path, agent: str, spec: str, files: dict[str, str]) -> tuple[list[TurnRecord], Path]:
    """Run the spec to its end on a fresh repository; the turns and the champion copy's directory."""
    script = tmp_path / "agent.sh"
    script.write_text(agent)
    repo = make_repo(tmp_path / "app", {**files, "crucible.toml": spec.format(agent=script)})
    url = migrated_sqlite_url(tmp_path / "crucible.db")
    with Store.open(url, upgrade=True) as store:
        settings = Settings(home=tmp_path / "home", database_url=url)
        service = compose_service(
            settings,
            store,
            environ={},
            forge_for=_no_forge,
            broker=lambda runner: LocalBroker(runner, inline=True),
        )
        spec_path = repo / "crucible.toml"
        run_id = service.create(load_spec(spec_path), spec_path.read_text(), spec_path, RunOptions())
        result = service.drive(run_id)
        assert result.status is RunStatus.COMPLETED, result.message
        turns = store.list_turns(run_id)
    return turns, settings.run_dir(run_id) / "arms" / "champion" / "app"


def test_a_write_into_the_champions_copy_fails_that_turn_only(tmp_path: Path) -> None:
    turns, champion = _drive(tmp_path, AGENT, SPEC, {"value.txt": "10\n"})
    assert [(t.number, t.reason) for t in turns] == [
        (1, Reason.POLICY_VIOLATION),
        (2, Reason.IMPROVED),
        (3, Reason.IMPROVED),
    ], [(t.number, t.reason, t.detail) for t in turns]
    assert "champion's copy (restored): value.txt" in (turns[0].detail or "")
    assert [t.value for t in turns[1:]] == [9.0, 8.0], "measured against the repaired champion"
    if (champion / "value.txt").exists():
        assert (champion / "value.txt").read_text() == "8\n", "the champion's copy is the kept commit"


def test_ignored_files_planted_in_the_champions_copy_fail_that_turn_only(tmp_path: Path) -> None:
    """Without the fingerprint, turn 1 kept a worse commit (11 measured against a champion reading
    the planted 100) and the planted output stood for every later turn; the bytecode of turn 2 was
    removed before the measurement but never named."""
    files = {"value.txt": "10\n", "measure.sh": MEASURE, ".gitignore": "build/\n__pycache__/\n"}
    turns, champion = _drive(tmp_path, PLANTER, PLANTED_SPEC, files)
    assert [(t.number, t.reason, t.value) for t in turns] == [
        (1, Reason.POLICY_VIOLATION, None),
        (2, Reason.POLICY_VIOLATION, None),
        (3, Reason.IMPROVED, 9.0),
        (4, Reason.IMPROVED, 8.0),
    ], [(t.number, t.reason, t.value, t.detail) for t in turns]
    assert "champion's copy (restored): build/value (ignored, kept)" in (turns[0].detail or "")
    assert "champion's copy (restored): __pycache__/ (ignored)" in (turns[1].detail or "")
    assert not (champion / "__pycache__").exists()
    if (champion / "build" / "value").exists():  # rebuilt by the champion's own measurement
        assert (champion / "build" / "value").read_text() in ("9\n", "8\n")

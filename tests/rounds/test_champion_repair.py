"""Self-repair of the champion's copy (issue 21, deliverable 5).

An unsandboxed agent that writes into the champion arm's checkout used to get that turn and every
later one rejected as ``evaluator_mutated`` (blaming the metric), since nothing repaired the copy.
Now the champion's copy is checked after the agent ran (HEAD and one status walk) and restored:
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
from controller.wiring import compose_service
from tests.conftest import git, make_repo

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


def _no_forge(spec: object) -> object:
    raise AssertionError("this run does not publish")


def test_a_write_into_the_champions_copy_fails_that_turn_only(tmp_path: Path) -> None:
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT)
    repo = make_repo(tmp_path / "app", {"value.txt": "10\n", "crucible.toml": SPEC.format(agent=agent)})
    git(repo, "add", "crucible.toml")
    url = f"sqlite:///{tmp_path / 'crucible.db'}"
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
        champion = settings.run_dir(run_id) / "arms" / "champion" / "app" / "value.txt"
    assert [(t.number, t.reason) for t in turns] == [
        (1, Reason.POLICY_VIOLATION),
        (2, Reason.IMPROVED),
        (3, Reason.IMPROVED),
    ], [(t.number, t.reason, t.detail) for t in turns]
    assert "champion's copy (restored): value.txt" in turns[0].detail
    assert [t.value for t in turns[1:]] == [9.0, 8.0], "measured against the repaired champion"
    if champion.exists():
        assert champion.read_text() == "8\n", "the champion's copy is the kept commit, not the agent's write"

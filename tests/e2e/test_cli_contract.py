"""The CLI contract of docs/cli.md, end to end: ``--json``, exit codes, ``--dry-run``, ``init``,
``runs show --events/--tsv``, ``patch``, ``accept``, COST accounting and the cost budget, and the knobs
proposer's ``exhausted`` stop."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from tests.conftest import E2E_HOME, git, isolate_environment, watched_machine_home
from tests.e2e.conftest import COMPONENT, Project, ok_run, outcomes, user_checkout_state

pytestmark = pytest.mark.slow

SHA = re.compile(r"[0-9a-f]{40}")

CONTRACT_AGENT = """\
case "$CRUCIBLE_TURN" in
  1) echo 8 > src/value.txt; echo "HYPOTHESIS: eight is less"
     echo "COST usd=0.25 tokens=100"; echo "COST usd=0.25 tokens=50" ;;
  2) echo more >> src/notes.txt; echo "HYPOTHESIS: notes"; echo "COST usd=0.125 tokens=10" ;;
  3) echo "COST usd=0.125 tokens=5"; exit 3 ;;
esac
"""

TOP_KEYS = {"run_id", "status", "stop_reason", "baseline", "best", "turns", "components", "pull_requests"}
TURN_KEYS = {
    "turn",
    "round",
    "outcome",
    "reason",
    "value",
    "samples",
    "reference_samples",
    "p_value",
    "changed_paths",
    "hypothesis",
    "commit",
    "cost_usd",
    "duration_s",
}


@dataclass(frozen=True)
class Finished:
    project: Project
    view: dict[str, Any]
    base_sha: str  # main when the run started (the patch test moves it later)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Finished]:
    """A finished three-turn run (kept, rejected, failed) with an interleaved 3 v 3 significance test.

    Made once per module (and xdist worker), in an environment isolated as each test's is (its own
    HOME and CRUCIBLE_HOME, the machine's HOME watched unless ``CRUCIBLE_TEST_E2E_HOME=temp``): three
    tests read it, one ``crucible loop`` each was 3.5-4.7 s of setup (issue 23). Only
    test_patch_applies_on_the_base_and_accept_refuses_a_moved_checkout changes anything (the user's
    checkout, at its end); the others read the run's record, and base_sha from before."""
    root = tmp_path_factory.mktemp("finished")
    with pytest.MonkeyPatch.context() as env:
        isolate_environment(env, root)
        with ExitStack() as home:
            if E2E_HOME == "machine":
                home.enter_context(watched_machine_home(env))
            project = Project(root)
            project.make(agent=CONTRACT_AGENT)
            project.write_spec(
                turns=3, metric={"samples": 3, "confidence": 0.95, "interleave": True, "sequential": False}
            )
            base_sha = project.base_sha()
            result = project.loop()
    view = ok_run(result)
    assert len(result.stdout.splitlines()) == 1, "with --json, stdout carries only the JSON object"
    assert "turn" in result.stderr and "stopped:" in result.stderr, "the live table goes to stderr"
    yield Finished(project, view, base_sha)


def test_json_object_has_the_design_fields(finished: Finished) -> None:
    view = finished.view
    assert set(view) >= TOP_KEYS
    assert isinstance(view["run_id"], str) and view["run_id"]
    assert (view["status"], view["stop_reason"]) == ("completed", "max_turns")
    assert view["baseline"] == {"value": 10.0, "samples": [10.0, 10.0, 10.0]}
    assert view["best"] == {"value": 8.0, "turn": 1}
    assert view["pull_requests"] == []
    assert outcomes(view) == [
        ("accepted", "improved"),
        ("rejected", "not_improved"),
        ("failed", "agent_failed"),
    ]
    for number, turn in enumerate(view["turns"], start=1):
        assert set(turn) >= TURN_KEYS, TURN_KEYS - set(turn)
        assert (turn["turn"], turn["round"]) == (number, 0)
        assert isinstance(turn["duration_s"], float) and turn["duration_s"] >= 0
    kept, rejected, failed = view["turns"]
    assert kept["samples"] == [8.0] * 3 and kept["reference_samples"] == [10.0] * 3
    assert kept["value"] == 8.0 and kept["p_value"] == pytest.approx(0.05)
    assert SHA.fullmatch(kept["commit"]) and kept["changed_paths"] == ["src/value.txt"]
    assert kept["hypothesis"] == "eight is less"
    assert rejected["value"] == 8.0 and rejected["reference_samples"] == [8.0] * 3
    assert rejected["commit"] is None and rejected["changed_paths"] == ["src/notes.txt"]
    assert failed["value"] is None and failed["p_value"] is None and failed["samples"] == []
    assert [t["cost_usd"] for t in view["turns"]] == [0.5, 0.125, 0.125], "COST lines add up per turn"
    (component,) = view["components"]
    assert component["name"] == COMPONENT
    assert component["base_sha"] == finished.base_sha
    assert component["head_sha"] == kept["commit"]
    assert "-10\n+8\n" in component["diff"] and "src/value.txt" in component["diff"]


def test_runs_show_json_events_and_tsv(finished: Finished) -> None:
    project, view = finished.project, finished.view
    run_id = view["run_id"]
    shown = project.cli("runs", "show", run_id, "--json")
    assert shown.code == 0 and shown.json is not None
    assert {k: shown.json[k] for k in TOP_KEYS} == {k: view[k] for k in TOP_KEYS}

    events = project.cli("runs", "show", run_id, "--events")
    assert events.code == 0
    rows = [json.loads(line) for line in events.stdout.splitlines()]
    kinds = [r["kind"] for r in rows]
    assert kinds[0] == "baseline" and kinds[-1] == "completed"
    assert kinds.count("turn_started") == 3
    assert {"accepted", "rejected", "failed"} <= set(kinds)
    assert all(r["run_id"] == run_id for r in rows)
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)

    tsv = project.cli("runs", "show", run_id, "--tsv")
    assert tsv.code == 0
    lines = tsv.stdout.splitlines()
    header = lines[0].split("\t")
    assert header[:4] == ["turn", "round", "outcome", "reason"] and "value" in header
    assert len(lines) == 1 + 3
    cells = [line.split("\t") for line in lines[1:]]
    assert all(len(c) == len(header) for c in cells)
    assert [c[0] for c in cells] == ["1", "2", "3"]
    assert [c[header.index("outcome")] for c in cells] == ["accepted", "rejected", "failed"]

    listed = project.cli("runs", "list", "--json")
    assert [r["run_id"] for r in listed.json] == [run_id]


def test_patch_applies_on_the_base_and_accept_refuses_a_moved_checkout(finished: Finished) -> None:
    project, view = finished.project, finished.view
    run_id = view["run_id"]
    repo = project.repo
    patch = project.cli("patch", run_id)
    assert patch.code == 0
    assert patch.stdout.startswith(f"# component: {COMPONENT}\n")
    diff = patch.stdout.split("\n", 1)[1]
    assert diff == view["components"][0]["diff"]
    check = subprocess.run(
        ["git", "apply", "--check", "-"], cwd=repo, input=diff, text=True, capture_output=True
    )
    assert check.returncode == 0, check.stderr
    pristine = user_checkout_state(repo)

    (repo / "scratch.txt").write_text("work in progress\n")
    refused = project.cli("accept", run_id)
    assert refused.code == 1, refused.describe()
    assert "working tree" in refused.stderr
    assert (repo / "src" / "value.txt").read_text() == "10\n", "a refused accept applies nothing"
    (repo / "scratch.txt").unlink()
    assert user_checkout_state(repo)["worktree"] == pristine["worktree"]

    accepted = project.cli("accept", run_id)
    assert accepted.code == 0, accepted.describe()
    assert (repo / "src" / "value.txt").read_text() == "8\n"
    assert git(repo, "status", "--porcelain") == "M src/value.txt"
    assert git(repo, "rev-parse", "HEAD") == pristine["HEAD"], "accept must not commit"

    git(repo, "commit", "-qam", "the user's own commit")
    moved = project.cli("accept", run_id)
    assert moved.code == 1, moved.describe()
    assert "HEAD" in moved.stderr and "moved" in moved.stderr


def test_dry_run_resolves_and_runs_nothing(project: Project, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    project.make()
    project.write_spec(
        sandbox={"mode": "none"},
        agent={"command": f"touch {ran}-agent"},
        metric={"command": f"touch {ran}-metric; sh tools/bench.sh"},
        validation={"command": f"touch {ran}-validation"},
    )

    text = project.cli("loop", "--spec", str(project.spec_path), "--dry-run")
    # The same dry run's --json form, in-process (the console script ran just above).
    as_json = project.cli_in_process("loop", "--spec", str(project.spec_path), "--dry-run", "--json")

    assert text.code == 0, text.describe()
    assert project.base_sha() in text.stdout
    surface = re.search(r"mutable files \((\d+)\): (.*)", text.stdout)
    assert surface is not None, text.stdout
    assert surface.group(1) == "2" and surface.group(2).split(", ") == ["src/notes.txt", "src/value.txt"]
    assert as_json.code == 0 and as_json.json["components"][0]["base_sha"] == project.base_sha()
    assert as_json.json["components"][0]["mutable_files"] == ["src/notes.txt", "src/value.txt"]
    assert list(tmp_path.glob("ran*")) == [], "--dry-run ran a command"
    assert not (project.home / "runs").exists()
    assert project.cli("runs", "list", "--json").json == []


def test_dry_run_prints_the_job_a_kubernetes_broker_would_create(project: Project) -> None:
    project.make()
    project.write_spec(
        broker={
            "kind": "kubernetes",
            "image": "ghcr.io/acme/loop:1",
            "agent_secret": "loop-agent",
            "ttl": "5m",
        }
    )

    text = project.cli("loop", "--spec", str(project.spec_path), "--dry-run")
    # The --json forms in-process (the console script ran just above).
    as_json = project.cli_in_process("loop", "--spec", str(project.spec_path), "--dry-run", "--json")

    assert text.code == 0, text.describe()
    assert '"kind": "Job"' in text.stdout and '"kind": "Secret"' in text.stdout
    job, secret = as_json.json["kubernetes"]
    assert job["metadata"]["name"] == "crucible-r0-dry-run-0"
    assert job["metadata"]["labels"]["app.kubernetes.io/component"] == "loop"
    assert (job["spec"]["backoffLimit"], job["spec"]["ttlSecondsAfterFinished"]) == (0, 300)
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/acme/loop:1"
    assert container["command"] == ["crucible", "worker"]
    assert container["envFrom"] == [{"secretRef": {"name": "loop-agent"}}]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    token = next(e for e in container["env"] if e["name"] == "CRUCIBLE_WORKER_TOKEN")
    assert token["valueFrom"]["secretKeyRef"]["name"] == secret["metadata"]["name"]
    assert secret["stringData"]["token"].startswith("(minted")
    assert not (project.home / "runs").exists()
    local = project.cli_in_process("loop", "--spec", str(project.write_spec()), "--dry-run", "--json")
    assert local.json["kubernetes"] is None


def test_init_writes_a_spec_that_dry_run_accepts(project: Project) -> None:
    repo = project.make()

    first = project.cli("init", cwd=repo)
    again = project.cli_in_process("init", cwd=repo)  # the refusal in-process: a process ran just above

    assert first.code == 0, first.describe()
    assert again.code == 2 and "exists" in again.stderr, "init must not overwrite a spec"
    spec = repo / "crucible.toml"
    assert project.cli("loop", "--dry-run", cwd=repo).code == 0, "the template must be valid as written"
    doc = tomlkit.parse(spec.read_text())
    doc["agent"]["command"] = "sh tools/agent.sh"
    doc["metric"]["command"] = "sh tools/bench.sh"
    spec.write_text(tomlkit.dumps(doc))
    dry = project.cli_in_process("loop", "--dry-run", "--json", cwd=repo)  # after a process, just above
    assert dry.code == 0, dry.describe()
    (component,) = dry.json["components"]
    assert (component["name"], component["base"]) == ("repo", "main")
    assert component["base_sha"] == project.base_sha()
    assert dry.json["metric"]["command"] == "sh tools/bench.sh"
    assert "tools/bench.sh" in component["evaluator_files"]
    assert "tools/bench.sh" not in component["mutable_files"]


@pytest.mark.usefixtures("migrated_home")  # not about a first run (``finished`` is)
def test_cost_lines_add_up_and_the_cost_budget_stops_the_run(project: Project) -> None:
    agent = 'echo $((10 - CRUCIBLE_TURN)) > src/value.txt; echo "COST usd=0.375 tokens=7"\n'
    project.make(agent=agent)
    project.write_spec(turns=10, budget={"cost_usd": 1.0})

    view = ok_run(project.loop())

    # 0.375 per turn: 0.75 after two turns is under budget, 1.125 after three is not.
    assert view["stop_reason"] == "cost"
    assert len(view["turns"]) == 3
    assert [t["cost_usd"] for t in view["turns"]] == [0.375] * 3
    assert view["cost_usd"] == pytest.approx(1.125)
    assert view["tokens"] == 21
    assert "cost" in view["message"]


@pytest.mark.usefixtures("migrated_home")  # not about a first run (``finished`` is)
def test_knobs_stop_with_exhausted_when_the_surface_is_spent(project: Project) -> None:
    bench = "printf 'METRIC score=%s\\n' \"$(sed -n 's/^level = //p' config.toml)\"\n"
    project.make({"config.toml": "[tune]\nlevel = 2\n", "tools/bench.sh": bench})
    project.write_spec(
        turns=10,
        agent={
            "command": None,
            "builtin": "knobs",
            "seed": 3,
            "knob": [{"file": "config.toml", "key": "tune.level", "values": [1, 2, 3]}],
        },
        component=[
            {"name": COMPONENT, "repo": "repo", "mutable": ["config.toml"], "protected": ["tools/**"]}
        ],
    )

    view = ok_run(project.loop())

    assert view["stop_reason"] == "exhausted"
    assert 2 <= len(view["turns"]) < 10
    assert all(t["hypothesis"].startswith("set tune.level in config.toml") for t in view["turns"])
    assert view["best"] == {"value": 1.0, "turn": next(t["turn"] for t in view["turns"] if t["value"] == 1.0)}
    assert "level = 1" in view["components"][0]["diff"]


def test_bad_usage_exits_2(project: Project) -> None:
    project.make()
    project.write_spec()
    assert project.cli("loop", "--no-such-option").code == 2
    # Two more usage errors of the same command in-process (its console script exits 2 just above).
    assert project.cli_in_process("loop", "--spec", str(project.spec_path), "--turns", "-1").code == 2
    assert project.cli_in_process("loop", "--spec", str(project.root / "missing.toml")).code == 2
    missing = project.cli("runs", "show", "no-such-run")
    assert missing.code == 2 and "no-such-run" in missing.stderr


@pytest.mark.usefixtures("migrated_home")  # not about a first run (``finished`` is)
def test_best_is_null_when_nothing_was_kept(project: Project) -> None:
    project.make(agent="echo more >> src/notes.txt\n")
    project.write_spec(turns=1)

    view = ok_run(project.loop())

    assert outcomes(view) == [("rejected", "not_improved")]
    assert view["best"] is None


def test_the_same_run_on_both_databases(project: Project, database_url: str) -> None:
    password = f"E2ELEAKdbpw{secrets.token_hex(6)}"
    url = database_url.replace("postgres@", f"postgres:{password}@", 1)  # trust auth ignores it
    env = {"CRUCIBLE_DATABASE_URL": url}
    # The agent fails its turn if it can see the controller's database URL (or its password).
    agent = "env | grep -q -e CRUCIBLE_DATABASE_URL -e E2ELEAK && exit 9\necho 8 > src/value.txt\n"
    project.make(agent=agent)
    project.write_spec(turns=1)

    upgraded = project.cli("db", "upgrade", env=env)
    result = project.loop(env=env)
    shown = project.cli("runs", "show", result.json["run_id"] if result.json else "-", "--json", env=env)
    events = project.cli("runs", "show", result.json["run_id"] if result.json else "-", "--events", env=env)

    assert upgraded.code == 0, upgraded.describe()
    view = ok_run(result)
    assert outcomes(view) == [("accepted", "improved")]
    assert shown.json["best"] == view["best"] == {"value": 8.0, "turn": 1}
    assert [json.loads(line)["kind"] for line in events.stdout.splitlines()][-1] == "completed"
    if not database_url.startswith("sqlite"):
        assert not (project.home / "crucible.db").exists(), "CRUCIBLE_DATABASE_URL must replace SQLite"
    logs = "".join(p.read_text() for p in (project.run_dir(view["run_id"]) / "logs").iterdir())
    for text in (upgraded.output, result.output, shown.output, events.output, logs):
        assert password not in text

"""Recovery fixtures: a user repository whose agent and metric hang once on demand, the real CLI as a
process the test can kill, and the checks that a resumed run ended where an uninterrupted one does.

The repository's agent and metric are deterministic (the agent's change depends only on CRUCIBLE_TURN, the
metric prints the number in ``src/value.txt``, one sample, no significance test). Both source
``tools/crash.sh``: when ``$RECOVERY_DIR/crash-once`` holds ``agent:K`` (or ``metric:K``, ``metric:0`` being
the baseline) the script removes the flag, leaves debris in its workspace (a tracked file changed, an
untracked and an ignored file created), writes its pid to ``hung.pid``, touches ``hung`` and sleeps ignoring
SIGTERM. The test then kills the controller (``kill -9``) or interrupts it (SIGINT) at exactly that point;
the flag is gone, so the re-run of the turn proceeds. Every agent and metric invocation after the hang also
appends ``<where> alive|dead`` to ``witness``: whether the hung process still ran when it started, which is
how the tests prove ``resume`` killed what the dead controller left before running anything.

RECOVERY_DIR reaches the scripts through the environment (it matches no secret pattern, so the scrub keeps
it); the sandbox is off so the scripts can write there. Without RECOVERY_DIR the scripts never hang, which
is how the reference run (``reference`` fixture, once per worker) is made.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.cli.show import turns_tsv
from controller.config.settings import Settings
from controller.services.control.reader import RunReader
from controller.services.control.recovery import recorded_groups
from controller.services.views.schemas import dump
from controller.store.store import Store
from controller.wiring import build
from tests.conftest import git, make_repo
from tests.support.fixtures import migrated_sqlite_url
from tests.support.waiting import wait_until as support_wait_until

COMPONENT = "app"
TURNS = 4
CLI_TIMEOUT_S = 120.0
POLL_S = 0.02
WAIT_S = 30.0
DECISION_KINDS = frozenset({"accepted", "rejected", "failed", "no_change"})

CRASH_SH = """\
witness() {
  [ -n "$RECOVERY_DIR" ] && [ -f "$RECOVERY_DIR/hung.pid" ] || return 0
  state=dead
  stat="/proc/$(cat "$RECOVERY_DIR/hung.pid")/stat"
  if [ -r "$stat" ]; then
    case "$(cut -d' ' -f3 "$stat")" in Z|X) ;; *) state=alive ;; esac
  fi
  echo "$1 $state" >> "$RECOVERY_DIR/witness"
}
hang_once() {
  [ -n "$RECOVERY_DIR" ] && [ "$(cat "$RECOVERY_DIR/crash-once" 2>/dev/null)" = "$1" ] || return 0
  rm -f "$RECOVERY_DIR/crash-once"
  echo debris >> src/notes.txt
  echo debris > src/leftover.txt
  echo debris > debris.log
  trap '' TERM
  echo $$ > "$RECOVERY_DIR/hung.pid"
  touch "$RECOVERY_DIR/hung"
  sleep 60
  exit 3
}
"""

AGENT_SH = """\
. tools/crash.sh
witness "agent:$CRUCIBLE_TURN"
case "$CRUCIBLE_TURN" in
  1) echo 9 > src/value.txt; echo on > src/cache.txt; echo "HYPOTHESIS: 9 with a cache" ;;
  2) echo 12 > src/value.txt; echo "HYPOTHESIS: raise the value to 12" ;;
  3) echo 7 > src/value.txt; echo "fast path" > src/extra.txt; echo "HYPOTHESIS: 7 with a fast path" ;;
  *) echo "HYPOTHESIS: leave everything as it is" ;;
esac
hang_once "agent:$CRUCIBLE_TURN"
"""

BENCH_SH = """\
. tools/crash.sh
witness "metric:$CRUCIBLE_TURN"
hang_once "metric:$CRUCIBLE_TURN"
printf 'METRIC score=%s\\n' "$(cat src/value.txt)"
"""

FILES = {
    "README.md": "the user's repository\n",
    ".gitignore": "*.log\n",
    "src/value.txt": "10\n",
    "src/notes.txt": "notes\n",
    "tools/crash.sh": CRASH_SH,
    "tools/agent.sh": AGENT_SH,
    "tools/bench.sh": BENCH_SH,
}

METRIC_COMMAND = "sh tools/bench.sh"

SPEC = f"""\
objective = "lower the score"
turns = {TURNS}

[agent]
command = "sh tools/agent.sh"
timeout = "60s"

[sandbox]
mode = "none"

[metric]
command = "{METRIC_COMMAND}"
name = "score"
direction = "minimize"
samples = 1
warmups = 0
confidence = 0.0
interleave = false
timeout = "60s"

[[component]]
name = "{COMPONENT}"
repo = "repo"
base = "main"
mutable = ["src/**"]
protected = ["tools/**"]
"""

# What the deterministic agent and metric give, turn by turn (the reference run is checked against it).
EXPECTED_TURNS = [
    {"turn": 1, "outcome": "accepted", "reason": "improved", "value": 9.0},
    {"turn": 2, "outcome": "rejected", "reason": "not_improved", "value": 12.0},
    {"turn": 3, "outcome": "accepted", "reason": "improved", "value": 7.0},
    {"turn": 4, "outcome": "no_change", "reason": "no_diff", "value": None},
]


# ------------------------------------------------------------------------------------------------- processes


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from /proc (None when there is no such process)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw.rsplit(b")", 1)[1].split()[0].decode()


def is_running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (killed, not yet reaped by whoever inherited it) has stopped."""
    return process_state(pid) not in (None, "Z", "X")


def pgid_of(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw.rsplit(b")", 1)[1].split()[2])


def running_members(pgid: int) -> list[int]:
    """Pids of the processes of group ``pgid`` that still run."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(entry.name))
    return members


def wait_until(condition: Any, what: str, *, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``condition()`` every POLL_S up to WAIT_S; fail early if ``proc`` exits meanwhile."""
    support_wait_until(condition, what, timeout=WAIT_S, interval=POLL_S, proc=proc)


# ------------------------------------------------------------------------------------------------------ CLI


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        lines = self.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else None

    def describe(self) -> str:
        return (
            f"exit {self.code}\n--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-3000:]}"
        )


@dataclass
class Controller:
    """A ``crucible`` process started in its own session, so the test can signal it alone."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def run_id(self) -> str:
        found: list[str] = []

        def started() -> bool:
            match = re.search(r"run (\S+) started", self.err.read_text())
            if match:
                found.append(match.group(1))
            return bool(found)

        wait_until(started, "the run id on stderr", proc=self.proc)
        return found[0]

    def finish(self) -> CliResult:
        code = self.proc.wait(timeout=CLI_TIMEOUT_S)
        return CliResult(code, self.out.read_text(), self.err.read_text())


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, "-c", "from controller.cli.main import main; main()", *args]


def isolated_env(home: Path, crucible_home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """os.environ without GIT_*/CRUCIBLE_* (as tests/conftest.py does), HOME and CRUCIBLE_HOME set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "CRUCIBLE_"))}
    env.update(HOME=str(home), CRUCIBLE_HOME=str(crucible_home), GIT_CONFIG_NOSYSTEM="1", **extra)
    return env


# ------------------------------------------------------------------------------------------------------ lab


@dataclass
class Lab:
    """The user's repository (``root/repo``), the spec beside it, the control dir, and the CLI."""

    root: Path
    env: dict[str, str]
    controllers: list[Controller] = field(default_factory=list)
    hung_groups: list[int] = field(default_factory=list)

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def spec_path(self) -> Path:
        return self.root / "crucible.toml"

    @property
    def control(self) -> Path:
        return Path(self.env["RECOVERY_DIR"])

    @property
    def home(self) -> Path:
        return Path(self.env["CRUCIBLE_HOME"])

    @property
    def database_url(self) -> str:
        return self.env.get("CRUCIBLE_DATABASE_URL") or f"sqlite:///{self.home / 'crucible.db'}"

    def make(self) -> None:
        make_repo(self.repo, FILES)
        self.spec_path.write_text(SPEC)
        self.control.mkdir(parents=True, exist_ok=True)

    def cli(self, *args: str) -> CliResult:
        proc = subprocess.run(
            cli_argv(*args),
            cwd=self.root,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    def spawn(self, *args: str) -> Controller:
        n = len(self.controllers)
        out, err = self.root / f"cli-{n}.out", self.root / f"cli-{n}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(
                cli_argv(*args),
                cwd=self.root,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
        controller = Controller(proc, out, err)
        self.controllers.append(controller)
        return controller

    def loop(self) -> Controller:
        return self.spawn("loop", "--spec", str(self.spec_path), "--json")

    def hang_at(self, where: str) -> None:
        """Make the agent or metric hang once at ``where`` (``agent:2``, ``metric:0`` …)."""
        (self.control / "crash-once").write_text(where)

    def wait_hung(self, controller: Controller) -> int:
        """Wait until the armed command hangs; return its pid (its group is cleaned up after the test)."""
        marker = self.control / "hung"
        wait_until(marker.exists, f"the hang marker {marker}", proc=controller.proc)
        pid = int((self.control / "hung.pid").read_text())
        self.hung_groups.append(pgid_of(pid))
        assert is_running(pid), "the hung command should be sleeping"
        return pid

    def witness(self) -> list[str]:
        path = self.control / "witness"
        return path.read_text().splitlines() if path.exists() else []

    def store(self) -> Store:
        return Store.open(self.database_url)

    @contextmanager
    def reader(self) -> Iterator[RunReader]:
        """The read facade ``crucible runs show`` and ``crucible patch`` print from, wired from this
        lab's environment in the test's own process, closed after: a CLI start per read (an import of
        the whole package, ~1-1.5 s) bought nothing here, and those commands run as processes in
        ``tests/e2e/test_cli_contract.py``."""
        root = build(self.env)
        try:
            yield root.reader()
        finally:
            root.close()

    def patch(self, run_id: str) -> str:
        """What ``crucible patch RUN`` prints."""
        with self.reader() as reader:
            return reader.patch(run_id)

    def lease_runs_out(self, run_id: str) -> None:
        """What waiting out a dead controller's lease leads to, without the wait: a scheduler whose
        store's clock reads just past the expiry (not a sleep) takes the run over and hands it back,
        so the next ``resume`` finds the lease free. For a test whose subject is what resume does
        after the takeover; resume's own wait for a lease to run out stays in the tests that do not
        call this (test_resume_first_kills_the_process_group_the_dead_controller_left, test_refusals,
        test_parallel_resume, tests/rounds/test_liveness_e2e)."""
        with self.store() as store:
            expires = store.get_run(run_id).lease_expires_at
        assert expires is not None, "the dead controller held the run's lease"
        with Store.open(self.database_url, clock=lambda: expires + timedelta(seconds=1)) as later:
            later.claim_run(run_id, "a-scheduler", 5)
            assert later.release_lease(run_id, "a-scheduler")

    def recorded_groups(self, run_id: str) -> list[tuple[int, str]]:
        """The process groups on record for the run (run directory and store), as resume sees them."""
        with self.store() as store:
            return recorded_groups(Settings(home=self.home, database_url=self.database_url), store, run_id)

    def checkout(self, run_id: str, arm: str = "candidate") -> Path:
        return self.home / "runs" / run_id / "arms" / arm / COMPONENT

    def cleanup(self) -> None:
        """SIGKILL what this test started and left running: controllers, then hung command groups."""
        for controller in self.controllers:
            if controller.proc.poll() is None:
                controller.proc.kill()
                controller.proc.wait()
        for pgid in self.hung_groups:
            if running_members(pgid):
                os.killpg(pgid, signal.SIGKILL)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    home = Path(os.environ["CRUCIBLE_HOME"])
    # Not about a first run: the home's SQLite file starts at the schema's head, as crucible left it
    # after an earlier run (a copy; a first ``crucible loop`` on an empty home runs every migration,
    # which tests/e2e/test_cli_contract.py covers, migrations themselves tests/store).
    home.mkdir()
    migrated_sqlite_url(home / "crucible.db")
    env = isolated_env(Path(os.environ["HOME"]), home, {})
    env["RECOVERY_DIR"] = str(tmp_path / "control")
    # A dead controller's run is taken over once its lease runs out: a short lease keeps the kill -9
    # tests' resumes quick (the default is 30 s; renewals every third of it).
    env["CRUCIBLE_LEASE_TTL"] = "3s"
    made = Lab(tmp_path, env)
    made.make()
    try:
        yield made
    finally:
        made.cleanup()


# ------------------------------------------------------------------------------------------------ reference


def projected(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What must be equal between an uninterrupted and an interrupted run, turn by turn."""
    keys = ("turn", "outcome", "reason", "value", "changed_paths", "hypothesis")
    return [{k: t[k] for k in keys} for t in view["turns"]]


@dataclass(frozen=True)
class Reference:
    turns: list[dict[str, Any]]
    patch: str


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """An uninterrupted run of the same repository and spec (no RECOVERY_DIR: nothing hangs)."""
    root = tmp_path_factory.mktemp("reference")
    (root / "home").mkdir()
    (root / "crucible-home").mkdir()
    migrated_sqlite_url(root / "crucible-home" / "crucible.db")  # as ``lab``'s
    ref = Lab(root, isolated_env(root / "home", root / "crucible-home", {"RECOVERY_DIR": ""}))
    make_repo(ref.repo, FILES)
    ref.spec_path.write_text(SPEC)
    result = ref.cli("loop", "--spec", str(ref.spec_path), "--json")
    assert result.code == 0, result.describe()
    view = result.json
    patch = ref.patch(view["run_id"])
    turns = projected(view)
    assert [{k: t[k] for k in ("turn", "outcome", "reason", "value")} for t in turns] == EXPECTED_TURNS
    assert all(f"b/src/{name}" in patch for name in ("value.txt", "cache.txt", "extra.txt")), patch
    return Reference(turns, patch)


# ---------------------------------------------------------------------------------------------- assertions


def events(lab: Lab, run_id: str) -> list[dict[str, Any]]:
    """What ``crucible runs show RUN --events`` prints, parsed."""
    with lab.reader() as reader:
        jsonl = reader.events_jsonl(run_id)
    return [json.loads(line) for line in jsonl.splitlines() if line.strip()]


def turns_table(lab: Lab, run_id: str) -> str:
    """What ``crucible runs show RUN --tsv`` prints."""
    with lab.reader() as reader:
        view = dump(reader.view(run_id, with_diffs=False))
    return turns_tsv(view["turns"])


def assert_decided_once(lab: Lab, run_id: str, turns: int = TURNS) -> list[dict[str, Any]]:
    """Exactly one decision event per turn number in the JSONL, one TSV line per turn; returns the events."""
    stream = events(lab, run_id)
    decided = Counter(e["turn"] for e in stream if e["kind"] in DECISION_KINDS)
    assert decided == {n: 1 for n in range(1, turns + 1)}, f"decision events per turn: {decided}"
    assert [e["kind"] for e in stream].count("baseline") == 1
    tsv = turns_table(lab, run_id)
    rows = [line.split("\t") for line in tsv.splitlines()[1:]]
    assert [row[0] for row in rows] == [str(n) for n in range(1, turns + 1)], tsv
    return stream


def assert_checkout_clean_at(path: Path, sha: str) -> None:
    """The controller-owned checkout is exactly ``sha``: that HEAD, nothing modified, untracked or ignored."""
    assert git(path, "rev-parse", "HEAD") == sha, f"{path} is not at the champion"
    status = git(path, "status", "--porcelain", "--ignored", "--untracked-files=all")
    assert status == "", f"{path} differs from the champion:\n{status}"


def assert_kept_commits_in_history(path: Path, view: Mapping[str, Any]) -> None:
    """Every kept turn's commit is in the final champion's history (none was lost or rewritten)."""
    head = view["components"][0]["head_sha"]
    kept = [t["commit"] for t in view["turns"] if t["outcome"] == "accepted"]
    assert kept and kept[-1] == head, f"the last kept commit is not the champion: {kept} vs {head}"
    history = git(path, "rev-list", "--first-parent", head).splitlines()
    missing = [sha for sha in kept if sha not in history]
    assert not missing, f"kept commits missing from the champion's history: {missing}"


def user_state(repo: Path) -> dict[str, Any]:
    """HEAD, refs, status (ignored and untracked included) and every file's bytes of the user's checkout."""
    files = {
        p.relative_to(repo).as_posix(): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    return {
        "HEAD": (repo / ".git" / "HEAD").read_text(),
        "sha": git(repo, "--no-optional-locks", "rev-parse", "HEAD"),
        "refs": git(repo, "--no-optional-locks", "for-each-ref", "--format=%(refname) %(objectname)"),
        "status": git(
            repo, "--no-optional-locks", "status", "--porcelain", "--ignored", "--untracked-files=all"
        ),
        "files": files,
    }


@pytest.fixture
def user_before(lab: Lab) -> dict[str, Any]:
    return user_state(lab.repo)

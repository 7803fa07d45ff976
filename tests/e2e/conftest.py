"""End-to-end fixtures: a real user repository, a ``crucible.toml`` beside it, and the real CLI.

Every test gets a ``Project``: a committed git repository (``tmp/repo``) holding a tiny deterministic
benchmark (``tools/bench.sh`` prints ``METRIC score=<contents of src/value.txt>``) and whatever agent script
the test writes, plus a spec at ``tmp/crucible.toml`` (outside the repository, so rewriting it never dirties
the user's checkout). ``Project.loop()`` runs ``crucible loop --json`` as a subprocess with an environment
built from ``os.environ`` (after the autouse fixture of ``tests/conftest.py`` pointed CRUCIBLE_HOME into the
test's temp dir; HOME is the machine's own unless a test asks for ``temp_home``) and returns exit code,
stdout, stderr and the parsed JSON object.

The helpers that look at git state live here too, so every test checks "the user's checkout is untouched"
and "the candidate checkout equals the champion byte for byte" the same, strict way.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from controller.cli.show import turns_tsv
from controller.services.control.reader import RunReader
from controller.services.views.schemas import dump
from controller.wiring import build
from tests.conftest import E2E_HOME, git, make_repo

COMPONENT = "app"
CLI_TIMEOUT_S = 120.0

BENCH_SH = 'printf "METRIC score=%s\\n" "$(cat src/value.txt)"\n'

DEFAULT_FILES: dict[str, str] = {
    "README.md": "the user's repository\n",
    ".gitignore": "*.log\n__pycache__/\n",
    "src/value.txt": "10\n",
    "src/notes.txt": "notes\n",
    "tools/bench.sh": BENCH_SH,
    "tools/agent.sh": "exit 0\n",
}


def default_spec() -> dict[str, Any]:
    """A spec for the default repository: deterministic metric, one sample, no significance test."""
    return {
        "objective": "lower the score",
        "turns": 1,
        "agent": {"command": "sh tools/agent.sh", "timeout": "60s"},
        "sandbox": {"mode": "bwrap"},
        "metric": {
            "command": "sh tools/bench.sh",
            "name": "score",
            "direction": "minimize",
            "samples": 1,
            "warmups": 0,
            "confidence": 0.0,
            "interleave": False,
            "timeout": "60s",
        },
        "component": [
            {
                "name": COMPONENT,
                "repo": "repo",
                "base": "main",
                "mutable": ["src/**"],
                "protected": ["tools/**"],
            }
        ],
    }


def _crucible_argv() -> list[str]:
    """The installed console script next to this interpreter, else an equivalent ``python -c`` call."""
    script = Path(sys.executable).parent / "crucible"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-c", "from controller.cli.main import main; main()"]


@dataclass(frozen=True)
class CliResult:
    """What one ``crucible`` invocation did; ``json`` is the parsed last stdout line (None if not JSON)."""

    code: int
    stdout: str
    stderr: str
    json: Any

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def describe(self) -> str:
        return (
            f"exit {self.code}\n--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )


def _last_json(stdout: str) -> Any:
    lines = stdout.rstrip("\n").splitlines()
    if not lines:
        return None
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        return None


def run_cli(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = CLI_TIMEOUT_S
) -> CliResult:
    """Run ``crucible *args`` in ``cwd`` with ``os.environ`` plus ``env``."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [*_crucible_argv(), *args],
        cwd=cwd,
        env=full_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr, _last_json(proc.stdout))


def run_cli_in_process(args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> CliResult:
    """``crucible *args`` as the console script's ``main`` runs it, but in this process: the exit
    code, stdout and stderr it gives, without a process start (an import of the whole package,
    0.5-1.5 s, issue 23). For a check of what a command that stops early prints and exits with (a
    refused spec, bad usage, a dry run), next to a check that runs the same command as a process."""
    from controller.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code: int = 0
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        patch.chdir(cwd)
        patch.setattr(sys, "argv", ["crucible", *args])  # as the console script sees it (``_dry`` reads it)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue(), _last_json(out.getvalue()))


def _merge(base: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in table by table; a None value deletes the key."""
    out = dict(base)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


class Project:
    """A user repository plus a spec outside it, and the CLI pointed at both."""

    def __init__(self, root: Path, home: Path | None = None) -> None:
        self.root = root
        self.repo = root / "repo"
        self.spec_path = root / "crucible.toml"
        # Given to every CLI call: a project made by a module-scoped fixture keeps its own home while
        # each test that reads it runs with the CRUCIBLE_HOME of its own tmp_path.
        self.home = home or Path(os.environ["CRUCIBLE_HOME"])

    def make(self, files: Mapping[str, str] | None = None, *, agent: str | None = None) -> Path:
        """Create and commit the repository: DEFAULT_FILES, then ``files``, then ``tools/agent.sh``."""
        content = {**DEFAULT_FILES, **(files or {})}
        if agent is not None:
            content["tools/agent.sh"] = agent
        make_repo(self.repo, content)
        settle(self.repo)
        return self.repo

    def write_spec(self, **changes: Any) -> Path:
        """Write ``default_spec()`` with ``changes`` merged in (``metric={"samples": 3}``)."""
        spec = _merge(default_spec(), changes)
        self.spec_path.write_text(tomlkit.dumps(spec))
        return self.spec_path

    def loop(self, *extra: str, env: Mapping[str, str] | None = None) -> CliResult:
        """``crucible loop --spec crucible.toml --json *extra``, run from the project root."""
        return self.cli("loop", "--spec", str(self.spec_path), "--json", *extra, env=env)

    def cli_in_process(
        self, *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> CliResult:
        """``cli`` through ``run_cli_in_process``: for a command that stops before any run starts."""
        return run_cli_in_process(
            args, cwd=cwd or self.root, env={"CRUCIBLE_HOME": str(self.home), **(env or {})}
        )

    def cli(self, *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> CliResult:
        return run_cli(args, cwd=cwd or self.root, env={"CRUCIBLE_HOME": str(self.home), **(env or {})})

    @contextmanager
    def reader(self) -> Iterator[RunReader]:
        """The read facade ``crucible runs show`` prints from, wired in this process for this home
        and closed after: a check of a run's events or table that is not about the command."""
        root = build({**os.environ, "CRUCIBLE_HOME": str(self.home)})
        try:
            yield root.reader()
        finally:
            root.close()

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """What ``crucible runs show RUN --events`` prints (test_cli_contract runs the command), parsed."""
        with self.reader() as reader:
            jsonl = reader.events_jsonl(run_id)
        return [json.loads(line) for line in jsonl.splitlines() if line.strip()]

    def tsv(self, run_id: str) -> str:
        """What ``crucible runs show RUN --tsv`` prints (test_cli_contract runs the command)."""
        with self.reader() as reader:
            view = dump(reader.view(run_id, with_diffs=False))
        return turns_tsv(view["turns"])

    def run_dir(self, run_id: str) -> Path:
        return self.home / "runs" / run_id

    def checkout(self, run_id: str, arm: str = "candidate") -> Path:
        """The controller-owned checkout of the component for ``arm`` (docs/architecture.md)."""
        return self.run_dir(run_id) / "arms" / arm / COMPONENT

    def base_sha(self) -> str:
        return git(self.repo, "rev-parse", "main")


@pytest.fixture(autouse=True)
def _machine_home_unless_asked(request: pytest.FixtureRequest) -> None:
    """End-to-end tests run with the machine's own HOME, as users run crucible; a test that writes into
    HOME asks for ``temp_home`` (and ``CRUCIBLE_TEST_E2E_HOME=temp`` runs them all with a temporary one)."""
    if E2E_HOME == "machine" and "temp_home" not in request.fixturenames:
        request.getfixturevalue("machine_home")


@pytest.fixture
def temp_home() -> Path:
    """The temporary HOME ``tests/conftest.py`` made, for a test that writes into HOME."""
    return Path(os.environ["HOME"])


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


@pytest.fixture
def migrated_home(migrated_sqlite: Path) -> Path:
    """CRUCIBLE_HOME as crucible left it after an earlier run: its SQLite database at the schema's head.

    For a module whose runs are not about a first run (``pytestmark``): each ``crucible loop`` on an
    empty home runs every migration first, 0.3-1 s of CPU per test (issue 23). The first run on an
    empty home (the database and the home made by the CLI, nothing made for a refused spec) stays
    covered where it is the subject (``test_cli_contract.py``, ``test_spec_errors.py``, the served
    runs of ``test_serve_sandbox.py``), migrations themselves in ``tests/store``."""
    home = Path(os.environ["CRUCIBLE_HOME"])
    home.mkdir()
    shutil.copyfile(migrated_sqlite, home / "crucible.db")
    return home


def ok_run(result: CliResult) -> dict[str, Any]:
    """The JSON object of a run that must have stopped normally."""
    assert result.code == 0, result.describe()
    assert isinstance(result.json, dict), result.describe()
    return result.json


def outcomes(view: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(outcome, reason) per turn, in turn order."""
    return [(t["outcome"], t["reason"]) for t in view["turns"]]


# ------------------------------------------------------------------------------------------- git state


def settle(repo: Path) -> None:
    """Make the repository look like one whose files were last edited a minute ago.

    Right after ``git commit`` the index is "racily clean" and any ``git status`` rewrites it; a real
    user's checkout is usually settled, so the strict index check below is meaningful. (A stale stat
    cache is tested on its own.)
    """
    past = time.time_ns() - 60_000_000_000
    for path in repo.rglob("*"):
        if ".git" not in path.relative_to(repo).parts:
            os.utime(path, ns=(past, past), follow_symlinks=False)
    git(repo, "update-index", "-q", "--refresh")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def user_checkout_state(repo: Path) -> dict[str, Any]:
    """Everything about the user's checkout that crucible must never change.

    HEAD (and what it points at), every ref, ``git status --porcelain --ignored`` (taken with
    ``--no-optional-locks`` so the snapshot itself never refreshes the index), the index file's bytes and
    mtime, every file of the working tree with its mode, and every entry under ``.git`` with its
    bytes (and mtime, except for objects), so a new ref, object, lock, log or config line shows up.
    """
    gitdir = repo / ".git"
    entries: dict[str, Any] = {}
    for path in sorted(gitdir.rglob("*")):
        rel = path.relative_to(gitdir).as_posix()
        if path.is_dir():
            entries[rel] = "dir"
        elif rel.startswith("objects/"):
            # Git "freshens" (touches) an existing object when a clone that borrows it through
            # alternates writes the same object again: the content is what matters there.
            entries[rel] = _digest(path)
        else:
            entries[rel] = (path.lstat().st_mtime_ns, _digest(path))
    worktree: dict[str, Any] = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        worktree[rel] = "dir" if path.is_dir() else (stat.S_IMODE(path.lstat().st_mode), path.read_bytes())
    index = gitdir / "index"
    return {
        "HEAD file": (gitdir / "HEAD").read_text(),
        "HEAD": git(repo, "--no-optional-locks", "rev-parse", "HEAD"),
        "refs": git(repo, "--no-optional-locks", "for-each-ref", "--format=%(refname) %(objectname)"),
        "status": git(
            repo, "--no-optional-locks", "status", "--porcelain", "--ignored", "--untracked-files=all"
        ),
        "index": (index.read_bytes(), index.stat().st_mtime_ns),
        "worktree": worktree,
        ".git entries": entries,
    }


def assert_user_checkout_unchanged(before: Mapping[str, Any], repo: Path) -> None:
    after = user_checkout_state(repo)
    for key, value in before.items():
        if key == ".git entries":
            added = sorted(set(after[key]) - set(value))
            removed = sorted(set(value) - set(after[key]))
            changed = sorted(k for k in set(value) & set(after[key]) if value[k] != after[key][k])
            assert (added, removed, changed) == ([], [], []), (
                f"user's .git changed: {added=} {removed=} {changed=}"
            )
        else:
            assert after[key] == value, f"user's checkout changed: {key}"


def git_bytes(cwd: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True)
    return proc.stdout


def assert_checkout_at(path: Path, sha: str) -> None:
    """The checkout at ``path`` is exactly commit ``sha``: detached HEAD there, a clean status with ignored
    and untracked files listed, and every file on disk equal (bytes and executable bit) to the commit's."""
    assert (path / ".git" / "HEAD").read_text().strip() == sha, "candidate HEAD is not the champion"
    status = git(path, "status", "--porcelain", "--ignored", "--untracked-files=all")
    assert status == "", f"candidate checkout differs from the champion:\n{status}"
    assert git(path, "diff", sha, "--stat") == ""
    expected: dict[str, tuple[str, str]] = {}
    for entry in git_bytes(path, "ls-tree", "-r", "-z", sha).split(b"\0"):
        if entry:
            meta, name = entry.split(b"\t", 1)
            mode, _kind, obj = meta.decode().split()
            expected[os.fsdecode(name)] = (mode, obj)
    on_disk: set[str] = set()
    dirs: set[str] = set()
    for item in path.rglob("*"):
        rel = item.relative_to(path).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        (dirs if item.is_dir() and not item.is_symlink() else on_disk).add(rel)
    assert on_disk == set(expected), (
        f"files differ: extra {on_disk - set(expected)}, missing {set(expected) - on_disk}"
    )
    parents = {p.as_posix() for rel in expected for p in Path(rel).parents if p != Path(".")}
    assert dirs <= parents, f"leftover directories: {dirs - parents}"
    for rel, (mode, obj) in expected.items():
        assert (path / rel).read_bytes() == git_bytes(path, "cat-file", "blob", obj), rel
        executable = bool((path / rel).stat().st_mode & stat.S_IXUSR)
        assert executable == (mode == "100755"), f"mode of {rel}"

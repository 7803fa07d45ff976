"""Secrets through the CLI (issue 2, "Must hold" 7).

The CLI (and this test process) holds secret-looking variables. ``tools/hunt.py`` plays a curious agent and a
curious metric: it reports (as hashes, in an ignored ``envdump/`` cache the run keeps) which variable names
it was given, and every token carrying the ``E2ELEAK`` marker it can find in its environment, in every
``/proc/*/environ`` and ``/proc/*/cmdline`` it can read, under ``$HOME`` and the directories it is given as
arguments, and in its own arguments. It prints what it finds on stdout (and a token found in the environ of
one of its ancestors, the controller, in its HYPOTHESIS line), so without a sandbox (where it does find the
controller's secrets in ``/proc``) the run's redaction is put to the test as well.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Project, ok_run, outcomes

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]

HUNT_PY = r"""
import hashlib, json, os, re, sys
from pathlib import Path

TOKEN = re.compile(rb"E2ELEAK[A-Za-z0-9]+")


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def scan(blob, where, found):
    for match in TOKEN.finditer(blob):
        found.append((where, match.group().decode()))


def ancestors():
    pids, pid = [], os.getpid()
    while pid > 1:
        pids.append(str(pid))
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def main():
    role = sys.argv[1]
    found = []
    for name, value in os.environ.items():
        scan(f"{name}={value}".encode(), "env", found)
    readable = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for kind in ("environ", "cmdline"):
            try:
                data = Path(f"/proc/{pid}/{kind}").read_bytes()
            except OSError:
                continue
            readable += 1
            scan(data, f"/proc/{pid}/{kind}", found)
    for top in [os.environ.get("HOME", ""), *sys.argv[2:]]:
        for root, _dirs, files in os.walk(top) if top else ():
            for name in files:
                try:
                    scan(Path(root, name).read_bytes(), os.path.join(root, name), found)
                except OSError:
                    pass
    scan(" ".join(sys.argv).encode(), "argv", found)
    # The agent may not write the ignored paths a measurement reads (workspace.keep_ignored): its reports
    # go beside the workspace, in the arm directory it may write.
    dumps = Path(os.environ["CRUCIBLE_WORKSPACE"]).parent / "envdump" if role == "agent" else Path("envdump")
    dumps.mkdir(exist_ok=True)
    report = {
        "home": os.environ.get("HOME"),
        "proc_files_read": readable,
        "env": {name: sha(value) for name, value in os.environ.items()},
        "found": [{"where": where, "sha": sha(token)} for where, token in found],
    }
    Path(dumps, f"{role}.json").write_text(json.dumps(report))
    dump = "".join(f"{k}={v}\n" for k, v in sorted(os.environ.items()))
    Path(dumps, f"{role}-env.txt").write_text(dump)
    print(dump)
    for where, token in found:
        print(f"FOUND {where} {token}")
    value = Path("src/value.txt").read_text().strip()
    if role == "agent":
        Path("src/value.txt").write_text("5\n")
        family = {f"/proc/{pid}/environ" for pid in ancestors()}
        mine = [token for where, token in found if where in family]
        print("HYPOTHESIS: lower the value" + (f" (saw {mine[0]})" if mine else ""))
    else:
        print(f"METRIC score={value}")


main()
"""

PROTOCOL = {
    "CRUCIBLE_RUN_ID",
    "CRUCIBLE_ROUND",
    "CRUCIBLE_TURN",
    "CRUCIBLE_WORKSPACE",
    "CRUCIBLE_CANDIDATE",
    "CRUCIBLE_STEER_FILE",
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Secrets:
    """Secret-looking variables set in this process (so in the CLI's environment too)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        tag = secrets.token_hex(8)
        self.url_password = f"E2ELEAKurlpw{tag}"
        self.env = {
            "GITHUB_TOKEN": f"E2ELEAKgithub{tag}",
            "MY_API_KEY": f"E2ELEAKapikey{tag}",
            "CRUCIBLE_DATABASE_PASSWORD": f"E2ELEAKcrucpw{tag}",
            "UPSTREAM_MIRROR": f"https://e2euser:{self.url_password}@mirror.invalid/repo.git",
        }
        # crucible's own configuration: not secret-looking, but no business of the agent either.
        self.config = {"CRUCIBLE_E2E_SETTING": f"E2ELEAKcrucfg{tag}"}
        self.allowed = {"OPENAI_API_KEY": f"allowed{tag}"}
        for name, value in {**self.env, **self.config, **self.allowed}.items():
            monkeypatch.setenv(name, value)

    @property
    def values(self) -> list[str]:
        """Every value that must never be stored or printed (a URL's password on its own, too)."""
        return [*self.env.values(), self.url_password, f"e2euser:{self.url_password}"]

    @property
    def hidden_names(self) -> set[str]:
        return {*self.env, *self.config, "CRUCIBLE_HOME"}


@pytest.fixture
def leaky(monkeypatch: pytest.MonkeyPatch) -> Secrets:
    return Secrets(monkeypatch)


def _hunt_project(project: Project, mode: str, *extra_dirs: str) -> None:
    project.make({"tools/hunt.py": HUNT_PY, ".gitignore": "*.log\nenvdump/\n"})
    args = " ".join(["", *extra_dirs])
    project.write_spec(
        turns=1,
        sandbox={"mode": mode},
        agent={"command": f"python3 tools/hunt.py agent{args}", "env_allow": ["OPENAI_API_KEY"]},
        metric={"command": f"python3 tools/hunt.py metric{args}"},
        workspace={"keep_ignored": ["envdump/"]},
    )


def _reports(project: Project, run_id: str) -> dict[str, dict[str, Any]]:
    """The hunter's reports: the agent's and the metric's in the candidate arm, the baseline metric's."""
    out = {}
    for arm, role in (("candidate", "agent"), ("candidate", "metric"), ("champion", "metric")):
        dump = project.checkout(run_id, arm) / "envdump"
        if role == "agent":
            dump = project.checkout(run_id, arm).parent / "envdump"
        report = json.loads((dump / f"{role}.json").read_text())
        report["dump"] = (dump / f"{role}-env.txt").read_text()
        out[f"{arm}/{role}"] = report
    return out


def _stored_bytes(home: Path) -> Iterator[tuple[Path, bytes]]:
    """Every file crucible keeps (database, logs, agent files, checkouts), except compressed git objects."""
    for path in home.rglob("*"):
        if path.is_file() and "objects" not in path.relative_to(home).parts:
            yield path, path.read_bytes()


def _cli_views(project: Project, run_id: str) -> list[str]:
    """What ``runs show`` (all formats) and ``patch`` print for the run."""
    return [
        project.cli("runs", "show", run_id, "--json").output,
        project.cli("runs", "show", run_id, "--events").output,
        project.cli("runs", "show", run_id, "--tsv").output,
        project.cli("runs", "show", run_id).output,
        project.cli("patch", run_id).output,
    ]


def _assert_nothing_leaked(project: Project, leaky: Secrets, outputs: list[str]) -> None:
    stored = list(_stored_bytes(project.home))
    assert any(p.name.startswith("crucible.db") for p, _ in stored), "the SQLite database was not scanned"
    assert any(p.parent.name == "logs" for p, _ in stored), "the run's logs were not scanned"
    for value in leaky.values:
        for text in outputs:
            assert value not in text, "a secret value reached the CLI's output"
        for path, data in stored:
            assert value.encode() not in data, f"a secret value is stored in {path}"


@pytest.mark.parametrize("mode", ["bwrap", "none"])
def test_agent_and_metric_never_see_secrets_and_nothing_stores_them(
    project: Project, leaky: Secrets, mode: str, temp_home: Path
) -> None:
    home = temp_home  # it plants a ~/.git-credentials
    credentials = f"E2ELEAKcreds{secrets.token_hex(8)}"
    (home / ".git-credentials").write_text(f"https://me:{credentials}@forge.invalid\n")
    _hunt_project(project, mode)

    result = project.loop()

    view = ok_run(result)
    assert outcomes(view) == [("accepted", "improved")]
    reports = _reports(project, view["run_id"])
    for where, report in reports.items():
        names = set(report["env"])
        assert not names & leaky.hidden_names, f"{where} saw {names & leaky.hidden_names}"
        assert {n for n in names if n.startswith("CRUCIBLE_")} <= PROTOCOL, where
        dumped = {line.split("=", 1)[0] for line in report["dump"].splitlines() if "=" in line}
        assert dumped == names and not dumped & leaky.hidden_names
        assert report["env"].get("OPENAI_API_KEY") == _sha(leaky.allowed["OPENAI_API_KEY"]), (
            f"{where}: env_allow must pass OPENAI_API_KEY through"
        )
        for value in (*leaky.env.values(), *leaky.config.values()):
            assert _sha(value) not in report["env"].values(), f"{where} got a secret under another name"
    found = {f["sha"] for f in reports["candidate/agent"]["found"]}
    if mode == "bwrap":
        for where, report in reports.items():
            assert report["found"] == [], f"{where} found secrets inside the sandbox: {report['found']}"
            assert report["proc_files_read"] >= 2, "the hunter did not read /proc"
            assert report["home"] != str(home)
    else:
        # Without a sandbox the controller's /proc/<pid>/environ and ~/.git-credentials are readable (the
        # documented weakness that crucible warns about); the hunter finds them, which proves it looks.
        assert _sha(leaky.env["GITHUB_TOKEN"]) in found
        assert _sha(credentials) in found
        assert "no sandbox" in result.stderr
        logs = "".join(p.read_text() for p in (project.run_dir(view["run_id"]) / "logs").iterdir())
        assert "[REDACTED]" in logs, "what the agent printed of the secrets must be redacted"
        assert "[REDACTED]" in (view["turns"][0]["hypothesis"] or "")
    outputs = [result.stdout, result.stderr]
    if mode == "none":  # where the agent did find the secrets and printed them
        outputs += _cli_views(project, view["run_id"])
    _assert_nothing_leaked(project, leaky, outputs)


@pytest.fixture
def home_outside_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A HOME that is not under /tmp (which the sandbox replaces with a tmpfs anyway), like /home/<user>."""
    home = Path(tempfile.mkdtemp(prefix="crucible-e2e-home-", dir="/var/tmp"))
    monkeypatch.setenv("HOME", str(home))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_sandbox_hides_the_users_real_home(project: Project, leaky: Secrets, home_outside_tmp: Path) -> None:
    credentials = f"E2ELEAKcreds{secrets.token_hex(8)}"
    (home_outside_tmp / ".git-credentials").write_text(f"https://me:{credentials}@forge.invalid\n")
    _hunt_project(project, "bwrap", str(home_outside_tmp))

    view = ok_run(project.loop())

    reports = _reports(project, view["run_id"])
    for where, report in reports.items():
        assert report["found"] == [], f"{where} read the user's home from inside the sandbox"


def test_kept_code_cannot_plant_git_config_that_the_controller_runs(
    project: Project, leaky: Secrets, tmp_path: Path
) -> None:
    """Code the agent got kept runs again, sandboxed, whenever the metric measures the champion arm; it must
    not be able to change that checkout's ``.git`` (``core.fsmonitor``, hooks), which the controller's own
    git commands would then run outside the sandbox with the controller's environment."""
    escaped = tmp_path / "escaped.txt"
    plant = f"git config core.fsmonitor 'env > {escaped}; false'\n"
    agent = f"""\
if [ "$CRUCIBLE_TURN" = 1 ]; then
  echo 8 > src/value.txt
  cat > src/hook.sh <<'HOOK'
{plant}HOOK
else
  echo more >> src/notes.txt
fi
"""
    bench = 'sh src/hook.sh >/dev/null 2>&1\nprintf "METRIC score=%s\\n" "$(cat src/value.txt)"\n'
    project.make({"tools/bench.sh": bench, "src/hook.sh": "true\n"}, agent=agent)
    project.write_spec(turns=2, metric={"interleave": True})

    view = ok_run(project.loop())

    assert outcomes(view) == [("accepted", "improved"), ("rejected", "not_improved")]
    assert not escaped.exists(), "a command planted by sandboxed code ran outside the sandbox"
    for arm in ("candidate", "champion"):
        config = (project.checkout(view["run_id"], arm) / ".git" / "config").read_text()
        assert "fsmonitor" not in config, f"sandboxed code rewrote the {arm} checkout's git config"

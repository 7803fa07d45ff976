"""``crucible serve`` with the sandbox on, as a developer machine has it (issue 20).

A run submitted to a real ``crucible serve`` process (``crucible loop --server``) runs its commands in
the server's sandbox: where ``python3`` is a pyenv shim under HOME the loop must run to its end, and a
command that cannot start inside the sandbox must stop the run with the sentence that names the
missing path and the fix, in the CLI, in the API's run detail and on the dashboard's run page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import MACHINE_HOME, free_port
from tests.e2e.conftest import Project, outcomes
from tests.e2e.test_sandbox_paths import tool_venv  # noqa: F401  (a fixture)
from tests.e2e.test_toolchains import MACHINE_SHIM, SHELL_PATH, pyenv_shaped_home, python_project
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

TOKEN = "serve-sandbox-token-0123456789"
READY_S = 120.0
CRUCIBLE = (sys.executable, "-m", "controller.cli.main")


@contextmanager
def serving(project: Project, env: Mapping[str, str]) -> Iterator[str]:
    """A ``crucible serve`` process with ``os.environ`` plus ``env`` (HOME as the test left it); its URL."""
    port = free_port()
    log = project.root / "serve.log"
    full = {**os.environ, **env, "CRUCIBLE_API_TOKEN": TOKEN}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*CRUCIBLE, "serve", "--port", str(port)],
            env=full,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_until(lambda: _ready(url), what="crucible serve to get ready", timeout=READY_S, proc=proc)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {log.read_text()[-3000:]}") from exc
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def submit(project: Project, url: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``crucible loop --server URL --spec … --json``, followed to the run's stop."""
    return subprocess.run(
        [*CRUCIBLE, "loop", "--server", url, "--spec", str(project.spec_path), "--json"],
        cwd=project.root,
        env={**os.environ, **env, "CRUCIBLE_API_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _view(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    view = json.loads(lines[-1])
    assert isinstance(view, dict)
    return view


def test_serve_runs_a_python_loop_through_a_pyenv_shaped_shim(project: Project, temp_home: Path) -> None:
    shims = pyenv_shaped_home(temp_home)
    python_project(project)
    env = {"PATH": f"{shims}:{SHELL_PATH}"}

    with serving(project, env) as url:
        done = submit(project, url, env)

    assert done.returncode == 0, done.stderr
    view = _view(done)
    assert outcomes(view) == [("accepted", "improved")], view


@pytest.mark.skipif(not MACHINE_SHIM.is_file(), reason="this machine's python3 is not a pyenv shim")
def test_serve_runs_a_python_loop_through_the_machines_pyenv_with_the_machines_home(
    project: Project, machine_home: Path
) -> None:
    assert os.environ["HOME"] == str(MACHINE_HOME)
    python_project(project)
    env = {"PATH": f"{MACHINE_SHIM.parent}:{SHELL_PATH}"}

    with serving(project, env) as url:
        done = submit(project, url, env)

    assert done.returncode == 0, done.stderr
    view = _view(done)
    assert outcomes(view) == [("accepted", "improved")], view


def test_a_command_that_cannot_start_stops_the_run_in_cli_api_and_dashboard(
    project: Project,
    tool_venv: Path,  # noqa: F811
) -> None:
    agent = tool_venv / "bin" / "lower-agent"
    project.make()
    # The path comes from the environment at run time: nothing can find it in the command to bind it.
    project.write_spec(turns=3, agent={"command": '"$LOWER_AGENT"'})
    env = {"LOWER_AGENT": str(agent)}
    sentence = f"{agent} exists outside but is not visible inside the sandbox (bubblewrap"
    fix = "add it, or the directory of the toolchain that holds it, to sandbox.readonly"

    local = project.loop(env=env)
    with serving(project, env) as url:
        done = submit(project, url, env)
        view = _view(done)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        detail = httpx.get(f"{url}/api/runs/{view['run_id']}", headers=headers, timeout=30).json()
        with httpx.Client(base_url=url, timeout=30) as browser:
            assert browser.post("/login", data={"token": TOKEN}).status_code in (200, 303)
            page = browser.get(f"/runs/{view['run_id']}").text

    assert local.code == 1 and done.returncode == 1, local.describe() + done.stderr
    for shown in (local.json, view, detail):
        assert isinstance(shown, dict)
        assert (shown["status"], shown["stop_reason"]) == ("failed", "error"), shown
        assert outcomes(shown) == [("failed", "agent_failed")], "the run stops after the first turn"
        assert sentence in str(shown["message"]) and fix in str(shown["message"]), shown["message"]
    assert sentence in local.stderr
    assert sentence in page and fix in page, page[-3000:]


def test_the_server_refuses_a_readonly_entry_it_cannot_show_naming_it(project: Project) -> None:
    project.make()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with serving(project, {}) as url:
        answers = []
        for entries in (["/usr", "/no/such/dir"], ["~", "/usr"]):  # "~" holds ~/.ssh
            project.write_spec(sandbox={"mode": "bwrap", "readonly": entries})
            body = {"spec": project.spec_path.read_text(), "spec_dir": str(project.root)}
            answers.append(httpx.post(f"{url}/api/runs", json=body, headers=headers, timeout=30))
        listed = httpx.get(f"{url}/api/runs", headers=headers, timeout=30).json()

    missing, denied = answers
    assert missing.status_code == 422 and missing.json()["key"] == "sandbox.readonly[1]", missing.text
    assert "'/no/such/dir' does not exist" in missing.json()["detail"]
    assert denied.status_code == 422 and denied.json()["key"] == "sandbox.readonly[0]", denied.text
    assert "which the sandbox keeps hidden (credentials)" in denied.json()["detail"]
    assert listed["items"] == [], "a refused spec stores nothing"

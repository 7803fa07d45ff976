"""What the two token-hunt tests share (issue 21): the hostile agent, the unprivileged user it runs as,
a directory that user can reach, a decoy process that shows the hunt works, and the checks of what the
hunt reported.

``test_token_reach.py`` here hunts under ``SubprocessBroker``; ``tests/k8s/test_token_reach.py`` in a
loop pod of the real control plane. The two must judge a hunt alike, so the judging lives here once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from controller.domain.jobs import RoundJob
from controller.services.remote.remote_rounds import RemoteRounds

HUNTER = Path(__file__).with_name("hunter.py")
NOBODY = 65534
# The hunter needs only the standard library; the system interpreter is reachable by any user (a venv's
# may link into root's home).
HUNTER_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
# The run both tests submit (the Kubernetes one appends its [broker] table).
SPEC = """
objective = "find the token"
turns = 2
[agent]
command = "{python} {hunter} {url} {reports} 2 {root}"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC m=1"
name = "m"
direction = "minimize"
samples = 1
warmups = 0
confidence = 0
interleave = false
[[component]]
name = "app"
repo = "."
mutable = ["src/**"]
"""


def unprivileged(argv: list[str]) -> list[str]:
    """``argv`` as the unprivileged user with no capabilities, as a pod's ``securityContext`` asks."""
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all"]
    return [*drop, "--bounding-set=-all", *argv]


@contextlib.contextmanager
def shared_directory() -> Iterator[Path]:
    """A directory the unprivileged user can reach (pytest's temp root and the node's are root's)."""
    path = Path(tempfile.mkdtemp(prefix="crucible-reach-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def decoy_process(token: str, cwd: Path, as_user: Callable[[list[str]], list[str]]) -> Iterator[None]:
    """A process of the agent's user holding ``token`` in its environment, as the worker once did."""
    env = {"PATH": os.environ["PATH"], "CRUCIBLE_WORKER_TOKEN": token}
    proc = subprocess.Popen(as_user(["sleep", "600"]), env=env, cwd=cwd)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def copy_hunter(into: Path) -> Path:
    """The hunter where the unprivileged user can read it."""
    hunter = into / "hunter.py"
    shutil.copy(HUNTER, hunter)
    hunter.chmod(0o644)
    return hunter


def minting(remote: RemoteRounds, minted: list[str]) -> Callable[[RoundJob], dict[str, str]]:
    """The broker's ``mint_worker_env``, noting each token it hands out."""

    def mint(job: RoundJob) -> dict[str, str]:
        env = remote.mint_worker_env(job)
        minted.append(env["CRUCIBLE_WORKER_TOKEN"])
        return env

    return mint


def assert_hunt_found_no_token(turns: Iterable[Path], token: str, decoy: str) -> None:
    """Each turn's report: the agent ran unprivileged (when the test could drop root), found the
    decoy's token (the hunt works), not the worker's; the worker's ``environ`` and ``mem`` were closed
    to it; and every token it tried on the worker API was refused."""
    for path in turns:
        report = json.loads(path.read_text())
        if os.geteuid() == 0:
            assert report["uid"] == NOBODY, "the agent ran unprivileged"
        assert report["found"].get(decoy, "").endswith("/environ"), (
            "the hunt reads what a same-user process shows"
        )
        assert token not in report["found"], (
            f"the agent found the worker's token at {report['found'].get(token)}"
        )
        workers = [p for p in report["ancestors"].values() if "controller.cli.main worker" in p["cmdline"]]
        assert workers, report["ancestors"]
        for proc in workers:
            assert (proc["environ"], proc["mem"]) == ("EACCES", "EACCES"), proc
        assert report["tries"], "the agent tried the worker API"
        assert all(status in (401, 403) for status in report["tries"].values()), report["tries"]


def assert_token_in_no_file(paths: Iterable[Path], token: str) -> None:
    for path in paths:
        if path.is_file() and not path.is_symlink():
            assert token.encode() not in path.read_bytes(), f"the token is in {path}"


def no_forge(spec: object) -> object:
    raise AssertionError("this run does not publish")

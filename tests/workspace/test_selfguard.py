"""``workspace.selfguard`` on a real process: after it ran, the secret is gone from the environment block
``/proc/<pid>/environ`` shows, and the process is non-dumpable (its ``/proc`` owned by root). The
end-to-end check against a hostile agent is ``tests/worker/test_token_reach.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SECRET = "s3cret-value-of-the-round-0123456789"
CHILD = """
import sys
from controller.workspace.selfguard import is_undumpable, make_undumpable, wipe_environment_value
assert not is_undumpable()
wiped, closed = wipe_environment_value("ROUND_SECRET"), make_undumpable()
print(wiped, closed, wipe_environment_value("NOT_SET"), flush=True)
sys.stdin.read()
"""


def test_the_secret_leaves_proc_environ_and_the_process_becomes_non_dumpable() -> None:
    env = {**os.environ, "ROUND_SECRET": SECRET}
    with subprocess.Popen(
        [sys.executable, "-c", CHILD], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().split() == ["True", "True", "False"]
        proc = Path(f"/proc/{child.pid}")
        environ = (proc / "environ").read_bytes()  # this test may be root, whom dumpable does not stop
        assert SECRET.encode() not in environ
        assert b"ROUND_SECRET=" in environ, "the variable's name stays; its bytes are zeroed"
        assert (proc / "environ").stat().st_uid == 0, "a non-dumpable process's /proc is root's"
        child.stdin.close()
        assert child.wait() == 0

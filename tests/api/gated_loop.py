"""A real ``crucible loop --dashboard 127.0.0.1:0`` whose metric samples the test lets through one by one.

The metric command takes a number from ``$GATE_DIR/taken`` (its index, counted over the whole run:
the baseline's samples first, then each turn's champion and candidate samples) and waits until
``$GATE_DIR/allow`` holds a larger number before it prints its sample, so a test can hold the loop in
the middle of a turn's measurement, look at the dashboard, then let the next sample through: no
timing, no sleeps in the test. Turn N's agent sets ``src/value.txt`` (10 at the base) to 10 - N.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.support.waiting import wait_until

SAMPLES = 3  # per arm: the baseline takes 3, each turn 6 (champion and candidate interleaved)
WAIT_S = 60.0

BENCH_SH = """\
n=$(cat "$GATE_DIR/taken" 2>/dev/null || echo 0)
echo $((n + 1)) > "$GATE_DIR/taken"
while [ "$(cat "$GATE_DIR/allow" 2>/dev/null || echo 0)" -le "$n" ]; do
  [ -d "$GATE_DIR" ] || exit 3
  sleep 0.05
done
printf 'METRIC score=%s\\n' "$(cat src/value.txt)"
"""

AGENT_SH = """\
echo $((10 - CRUCIBLE_TURN)) > src/value.txt
echo "HYPOTHESIS: one less than the champion"
"""

SPEC = f"""\
objective = "lower the score"
turns = 1

[agent]
command = "sh tools/agent.sh"
timeout = "60s"

[sandbox]
mode = "none"

[metric]
command = "sh tools/bench.sh"
name = "score"
direction = "minimize"
samples = {SAMPLES}
warmups = 0
confidence = 0.0
timeout = "120s"

[[component]]
name = "app"
repo = "repo"
base = "main"
mutable = ["src/**"]
protected = ["tools/**"]
"""


@dataclass
class GatedLoop:
    proc: subprocess.Popen[bytes]
    gate: Path
    err: Path
    out: Path

    def allow(self, samples: int) -> None:
        """Let the first ``samples`` metric samples of the run complete."""
        (self.gate / "allow.tmp").write_text(f"{samples}\n")
        (self.gate / "allow.tmp").replace(self.gate / "allow")

    def stderr(self) -> str:
        return self.err.read_text()

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        """``wait_until`` on the loop's process, failing with what the loop printed."""
        try:
            wait_until(condition, what, timeout=WAIT_S, proc=self.proc)
        except AssertionError as exc:
            pytest.fail(f"{exc}:\n{self.stderr()}")

    def taken(self) -> int:
        path = self.gate / "taken"
        text = path.read_text().strip() if path.exists() else ""
        return int(text) if text.isdigit() else 0

    def link(self) -> str:
        """The dashboard link the loop printed (``http://127.0.0.1:PORT/login?token=…``)."""
        found: list[str] = []

        def printed() -> bool:
            match = re.search(r"dashboard \(read-only\): (\S+)", self.stderr())
            if match:
                found.append(match.group(1))
            return bool(found)

        self.wait_for("the dashboard link", printed)
        return found[0]

    def run_id(self) -> str:
        match = re.search(r"run (\S+) started", self.stderr())
        assert match, self.stderr()
        return match.group(1)

    def stop(self) -> None:
        """End the loop and every metric it started. A SIGKILL alone left the metric of the running
        sample waiting on its gate for good (an orphan spinning after the test's directory was gone), so
        the gate opens first and the loop gets SIGTERM, which ends its commands, before any SIGKILL."""
        if self.proc.poll() is not None:
            return
        self.allow(10**9)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_gated_loop(root: Path, *extra: str) -> GatedLoop:
    """The repository and spec under ``root`` and ``crucible loop --dashboard 127.0.0.1:0`` running on them
    in its own session (so the test can signal it alone). The caller stops it."""
    make_repo(
        root / "repo",
        {"src/value.txt": "10\n", "tools/bench.sh": BENCH_SH, "tools/agent.sh": AGENT_SH},
    )
    (root / "crucible.toml").write_text(SPEC)
    gate = root / "gate"
    gate.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GATE_DIR"] = str(gate)
    argv = [sys.executable, "-c", "from controller.cli.main import main; main()"]
    argv += ["loop", "--spec", str(root / "crucible.toml"), "--dashboard", "127.0.0.1:0", *extra]
    out, err = root / "loop.out", root / "loop.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            argv,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    return GatedLoop(proc, gate, err, out)

"""What a preset adds to a turn's agent call, as a ratio against the same CLI run by hand.

Floor  = the real CLI started directly with exactly the argv and environment the preset builds (a fresh
         ``HOME`` each call, stdin closed), in a git checkout, against the scripted model server of the
         tests (``tests/agentkit``) that makes one edit.
Preset = what the controller does for a preset's turn (``controller.agents.turn``, ADR-0038): find the
         CLI, check the model endpoint, make the turn's folder and the CLI's settings, run the command a
         turn runs (the CLI ``exec``'d by ``/bin/sh -c``, as the executor runs it, its output going to
         files), read those files and let the preset's parser read them, remove the folder (for aider
         also: copy the checkout's git index to its scratch before, remove its cache folder after,
         ADR-0039; by hand aider runs without the scratch and ``git clean`` removes its cache, untimed).

Both arms run outside the sandbox (its cost is the same for every agent command, preset or not) and
interleaved, so drift on a shared machine hits both; between calls the checkout is restored (untimed).
Inside a turn's sandbox the CLI's ``HOME`` is a fresh tmpfs (Codex alone writes some sixty files there at
each start, twice as fast as on a disk); so both arms make it on a tmpfs too (``/dev/shm``, when there is
one: the line "TMPDIR" says which). The preset arm runs as in a loop pod (its ``HOME`` inside the turn's
folder), with that folder on the tmpfs as well; in a sandboxed turn the two output files are on the run's
disk.
Prints per preset the wall-time medians, the ratio preset/floor (and the median of each interleaved
pair's ratio), and the CPU time (user + system) each
arm used: the CLI's processes, plus this process's own work in the arm (for the preset arm: preparing and
reading the turn), which a loaded machine's wall times blur.

    python bench/agents.py [--calls 10] [--presets claude-code,codex,aider,gemini,qwen-code] [--latency-ms 0]

``--latency-ms`` makes the scripted model take that long per call, as a real one does (seconds): the
wrapper's cost is fixed per turn, so the ratio depends on how long the CLI's own call takes.

Target (issue 20): ratio <= 1.1.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.agents.base import Settings  # noqa: E402
from controller.agents.outcome import PREAMBLE, home_variables  # noqa: E402
from controller.agents.registry import preset  # noqa: E402
from controller.agents.turn import clean, finish, prepare  # noqa: E402
from controller.config.agent import AgentSpec  # noqa: E402
from tests.agentkit.anthropic import AnthropicMessages  # noqa: E402
from tests.agentkit.chat import ChatCompletions  # noqa: E402
from tests.agentkit.clis import AGENTS_BIN  # noqa: E402
from tests.agentkit.gemini import GeminiGenerateContent  # noqa: E402
from tests.agentkit.responses import OpenAIResponses  # noqa: E402
from tests.agentkit.script import Edit  # noqa: E402
from tests.agentkit.server import Dialect, ModelServer, ScriptedModel, running_model_server  # noqa: E402

PROGRAMS = {
    "claude-code": "claude",
    "codex": "codex",
    "aider": "aider",
    "gemini": "gemini",
    "qwen-code": "qwen",
}
MODELS = {
    "claude-code": "claude-sonnet-4-5",
    "codex": "gpt-5",
    "aider": "gpt-4o",
    "gemini": "gemini-2.5-pro",
    "qwen-code": "qwen3-coder",
}
KEYS = {"claude-code": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}  # the others: OPENAI_API_KEY
WITHOUT_V1 = ("claude-code", "gemini")  # base URLs given without /v1
BRIEF = "# Objective\n\nLower the value in src/value.txt.\n"


@dataclass
class Arm:
    name: str
    times: list[float]
    cpu: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)


def _cpu() -> float:
    """CPU time used so far by this process and its waited-for children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        used = resource.getrusage(who)
        total += used.ru_utime + used.ru_stime
    return total


def _timed(arm: Arm, call: Callable[[], tuple[float, float]]) -> None:
    """One call of ``arm``: its wall time and its CPU time (each the call's own measure)."""
    wall, cpu = call()
    arm.times.append(wall)
    arm.cpu.append(cpu)


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _checkout(where: Path) -> Path:
    repo = where / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "value.txt").write_text("10\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", "init")
    return repo


def _base_url(name: str, server: ModelServer) -> str:
    return server.url + ("" if name in WITHOUT_V1 else "/v1")


def _by_hand(
    name: str, cli: str, repo: Path, server: ModelServer, env: dict[str, str]
) -> tuple[float, float]:
    """The CLI with the preset's own flags and environment, started directly."""
    chosen = preset(name)
    home = Path(tempfile.mkdtemp(prefix="bench-agent-home-"))
    try:
        settings = Settings(
            workdir=repo,
            home=home,
            model=MODELS[name],
            base_url=_base_url(name, server),
            sandboxed=True,
            folder=home,
        )
        call = chosen.invocation(cli, PREAMBLE.format(workdir=repo) + BRIEF, settings)
        for folder in call.dirs:
            (home / folder).mkdir(parents=True, exist_ok=True)
        for relative, text in call.files.items():
            (home / relative).parent.mkdir(parents=True, exist_ok=True)
            (home / relative).write_text(text)
        full = {**env, **home_variables(home), **call.env}
        started, cpu = time.perf_counter(), _cpu()
        subprocess.run(
            call.argv,
            cwd=repo,
            env=full,
            input=(call.stdin or "").encode(),
            capture_output=True,
            check=True,
        )
        return time.perf_counter() - started, _cpu() - cpu
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _restore(repo: Path) -> None:
    """The checkout as committed, without what a CLI left (aider's repository-map cache by hand)."""
    _git(repo, "checkout", "-q", ".")
    _git(repo, "clean", "-fdxq")


def _as_a_turn(spec: AgentSpec, repo: Path, brief: Path, env: dict[str, str]) -> tuple[float, float]:
    """A preset's turn as the controller runs it (in a loop pod's way: no bubblewrap, see the module
    docstring), from finding the CLI to reading its output and removing the turn's folder."""
    started, cpu = time.perf_counter(), _cpu()
    folder = Path(tempfile.gettempdir()) / f"bench-preset-turn-{os.getpid()}"
    turn = prepare(
        spec,
        None,
        folder=folder,
        workdir=repo,
        brief=brief.read_text(encoding="utf-8"),
        boundary="pod",
        network=True,
        sandbox_home="/nonexistent",
        environ=env,
    )
    try:
        if turn.failure is not None:
            raise SystemExit(f"the preset's turn failed before its CLI started: {turn.failure}")
        done = subprocess.run(
            ["/bin/sh", "-c", turn.command],
            cwd=repo,
            env={**env, **turn.env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        finished = finish(spec, turn, done.returncode)
    finally:
        clean(turn)
    elapsed, used = time.perf_counter() - started, _cpu() - cpu
    if finished.failure is not None or not any(line.startswith("HYPOTHESIS:") for line in finished.lines):
        said = finished.failure or finished.stderr[-2000:]
        raise SystemExit(f"the preset's turn failed (exit {finished.returncode}): {said}")
    return elapsed, used


def measure(name: str, calls: int, where: Path, latency_s: float = 0.0) -> tuple[Arm, Arm]:
    cli = str((AGENTS_BIN / PROGRAMS[name]).resolve())
    repo = _checkout(where / name)
    brief = where / name / "CANDIDATE.md"
    brief.write_text(BRIEF)
    key = KEYS.get(name, "OPENAI_API_KEY")
    env = {**os.environ, key: "sk-bench-0123456789"}
    dialects: list[Dialect] = [
        AnthropicMessages(),
        OpenAIResponses(),
        ChatCompletions(),
        GeminiGenerateContent(),
    ]
    with running_model_server(dialects, ScriptedModel()) as server:
        server.model.edit = Edit("src/value.txt", "10", "8")
        server.model.delay_s = latency_s
        spec = AgentSpec.model_validate(
            {"preset": name, "cli": cli, "model": MODELS[name], "base_url": _base_url(name, server)}
        )
        hand, wrapped = Arm("by hand", [], []), Arm("preset", [], [])
        _by_hand(name, cli, repo, server, env)  # warm the page cache for both arms
        _restore(repo)
        for _ in range(calls):
            _timed(hand, lambda: _by_hand(name, cli, repo, server, env))
            _restore(repo)
            _timed(wrapped, lambda: _as_a_turn(spec, repo, brief, env))
            _restore(repo)
    return hand, wrapped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--presets", default=",".join(PROGRAMS))
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="the scripted model's time per call (a real one: seconds)",
    )
    args = parser.parse_args(argv)
    names = [n for n in args.presets.split(",") if n]
    missing = [n for n in names if not (AGENTS_BIN / PROGRAMS[n]).exists()]
    if missing:
        hint = "bash scripts/testenv/agents.sh installs them"
        raise SystemExit(f"not installed in {AGENTS_BIN}: {', '.join(missing)} ({hint})")
    checkouts = tempfile.gettempdir()  # the checkouts stay where a workspace would be: on disk
    tmpfs = Path("/dev/shm")
    if tmpfs.is_dir() and os.access(tmpfs, os.W_OK):
        os.environ["TMPDIR"] = str(tmpfs)  # both arms' CLI HOMEs, as on a turn's tmpfs /tmp
        tempfile.tempdir = None
    print("load (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    print(f"TMPDIR {tempfile.gettempdir()}" + ("" if tempfile.gettempdir() == str(tmpfs) else " (no tmpfs)"))
    with tempfile.TemporaryDirectory(prefix="bench-agents-", dir=checkouts) as tmp:
        for name in names:
            hand, wrapped = measure(name, args.calls, Path(tmp), args.latency_ms / 1000)
            ratio = wrapped.median / hand.median
            added = (wrapped.median - hand.median) * 1000
            print(f"{name} (model latency {args.latency_ms:g} ms per call, medians of {args.calls}):")
            medians = f"by hand {hand.median * 1000:.0f} ms, preset {wrapped.median * 1000:.0f} ms"
            print(f"  {medians} ({added:+.0f} ms)")
            print(f"  ratio {ratio:.3f} (target <= 1.1)")
            # Each preset call runs right after a by-hand call: the median of their ratios is what a
            # shared machine's drift over the whole run moves least.
            paired = statistics.median(p / h for p, h in zip(wrapped.times, hand.times, strict=True))
            print(f"  paired ratio {paired:.3f} (median of preset / the by-hand call just before it)")
            cpu = f"by hand {hand.cpu_median * 1000:.0f} ms, preset {wrapped.cpu_median * 1000:.0f} ms"
            print(f"  cpu: {cpu} ({(wrapped.cpu_median - hand.cpu_median) * 1000:+.0f} ms)")
            print(f"  by hand: {[round(t * 1000) for t in hand.times]}")
            print(f"  preset:  {[round(t * 1000) for t in wrapped.times]}")
    print("load (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

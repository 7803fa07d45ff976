"""Where a served turn's CPU goes: every thread's CPU per function, for ``bench/scheduler.py``'s drive.

The method of ADR-0048 and ADR-0050, kept so the next profile starts from it. ``bench/scheduler.py``
says how much a turn costs; this says where. One drive of ``--runs`` runs of ``--turns`` turns (the
scheduler, the threaded local broker, the trivial agent and metric of ``bench/scheduler.py``), with
the functions named by ``--wrap`` (``module:qualname``; the turn path's main steps unless given) wrapped
to add up their thread CPU (``time.thread_time``, inclusive, the outermost call per thread: a
recursive or nested call is not counted twice). Printed per decided turn: each function's CPU and
calls, this process's threads and the children it waited for (git and the commands), the processes
started by program name, and the SQL statements by verb (the engine's hook). The runs' setup is
included; with 100 turns a run it is a few percent of a turn.

    python bench/turn_profile.py [--runs 8] [--turns 100] [--wrap MODULE:QUALNAME ...]
                                 [--postgres ADMIN_URL]

The wrappers cost about 2 us a call: a function called a hundred times a turn reads 0.2 ms high. No
target: a profile, not a benchmark (``bench/scheduler.py`` prints the ratio).
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import sqlalchemy as sa  # noqa: E402
from scheduler import drive  # noqa: E402

TURN_PATH = [
    "controller.services.execution.loop:Search.next_turn",
    "controller.services.execution.turn:write_candidate_file",
    "controller.services.execution.turn:try_candidate",
    "controller.services.execution.turn:_decide",
    "controller.services.execution.steps:propose",
    "controller.services.execution.steps:check_policy",
    "controller.services.execution.verdict:evaluate",
    "controller.services.execution.execute:Executor.run",
    "controller.services.execution.execute:Executor._control_state",
    "controller.services.execution.execute:Executor._write_log",
    "controller.workspace.process:run_command",
    "controller.workspace.escapees:reap_escapees",
    "controller.workspace.git:run_git_bytes",
    "controller.services.execution.keep:commit_changed",
    "controller.services.execution.keep:settle_arms",
    "controller.store.turns:TurnsAndSamples.start_turn",
    "controller.store.turns:TurnsAndSamples.decide_turn",
    "controller.store.turns:TurnsAndSamples.turn_snapshot",
]


class Tally:
    """Thread CPU seconds and calls per wrapped function, from every thread."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = collections.defaultdict(float)
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._active = threading.local()

    def wrap(self, key: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            active: set[str] = self._active.__dict__.setdefault("keys", set())
            if key in active:
                return function(*args, **kwargs)
            active.add(key)
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                active.discard(key)
                with self._lock:
                    self.cpu[key] += spent
                    self.calls[key] += 1

        return timed


def install(tally: Tally, target: str) -> bool:
    """Wrap ``target`` (``module:qualname``) wherever it is reachable: on its class for a method, in
    every loaded module that imported it by name for a function. False if it does not exist."""
    module_name, _, qualname = target.partition(":")
    try:
        owner: Any = importlib.import_module(module_name)
        *path, name = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, name)
    except (ImportError, AttributeError):
        return False
    wrapped = tally.wrap(target, original)
    if path:
        setattr(owner, name, wrapped)
        return True
    for module in list(sys.modules.values()):
        for attribute, value in list(getattr(module, "__dict__", {}).items()):
            if value is original:
                setattr(module, attribute, wrapped)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--wrap", action="append", help="module:qualname (repeatable)")
    parser.add_argument(
        "--postgres", metavar="ADMIN_URL", help="on a PostgreSQL database made through this admin URL"
    )
    args = parser.parse_args(argv)
    tally = Tally()
    targets = args.wrap or TURN_PATH
    missing = [t for t in targets if not install(tally, t)]
    for target in missing:
        print(f"not found, not profiled: {target}", file=sys.stderr)
    started: collections.Counter[str] = collections.Counter()
    popen_init = subprocess.Popen.__init__

    def counted(self: subprocess.Popen[Any], command: Any, *rest: Any, **kwargs: Any) -> None:
        words = [command] if isinstance(command, (str, bytes, os.PathLike)) else list(command)
        started[os.path.basename(str(words[0]))] += 1
        popen_init(self, command, *rest, **kwargs)

    subprocess.Popen.__init__ = counted  # type: ignore[method-assign,assignment]
    statements: collections.Counter[str] = collections.Counter()

    def statement(_conn: Any, _cursor: Any, text: str, *_rest: Any) -> None:
        statements[text.split(None, 1)[0].upper()] += 1

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", statement)
    work = Path(tempfile.mkdtemp(prefix="crucible-turn-profile-"))
    try:
        done = drive(work / "drive", args.runs, args.turns, args.runs, args.postgres)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    turns = done.decided
    own, children = done.own / turns * 1000, done.children / turns * 1000
    print(
        f"{done.runs} runs x {args.turns} turns ({turns} decided, {done.wall:.1f} s wall, load "
        f"{os.getloadavg()[0]:.1f}), per decided turn: this process's threads {own:.2f} ms, "
        f"its waited children {children:.2f} ms"
    )
    for target in targets:
        if target not in missing:
            cpu, calls = tally.cpu[target] / turns * 1000, tally.calls[target] / turns
            print(f"  {cpu:7.3f} ms {calls:6.2f} calls  {target}")
    print("  processes started: " + ", ".join(f"{n} {c / turns:.2f}" for n, c in started.most_common()))
    total = sum(statements.values())
    print(
        f"  statements: {total / turns:.2f} ("
        + ", ".join(f"{verb} {n / turns:.2f}" for verb, n in statements.most_common())
        + ")"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

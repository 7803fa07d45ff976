"""Runs the user's commands (agent, validation, metric) the way docs/agent.md demands.

Every command gets the scrubbed environment plus the protocol variables, runs in its own process group
(recorded in the run directory before it can do anything, so ``resume`` can kill it after a
``kill -9`` of the controller), inside bubblewrap when the sandbox is on, and leaves a redacted log behind.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller.engine.protocol import CAPTURE_PREFIXES
from controller.services.execution.pgroups import GroupRegistry
from controller.workspace.envscrub import ScrubbedEnv, redact
from controller.workspace.gitguard import ControlGuard, restore_control, tampered
from controller.workspace.process import CommandResult, run_command
from controller.workspace.sandbox import Sandbox, wrap_command
from controller.workspace.sandboxpaths import start_problem

DISK_CHECK_S = 5.0  # how often a running command's run directory is measured against budget.disk


def disk_usage(path: Path) -> int:
    """Bytes of the files under ``path`` (``lstat`` sizes; what budget.disk counts)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


@dataclass
class Executor:
    """Runs shell commands for one run; holds what every command of the run shares."""

    groups: GroupRegistry
    run_id: str
    scrubbed: ScrubbedEnv
    sandbox: bool
    network: bool
    sandbox_home: str
    readonly: list[Path] = field(default_factory=list)
    hide: list[Path] = field(default_factory=list)
    # Never re-exposed inside the sandbox, even when a command names a path there (CRUCIBLE_HOME).
    private: list[Path] = field(default_factory=list)
    cancel: threading.Event = field(default_factory=threading.Event)
    # The run's sandbox (``sandboxhost.run_sandbox``: homes and deny list, sandbox.readonly, secret
    # files), one per run so each command's exposure is computed once; None: one made per command
    # from ``hide`` and ``private`` alone.
    box: Sandbox | None = None
    command_seconds: float = 0.0  # wall time spent inside commands, for the overhead benchmark
    # Commands started so far: a fingerprint of a checkout taken at one count holds at the same count
    # (``candidate_copy``), since only a command can write there between two of crucible's own steps.
    commands_run: int = 0
    # The .git directories of the run's checkouts: any change a command makes to their control files
    # (config, hooks, refs …) is undone right after it and reported through ``take_violations``.
    guarded: list[Path] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    # Their last scans, per .git, so a scan finding nothing changed is a few ``lstat`` calls.
    _control_guards: dict[Path, ControlGuard] = field(default_factory=dict, init=False, repr=False)
    # budget.disk: caps the sandbox's tmpfs mounts and, checked every DISK_CHECK_S while a command runs,
    # stops a command that fills the run directory (``disk_root``) past it.
    disk_budget: int | None = None
    disk_root: Path | None = None
    disk_exceeded: bool = False
    # Why the last command could not start inside the sandbox, if that was it (for callers that only
    # see an outcome, like validation with retries).
    last_start_problem: str | None = None

    def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float | None,
        writable: Sequence[Path],
        protocol: Mapping[str, str],
        log: Path | None = None,
        home_tree: Path | None = None,
    ) -> CommandResult:
        """Run ``command`` through ``/bin/sh -c`` and return its (capped) result. ``home_tree``: folders
        and files shown in the sandbox's ``HOME`` (a preset's settings, ``Sandbox.wrap``)."""
        env = dict(self.scrubbed.env)
        env.update(protocol)
        argv: list[str] = ["/bin/sh", "-c", command]
        if self.sandbox:
            env["HOME"] = self.sandbox_home
            if self.box is not None:
                argv = self.box.wrap(
                    argv,
                    writable=list(writable),
                    readonly=list(self.readonly),
                    search_path=env.get("PATH"),
                    environ=env,
                    home_tree=home_tree,
                )
            else:
                argv = wrap_command(
                    argv,
                    writable=list(writable),
                    readonly=list(self.readonly),
                    hide=list(self.hide),
                    network=self.network,
                    home=self.sandbox_home,
                    private=list(self.private),
                    search_path=env.get("PATH"),
                    tmpfs_bytes=self.disk_budget,
                    home_tree=home_tree,
                )
        self.commands_run += 1
        guarded = {git_dir: self._control_state(git_dir) for git_dir in self.guarded}
        groups: list[int] = []

        def remember(pgid: int) -> None:
            groups.append(pgid)
            self.groups.record(pgid, command[:200])

        stop, watchdog = self._watch_disk()
        try:
            result = run_command(
                argv,
                cwd=cwd,
                env=env,
                timeout=timeout,
                cancel=stop,
                on_spawn=remember,
                capture_prefixes=CAPTURE_PREFIXES,
            )
        finally:
            watchdog.set()
            for pgid in groups:
                self.groups.clear(pgid)
            self._undo_git_changes(guarded)
        if self.sandbox and result.returncode in (126, 127):
            denied = self.box.denied if self.box is not None else ()
            result = replace(result, start_problem=start_problem(result.stderr, env.get("PATH"), denied))
        self.last_start_problem = result.start_problem
        if result.survivors:
            pids = ", ".join(str(pid) for pid in result.survivors)
            self.violations.append(f"processes the command started could not be killed: {pids}")
        self.command_seconds += result.duration_s
        if log is not None:
            self._write_log(log, command, result)
        return result

    def _watch_disk(self) -> tuple[threading.Event, threading.Event]:
        """(the event the command stops on, an event that ends the watch). Without a disk budget that
        is the run's cancel event; with one, a watcher also sets it when the run directory has grown
        past the budget (checked every DISK_CHECK_S; ``disk_exceeded`` then says so)."""
        done = threading.Event()
        if self.disk_budget is None or self.disk_root is None:
            return self.cancel, done
        stop, budget, root = threading.Event(), self.disk_budget, self.disk_root

        def watch() -> None:
            next_check = time.monotonic() + DISK_CHECK_S
            while not done.wait(0.1):
                if self.cancel.is_set():
                    stop.set()
                elif time.monotonic() >= next_check:
                    next_check = time.monotonic() + DISK_CHECK_S
                    if disk_usage(root) >= budget:
                        self.disk_exceeded = True
                        stop.set()

        threading.Thread(target=watch, name="crucible-disk-watch", daemon=True).start()
        return stop, done

    def take_violations(self) -> list[str]:
        """What commands did since the last call that the turn must refuse (and has been undone)."""
        found, self.violations = self.violations, []
        return found

    def _undo_git_changes(self, before: Mapping[Path, dict[str, bytes | str]]) -> None:
        for git_dir, state in before.items():
            changes = tampered(state, self._control_state(git_dir))
            if changes:
                restore_control(git_dir, state)
                shown = ", ".join(f".git/{c}" for c in changes[:10])
                self.violations.append(f"{git_dir.parent.name}: a command changed {shown} (restored)")

    def _control_state(self, git_dir: Path) -> dict[str, bytes | str]:
        """``control_state`` through this executor's ``ControlGuard`` of ``git_dir``: the scans before
        and after every command cost a check of the stat data when nothing changed, not a walk."""
        guard = self._control_guards.get(git_dir)
        if guard is None:
            guard = self._control_guards[git_dir] = ControlGuard(git_dir)
        return guard.state()

    def redact(self, text: str) -> str:
        return redact(text, self.scrubbed.secrets)

    def _write_log(self, log: Path, command: str, result: CommandResult) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        status = "timed out" if result.timed_out else f"exit {result.returncode}"
        text = (
            f"$ {command}\n# {status} after {result.duration_s:.2f}s\n"
            f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}\n"
        )
        log.write_text(self.redact(text), encoding="utf-8", errors="replace")

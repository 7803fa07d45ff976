"""``SubprocessBroker``: each round runs ``crucible worker`` as a child process of the controller.

The remote path of the Kubernetes broker (ADR-0014, ADR-0015) without a cluster: the child gets
only the environment a loop pod would (the worker's variables, minted per round, on top of the few
variables in ``CHILD_VARIABLES`` taken from the given environment: no database URL, no forge or API
credential can pass, whatever the controller's own environment holds), its own working directory,
and talks to the controller over HTTP like a pod. What the round concluded comes from the
controller (``remote_outcome``: what the worker reported, once accepted), never from the child's
output; a child that exits otherwise is a FAILED round with its exit code and the tail of its log.

Cancel sends SIGTERM to the child's process group (the worker then cancels its round, restores
the turn, reports, and exits); a child that has not exited ``kill_after_s`` later is killed.
Dependency inversion as for the other brokers: ``mint_worker_env``/``remote_outcome``/``revoke``
are injected; this module knows nothing of the store or the services.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from controller.brokers.base import BrokerCapabilities, HypothesisPod, RoundOutcome, RoundReport
from controller.brokers.table import RoundTable
from controller.domain.errors import NotFoundError
from controller.domain.jobs import RoundJob, RoundState

MintWorkerEnv = Callable[[RoundJob], dict[str, str]]
RemoteOutcome = Callable[[str, int], RoundOutcome | None]
Revoke = Callable[[str, int], None]

WORKER_COMMAND: tuple[str, ...] = (sys.executable, "-m", "controller.cli.main", "worker")
# What a child takes from the environment it is given (a pod's image sets as much): nothing secret.
CHILD_VARIABLES = frozenset(
    {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME", "VIRTUAL_ENV"}
)
LOG_TAIL = 2000  # characters of the child's output a FAILED report quotes
CLOSE_WAIT_S = 10.0  # a confirmation's grace after SIGTERM before SIGKILL


@dataclass
class _Round:
    job: RoundJob
    report: RoundReport
    workdir: Path
    process: subprocess.Popen[bytes] | None = None
    cancelled: bool = False
    done: threading.Event = field(default_factory=threading.Event)


class SubprocessBroker:
    """See the module docstring. ``root``: where each round's working directory is made."""

    def __init__(
        self,
        *,
        mint_worker_env: MintWorkerEnv,
        remote_outcome: RemoteOutcome,
        root: Path,
        environ: Mapping[str, str],
        revoke: Revoke | None = None,
        command: Sequence[str] = WORKER_COMMAND,
        kill_after_s: float = 30.0,
    ) -> None:
        self._mint = mint_worker_env
        self._outcome = remote_outcome
        self._revoke = revoke
        self._root = root
        self._environ = {name: value for name, value in environ.items() if name in CHILD_VARIABLES}
        self._command = tuple(command)
        self._kill_after_s = kill_after_s
        self._table: RoundTable[_Round] = RoundTable()  # (run, round) -> its latest attempt
        self._lock = self._table.lock
        self.capabilities = BrokerCapabilities(remote=True, concurrent=True)

    def launch(self, job: RoundJob) -> RoundReport:
        workdir = self._root / job.run_id / f"round-{job.round}-{job.attempt}"
        pending = RoundReport(job.run_id, job.round, RoundState.PENDING)
        entry, new = self._table.admit(job, lambda: _Round(job, pending, workdir))
        if not new:
            return entry.report
        name = f"crucible-worker-{job.run_id}-{job.round}-{job.attempt}"
        threading.Thread(target=self._execute, args=(entry,), name=name, daemon=True).start()
        return entry.report

    def status(self, run_id: str, round: int) -> RoundReport:
        return self._get(run_id, round).report

    def wait(self, run_id: str, round: int, timeout: float | None = None) -> RoundReport:
        return self._table.wait(run_id, round, timeout)

    def cancel(self, run_id: str, round: int) -> RoundReport:
        entry = self._get(run_id, round)
        with self._lock:
            entry.cancelled = True
            if entry.report.state == RoundState.PENDING:
                self._move(entry, RoundState.CANCELLED)
                entry.done.set()
            process = entry.process
        if process is not None and process.poll() is None:
            _signal_group(process, signal.SIGTERM)
        return entry.report

    # -- the child ----------------------------------------------------------------------------

    def _execute(self, entry: _Round) -> None:
        job = entry.job
        try:
            with self._lock:
                if entry.report.state != RoundState.PENDING:
                    return  # cancelled before it started
                env = {**self._environ, **self._mint(job)}
                entry.workdir.mkdir(parents=True, exist_ok=True)
                log = entry.workdir / "worker.log"
                with log.open("wb") as out:
                    entry.process = subprocess.Popen(
                        self._command,
                        cwd=entry.workdir,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its own process group: cancel reaches its commands
                    )
                self._move(entry, RoundState.RUNNING)
            code = self._reap(entry)
            self._conclude(entry, code, log)
        except Exception as exc:  # the round failed, not the broker: report it
            with self._lock:
                if entry.report.state not in (RoundState.SUCCEEDED, RoundState.FAILED, RoundState.CANCELLED):
                    self._move(entry, RoundState.FAILED, error=f"{type(exc).__name__}: {exc}")
        finally:
            if self._revoke is not None:
                # A revoke that failed (database away) still leaves the token to expire.
                with contextlib.suppress(Exception):
                    self._revoke(job.run_id, job.round)
            entry.done.set()

    def _reap(self, entry: _Round) -> int:
        process = entry.process
        assert process is not None
        while True:
            try:
                return process.wait(timeout=self._kill_after_s if entry.cancelled else None)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)

    def _conclude(self, entry: _Round, code: int, log: Path) -> None:
        outcome = self._outcome(entry.job.run_id, entry.job.round)
        with self._lock:
            if code == 0 and outcome is not None:
                state = RoundState.CANCELLED if entry.cancelled else RoundState.SUCCEEDED
                self._move(entry, state, outcome=outcome)
            elif entry.cancelled:
                self._move(entry, RoundState.CANCELLED, outcome=outcome, error=f"worker exited {code}")
            else:
                why = "exited 0 but reported no outcome" if code == 0 else f"exited {code}"
                tail = log.read_text(errors="replace")[-LOG_TAIL:].strip()
                self._move(entry, RoundState.FAILED, error=f"worker_failed: crucible worker {why}: {tail}")

    def _get(self, run_id: str, round: int) -> _Round:
        return self._table.get(run_id, round)

    def _move(self, entry: _Round, state: RoundState, **changes: object) -> None:
        self._table.move(entry, state, **changes)


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


class SubprocessConfirmations:
    """``ConfirmLauncher`` (ADR-0043) with child processes: each confirmation runs ``crucible worker``
    with the confirmation's environment on top of ``CHILD_VARIABLES``, in a directory of its own under
    ``root``, as a round's worker does. A child this process did not start (a restarted controller)
    is not found: the caller launches the claim again with a fresh token, which retires the old one."""

    def __init__(
        self, *, root: Path, environ: Mapping[str, str], command: Sequence[str] = WORKER_COMMAND
    ) -> None:
        self._root = root
        self._environ = {name: value for name, value in environ.items() if name in CHILD_VARIABLES}
        self._command = tuple(command)
        self._children: dict[tuple[str, int, int, str], tuple[subprocess.Popen[bytes], Path]] = {}
        self._lock = threading.Lock()

    def launch_confirmation(self, job: RoundJob, turn: int, claim: str, env: Mapping[str, str]) -> None:
        key = (job.run_id, job.round, turn, claim)
        with self._lock:
            known = self._children.get(key)
            if known is not None and known[0].poll() is None:
                return
            workdir = self._root / job.run_id / f"confirm-{job.round}-{turn}-{claim}"
            workdir.mkdir(parents=True, exist_ok=True)
            log = workdir / "worker.log"
            with log.open("wb") as out:
                child = subprocess.Popen(
                    self._command,
                    cwd=workdir,
                    env={**self._environ, **env},
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._children[key] = (child, log)

    def confirmation_status(self, run_id: str, round: int, turn: int, claim: str) -> HypothesisPod:
        with self._lock:
            known = self._children.get((run_id, round, turn, claim))
        if known is None:
            raise NotFoundError(f"no confirmation {claim} of turn {turn} of run {run_id} was launched here")
        child, log = known
        code = child.poll()
        if code is None:
            return HypothesisPod(False)
        if code == 0:
            return HypothesisPod(True)
        tail = log.read_text(errors="replace")[-LOG_TAIL:].strip()
        return HypothesisPod(True, f"worker_failed: crucible worker exited {code}: {tail}")

    def close(self) -> None:
        """Stop every child still measuring (the controller is going away) and reap each one: a child
        only signalled was left a zombie, and its ``Popen`` warned 'still running' when collected."""
        with self._lock:
            children = [child for child, _log in self._children.values()]
        for child in children:
            if child.poll() is None:
                _signal_group(child, signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
                child.wait()

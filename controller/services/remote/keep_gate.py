"""A remote round's claimed keep counts only once a confirmation reproduced it (issue 21, ADR-0043).

The recount (``recount``) proves a worker's decision is what its samples give; a confirmation proves
the samples: ``confirm`` measures the claim again where no agent ran. ``KeepGate`` sits between the
two in ``RemoteRounds.decide_turn``, for the runs whose launcher ``launcher_for`` names (None: this
run's keeps are recorded on the recount alone, as a local run's are measured by the controller):

- ``require_confirmed``: a keep of turn ``number`` claiming ``commits`` over the run's champion heads
  (the claim) is let through once the claim's confirmation concluded ``confirmed``. Until then the
  request waits up to ``wait_s`` (woken by a report through this process, re-reading the grants every
  ``poll_s`` otherwise: another replica's report) and answers ``ConfirmingError`` (503, the worker
  sends the same decision again). The first request of a claim mints the confirmation's token and
  launches it; a confirmation whose worker ended without a report, or that this process cannot find
  (a restarted controller of the subprocess launcher), is concluded not confirmed, or launched again.
  A claim concluded not confirmed is refused (``UnconfirmedError``, 403, recorded as a
  ``policy_violation`` event naming what the confirmation measured); the turn stays undecided and the
  token good, so an attacker's forged keep costs the honest worker nothing.
- ``require_failed``: a rejection with reason ``unconfirmed`` (the honest worker settling a keep its
  confirmation did not reproduce) only when a confirmation of that turn concluded not confirmed.

A confirmation is named by its claim (``claim_name``): the same keep sent again waits on the same
confirmation; another claim of the same turn gets its own, so no claim can retire another's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping

from controller.brokers.base import ConfirmLauncher
from controller.domain.enums import EventKind, Outcome, Reason
from controller.domain.errors import (
    ConfirmingError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    UnconfirmedError,
)
from controller.domain.jobs import RoundJob
from controller.services.remote import scopes
from controller.store.ports import RemoteRoundStore
from controller.store.records import WorkerRoundRecord
from controller.store.worker_protocol import ConfirmationOutcome

WAIT_S = 10.0  # how long one decision request waits for its confirmation before answering 503
POLL_S = 0.5  # between reads of the grants while it waits (a report through another replica)

LauncherFor = Callable[[str], ConfirmLauncher | None]
MintConfirmEnv = Callable[[RoundJob, int, Mapping[str, str], Mapping[str, str]], dict[str, str]]


def claim_name(candidate: Mapping[str, str]) -> str:
    """A short name of a claim (its candidate heads), the same in any process."""
    canonical = json.dumps(dict(sorted(candidate.items())), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


class KeepGate:
    """See the module docstring."""

    def __init__(
        self,
        store: RemoteRoundStore,
        mint: MintConfirmEnv,
        launcher_for: LauncherFor,
        *,
        wait_s: float = WAIT_S,
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._mint = mint
        self._launcher_for = launcher_for
        self.wait_s = wait_s
        self.poll_s = poll_s
        self._clock = clock
        self._reports = threading.Condition()
        self._closed = False

    def require_confirmed(self, grant: WorkerRoundRecord, number: int, commits: Mapping[str, str]) -> None:
        """Return once the keep's claim is confirmed (module docstring); ConfirmingError while it is
        measured, UnconfirmedError (recorded) when it was not reproduced."""
        launcher = self._launcher_for(grant.run_id)
        if launcher is None:
            return
        champion = {c.name: c.head_sha for c in self._store.list_components(grant.run_id)}
        candidate = {**champion, **commits}
        claim = claim_name(candidate)
        deadline = self._clock() + self.wait_s
        while True:
            found = self._claim(grant, number, candidate)
            if found is not None and found.outcome is not None:
                self._settled(
                    grant, number, ConfirmationOutcome.model_validate(found.outcome["confirmation"])
                )
                return
            if found is None or found.revoked_at is not None:
                job = RoundJob.from_json({k: v for k, v in grant.job.items() if k not in scopes.SCOPES})
                env = self._mint(job, number, champion, candidate)
                launcher.launch_confirmation(job, number, claim, env)
            else:
                self._check(launcher, found, number, claim)
            left = deadline - self._clock()
            if left <= 0 or self._closed:
                raise ConfirmingError(f"turn {number}'s keep is being confirmed; send the decision again")
            with self._reports:
                if not self._closed:
                    self._reports.wait(min(left, self.poll_s))

    def require_failed(self, grant: WorkerRoundRecord, number: int) -> None:
        """ForbiddenError unless a confirmation of turn ``number`` concluded not confirmed."""
        for found in self._store.confirmations(grant.run_id, grant.round, number):
            if found.outcome is not None and not found.outcome["confirmation"]["confirmed"]:
                return
        raise ForbiddenError(f"turn {number}: {Reason.UNCONFIRMED} with no failed confirmation on record")

    def reported(self) -> None:
        """A confirmation reported through this process's worker routes: wake the waiters."""
        with self._reports:
            self._reports.notify_all()

    def close(self) -> None:
        """The server is stopping: every waiting request answers 503 now (ADR-0037)."""
        with self._reports:
            self._closed = True
            self._reports.notify_all()

    def _claim(
        self, grant: WorkerRoundRecord, number: int, candidate: Mapping[str, str]
    ) -> WorkerRoundRecord | None:
        """The newest confirmation of this claim of the turn, or None."""
        found = None
        for one in self._store.confirmations(grant.run_id, grant.round, number):
            if one.job["confirm"]["candidate"] == dict(candidate):
                found = one
        return found

    def _check(self, launcher: ConfirmLauncher, found: WorkerRoundRecord, number: int, claim: str) -> None:
        """A live confirmation without a report: launch it again when this process cannot find it
        (a restarted controller; the new token retires the old), conclude it not confirmed when its
        worker ended without reporting."""
        try:
            state = launcher.confirmation_status(found.run_id, found.round, number, claim)
        except NotFoundError:
            job = RoundJob.from_json({k: v for k, v in found.job.items() if k not in scopes.SCOPES})
            scope = found.job["confirm"]
            launcher.launch_confirmation(
                job, number, claim, self._mint(job, number, scope["champion"], scope["candidate"])
            )
            return
        if not state.finished:
            return
        again = self._store.worker_round_by_token(found.token_hash)
        if again is None or again.outcome is not None:
            return  # it reported as it ended
        why = state.error or "it exited without one"
        lost = ConfirmationOutcome(
            turn=number, confirmed=False, detail=f"the confirmation sent no report: {why}"
        )
        with contextlib.suppress(ConflictError):  # it reported meanwhile, or the round ended
            self._store.finish_worker_round(found.token_hash, {"confirmation": lost.model_dump(mode="json")})

    def _settled(self, grant: WorkerRoundRecord, number: int, outcome: ConfirmationOutcome) -> None:
        if outcome.confirmed:
            return
        measured = "nothing" if outcome.value is None else f"{outcome.value:g}"
        detail = f"claimed keep; the confirmation measured {measured}: {outcome.detail}"
        payload = {
            "round": grant.round,
            "turn": number,
            "outcome": str(Outcome.REJECTED),
            "reason": str(Reason.POLICY_VIOLATION),
            "detail": f"report refused: {detail}",
        }
        self._store.append_event(grant.run_id, EventKind.REJECTED, payload)
        raise UnconfirmedError(f"{Reason.UNCONFIRMED}: {detail}")

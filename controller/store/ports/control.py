"""Ports of the controller's own bookkeeping: scheduling runs across replicas, remote rounds' tokens and
outcomes, and the process groups a run's commands started.

Each is used by one part of ``services.control`` or ``services.remote``; the contract is ``Store``'s
(``store.leases``, ``store.worker_rounds``, ``store.process_groups``), tested per Protocol over every
implementation in ``tests/ports``. Errors as in ``ports.runs``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, Protocol

from controller.store.records import WorkerRoundRecord


class Scheduling(Protocol):
    """What a server's scheduler needs beyond a run's own record: claiming runs nobody drives (several
    replicas on one database split them, never claim one twice), handing leases back in bulk, and
    noticing which runs have news (new events) without reading every run."""

    def claim_runs(self, owner: str, ttl_s: float, *, limit: int) -> list[str]:
        """Claim up to ``limit`` runs nobody drives (pending, or running without a live lease), oldest
        first; their ids. Runs another claimer has locked are skipped, not waited for."""
        ...

    def release_leases(self, owner: str, run_ids: Collection[str]) -> int:
        """Hand back every lease of ``run_ids`` that ``owner`` holds; how many it held."""
        ...

    def newest_events(self, after_id: int) -> dict[str, int]:
        """Per run with events newer than ``after_id``, the id of its newest."""
        ...

    def newest_event_id(self) -> int:
        """The id of the newest event of any run (0: none)."""
        ...


class WorkerRoundRecords(Protocol):
    """The attempts of remote rounds (ADR-0014): the token each worker holds (only its sha256 is
    stored), the commits its verified bundles brought in, and the outcome it reported.

    Only the newest attempt of a round (or of one hypothesis of a turn, ADR-0018) may write: a new
    attempt revokes the earlier ones. NotFoundError for a token no attempt was minted for;
    ConflictError for writing with a revoked token (its attempt is over) or a token hash used twice.
    Expiry is the caller's to check (``worker_round_by_token`` returns ``expires_at``)."""

    def add_worker_round(
        self,
        run_id: str,
        round: int,
        *,
        token_hash: str,
        job: Mapping[str, Any],
        expires_at: datetime,
        replacing: str | None = None,
    ) -> WorkerRoundRecord:
        """A new attempt of ``round`` (attempts count from 1), revoking earlier ones of its scope;
        ConflictError when ``replacing`` (a token hash) names a grant that is no longer live."""
        ...

    def worker_round_by_token(self, token_hash: str) -> WorkerRoundRecord | None:
        """The attempt a token hash was minted for, revoked or expired included (the caller decides)."""
        ...

    def prove_worker_heads(self, token_hash: str, heads: Mapping[str, str]) -> WorkerRoundRecord:
        """Record commits a verified bundle of this live attempt brought in (component -> sha)."""
        ...

    def proved_heads(self, run_id: str, round: int) -> dict[str, set[str]]:
        """Every commit, by component, a verified bundle of any attempt of the round brought in."""
        ...

    def finish_worker_round(self, token_hash: str, outcome: Mapping[str, Any]) -> WorkerRoundRecord:
        """Store the attempt's outcome and revoke its token in one step."""
        ...

    def revoke_worker_rounds(self, run_id: str, round: int) -> int:
        """Revoke every live token of the round; how many were live."""
        ...

    def worker_outcome(self, run_id: str, round: int) -> WorkerRoundRecord | None:
        """The newest attempt of the round that reported an outcome (not a hypothesis pod's), or None."""
        ...

    def confirmations(self, run_id: str, round: int, turn: int) -> list[WorkerRoundRecord]:
        """The confirmation grants of ``turn`` of the round (ADR-0043), oldest first."""
        ...

    def live_hypotheses(self, run_id: str, round: int, index: int) -> list[WorkerRoundRecord]:
        """The unrevoked hypothesis grants of parallel index ``index`` of the round, oldest first
        (what a warm pod's slot may take next, ADR-0031)."""
        ...


class ProcessGroupRecords(Protocol):
    """The process groups a run's commands started, so a resume on this host kills what a dead
    driver left running (``recovery.kill_leftovers``)."""

    def record_process_group(self, run_id: str, pgid: int, command: str) -> None:
        """Remember a running command's group; recording it again updates the command."""
        ...

    def clear_process_group(self, run_id: str, pgid: int) -> None:
        """Forget a group; clearing one that is not recorded is not an error."""
        ...

    def list_process_groups(self, run_id: str) -> list[tuple[int, str]]:
        """(pgid, command) in the order they were recorded."""
        ...

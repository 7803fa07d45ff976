"""The store's record of remote rounds: worker tokens (hashed), their jobs, proved heads and outcomes.

A mixin of ``Store`` in its own module (ADR-0014); the session scope and transaction rules are
``Store``'s. The token itself never reaches the database: callers hand in its sha256, and a lookup
by that hash is the only way back to a row.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from controller.domain.errors import ConflictError, NotFoundError
from controller.store.models import WorkerRoundRow
from controller.store.queries import get_run_row, lock_run
from controller.store.records import WorkerRoundRecord


def hypothesis_scope(job: Mapping[str, Any]) -> tuple[int, int] | None:
    """(turn, index) of a hypothesis pod's grant (ADR-0018); None for a round's worker."""
    scope = job.get("hypothesis")
    if not isinstance(scope, Mapping):
        return None
    return int(scope["turn"]), int(scope["index"])


def slot_index(job: Mapping[str, Any]) -> int | None:
    """The parallel index of a warm hypothesis pod's slot grant (ADR-0034); None for any other.
    Such a token only asks for its slot's next hypothesis, each of which comes with its own
    hypothesis grant (``hypothesis_scope``)."""
    slot = job.get("slot")
    return slot if isinstance(slot, int) and not isinstance(slot, bool) else None


def confirm_scope(job: Mapping[str, Any]) -> int | None:
    """The turn a confirmation's grant (issue 21, ADR-0043) measures a claimed keep of; None for any
    other grant. Such a token fetches the champion and the claimed commits and reports samples,
    nothing else."""
    scope = job.get("confirm")
    if not isinstance(scope, Mapping):
        return None
    return int(scope["turn"])


def _grant_key(job: Mapping[str, Any]) -> tuple[object, ...]:
    """What a new grant replaces: the same hypothesis, the same slot, the confirmation of the same
    claim, or (None) the round's worker."""
    slot = slot_index(job)
    if slot is not None:
        return ("slot", slot)
    turn = confirm_scope(job)
    if turn is not None:  # one live confirmation per claim: another claim of the turn has its own
        return ("confirm", turn, tuple(sorted(job["confirm"]["candidate"].items())))
    return ("hypothesis", hypothesis_scope(job))


class WorkerRounds:
    """``add_worker_round`` / ``worker_round_by_token`` / ``prove_worker_heads`` / ``proved_heads`` /
    ``finish_worker_round`` / ``revoke_worker_rounds`` / ``worker_outcome`` / ``confirmations`` /
    ``live_hypotheses``; mixed into ``Store``."""

    def _now(self) -> datetime:
        raise NotImplementedError

    def _session(self, *, read_only: bool = False) -> AbstractContextManager[Session]:
        raise NotImplementedError

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
        """A new attempt of ``round`` (attempts count from 1); earlier attempts of it are revoked, so
        only the newest worker of a round may write. A hypothesis grant (``job["hypothesis"]``, one
        pod per parallel hypothesis, ADR-0018) revokes only earlier grants of its own turn and index:
        the N pods of a turn hold N live tokens; a slot grant (``job["slot"]``, ADR-0034) only earlier
        grants of its own slot. ``replacing``: the token hash of the grant this one takes over (a
        warm pod taking an offer, ADR-0034); ConflictError, nothing written, when that grant is no
        longer live, so an offer withdrawn meanwhile (ADR-0051) is never handed out under a new token.
        ConflictError for a token hash already used."""
        with self._session() as s:
            lock_run(s, run_id)
            now = self._now()
            if replacing is not None:
                old = s.scalars(
                    sa.select(WorkerRoundRow).where(WorkerRoundRow.token_hash == replacing)
                ).one_or_none()
                if old is None or old.revoked_at is not None:
                    raise ConflictError(f"the grant this one replaces in run {run_id} is no longer live")
            of_round = (WorkerRoundRow.run_id == run_id, WorkerRoundRow.round == round)
            # Only the live grants and the highest attempt: a parallel round mints two grants per
            # hypothesis, and reading every earlier one would grow each mint with the run's length.
            live = s.scalars(
                sa.select(WorkerRoundRow).where(*of_round, WorkerRoundRow.revoked_at.is_(None))
            ).all()
            last = s.scalar(sa.select(sa.func.max(WorkerRoundRow.attempt)).where(*of_round))
            scope = _grant_key(job)
            for row in live:
                if _grant_key(row.job) == scope:
                    row.revoked_at = now
            row = WorkerRoundRow(
                run_id=run_id,
                round=round,
                attempt=(last or 0) + 1,
                token_hash=token_hash,
                job=dict(job),
                created_at=now,
                expires_at=expires_at,
                revoked_at=None,
                heads={},
                outcome=None,
            )
            s.add(row)
            s.flush()
            return row.to_record()

    def worker_round_by_token(self, token_hash: str) -> WorkerRoundRecord | None:
        """The attempt a token hash was minted for, revoked or expired included (the caller decides)."""
        query = sa.select(WorkerRoundRow).where(WorkerRoundRow.token_hash == token_hash)
        with self._session(read_only=True) as s:
            row = s.scalars(query).one_or_none()
            return row.to_record() if row is not None else None

    def prove_worker_heads(self, token_hash: str, heads: Mapping[str, str]) -> WorkerRoundRecord:
        """Record commits a verified bundle of this attempt brought in (component -> sha)."""
        with self._session() as s:
            row = self._live_row(s, token_hash)
            proved = {name: list(shas) for name, shas in row.heads.items()}
            for name, sha in heads.items():
                if sha not in proved.setdefault(name, []):
                    proved[name].append(sha)
            row.heads = proved
            return row.to_record()

    def proved_heads(self, run_id: str, round: int) -> dict[str, set[str]]:
        """Every commit (by component) a verified bundle of any attempt of the round brought in."""
        query = sa.select(WorkerRoundRow.heads).where(
            (WorkerRoundRow.run_id == run_id) & (WorkerRoundRow.round == round)
        )
        proved: dict[str, set[str]] = {}
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            for heads in s.scalars(query):
                for name, shas in heads.items():
                    proved.setdefault(name, set()).update(shas)
        return proved

    def finish_worker_round(self, token_hash: str, outcome: Mapping[str, Any]) -> WorkerRoundRecord:
        """Store the attempt's outcome and revoke its token in one step: nothing it sends later counts."""
        with self._session() as s:
            row = self._live_row(s, token_hash)
            row.outcome = dict(outcome)
            row.revoked_at = self._now()
            return row.to_record()

    def revoke_worker_rounds(self, run_id: str, round: int) -> int:
        """Revoke every live token of the round (it ended, or was cancelled); how many were live."""
        with self._session() as s:
            lock_run(s, run_id)
            rows = s.scalars(
                sa.select(WorkerRoundRow).where(
                    WorkerRoundRow.run_id == run_id,
                    WorkerRoundRow.round == round,
                    WorkerRoundRow.revoked_at.is_(None),
                )
            ).all()
            for row in rows:
                row.revoked_at = self._now()
            return len(rows)

    def worker_outcome(self, run_id: str, round: int) -> WorkerRoundRecord | None:
        """The newest attempt of the round that reported an outcome, or None. A hypothesis pod's
        ending (nor a warm slot's) is not the round's outcome (the controller decides its turns,
        ADR-0018, ADR-0034)."""
        query = (
            sa.select(WorkerRoundRow)
            .where(
                WorkerRoundRow.run_id == run_id,
                WorkerRoundRow.round == round,
                WorkerRoundRow.outcome.is_not(None),
            )
            .order_by(WorkerRoundRow.attempt.desc())
        )
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            for row in s.scalars(query):
                # ``outcome IS NOT NULL`` lets a JSON null through (the column stores None as JSON).
                if row.outcome is not None and _grant_key(row.job) == ("hypothesis", None):
                    return row.to_record()
            return None

    def confirmations(self, run_id: str, round: int, turn: int) -> list[WorkerRoundRecord]:
        """The confirmation grants of ``turn`` of the round (ADR-0043), oldest first."""
        query = (
            sa.select(WorkerRoundRow)
            .where(WorkerRoundRow.run_id == run_id, WorkerRoundRow.round == round)
            .order_by(WorkerRoundRow.attempt)
        )
        with self._session(read_only=True) as s:
            return [r.to_record() for r in s.scalars(query) if confirm_scope(r.job) == turn]

    def live_hypotheses(self, run_id: str, round: int, index: int) -> list[WorkerRoundRecord]:
        """The unrevoked hypothesis grants of parallel index ``index`` of the round, oldest first
        (what a warm pod's slot may take next, ADR-0034)."""
        query = (
            sa.select(WorkerRoundRow)
            .where(
                WorkerRoundRow.run_id == run_id,
                WorkerRoundRow.round == round,
                WorkerRoundRow.revoked_at.is_(None),
            )
            .order_by(WorkerRoundRow.attempt)
        )
        with self._session(read_only=True) as s:
            rows = s.scalars(query).all()
            return [r.to_record() for r in rows if (hypothesis_scope(r.job) or (None, None))[1] == index]

    def _live_row(self, s: Session, token_hash: str) -> WorkerRoundRow:
        row = s.scalars(
            sa.select(WorkerRoundRow).where(WorkerRoundRow.token_hash == token_hash)
        ).one_or_none()
        if row is None:
            raise NotFoundError("no round was minted for this token")
        lock_run(s, row.run_id)
        s.refresh(row)
        if row.revoked_at is not None:
            raise ConflictError(f"round {row.round} attempt {row.attempt} of run {row.run_id} is over")
        return row

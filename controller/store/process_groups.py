"""The store's record of running commands' process groups (for writers on other hosts).

A mixin of ``Store`` in its own module; the session scope and transaction rules are ``Store``'s.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session

from controller.store.models import ProcessGroupRow
from controller.store.queries import get_run_row, lock_run


class ProcessGroups:
    """``record_process_group`` / ``clear_process_group`` / ``list_process_groups``; mixed into ``Store``."""

    def _now(self) -> datetime:
        raise NotImplementedError

    def _session(self, *, read_only: bool = False) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def record_process_group(self, run_id: str, pgid: int, command: str) -> None:
        """Remember a running command's process group; recording it again updates the command."""
        with self._session() as s:
            lock_run(s, run_id)
            row = s.get(ProcessGroupRow, (run_id, pgid))
            if row is None:
                s.add(ProcessGroupRow(run_id=run_id, pgid=pgid, command=command, created_at=self._now()))
            else:
                row.command = command

    def clear_process_group(self, run_id: str, pgid: int) -> None:
        """Forget a process group; clearing one that is not recorded is not an error."""
        with self._session() as s:
            lock_run(s, run_id)
            row = s.get(ProcessGroupRow, (run_id, pgid))
            if row is not None:
                s.delete(row)

    def list_process_groups(self, run_id: str) -> list[tuple[int, str]]:
        """(pgid, command) in the order they were recorded."""
        query = (
            sa.select(ProcessGroupRow.pgid, ProcessGroupRow.command)
            .where(ProcessGroupRow.run_id == run_id)
            .order_by(ProcessGroupRow.created_at, ProcessGroupRow.pgid)
        )
        with self._session(read_only=True) as s:
            get_run_row(s, run_id)
            return [(pgid, command) for pgid, command in s.execute(query)]

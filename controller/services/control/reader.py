"""The read facade of runs: what ``crucible runs show/list/feedback/patch`` and the demo read of a run.

Split from the run service (its driver) because reading needs none of what driving does: no broker,
no feedback hub, no forge client, no lease. A command that only reads builds this alone
(``wiring.Root.reader``), and the driver keeps one for the options it drives with. Every method is a
snapshot of the store through the ports it reads (``store.ports``); nothing here writes.
"""

from __future__ import annotations

from typing import Protocol

from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.services.views import schemas
from controller.services.views.patching import patch_text
from controller.services.views.reads import FeedbackView, events_jsonl, feedback_view, run_view, runs_list
from controller.store.ports import RunViews


class ReaderStore(RunViews, FeedbackView, Protocol):
    """The ports the facade reads through: a run's read models, the runs list, the feedback page."""


class RunReader:
    """Read models of runs, as ``--json`` and the API show them (see the module docstring)."""

    def __init__(self, settings: Settings, store: ReaderStore) -> None:
        self.settings = settings
        self.store = store

    def options(self, run_id: str) -> RunOptions:
        """The options the run was started with (``resume`` restores every one of them)."""
        return RunOptions.stored(self.store.get_run(run_id).options)

    def view(self, run_id: str, *, with_diffs: bool = True) -> schemas.Run:
        """One run as ``--json`` shows it (docs/cli.md, "--json")."""
        return run_view(self.settings, self.store, run_id, with_diffs=with_diffs)

    def list_runs(self, *, limit: int = 50) -> list[schemas.RunSummary]:
        """The newest runs first."""
        return runs_list(self.store, limit=limit)

    def events_jsonl(self, run_id: str, *, after_id: int = 0) -> str:
        """The run's events as JSON lines, oldest first."""
        return events_jsonl(self.store, run_id, after_id)

    def feedback(self, run_id: str) -> schemas.Feedback:
        """The run's feedback items with their verdicts, and its rounds."""
        return feedback_view(self.store, run_id)

    def patch(self, run_id: str) -> str:
        """The final patch, one unified diff per component."""
        return patch_text(self.settings, self.store, run_id)

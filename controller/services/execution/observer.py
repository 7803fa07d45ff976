"""What a live run reports for display, as a small base class in a module of its own.

Kept apart from ``context.py`` (which imports the store and the workspace) so that a display that
only follows a run on a server (``crucible loop --server``) does not import the run engine.
"""

from __future__ import annotations


class Observer:
    """Receives progress for display; the CLI subclasses it. Every method is optional."""

    def step(self, text: str) -> None:
        """A long step started (``turn 3: measuring 2/10``)."""

    def turn_decided(self, row: dict[str, object]) -> None:
        """A turn got its decision; ``row`` is the turn as in the ``--json`` output."""

    def baseline(self, value: float, samples: list[float]) -> None:
        """The baseline was measured."""

    def warn(self, text: str) -> None:
        """Something the user should know that does not stop the run."""

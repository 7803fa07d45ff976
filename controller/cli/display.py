"""What the user sees while a run is live: a turn table and the current step, on stderr.

stdout stays free for results (``--json`` prints exactly one JSON object as its last line), so the
live display always goes to stderr.
"""

from __future__ import annotations

import statistics
import sys
from typing import TextIO

from controller.services.execution.observer import Observer

HEADER = (
    f"{'turn':>4}  {'outcome':<9} {'reason':<17} {'metric':>10} {'Δ champ':>9} {'p':>6} {'pairs':>9} "
    f"{'secs':>6} {'cost':>6}  hypothesis"
)
# How a sequential measurement stopped, in the width of the table's "pairs" column.
_STOP_SHORT = {"kept early": "early", "rejected early": "worse", "futility": "futile", "max samples": "max"}


def _num(value: object, fmt: str = ".4g") -> str:
    return "-" if value is None else format(value, fmt) if isinstance(value, int | float) else str(value)


class TableObserver(Observer):
    """Prints one row per decided turn; shows the current step on a TTY."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.champion: float | None = None
        self._header_done = False
        self._warned: set[str] = set()

    def _line(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()

    def _header(self) -> None:
        if not self._header_done:
            self._line(HEADER)
            self._header_done = True

    def step(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text[:120])
            self.stream.flush()

    def baseline(self, value: float, samples: list[float]) -> None:
        self.champion = value
        shown = ", ".join(f"{s:.4g}" for s in samples)
        self._line(f"baseline: {value:.6g}  (samples: {shown})")

    def turn_decided(self, row: dict[str, object]) -> None:
        self._header()
        value = row.get("value")
        delta = None
        reference = row.get("reference_samples")
        champion = self.champion
        if isinstance(reference, list) and reference:
            champion = statistics.median(reference)
        if isinstance(value, int | float) and champion is not None:
            delta = value - champion
        if row.get("outcome") == "accepted" and isinstance(value, int | float):
            self.champion = value
        hyp = str(row.get("hypothesis") or "")[:60]
        self._line(
            f"{_num(row.get('turn')):>4}  {row.get('outcome')!s:<9} {row.get('reason')!s:<17} "
            f"{_num(value):>10} {_num(delta, '+.3g'):>9} {_num(row.get('p_value'), '.3f'):>6} "
            f"{_pairs(row):>9} {_num(row.get('duration_s'), '.1f'):>6} "
            f"{_num(row.get('cost_usd'), '.2f'):>6}  {hyp}"
        )
        hypotheses = row.get("hypotheses")
        for item in hypotheses if isinstance(hypotheses, list) else []:
            # Parallel hypotheses (ADR-0016): one indented line each, under their turn.
            self._line(
                f"{'#' + str(item.get('index')):>6}  {item.get('outcome')!s:<7} {item.get('reason')!s:<17} "
                f"{_num(item.get('value')):>10} {'':>9} {_num(item.get('p_value'), '.3f'):>6} {'':>9} "
                f"{_num(item.get('duration_s'), '.1f'):>6} {_num(item.get('cost_usd'), '.2f'):>6}  "
                f"{str(item.get('hypothesis') or '')[:58]}"
            )

    def warn(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self._line(f"warning: {text}")


def _pairs(row: dict[str, object]) -> str:
    """``5 early``: the pairs a sequential measurement used and why it stopped; ``-`` for the fixed rule."""
    pairs, stop = row.get("pairs"), row.get("sequential_stop")
    if pairs is None:
        return "-"
    return f"{pairs} {_STOP_SHORT.get(str(stop), str(stop))}"

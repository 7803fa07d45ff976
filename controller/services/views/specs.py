"""A run's spec as it was submitted: parsed from the text the store keeps, once per text.

The controller (resume, the broker's settings, a round's kind, the forge) and the worker API (every
report is checked against the run's rules) all read it; a ``Spec`` is frozen, so one parse serves all.
"""

from __future__ import annotations

import functools
from pathlib import Path

from controller.config.spec import Spec, parse_spec
from controller.store.ports import RunReads


def stored_spec(store: RunReads, run_id: str) -> Spec:
    """The run's spec from its stored text, resolved against the directory the spec file was in."""
    run = store.get_run(run_id)
    spec_dir = Path(run.spec_path).parent if run.spec_path else Path.cwd()
    return _parsed(run.spec_text, spec_dir)


@functools.lru_cache(maxsize=256)
def _parsed(text: str, spec_dir: Path) -> Spec:
    """``parse_spec``, remembered: a served run asks for its stored spec five times as it starts (its
    broker, its round's kind, its forge...). A spec that does not parse raises each time (exceptions
    are not remembered)."""
    return parse_spec(text, spec_dir)

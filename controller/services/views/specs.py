"""A run's spec as it was submitted: parsed from the text the store keeps, once per text.

The controller (resume, the broker's settings, a round's kind, the forge) and the worker API (every
report is checked against the run's rules) all read it; a ``Spec`` is frozen, so one parse serves all.
A run's spec text and path are written once, when it is created, so they are remembered per store
too: a served run asked for them five times as it started, each a read of the whole run row.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from pathlib import Path

from controller.config.spec import Spec, parse_spec
from controller.store.ports import RunReads

REMEMBERED_RUNS = 1024  # runs whose spec text one store's memo keeps (the runs a server drives at once)

_SOURCES: weakref.WeakKeyDictionary[RunReads, OrderedDict[str, tuple[str, Path | None]]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def stored_spec(store: RunReads, run_id: str) -> Spec:
    """The run's spec from its stored text, resolved against the directory the spec file was in."""
    text, spec_dir = _source(store, run_id)
    return _parsed(text, spec_dir or Path.cwd())


def _source(store: RunReads, run_id: str) -> tuple[str, Path | None]:
    """The run's spec text and directory: read once per store (they never change), the least
    recently asked for forgotten first. Keyed by the store object: two databases may hold runs of
    one id (tests), and an unknown run raises NotFoundError each time."""
    with _LOCK:
        known = _SOURCES.setdefault(store, OrderedDict())
        source = known.get(run_id)
        if source is not None:
            known.move_to_end(run_id)
            return source
    run = store.get_run(run_id)
    source = run.spec_text, Path(run.spec_path).parent if run.spec_path else None
    with _LOCK:
        known[run_id] = source
        while len(known) > REMEMBERED_RUNS:
            known.popitem(last=False)
    return source


@functools.lru_cache(maxsize=256)
def _parsed(text: str, spec_dir: Path) -> Spec:
    """``parse_spec``, remembered: a served run asks for its stored spec five times as it starts (its
    broker, its round's kind, its forge...). A spec that does not parse raises each time (exceptions
    are not remembered)."""
    return parse_spec(text, spec_dir)

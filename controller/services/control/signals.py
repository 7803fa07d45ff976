"""What the run service's driver is handed and told: the callables the composition root gives it and
the signals the edge (the CLI's signal handlers, the server's shutdown) sends a run it drives.

Kept apart from ``service`` so that the edge and the root name these without the driver's imports.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.brokers.base import HypothesisLauncher
from controller.config.spec import Spec
from controller.forge.base import Forge
from controller.services.execution.context import RunContext
from controller.services.execution.loop import LoopResult

ForgeFor = Callable[[Spec], Forge]
"""The forge client for a spec's ``publish.forge`` (one per forge and credential; SpecError if unusable)."""

HypothesesFor = Callable[[str], HypothesisLauncher | None]
"""The launcher of a run's hypothesis pods (Kubernetes with ``parallel > 1``, ADR-0018); None: its
hypotheses run where its round runs."""

OnWait = Callable[[str, float], None]
"""Told the holder and the seconds a resume waits for a silent holder's lease to run out."""

BeforeWatch = Callable[[RunContext, LoopResult], None]
"""Called with round 0's result once its search is done, before the feedback watch starts (the CLI
says so; the demo's reviewer reviews the draft PR)."""


@dataclass(frozen=True)
class Signals:
    """What the edge tells a run's driver from outside (the CLI's signal handlers, the server's
    shutdown): ``cancel`` ends the run cancelled; ``detach`` with ``cancel`` stops driving it without
    ending it (SIGTERM: the lease is handed back, a resume continues); ``wakeup`` wakes a waiting
    watch at once (a webhook delivery, a cancel)."""

    cancel: threading.Event = field(default_factory=threading.Event)
    detach: threading.Event = field(default_factory=threading.Event)
    wakeup: threading.Event = field(default_factory=threading.Event)

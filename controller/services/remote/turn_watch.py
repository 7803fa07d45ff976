"""A hypothesis pod's look at whether its turn has started (ADR-0051: speculative turns).

With the knobs proposer, a warm pod (ADR-0034) whose hypothesis of turn t reported is offered its
hypothesis of turn t+1 before turn t is decided, and measures it at once against the current champion.
Nothing of it is recorded until turn t+1 starts, which happens only after turn t is decided; the pod
sends its bundle and report only then (``TurnWatch.wait_started``). When turn t's decision voids it
(a keep moved the champion, or a failure changed the walk's proposals) or the run stops, the controller
withdraws it, revoking its token: the watch's look gets 401 and cancels the hypothesis's commands,
and the pod drops it (``HypothesisVoid``) and asks for its next. The look is a long poll
(``HttpLedger.await_turn``, ``turn_wait.await_turn`` on the controller), which the turn's start or the
withdrawal answers within milliseconds, not at the next of looks 0.5 s apart (ADR-0051's addendum).
"""

from __future__ import annotations

import threading
import time

from controller.domain.enums import RunStatus
from controller.domain.errors import CrucibleError, RetryLaterError, UnauthenticatedError
from controller.store.http_ledger import HttpLedger

WATCH_S = 0.5  # the least time between two looks (a controller that answers a look at once)
JOIN_S = 1.0  # how long ``stop`` waits for a look in flight before leaving it to end on its own


class HypothesisVoid(CrucibleError):
    """A hypothesis a warm pod took ahead of its turn no longer counts (ADR-0051): the controller
    withdrew it (the turn before kept, so the champion moved, or the walk's proposals changed) or the
    run stopped before the turn started. The pod stopped it, sends nothing and asks for its next."""


class _Cancel(threading.Event):
    """The hypothesis's cancel: set by the watch (void), or the pod's own cancel once ``follow``
    linked it, which the running command sees at once (the executor asks ``is_set``,
    ``workspace.process``) even while the watch waits in its long poll; setting this one (a void)
    leaves the pod's alone."""

    def __init__(self) -> None:
        super().__init__()
        self.outer: threading.Event | None = None

    def is_set(self) -> bool:
        return super().is_set() or (self.outer is not None and self.outer.is_set())

    def wait(self, timeout: float | None = None) -> bool:
        """As ``Event.wait``, the pod's cancel included (looked at every 0.05 s)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                return False
            super().wait(left)
        return True


class TurnWatch:
    """Whether the turn of a hypothesis has started, asked with the hypothesis's own token until it
    has (ADR-0051). A warm pod may take a hypothesis ahead of its turn; the turn starts once the one
    before is decided and kept nothing, and the pod reports only then. If instead the controller
    withdraws the hypothesis, its token is revoked: the look gets 401 and sets ``cancel``, which the
    hypothesis's commands run under (it is also set while the pod's own cancel is, ``follow``), so
    the pod stops measuring at once. A run that stopped voids it too. Each look is a long poll that
    the controller answers when the turn started, the hypothesis was withdrawn or the run stopped
    (or after its own wait); looks are at least ``poll_s`` apart, so a controller that answers at
    once is asked as often as before. For a hypothesis of a turn already started (the usual case)
    this is one request, beside the fetch."""

    def __init__(self, ledger: HttpLedger, run_id: str, turn: int, *, poll_s: float = WATCH_S) -> None:
        self.cancel = _Cancel()
        self._ledger, self._run_id, self._turn, self._poll_s = ledger, run_id, turn, poll_s
        self._started = threading.Event()
        self._void = threading.Event()
        self._end = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="crucible-turn-watch", daemon=True)
        self._thread.start()

    def follow(self, outer: threading.Event) -> None:
        """The pod's own cancel ``outer`` cancels the hypothesis too (``cancel`` is set while it is)."""
        self.cancel.outer = outer

    def wait_started(self) -> bool:
        """True once the turn started; False when the hypothesis is void (withdrawn, the run stopped)
        or the pod is cancelled while the turn has not started (a cancelled pod reports nothing for
        a turn that does not exist)."""
        while not self._started.is_set():
            if self._void.is_set() or self.cancel.is_set():
                return False
            self._started.wait(0.05)
        return True

    def stop(self) -> None:
        """End the watch. A look still waiting in the controller (the hypothesis ended otherwise:
        the pod's cancel, an error) is left to end on its own, within the controller's wait, and
        closes its ledger then: the pod does not wait for it."""
        self._end.set()
        self._thread.join(JOIN_S)

    def _watch(self) -> None:
        try:
            while not (self._end.is_set() or self._started.is_set() or self._void.is_set()):
                began = time.monotonic()
                self._look()
                self._end.wait(max(0.0, self._poll_s - (time.monotonic() - began)))
        finally:
            self._ledger.close()

    def _look(self) -> None:
        try:
            snapshot = self._ledger.await_turn(self._run_id, self._turn)
        except UnauthenticatedError:  # revoked: withdrawn, or the round is over
            self._void.set()
            self.cancel.set()
            return
        except RetryLaterError:  # the controller is away (restarting): look again
            return
        except Exception:  # anything else: the report says what it is (never a pod waiting forever)
            self._started.set()
            return
        if snapshot.counts.highest >= self._turn:
            self._started.set()
        elif snapshot.run.status is not RunStatus.RUNNING:
            self._void.set()
            self.cancel.set()

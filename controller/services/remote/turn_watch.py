"""A hypothesis pod's look at whether its turn has started (ADR-0051: speculative turns).

With the knobs proposer, a warm pod (ADR-0034) whose hypothesis of turn t reported is offered its
hypothesis of turn t+1 before turn t is decided, and measures it at once against the current champion.
Nothing of it is recorded until turn t+1 starts, which happens only after turn t is decided; the pod
sends its bundle and report only then (``TurnWatch.wait_started``). When turn t's decision voids it
(a keep moved the champion, or a failure changed the walk's proposals) or the run stops, the controller
withdraws it, revoking its token: the watch's next look gets 401 and cancels the hypothesis's commands,
and the pod drops it (``HypothesisVoid``) and asks for its next.
"""

from __future__ import annotations

import threading

from controller.domain.enums import RunStatus
from controller.domain.errors import CrucibleError, RetryLaterError, UnauthenticatedError
from controller.store.http_ledger import HttpLedger

WATCH_S = 0.5  # between a hypothesis pod's looks at whether its turn started (ADR-0051)


class HypothesisVoid(CrucibleError):
    """A hypothesis a warm pod took ahead of its turn no longer counts (ADR-0051): the controller
    withdrew it (the turn before kept, so the champion moved, or the walk's proposals changed) or the
    run stopped before the turn started. The pod stopped it, sends nothing and asks for its next."""


class TurnWatch:
    """Whether the turn of a hypothesis has started, looked at with the hypothesis's own token every
    ``poll_s`` until it has (ADR-0051). A warm pod may take a hypothesis ahead of its turn; the turn
    starts once the one before is decided and kept nothing, and the pod reports only then. If
    instead the controller withdraws the hypothesis, its token is revoked: the next look gets 401
    and sets ``cancel``, which the hypothesis's commands run under (linked to the pod's own cancel,
    ``follow``), so the pod stops measuring within a look. A run that stopped voids it too. For a
    hypothesis of a turn already started (the usual case) this is one request, beside the fetch."""

    def __init__(self, ledger: HttpLedger, run_id: str, turn: int, *, poll_s: float = WATCH_S) -> None:
        self.cancel = threading.Event()
        self._ledger, self._run_id, self._turn, self._poll_s = ledger, run_id, turn, poll_s
        self._outer: threading.Event | None = None
        self._started = threading.Event()
        self._void = threading.Event()
        self._end = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="crucible-turn-watch", daemon=True)
        self._thread.start()

    def follow(self, outer: threading.Event) -> None:
        """Pass the pod's own cancel on to ``cancel`` (looked at every ``poll_s``, and right away)."""
        self._outer = outer
        if outer.is_set():
            self.cancel.set()

    def wait_started(self) -> bool:
        """True once the turn started; False when the hypothesis is void (withdrawn, the run stopped)
        or the pod is cancelled while the turn has not started (a cancelled pod reports nothing for
        a turn that does not exist)."""
        while not self._started.is_set():
            if self._void.is_set() or (self._outer is not None and self._outer.is_set()):
                return False
            self._started.wait(0.05)
        return True

    def stop(self) -> None:
        self._end.set()
        self._thread.join()

    def _watch(self) -> None:
        try:
            while not self._end.is_set():
                if self._outer is not None and self._outer.is_set():
                    self.cancel.set()
                if not (self._started.is_set() or self._void.is_set()):
                    self._look()
                self._end.wait(self._poll_s)
        finally:
            self._ledger.close()

    def _look(self) -> None:
        try:
            snapshot = self._ledger.turn_snapshot(self._run_id, last=1)
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

"""Liveness without process ids: the driving process holds the run's lease and renews it (ADR-0004).

A pid is meaningless on another host and a dead replica signals nothing, so whoever drives a run
holds its lease (``Store.claim_run``) and a heartbeat thread renews it every third of its duration.
The renewal also reads the run's cancel flag, which is how ``crucible cancel`` (or the API, from any
host) reaches the driver: the heartbeat sets the run's cancel event and the loop stops at its next
check, killing the running command's process group. A holder that stops heart-beating (kill -9, a
lost host, a frozen VM) loses the run once the lease expires: ``crucible resume`` or a server's
scheduler takes it over. A holder that finds its lease gone stops without writing (``lost``).

``await_takeover`` is how a resume tells a dead holder from a live one without a pid: it watches the
lease; a live holder renews it (the expiry moves), a dead one lets it run out.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from types import TracebackType

from controller.domain.errors import LeaseLostError, RefusedError, RetryLaterError
from controller.store.ports import RunLeases
from controller.store.records import Renewal, RunRecord

log = logging.getLogger(__name__)

DEFAULT_TTL_S = 30.0
BEATS_PER_LEASE = 3  # renew every third of the lease: two beats may be missed before it expires

_OWNER: str | None = None


def process_owner() -> str:
    """This process's owner id, ``host:pid:nonce`` (readable; the nonce makes a reused pid, or a
    restarted container with the same hostname and pid 1, a different owner)."""
    global _OWNER
    if _OWNER is None or not _OWNER.startswith(f"{socket.gethostname()}:{os.getpid()}:"):
        _OWNER = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
    return _OWNER


class Heartbeat:
    """Holds ``run_id``'s lease for the ``with`` block; the process's keeper renews it.

    Entering claims the lease (LeaseHeldError if a live holder has it); leaving hands it back. While
    held, a cancel request sets ``cancel`` (and calls ``on_cancel``, which wakes a waiting run); a lost
    lease sets ``cancel`` too and ``lost``, after which the driver must not write to the run
    (``check``). Renewals are batched: every lease one process holds through one store is renewed
    by one statement per beat (``_Keeper``), so a server driving a thousand runs renews them with
    one transaction every ten seconds, not a hundred a second. A renewal that fails because the
    database is busy is retried at the next beat.
    """

    def __init__(
        self,
        store: RunLeases,
        run_id: str,
        *,
        cancel: threading.Event,
        ttl_s: float = DEFAULT_TTL_S,
        owner: str | None = None,
        on_cancel: Callable[[], None] | None = None,
    ) -> None:
        self.store, self.run_id, self.cancel, self.ttl_s = store, run_id, cancel, ttl_s
        self.on_cancel = on_cancel
        self.owner = owner or process_owner()
        self.lost = False
        self.cancel_requested = False
        self._keeper: _Keeper | None = None

    def __enter__(self) -> Heartbeat:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Claim the lease (LeaseHeldError if a live holder has it), read a pending cancel request
        at once, and have the process's keeper renew it from now on."""
        self.store.claim_run(self.run_id, self.owner, self.ttl_s)
        self.beat()
        self._keeper = _Keeper.of(self.store, self.owner, self.ttl_s)
        self._keeper.add(self)

    def adopt(self, run: RunRecord) -> None:
        """``start`` for a lease this owner already took (``Store.claim_runs``), given the run as read
        after the claim: no second claim and no beat (two write transactions per served run), the
        cancel flag taken from ``run``. Falls back to ``start`` when ``run`` shows another holder."""
        expires = run.lease_expires_at
        if run.id != self.run_id or run.lease_owner != self.owner or expires is None:
            self.start()
            return
        self.renewed(Renewal(expires_at=expires, cancel_requested=run.cancel_requested))
        self._keeper = _Keeper.of(self.store, self.owner, self.ttl_s)
        self._keeper.add(self)

    def stop(self, *, release: bool = True) -> None:
        """Stop renewing and hand the lease back (unless it was lost; ``release=False``: the caller
        hands many back at once, ``Store.release_leases``)."""
        if self._keeper is not None:
            self._keeper.remove(self)
            self._keeper = None
        if release and not self.lost:
            try:
                self.store.release_lease(self.run_id, self.owner)
            except RetryLaterError as error:  # it expires by itself; a takeover then just waits
                log.warning("run %s: could not hand the lease back: %s", self.run_id, error)

    def check(self) -> None:
        """Raise LeaseLostError if the lease was taken over (the run is someone else's now)."""
        if self.lost:
            raise LeaseLostError(f"run {self.run_id}: the lease of {self.owner} was taken over")

    def beat(self) -> None:
        """Renew this lease alone, now (the keeper renews all of them together every ``ttl_s / 3``)."""
        try:
            renewal: Renewal | None = self.store.renew_lease(self.run_id, self.owner, self.ttl_s)
        except LeaseLostError:
            renewal = None
        self.renewed(renewal)

    def renewed(self, renewal: Renewal | None) -> None:
        """Take in one renewal's answer: None when the lease is gone."""
        if renewal is None:
            if not self.lost:
                log.warning(
                    "run %s: the lease of %s is gone; stopping without writing", self.run_id, self.owner
                )
                self.lost = True
                self._cancel()
            return
        if renewal.cancel_requested and not self.cancel_requested:
            self.cancel_requested = True
            self._cancel()

    def _cancel(self) -> None:
        self.cancel.set()
        if self.on_cancel is not None:
            self.on_cancel()


class _Keeper:
    """Renews every lease one process holds through one store, as one owner with one lease length,
    in one statement every third of the lease (``Store.renew_leases``). Its thread runs while it
    has leases to keep."""

    def __init__(self, store: RunLeases, owner: str, ttl_s: float) -> None:
        self.store, self.owner, self.ttl_s = store, owner, ttl_s
        self._beats: dict[str, Heartbeat] = {}
        self._lock = threading.Lock()
        # Held while a renewal is in flight: ``remove`` waits on it, so a stopped heartbeat's driver
        # can close its store without a renewal still holding one of its connections. Reentrant: a
        # renewal's answer may stop the heartbeat from this very thread.
        self._renewing = threading.RLock()
        self._thread: threading.Thread | None = None

    @classmethod
    def of(cls, store: RunLeases, owner: str, ttl_s: float) -> _Keeper:
        with _KEEPERS_LOCK:
            key = (id(store), owner, ttl_s)  # a live keeper holds its store, so the id stays its own
            keeper = _KEEPERS.get(key)
            if keeper is None:
                keeper = _KEEPERS[key] = cls(store, owner, ttl_s)
            return keeper

    def add(self, beat: Heartbeat) -> None:
        with self._lock:
            self._beats[beat.run_id] = beat
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="crucible-leases", daemon=True)
                self._thread.start()

    def remove(self, beat: Heartbeat) -> None:
        """Stop renewing ``beat``; returns once no renewal that may include it is in flight."""
        with self._lock:
            if self._beats.get(beat.run_id) is beat:
                del self._beats[beat.run_id]
        # Bounded: a renewal stuck on a locked row must not hold the driver's stop for good (the lease
        # then expires by itself, which a takeover already waits out).
        if self._renewing.acquire(timeout=self.ttl_s):
            self._renewing.release()
        else:
            log.warning("run %s: a lease renewal is still in flight after %.0f s", beat.run_id, self.ttl_s)

    def renew(self) -> None:
        """One beat for every lease held (the thread's body; tests call it directly)."""
        with self._renewing:
            with self._lock:
                beats = dict(self._beats)
            if not beats:
                return
            renewals = self.store.renew_leases(self.owner, self.ttl_s, list(beats))
            for run_id, beat in beats.items():
                beat.renewed(renewals.get(run_id))

    def _run(self) -> None:
        while True:
            time.sleep(self.ttl_s / BEATS_PER_LEASE)
            with self._lock:
                if not self._beats:
                    self._thread = None  # under the lock: an add() now starts a new thread
                    return
            try:
                self.renew()
            except RetryLaterError as error:
                log.warning("lease renewal failed, retrying at the next beat: %s", error)
            except Exception:  # the keeper must outlive one bad beat, or every lease would expire
                log.exception("lease renewal failed")


# Weak: a keeper without leases and without its thread goes away (and a new one is made on demand).
_KEEPERS: weakref.WeakValueDictionary[tuple[int, str, float], _Keeper] = weakref.WeakValueDictionary()
_KEEPERS_LOCK = threading.Lock()


def await_takeover(
    store: RunLeases,
    run_id: str,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
    on_wait: Callable[[str, float], None] | None = None,
    owner: str | None = None,
) -> None:
    """Return once nobody else holds ``run_id``'s lease (released, expired without renewal, or held
    by ``owner``, default this process: a scheduler that claimed the run with ``claim_runs``).

    RefusedError naming the holder as soon as the lease is renewed while we watch: its heartbeat is
    alive, so the run is still being driven. Waits at most until the current expiry (a lease's
    length); ``on_wait(owner, seconds)`` is told once, before waiting.
    """
    me = owner or process_owner()
    run = store.get_run(run_id)
    told = False
    seen = run.lease_expires_at
    while run.lease_owner not in (None, me) and run.lease_expires_at is not None:
        if run.lease_expires_at != seen:
            raise RefusedError(
                f"run {run_id} is still running: {run.lease_owner} holds its lease and keeps renewing it"
            )
        left = (run.lease_expires_at - clock()).total_seconds()
        if left <= 0:
            return
        if not told and on_wait is not None:
            on_wait(run.lease_owner, left)
            told = True
        sleep(min(left, 0.25))
        run = store.get_run(run_id)

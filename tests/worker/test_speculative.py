"""Speculative turns' withdrawals (ADR-0051): a hypothesis a warm pod took ahead of its turn counts
only if the turn is played with it, against the champion it was measured against.

Through the real worker routes and store (SQLite and PostgreSQL): ``Slots.withdraw`` revokes what the
turn will not be played with and keeps what it will (a pod busy with it keeps a good token); a take
that races a withdrawal hands nothing out; the report route refuses a hypothesis measured against
another champion; and a pod's ``TurnWatch`` stops a withdrawn hypothesis's commands.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from controller.domain.enums import RunStatus, StopReason
from controller.domain.errors import ConflictError, UnauthenticatedError
from controller.domain.jobs import RoundJob
from controller.services.remote.remote_rounds import token_hash
from controller.services.remote.slots import Slots, Taken
from controller.services.remote.turn_wait import await_turn
from controller.services.remote.turn_watch import TurnWatch
from controller.store import Store
from controller.store.http_ledger import HttpLedger
from controller.store.records import TurnSnapshot, WorkerRoundRecord
from tests.worker.conftest import Controller
from tests.worker.test_hypothesis_tokens import _report

JOB = RoundJob(run_id="r1", round=0, turns=1, first_turn=2, heads={"app": "a" * 40})
MOVED = RoundJob(run_id="r1", round=0, turns=1, first_turn=2, heads={"app": "b" * 40})


def _proposal(new: int) -> dict[str, Any]:
    return {"file": "conf.json", "key": "a", "old": 1, "new": new, "hypothesis": f"a = {new}"}


@pytest.fixture
def slotted(controller: Controller) -> Controller:
    controller.seed_run("r1")  # its champion: app at "a" * 40
    controller.remote.slot_wait_s = 0.0
    return controller


def _live(controller: Controller, index: int) -> list[WorkerRoundRecord]:
    return controller.store.live_hypotheses("r1", 0, index)


def test_withdraw_keeps_what_the_turn_is_played_with_and_revokes_the_rest(slotted: Controller) -> None:
    slots = slotted.remote.slots
    slots.offer(JOB, 2, 0, _proposal(5))  # taken ahead below: its pod measures it
    slots.offer(MOVED, 2, 1, _proposal(6))  # against a champion that is no longer one
    slots.offer(JOB, 2, 2, _proposal(7))  # the walk proposes another value for index 2 now
    slots.offer(JOB, 2, 3, _proposal(8))  # the turn has only three hypotheses now
    busy = slots.take("r1", 0, 0, 1, 0)
    assert busy.turn == 2 and busy.env is not None
    slots.offer(JOB, 3, 0, _proposal(9))  # another turn: not this withdrawal's business
    wanted = {0: _proposal(5), 1: _proposal(6), 2: _proposal(2)}
    assert slots.withdraw(JOB, 2, 4, wanted) == 3
    (kept,) = [g for g in _live(slotted, 0) if g.job["hypothesis"]["turn"] == 2]
    assert kept.token_hash == token_hash(busy.env["CRUCIBLE_WORKER_TOKEN"]), "the busy pod's token stays good"
    assert [_live(slotted, i) for i in (1, 2, 3)] == [[], [], []]
    assert sorted(g.job["hypothesis"]["turn"] for g in _live(slotted, 0)) == [2, 3]
    assert slots.withdraw(JOB, 2, 4, wanted) == 0, "nothing stale is left"
    # The pods holding the withdrawn ones are refused (401): they drop them.
    slots.offer(JOB, 2, 1, _proposal(6))
    taken = slots.take("r1", 0, 1, 1, 0)
    assert taken.env is not None
    slots.withdraw(JOB, 2, 4, {})  # the search is over: nothing of turn 2 stays live
    with slotted.client(taken.env["CRUCIBLE_WORKER_TOKEN"]) as http:
        assert http.get("/api/worker/runs/r1/job").status_code == 401


class _Racing:
    """The store, with a withdrawal landing between a take's read of the offer and its mint."""

    def __init__(self, store: Store, withdraw: threading.Event) -> None:
        self.store, self.withdraw = store, withdraw

    def live_hypotheses(self, run_id: str, round: int, index: int) -> list[WorkerRoundRecord]:
        found = self.store.live_hypotheses(run_id, round, index)
        if self.withdraw.is_set():
            self.withdraw.clear()
            for grant in found:
                self.store.finish_worker_round(grant.token_hash, {"withdrawn": "test"})
        return found

    def list_hypotheses(self, run_id: str, turn: int | None = None) -> list[Any]:
        return self.store.list_hypotheses(run_id, turn)

    def finish_worker_round(self, token_hash: str, outcome: Mapping[str, Any]) -> WorkerRoundRecord:
        return self.store.finish_worker_round(token_hash, outcome)


def test_a_take_racing_a_withdrawal_hands_nothing_out(slotted: Controller) -> None:
    slotted.remote.slots.offer(JOB, 2, 0, _proposal(5))
    (offer,) = _live(slotted, 0)
    race = threading.Event()
    slots = Slots(_Racing(slotted.store, race), slotted.remote.mint_hypothesis_env)
    race.set()
    assert slots.take("r1", 0, 0, 1, 0) == Taken(), "the offer it read was withdrawn before its mint"
    assert _live(slotted, 0) == [], "no token was minted for it"
    with pytest.raises(ConflictError):
        slotted.remote.mint_hypothesis_env(JOB, 2, 0, _proposal(5), offer.token_hash)


def test_a_report_measured_against_another_champion_is_refused_and_its_grant_ended(
    slotted: Controller,
) -> None:
    slotted.store.start_turn("r1", 2, 0)
    stale = slotted.remote.mint_hypothesis_env(MOVED, 2, 0, None)["CRUCIBLE_WORKER_TOKEN"]
    good = slotted.remote.mint_hypothesis_env(JOB, 2, 1, None)["CRUCIBLE_WORKER_TOKEN"]
    with slotted.client(stale) as http:
        refused = http.post("/api/worker/runs/r1/ledger/turns/2/hypotheses", json=_report(0))
        assert refused.status_code == 401, refused.text
        assert http.get("/api/worker/runs/r1/job").status_code == 401, "its grant ended"
    with slotted.client(good) as http:
        answer = http.post("/api/worker/runs/r1/ledger/turns/2/hypotheses", json=_report(1))
    assert answer.status_code == 200, answer.text
    assert [h.index for h in slotted.store.list_hypotheses("r1", 2)] == [1]


def test_a_pods_watch_waits_for_its_turn_and_cancels_a_withdrawn_hypothesis(slotted: Controller) -> None:
    slots = slotted.remote.slots
    slots.offer(JOB, 2, 0, None)
    slots.offer(JOB, 2, 1, None)
    first, second = slots.take("r1", 0, 0, 1, 0), slots.take("r1", 0, 1, 1, 0)
    assert first.env is not None and second.env is not None

    def watch(env: Mapping[str, str]) -> TurnWatch:
        ledger = HttpLedger(slotted.url, env["CRUCIBLE_WORKER_TOKEN"])
        return TurnWatch(ledger, "r1", 2, poll_s=0.05)

    started, withdrawn = watch(first.env), watch(second.env)
    outer = threading.Event()
    started.follow(outer)
    withdrawn.follow(outer)
    try:
        slots.withdraw(JOB, 2, 2, {0: None})  # index 1 is not played: its pod stops
        assert withdrawn.cancel.wait(60), "the withdrawn hypothesis's commands are cancelled"
        assert withdrawn.wait_started() is False
        assert not started.cancel.is_set()
        slotted.store.start_turn("r1", 2, 0)
        assert started.wait_started() is True, "sent once its turn started"
        outer.set()  # the pod's own cancel reaches the hypothesis's commands
        assert started.cancel.wait(60)
    finally:
        started.stop()
        withdrawn.stop()


class _Asked:
    """``await_turn`` in a thread of its own: what it answered (a snapshot or the error it raised);
    ``waiting`` is set once it waits for news (so the news a test makes next is what wakes it)."""

    def __init__(
        self,
        slotted: Controller,
        grant: WorkerRoundRecord,
        *,
        turn: int = 2,
        wait_s: float,
        poll_s: float = 0.5,
    ) -> None:
        self.answer: object = None
        self.waiting = threading.Event()
        slots = slotted.remote.slots
        asked = self

        class News:
            def news(self) -> int:
                return slots.news()

            def wait_news(self, seen: int, timeout: float) -> bool:
                asked.waiting.set()
                return slots.wait_news(seen, timeout)

        def ask() -> None:
            try:
                self.answer = await_turn(slotted.store, News(), grant, turn, wait_s=wait_s, poll_s=poll_s)
            except UnauthenticatedError as exc:
                self.answer = exc

        self._thread = threading.Thread(target=ask, daemon=True)
        self._thread.start()

    def done(self) -> object:
        """Its answer. A look the news did not wake would wait out ``ASLEEP_S`` (past this join)."""
        self._thread.join(ASLEEP_S / 4)
        assert not self._thread.is_alive(), "the look was not woken"
        return self.answer


ASLEEP_S = 120.0  # the looks below re-read only this rarely: only news answers them within the test


def test_a_look_for_the_turn_is_answered_by_its_start_and_a_withdrawal_at_once(slotted: Controller) -> None:
    """ADR-0051's addendum: a pod holding a hypothesis taken ahead of turn 2 waits in its look until
    the turn starts (the controller then offers the turn's unreported hypotheses: news) or the
    hypothesis is withdrawn (401), not until its next re-read."""
    slots = slotted.remote.slots
    for index in (0, 1):
        slots.offer(JOB, 2, index, None)
    held = [_live(slotted, index)[0] for index in (0, 1)]
    played = _Asked(slotted, held[0], wait_s=ASLEEP_S, poll_s=ASLEEP_S)
    void = _Asked(slotted, held[1], wait_s=ASLEEP_S, poll_s=ASLEEP_S)
    assert played.waiting.wait(60) and void.waiting.wait(60)
    slots.withdraw(JOB, 2, 2, {0: None, 1: _proposal(3)})  # index 1 is played with another value
    assert isinstance(void.done(), UnauthenticatedError)
    slotted.store.start_turn("r1", 2, 0)
    slots.offer(JOB, 2, 0, None)  # what ``try_in_pods`` does right after the start
    answer = played.done()
    assert isinstance(answer, TurnSnapshot) and answer.counts.highest == 2
    # A turn already started, a run that stopped: answered at once; nothing new: after the wait.
    assert _Asked(slotted, held[0], wait_s=ASLEEP_S, poll_s=ASLEEP_S).done() == answer
    quick = _Asked(slotted, held[0], turn=3, wait_s=0.0).done()
    assert isinstance(quick, TurnSnapshot) and quick.counts.highest == 2
    slotted.store.set_run_status("r1", RunStatus.COMPLETED, stop_reason=StopReason.MAX_TURNS)
    stopped = _Asked(slotted, held[0], turn=3, wait_s=ASLEEP_S, poll_s=ASLEEP_S).done()
    assert isinstance(stopped, TurnSnapshot) and stopped.run.status is RunStatus.COMPLETED


def test_a_look_waiting_for_its_turn_answers_when_the_server_stops(slotted: Controller) -> None:
    slotted.remote.slots.offer(JOB, 2, 0, None)
    (grant,) = _live(slotted, 0)
    look = _Asked(slotted, grant, wait_s=ASLEEP_S, poll_s=ASLEEP_S)
    assert look.waiting.wait(60)
    slotted.remote.slots.close()
    answer = look.done()
    assert isinstance(answer, TurnSnapshot) and answer.counts.highest < 2, "what it read: a look again"


def test_a_report_that_arrives_while_the_turn_reads_its_reports_is_not_slept_through(
    slotted: Controller,
) -> None:
    """``wait_for_reports`` after a read: a report stored since the previous wait returned (while the
    turn read the record, checked its pods and offered ahead) makes the next wait return at once,
    not after its timeout (the decision, or a free slot's next offer, up to a second late)."""
    slots = slotted.remote.slots

    def turn() -> None:
        slots.wait_for_reports(0.0)  # the turn reads the record after this
        slots.reported()  # a report arrives while it reads
        slots.wait_for_reports(ASLEEP_S)

    follower = threading.Thread(target=turn, daemon=True)
    follower.start()
    follower.join(ASLEEP_S / 4)
    assert not follower.is_alive(), "the report was slept through"

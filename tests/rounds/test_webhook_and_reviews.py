"""Feedback by webhook alone (real signatures from the local forge), and two reviews steering two
different refinement commits on the same branch."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from controller.config.spec import load_spec
from controller.services.execution.loop import LoopResult, run_loop
from controller.services.feedback.publish import Publisher, branch_name
from controller.services.feedback.watch import Watch, watch_feedback
from controller.services.views.reads import feedback_view
from controller.services.views.schemas import dump
from tests.conftest import git
from tests.forgekit import (
    REVIEW_AGENT,
    PublishingRun,
    app_forge,
    github_as,
    review_round_spec,
    start_run,
    write_agent,
)

pytestmark = pytest.mark.slow
SECRET = "it is a secret to everybody"


def _setup(tmp_path: Path, api: str, max_rounds: int, agent: str = REVIEW_AGENT) -> PublishingRun:
    spec = review_round_spec(write_agent(tmp_path, agent), api, max_rounds=max_rounds)
    return start_run(tmp_path, api, spec)


def _review(api_url: str, number: int, text: str) -> None:
    bob = github_as(api_url, "bob")
    pull = bob.get_repo("alice/app").get_pull(number)
    commit = list(pull.get_commits())[-1]
    pull.create_review(
        commit=commit, body="", event="COMMENT", comments=[{"path": "src/value.txt", "line": 1, "body": text}]
    )
    bob.close()


def test_webhooks_alone_deliver_the_feedback(tmp_path: Path) -> None:
    from controller.cli.listen import webhook_server
    from tests.conftest import free_port

    port = free_port()
    webhook_url = f"http://127.0.0.1:{port}/webhooks/github"
    with app_forge(tmp_path, webhook_url=webhook_url, webhook_secret=SECRET) as app:
        handle = app.handle
        run = _setup(tmp_path, handle.api_url, 1)
        store, run_id, client = run.store, run.run_id, run.client
        ctx = run.context(Publisher(client, store))
        watch = Watch(forge=client, own_logins=["alice"], records=store, poll=False)
        woken = threading.Event()

        def then(context: object, searched: LoopResult) -> LoopResult:
            [record] = store.list_pulls(run_id)
            _review(handle.api_url, record.number, "webhook only: please keep it stable")

            def sleep(event: threading.Event, timeout: float) -> bool:
                woken.set()
                return event.wait(5)  # the webhook wakes the watch

            watch.sleep_until_woken = sleep
            return watch_feedback(context, searched, watch)  # type: ignore[arg-type]

        with webhook_server(store, SECRET, "127.0.0.1", port, ctx.hooks.wakeup.set):
            result = run_loop(ctx, then=then, leases=store)
        assert result.stop_reason == "max_rounds", result.message
        items = dump(feedback_view(store, run_id))["feedback"]
        assert any("webhook only" in i["body"] and i["verdict"] == "accepted" for i in items)
        [finished] = dump(feedback_view(store, run_id))["rounds"]
        assert finished["kept"]


def test_two_reviews_steer_two_different_commits(tmp_path: Path) -> None:
    with app_forge(tmp_path) as app:
        handle, alice = app.handle, app.alice
        run = _setup(tmp_path, handle.api_url, 2)
        store, run_id, client, settings = run.store, run.run_id, run.client, run.settings
        ctx = run.context(Publisher(client, store))
        reviews = iter(["first review: make it blue", "second review: make it green"])

        def then(context: object, searched: LoopResult) -> LoopResult:
            [record] = store.list_pulls(run_id)
            _review(handle.api_url, record.number, next(reviews))
            watch = Watch(forge=client, own_logins=["alice"], records=store)

            def sleep(event: threading.Event, timeout: float) -> bool:
                rounds = dump(feedback_view(store, run_id))["rounds"]
                if len(rounds) == 1 and not getattr(sleep, "done", False):
                    sleep.done = True  # type: ignore[attr-defined]
                    _review(handle.api_url, record.number, next(reviews))
                return False

            watch.sleep_until_woken = sleep
            return watch_feedback(context, searched, watch)  # type: ignore[arg-type]

        result = run_loop(ctx, then=then, leases=store)
        assert result.stop_reason == "max_rounds", result.message
        heads = [r["head"] for r in dump(feedback_view(store, run_id))["rounds"]]
        assert len(heads) == 2 and all(heads) and heads[0] != heads[1]
        clone = settings.home / "runs" / run_id / "arms" / "candidate" / "app"
        first = git(clone, "show", f"{heads[0]}:src/addressed.txt")
        second = git(clone, "show", f"{heads[1]}:src/addressed.txt")
        assert "make it blue" in first and "make it green" in second and "make it blue" not in second
        tip = alice.get_repo("alice/app").get_branch(branch_name(run_id)).commit
        assert tip.sha == heads[1] and [p.sha for p in tip.parents] == [heads[0]]


LIVE_AGENT = """\
if [ "$CRUCIBLE_ROUND" = "0" ]; then
  echo 8 > src/value.txt
else
  for i in $(seq 1 100); do [ -s "$CRUCIBLE_STEER_FILE" ] && break; sleep 0.1; done
  cp "$CRUCIBLE_STEER_FILE" src/live.txt
fi
"""


def test_live_steer_appends_feedback_that_arrives_while_a_turn_runs(tmp_path: Path) -> None:
    with app_forge(tmp_path) as app:
        handle = app.handle
        run = _setup(tmp_path, handle.api_url, 1, agent=LIVE_AGENT)
        store, run_id, client, settings = run.store, run.run_id, run.client, run.settings
        spec_text = (
            (tmp_path / "crucible.toml").read_text().replace('poll_interval = "1s"', 'poll_interval = "0.2s"')
        )
        (tmp_path / "crucible.toml").write_text(spec_text)
        ctx = replace(run, spec=load_spec(tmp_path / "crucible.toml")).context(Publisher(client, store))

        def late_comment() -> None:
            for _ in range(300):
                if any(e.kind == "round_started" for e in store.list_events(run_id)):
                    break
                threading.Event().wait(0.05)
            [record] = store.list_pulls(run_id)
            bob = github_as(handle.api_url, "bob")
            bob.get_repo("alice/app").get_pull(record.number).create_issue_comment("live: also rename it")
            bob.close()

        def then(context: object, searched: LoopResult) -> LoopResult:
            [record] = store.list_pulls(run_id)
            _review(handle.api_url, record.number, "first: keep it")
            threading.Thread(target=late_comment, daemon=True).start()
            watch = Watch(forge=client, own_logins=["alice"], records=store, live_steer=True)
            watch.sleep_until_woken = lambda event, timeout: False
            return watch_feedback(context, searched, watch)  # type: ignore[arg-type]

        result = run_loop(ctx, then=then, leases=store)

        assert result.stop_reason == "max_rounds", result.message
        [finished] = dump(feedback_view(store, run_id))["rounds"]
        clone = settings.home / "runs" / run_id / "arms" / "candidate" / "app"
        live = git(clone, "show", f"{finished['head']}:src/live.txt")
        assert "> live: also rename it" in live and "@bob" in live
        consumed = [i for i in dump(feedback_view(store, run_id))["feedback"] if "live:" in i["body"]]
        assert consumed and all(i["round"] == 1 for i in consumed), (
            "live feedback is consumed by the running round"
        )

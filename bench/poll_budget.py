"""Poll budget of the feedback poller (issue 4): billable requests and detection latency in one hour.

Scene: the local forge in this process (real HTTP, real ETags, real rate-limit headers), 50
repositories with 20 open draft PRs each (1,000 PRs), webhooks off. One ``Poller`` -- the one
``crucible loop --watch-feedback`` runs -- watches all of them with ``poll_interval`` 30 s through
the httpx ``GithubReader``. The forge and the poller share a simulated clock, so one hour passes
without waiting, and the forge's ``updated_at``, ``Date`` and rate-limit window all live on it.

During the hour a seeded trickle of feedback arrives at random moments on random PRs (by default
120 actions: conversation comments, reviews with a body and 1-3 inline comments, reviews with only
inline comments, edits of earlier comments) and a few PRs are closed by a person. Every body carries
a marker, so the benchmark knows when each item was posted and in which poll it was first reported.

Printed:
- the initial sync, once per watch start (three lists per repository and the reviews of every PR,
  whose review state nobody knows yet), kept apart from the hour;
- billable requests in the hour (answers that were not 304; a 304 costs no rate limit), as a ratio
  against its floor, the number of feedback actions (no poller can see a change without reading it
  once), and against the target of 1,000 an hour;
- detection latency (simulated seconds from posting to the poll that reported it), p50 and worst,
  with the worst as a ratio against its floor, the poll interval.

    python bench/poll_budget.py [--repos 50] [--pulls 20] [--actions 120] [--closes 5] [--seed 1]

Targets: <= 1,000 billable requests per hour; worst-case latency <= 60 s. Exit status 1 if an item
was never reported (or a target is missed with --strict).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from controller.forge.base import FeedbackEvent
from controller.forge.github import basic_auth_env
from controller.forge.polling import GithubReader
from controller.localforge.server import running_forge
from controller.localforge.users import add_user
from controller.services.feedback.poller import Poller

TOKENS = {"alice": "bench-alice-token", "bob": "bench-bob-token", "watcher": "bench-watcher-token"}
HOUR = 3600
MARKER = re.compile(r"\[m(\d+)\]")
BUDGET_TARGET = 1000
LATENCY_TARGET = 60.0


class SimClock:
    """Whole simulated seconds from a real starting point (the forge stamps seconds anyway)."""

    def __init__(self) -> None:
        self.start = float(int(time.time()))
        self.elapsed = 0.0

    def advance_to(self, elapsed: float) -> None:
        self.elapsed = max(self.elapsed, elapsed)

    def epoch(self) -> float:
        return self.start + self.elapsed

    def moment(self) -> datetime:
        return datetime.fromtimestamp(self.epoch(), UTC)


@dataclass
class Ledger:
    """What was posted when, and when a poll first reported it."""

    posted: dict[int, float] = field(default_factory=dict)  # marker -> simulated second
    seen: dict[int, float] = field(default_factory=dict)
    closed: dict[tuple[str, int], float] = field(default_factory=dict)
    closed_seen: dict[tuple[str, int], float] = field(default_factory=dict)
    next_marker: int = 0
    superseded: int = 0

    def mark(self, at: float) -> str:
        self.next_marker += 1
        self.posted[self.next_marker] = at
        return f"[m{self.next_marker}]"

    def supersede(self, marker: int) -> None:
        """An edit replaced the text carrying ``marker``: a poll sees only the newest version of a
        comment, so a version edited before any poll saw it is not expected any more (the edit is)."""
        if marker not in self.seen:
            self.posted.pop(marker, None)
            self.superseded += 1

    def report(self, events: list[FeedbackEvent], at: float) -> None:
        for event in events:
            for found in MARKER.finditer(event.body):
                self.seen.setdefault(int(found.group(1)), at)

    def latencies(self) -> list[float]:
        items = [self.seen[m] - t for m, t in self.posted.items() if m in self.seen]
        return items + [self.closed_seen[k] - t for k, t in self.closed.items() if k in self.closed_seen]

    def missing(self) -> int:
        return len(self.unreported())

    def unreported(self) -> list[str]:
        items = [f"[m{m}]" for m in sorted(set(self.posted) - set(self.seen))]
        return items + [f"close of {r}#{n}" for r, n in sorted(set(self.closed) - set(self.closed_seen))]


class Actors:
    """People on the forge: alice owns every repository, bob reviews."""

    def __init__(self, api_url: str) -> None:
        self.alice = self._client(api_url, TOKENS["alice"])
        self.bob = self._client(api_url, TOKENS["bob"])

    @staticmethod
    def _client(api_url: str, token: str) -> httpx.Client:
        headers = {"Authorization": f"token {token}", "Accept": "application/vnd.github+json"}
        return httpx.Client(base_url=api_url, headers=headers, timeout=30)

    def close(self) -> None:
        self.alice.close()
        self.bob.close()


def call(client: httpx.Client, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    answer = client.request(method, path, json=body)
    if answer.status_code >= 400:
        raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:200]}")
    return answer.json() if answer.content else None


def source_repo(path: Path, branches: int) -> None:
    """One local repository with ``main`` and ``branches`` branches, each changing line 1 of f.txt."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(path), *args], check=True, env=env, capture_output=True)

    path.mkdir(parents=True)
    git("init", "-q", "-b", "main")
    (path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 6)))
    git("add", "f.txt")
    git("commit", "-q", "-m", "base")
    for index in range(branches):
        git("checkout", "-q", "-b", f"b{index}", "main")
        (path / "f.txt").write_text(f"changed {index}\n" + "".join(f"line {i}\n" for i in range(2, 6)))
        git("commit", "-q", "-am", f"change {index}")
    git("checkout", "-q", "main")


def seed(api_url: str, url: str, work: Path, actors: Actors, repos: int, pulls: int) -> dict[str, list[int]]:
    """``repos`` repositories of alice with ``pulls`` open draft PRs each; returns repo -> numbers."""
    source = work / "source"
    source_repo(source, pulls)
    env = {**os.environ, **basic_auth_env(TOKENS["alice"])}  # as crucible's own pushes authenticate
    numbers: dict[str, list[int]] = {}
    for index in range(repos):
        name = f"r{index:02d}"
        call(actors.alice, "POST", "/user/repos", {"name": name})
        call(actors.alice, "PUT", f"/repos/alice/{name}/collaborators/bob", {"permission": "push"})
        subprocess.run(
            ["git", "-C", str(source), "push", "-q", f"{url}/alice/{name}.git", "refs/heads/*:refs/heads/*"],
            check=True,
            env=env,
            capture_output=True,
        )
        numbers[f"alice/{name}"] = [
            call(
                actors.alice,
                "POST",
                f"/repos/alice/{name}/pulls",
                {"head": f"alice:b{b}", "base": "main", "title": f"change {b}", "draft": True},
            )["number"]
            for b in range(pulls)
        ]
    return numbers


@dataclass
class Trickle:
    """The seeded feedback of the hour: (simulated second, action) in time order."""

    actions: list[tuple[float, Callable[[float], None]]]


def trickle(
    rng: random.Random,
    actors: Actors,
    ledger: Ledger,
    numbers: dict[str, list[int]],
    count: int,
    closes: int,
    hour: int = HOUR,
) -> Trickle:
    targets = [(repo, n) for repo, ns in numbers.items() for n in ns]
    comments: list[tuple[str, int, int]] = []  # (repo, issue comment id, its marker) to edit later

    def conversation(repo: str, number: int) -> Callable[[float], None]:
        def act(at: float) -> None:
            marker = ledger.mark(at)
            made = call(
                actors.bob,
                "POST",
                f"/repos/{repo}/issues/{number}/comments",
                {"body": f"{marker} could this allocate less?"},
            )
            comments.append((repo, made["id"], ledger.next_marker))

        return act

    def review(repo: str, number: int, with_body: bool, inline: int) -> Callable[[float], None]:
        def act(at: float) -> None:
            body = f"{ledger.mark(at)} a few things" if with_body else ""
            notes = [
                {"path": "f.txt", "line": 1, "body": f"{ledger.mark(at)} note {i}"} for i in range(inline)
            ]
            call(
                actors.bob,
                "POST",
                f"/repos/{repo}/pulls/{number}/reviews",
                {"body": body, "event": "COMMENT", "comments": notes},
            )

        return act

    def edit(fallback: Callable[[float], None]) -> Callable[[float], None]:
        def act(at: float) -> None:
            if not comments:
                fallback(at)
                return
            index = rng.randrange(len(comments))
            repo, comment, before = comments[index]
            marker = ledger.mark(at)
            call(
                actors.bob,
                "PATCH",
                f"/repos/{repo}/issues/comments/{comment}",
                {"body": f"{marker} edited: on second thought, keep it"},
            )
            ledger.supersede(before)
            comments[index] = (repo, comment, ledger.next_marker)

        return act

    def close(repo: str, number: int) -> Callable[[float], None]:
        def act(at: float) -> None:
            call(actors.alice, "PATCH", f"/repos/{repo}/pulls/{number}", {"state": "closed"})
            ledger.closed[(repo, number)] = at

        return act

    planned: list[tuple[float, Callable[[float], None]]] = []
    for _ in range(count):
        repo, number = rng.choice(targets)
        roll = rng.random()
        if roll < 0.40:
            act = conversation(repo, number)
        elif roll < 0.75:
            act = review(repo, number, True, rng.randint(1, 3))
        elif roll < 0.85:
            act = review(repo, number, False, rng.randint(1, 3))
        else:
            act = edit(conversation(repo, number))
        planned.append((float(rng.randint(1, hour - 1)), act))
    for repo, number in rng.sample(targets, min(closes, len(targets))):
        planned.append((float(rng.randint(1, hour - 1)), close(repo, number)))
    planned.sort(key=lambda p: p[0])
    return Trickle(planned)


@dataclass
class Result:
    repos: int
    pulls: int
    actions: int
    closes: int
    interval: float
    sync_billable: int
    polls: int
    requests: int
    billable: int
    latencies: list[float]
    unreported: list[str]
    superseded: int = 0

    @property
    def missing(self) -> int:
        return len(self.unreported)

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)


def run(
    repos: int,
    pulls: int,
    actions: int,
    closes: int,
    interval: float,
    seed_value: int,
    hour: int = HOUR,
    log: Callable[[str], None] = print,
) -> Result:
    rng = random.Random(seed_value)
    clock = SimClock()
    with tempfile.TemporaryDirectory(prefix="crucible-poll-bench-") as tmp:
        work = Path(tmp)
        root = work / "forge"
        for user, token in TOKENS.items():
            add_user(root, user, token=token)
        with running_forge(root, clock=clock.moment) as handle:
            actors = Actors(handle.api_url)
            started = time.monotonic()
            numbers = seed(handle.api_url, handle.url, work, actors, repos, pulls)
            log(f"seeded {repos} repositories x {pulls} PRs in {time.monotonic() - started:.0f} s")
            # The PRs were made within one simulated second; the watch starts a minute later, as
            # it does after a search (a read in the PRs' own second could not settle them).
            clock.start += 60
            ledger = Ledger()
            plan = trickle(rng, actors, ledger, numbers, actions, closes, hour)
            reader = GithubReader(handle.api_url, lambda repo: TOKENS["watcher"], clock=clock.epoch)
            poller = Poller(reader, repos=list(numbers), clock=lambda: clock.elapsed)
            for repo, ns in numbers.items():
                for number in ns:
                    poller.watch(repo, number)
            poller.poll()  # the initial sync at second 0
            poller.pull_changes()
            sync_billable = reader.billable
            base_requests, base_billable = reader.requests, reader.billable
            polls = 0
            pending = list(plan.actions)
            second = 0.0
            spent = (0, 0)
            while second <= hour + 2 * interval:
                second += 1.0
                clock.advance_to(second)
                while pending and pending[0][0] <= second:
                    at, act = pending.pop(0)
                    act(at)
                if poller.due(interval):
                    polls += second <= hour
                    ledger.report(poller.poll(), second)
                    for repo, state in poller.pull_changes():
                        if state.state == "closed":
                            ledger.closed_seen.setdefault((repo, state.number), second)
                if second == hour:  # what the hour cost; catch-up polls after it only find stragglers
                    spent = (reader.requests - base_requests, reader.billable - base_billable)
                if second >= hour and not ledger.missing():
                    break
            result = Result(
                repos,
                pulls,
                actions,
                closes,
                interval,
                sync_billable,
                polls,
                *spent,
                ledger.latencies(),
                ledger.unreported(),
                ledger.superseded,
            )
            reader.close()
            actors.close()
    return result


def report(result: Result) -> list[str]:
    latencies = sorted(result.latencies)
    p50 = statistics.median(latencies) if latencies else 0.0
    budget_ok = result.billable <= BUDGET_TARGET
    latency_ok = result.worst <= LATENCY_TARGET
    floor = max(1, result.actions + result.closes)
    return [
        f"poll budget: {result.repos} repositories, {result.repos * result.pulls} open PRs, "
        f"{result.actions} feedback actions + {result.closes} closes in one simulated hour, "
        f"poll interval {result.interval:.0f} s, webhooks off",
        f"initial sync (once per watch start): {result.sync_billable} billable requests",
        f"hour: {result.polls} polls, {result.requests} requests, {result.billable} billable, "
        f"{result.requests - result.billable} answered 304 (free)",
        f"billable / floor (one read per action, {floor}): {result.billable / floor:.2f}",
        f"billable vs target {BUDGET_TARGET}/h: {result.billable / BUDGET_TARGET:.2f} "
        f"-> {'OK' if budget_ok else 'MISSED'}",
        f"detection latency: p50 {p50:.0f} s, worst {result.worst:.0f} s; worst / poll interval "
        f"{result.worst / result.interval:.2f}; target <= {LATENCY_TARGET:.0f} s -> "
        f"{'OK' if latency_ok else 'MISSED'}",
        f"never reported: {result.missing} {' '.join(result.unreported)}".rstrip(),
        f"edited before any poll saw them (a poll sees only the newest version): {result.superseded}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=50)
    parser.add_argument("--pulls", type=int, default=20, help="open PRs per repository")
    parser.add_argument("--actions", type=int, default=120, help="feedback actions in the hour")
    parser.add_argument("--closes", type=int, default=5, help="PRs a person closes during the hour")
    parser.add_argument("--interval", type=float, default=30.0, help="feedback.poll_interval, seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    result = run(args.repos, args.pulls, args.actions, args.closes, args.interval, args.seed)
    for line in report(result):
        print(line)
    missed = result.billable > BUDGET_TARGET or result.worst > LATENCY_TARGET
    return 1 if result.missing or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())

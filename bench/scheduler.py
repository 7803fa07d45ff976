"""The server's scheduler (issue 8, ADR-0012): controller CPU per turn, and the RSS of an idle server.

1. **CPU per turn.** Short runs (a trivial agent and metric) are submitted to the run service
   ``crucible serve`` builds (threaded local broker) and driven by its ``Scheduler`` (``--concurrent``
   at once, ticking as the server does), in this process. The turn's own commands are measured apart:
   each is run alone ``CALIBRATION`` times in the same run (as ``/bin/sh -c`` like crucible runs it)
   for its CPU cost. The controller's CPU is this process's CPU, every thread, plus its waited
   children's, git included, minus the commands' own; the bench's own wait for the drive's end looks
   at the scheduler's table, not the store, so it adds next to nothing (``all_finished``). Three
   drives, three figures, each a ratio against the turn's own commands: ``--runs`` runs of
   ``--turns`` turns per decided turn, each run's setup spread over its few turns (the figure this
   bench always printed); a turn in **steady state** (a run turning many times, which is what a
   thousand runs turning once a minute are), from ``--steady-runs`` runs of ``--steady-turns`` turns
   against the same runs of one turn; and what a **run** costs besides its turns (claim, checkouts,
   baseline, finish), from the same two. On SQLite files, or with ``--postgres ADMIN_URL`` on
   PostgreSQL databases made for each drive and dropped after.
2. **RSS and database statements of an idle server watching PRs.** A local forge holds one
   repository with ``--prs`` open draft PRs (generated once under ``--cache``, reused after).
   ``crucible serve`` (a real process) is started on an empty database: its RSS is the floor. Then on
   a database holding ``--prs`` watching runs, one PR each (a run with 0 search turns that publishes
   and watches feedback; its pull recorded as crucible publishes it): the server claims them all, each
   run measures its baseline and settles into its feedback watch, the feedback hub polls the
   repository. Once *every* run watches and holds its lease in this server (and, parked, holds no
   thread: ``/metrics``), and the hub has read every PR, RSS is sampled for a few seconds and the
   server's SQL statements per second are counted over ``--idle`` seconds (``crucible_db_statements``
   of ``/metrics``, less the scrapes' own). Both are measured twice in the same run: with watching
   runs parked (ADR-0020) and with ``CRUCIBLE_PARK_WATCHING=false`` (a thread per watching run, the
   path before it). Printed: the time until all runs watched, RSS against the floor and the 300 MB
   target, and statements per second of each.

    python bench/scheduler.py [--runs 200] [--turns 2] [--concurrent 8] [--prs 1000] [--quick]
                              [--steady-runs 8] [--steady-turns 25] [--idle 60] [--skip-cpu]
                              [--skip-rss] [--only parked|threads] [--settle-limit 3600]
                              [--postgres ADMIN_URL]

``--quick``: 20 runs and 100 PRs (about three minutes). ``--settle-limit``: how long to wait for every
run to watch; past it the server is measured with what watches then, and said so. Exit status 1 if a
run did not finish, stopped instead of watching or did not watch in time, or with ``--strict`` if the
parked server's RSS is over the target.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from poll_budget import call, source_repo  # noqa: E402

from controller.config.options import RunOptions  # noqa: E402
from controller.config.settings import Settings  # noqa: E402
from controller.config.spec import parse_spec  # noqa: E402
from controller.domain.enums import FINISHED_STATUSES, RunPhase, RunStatus  # noqa: E402
from controller.forge.github import basic_auth_env  # noqa: E402
from controller.localforge.server import running_forge  # noqa: E402
from controller.localforge.users import add_user  # noqa: E402
from controller.services.control.scheduler import Scheduler  # noqa: E402
from controller.store import NewRun, Store  # noqa: E402
from controller.store.records import ComponentRecord, PullRecord  # noqa: E402
from controller.wiring import Mode, Root, build  # noqa: E402

RSS_TARGET_MB = 300.0
TOKEN = "bench-scheduler-token-0123456789"
ALICE = "bench-scheduler-alice"
AGENT = "echo $CRUCIBLE_TURN > src/a.txt"
METRIC = "echo METRIC m=$(cat src/a.txt)"
CALIBRATION = 200  # executions of each command, measured alone, for its CPU cost

RUN_SPEC = """
objective = "count up"
turns = {turns}
[agent]
command = "{agent}"
[sandbox]
mode = "none"
[metric]
command = "{metric}"
name = "m"
direction = "maximize"
samples = 1
warmups = 0
confidence = 0
interleave = false
[[component]]
name = "app"
repo = "."
base = "main"
mutable = ["src/**"]
"""

WATCH_SPEC = """
objective = "hold the line"
turns = 0
[agent]
command = "true"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC m=1"
name = "m"
samples = 1
warmups = 0
confidence = 0
interleave = false
[[component]]
name = "app"
repo = "{repo}"
base = "main"
mutable = ["f.txt"]
upstream = "alice/app"
[publish]
forge = "{api}"
[feedback]
poll_interval = "30s"
max_rounds = 5
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x"}
    env.update(GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@x")
    done = subprocess.run(["git", "-C", str(cwd), *args], check=True, env=env, capture_output=True, text=True)
    return done.stdout.strip()


def until(check: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


# -- 1. CPU per turn -----------------------------------------------------------------------------


def children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def command_cpu(command: str, cwd: Path) -> float:
    """CPU seconds one run of ``command`` costs, as crucible runs it (``/bin/sh -c``), measured alone
    ``CALIBRATION`` times in this run (the kernel's per-process accounting of waited children)."""
    env = {**os.environ, "CRUCIBLE_TURN": "1"}
    before = children_cpu()
    for _ in range(CALIBRATION):
        subprocess.run(["/bin/sh", "-c", command], cwd=cwd, env=env, check=True, capture_output=True)
    return (children_cpu() - before) / CALIBRATION


@dataclass(frozen=True)
class Drive:
    """What one scheduler drive of ``runs`` runs cost: CPU seconds of this process's threads
    (``own``) and of every child it waited for (``children``: git, the commands, the metric), the
    decided turns and the wall time."""

    runs: int
    decided: int
    own: float
    children: float
    wall: float

    def controller(self, commands: Commands) -> float:
        """The controller's CPU seconds: everything but the turns' and the baselines' own commands."""
        return self.own + self.children - commands.spent(self.runs, self.decided)


@dataclass(frozen=True)
class Commands:
    """CPU seconds one execution of the agent and of the metric cost, measured alone in this run."""

    agent: float
    metric: float

    @property
    def turn(self) -> float:
        """A decided turn's own commands: the agent once, the metric once (one sample, no interleave)."""
        return self.agent + self.metric

    def spent(self, runs: int, decided: int) -> float:
        """The commands of ``decided`` turns and of ``runs`` baselines (the metric once each)."""
        return decided * self.turn + runs * self.metric


def finished(store: Store) -> int:
    """How many runs have finished: one small read (the bench's own polling is counted as controller
    CPU, so it must not read every run)."""
    return sum(n for status, n in store.count_runs_by_status().items() if status in FINISHED_STATUSES)


def all_finished(scheduler: Scheduler, store: Store, runs: int) -> bool:
    """Whether the drive is over: the scheduler drives no run any more (a look at its own table, a lock
    and a dict) and the store says all ``runs`` finished. The store is read only when the scheduler's
    table is empty: a look every 0.2 s that read it each time cost 1.2 ms of this process's CPU, which
    the drive counts as the controller's (0.25 ms a turn of the steady state, ADR-0050)."""
    return not scheduler.driving() and finished(store) >= runs


def spec_repo(work: Path, turns: int) -> Path:
    """A one-file repository whose ``crucible.toml`` runs ``turns`` turns of the trivial agent."""
    repo = work / f"app-{turns}"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.txt").write_text("0\n")
    (repo / "crucible.toml").write_text(RUN_SPEC.format(turns=turns, agent=AGENT, metric=METRIC))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


@contextmanager
def database(work: Path, postgres: str | None) -> Iterator[str]:
    """The URL of a database of one drive's own: a SQLite file in ``work``, or with ``postgres`` (an
    admin URL) a PostgreSQL database made and migrated here, dropped afterwards."""
    if postgres is None:
        yield f"sqlite:///{work / 'cpu.db'}"
        return
    name = f"crucible_bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
        url = sa.engine.make_url(postgres).set(database=name).render_as_string(hide_password=False)
        Store.open(url, upgrade=True).close()
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def drive(work: Path, runs: int, turns: int, concurrent: int, postgres: str | None = None) -> Drive:
    """Submit ``runs`` runs of ``turns`` turns to the run service ``crucible serve`` builds and let its
    ``Scheduler`` (ticking as the server does) drive them to the end, in this process, on a database
    of their own (``database``); what that cost (see ``Drive``)."""
    work.mkdir()
    repo = spec_repo(work, turns)
    with database(work, postgres) as url:
        settings = Settings(home=work / "home", database_url=url)
        root = build(dict(os.environ), settings=settings, mode=Mode.SERVE)
        try:
            return _drive(root, repo, runs, concurrent)
        finally:
            root.close()


def _drive(root: Root, repo: Path, runs: int, concurrent: int) -> Drive:
    """``drive``'s runs, on the composition root ``root`` (closed by the caller)."""
    service = root.service()
    spec_path = repo / "crucible.toml"
    spec = parse_spec(spec_path.read_text(), repo)
    ids = [service.create(spec, spec_path.read_text(), spec_path, RunOptions()) for _ in range(runs)]
    store = root.store()
    scheduler = Scheduler(service, max_concurrent_runs=concurrent)
    before, children = time.process_time(), os.times()
    started = time.monotonic()
    scheduler.start()
    try:
        until(lambda: all_finished(scheduler, store, runs), "the runs", 3600)
    finally:
        scheduler.stop(30)
    wall = time.monotonic() - started
    after = os.times()
    own = time.process_time() - before
    waited = (after.children_user - children.children_user) + (
        after.children_system - children.children_system
    )
    failed = [r for r in ids if store.get_run(r).status is not RunStatus.COMPLETED]
    if failed:
        raise SystemExit(f"{len(failed)} runs did not complete, e.g. {failed[0]}: {store.get_run(failed[0])}")
    decided = sum(store.turn_counts(r).decided.get(0, 0) for r in ids)
    return Drive(runs, decided, own, waited, wall)


@dataclass(frozen=True)
class CpuPerTurn:
    """The served path's CPU, each figure against the turn's own commands (``commands.turn``):

    - ``mix``: ``--runs`` runs of ``--turns`` turns, per decided turn, setup included (the old figure);
    - ``per_turn``: a turn in steady state, from two drives of the same ``steady_runs`` runs that
      differ only in their turns (``steady_turns`` and 1): the extra controller CPU over the extra turns;
    - ``per_run``: what a run costs besides its turns (claim, clones, baseline, finish), the rest of
      the one-turn drive's CPU per run once its turns are taken off at ``per_turn``.
    """

    commands: Commands
    mix: Drive
    long: Drive
    short: Drive

    @property
    def mix_per_turn(self) -> float:
        return self.mix.controller(self.commands) / self.mix.decided

    @property
    def per_turn(self) -> float:
        extra = self.long.controller(self.commands) - self.short.controller(self.commands)
        return extra / (self.long.decided - self.short.decided)

    @property
    def per_turn_split(self) -> tuple[float, float]:
        """``per_turn``'s CPU of this process's threads, and of its waited children (git; the turn's
        own commands are in here too, taken off in ``per_turn``)."""
        turns = self.long.decided - self.short.decided
        return (self.long.own - self.short.own) / turns, (self.long.children - self.short.children) / turns

    @property
    def per_run(self) -> float:
        return (self.short.controller(self.commands) - self.short.decided * self.per_turn) / self.short.runs


def cpu_per_turn(
    work: Path,
    runs: int,
    turns: int,
    concurrent: int,
    steady_runs: int,
    steady_turns: int,
    postgres: str | None = None,
) -> CpuPerTurn:
    """The three drives of ``CpuPerTurn`` and the commands' own cost, all in this run."""
    if steady_turns < 2:
        raise SystemExit("--steady-turns must be at least 2 (it is compared with a drive of one turn)")
    mix = drive(work / "mix", runs, turns, concurrent, postgres)
    short = drive(work / "short", steady_runs, 1, concurrent, postgres)
    long = drive(work / "long", steady_runs, steady_turns, concurrent, postgres)
    repo = work / "mix" / f"app-{turns}"
    commands = Commands(command_cpu(AGENT, repo), command_cpu(METRIC, repo))
    return CpuPerTurn(commands, mix, long, short)


# -- 2. RSS of an idle server watching PRs -------------------------------------------------------


def seeded_forge(cache: Path, prs: int) -> tuple[Path, Path]:
    """The forge root holding alice/app with ``prs`` open draft PRs, and the source repository;
    generated once per ``prs`` under ``cache`` and reused."""
    base = cache / f"forge-{prs}"
    forge_root, source, done = base / "forge", base / "source", base / "seeded"
    if done.exists():
        return forge_root, source
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    log(f"seeding the forge with {prs} PRs under {base} (once)")
    add_user(forge_root, "alice", admin=True, token=ALICE)
    source_repo(source, prs)
    with (
        running_forge(forge_root) as handle,
        httpx.Client(
            base_url=handle.api_url, headers={"Authorization": f"token {ALICE}"}, timeout=60
        ) as alice,
    ):
        call(alice, "POST", "/user/repos", {"name": "app"})
        push = [
            "git",
            "-C",
            str(source),
            "push",
            "-q",
            f"{handle.url}/alice/app.git",
            "refs/heads/*:refs/heads/*",
        ]
        subprocess.run(push, check=True, env={**os.environ, **basic_auth_env(ALICE)}, capture_output=True)
        for b in range(prs):
            body = {"head": f"alice:b{b}", "base": "main", "title": f"change {b}", "draft": True}
            call(alice, "POST", "/repos/alice/app/pulls", body)
    done.write_text("")
    return forge_root, source


def watching_runs(store: Store, source: Path, api_url: str, prs: int) -> list[str]:
    """``prs`` pending runs, each publishing to and watching one PR (recorded as crucible records it)."""
    spec_text = WATCH_SPEC.format(repo=source, api=api_url)
    spec = parse_spec(spec_text, source)
    base = git(source, "rev-parse", "main")
    ids = []
    for n in range(prs):
        run_id = f"w{n:05d}"
        store.create_run(
            NewRun(
                id=run_id,
                spec_text=spec_text,
                spec_fingerprint=spec.fingerprint(),
                spec_path=None,
                objective=spec.objective,
                metric_name="m",
                direction="minimize",
                turns_planned=0,
                options={"publish_prs": True, "watch_feedback": True},
            ),
            [
                ComponentRecord(
                    run_id=run_id, name="app", repo=str(source), base_ref="main", base_sha=base, head_sha=base
                )
            ],
        )
        head = git(source, "rev-parse", f"b{n}")
        store.save_pull(
            PullRecord(
                run_id=run_id,
                component="app",
                repo="alice/app",
                number=n + 1,
                url=f"{api_url}/repos/alice/app/pulls/{n + 1}",
                branch=f"b{n}",
                head_sha=head,
                pushed_sha=head,
                base_sha=base,
            )
        )
        ids.append(run_id)
    return ids


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for pid {pid}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(env: dict[str, str], out: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    with out.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "controller.cli.main", "serve", "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited ({proc.returncode}); see {out}")
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        until(ready, "the server to be ready", 120)
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def sampled_rss(pid: int, seconds: float) -> float:
    peak = 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, rss_mb(pid))
        time.sleep(0.5)
    return peak


SCRAPE_STATEMENTS = 4  # what one /metrics scrape reads itself (runs, turns, deliveries, statements)


def metrics(url: str) -> dict[str, float]:
    """The server's unlabelled Prometheus samples."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def threads_of(pid: int) -> int:
    """The server's threads (Python names them only for itself, so all of them are counted)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise SystemExit(f"no Threads for pid {pid}")


@dataclass(frozen=True)
class Idle:
    """One idle server watching PRs: what it took and what it costs."""

    settle_s: float  # from start until every run watched with its lease held here
    watching: int  # runs watching (all of them unless ``settle_s`` reached the time limit)
    rss_mb: float
    statements_per_s: float
    threads: int  # the server's threads while idle
    stopped: int  # runs that stopped instead of watching


def idle_server(
    work: Path, env: dict[str, str], source: Path, api_url: str, prs: int, idle_s: float, limit_s: float
) -> Idle:
    db = work / "watch.db"
    watched = {**env, "CRUCIBLE_HOME": str(work / "home"), "CRUCIBLE_DATABASE_URL": f"sqlite:///{db}"}
    subprocess.run([sys.executable, "-m", "controller.cli.main", "db", "upgrade"], env=watched, check=True)
    with Store.open(watched["CRUCIBLE_DATABASE_URL"]) as store:
        ids = set(watching_runs(store, source, api_url, prs))
        started = time.monotonic()
        with serving(watched, work / "serve.log") as (proc, url):
            stopped: list[str] = []
            watching = 0
            while time.monotonic() - started < limit_s:  # every run watching, its lease held here
                runs = [r for r in store.list_runs(limit=prs + 10) if r.id in ids]
                stopped = [r.id for r in runs if r.status in FINISHED_STATUSES]
                watching = sum(r.phase is RunPhase.WATCHING and r.lease_owner is not None for r in runs)
                if stopped or (watching == prs and metrics(url).get("crucible_leases_held") == prs):
                    break
                time.sleep(1)
            took = time.monotonic() - started
            if stopped:
                for run_id in stopped[:3]:
                    log(f"run {run_id} stopped: {store.get_run(run_id).stop_message}")
                return Idle(took, watching, 0.0, 0.0, 0, len(stopped))
            log(f"{watching} of {prs} runs watching after {took:.0f} s; letting the hub read every PR")
            time.sleep(35)  # the hub's first poll (every 30 s) reads every PR's reviews
            rss = sampled_rss(proc.pid, 10)
            threads = threads_of(proc.pid)
            before = metrics(url)["crucible_db_statements_total"]
            time.sleep(idle_s)
            after = metrics(url)["crucible_db_statements_total"]
            rate = (after - before - SCRAPE_STATEMENTS) / idle_s
            still = [
                r
                for r in store.list_runs(limit=prs + 10)
                if r.id in ids and r.status is not RunStatus.RUNNING
            ]
    return Idle(took, watching, rss, rate, threads, len(still))


def idle_rss(
    work: Path, cache: Path, prs: int, idle_s: float, arms: list[str], limit_s: float
) -> tuple[float, dict[str, Idle]]:
    """The floor (RSS MB of a server with no runs) and, per arm (``parked``: ADR-0020; ``threads``:
    CRUCIBLE_PARK_WATCHING=false), the idle server watching ``prs`` PRs."""
    forge_root, source = seeded_forge(cache, prs)
    with running_forge(forge_root) as handle:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRUCIBLE_")}
        env.update(
            CRUCIBLE_API_TOKEN=TOKEN,
            CRUCIBLE_ALLOW_UNSANDBOXED="1",  # the bench's specs run unsandboxed, as the operator allows
            CRUCIBLE_GITHUB_TOKEN=ALICE,
            CRUCIBLE_FORGE_WRITE_INTERVAL="0",
            CRUCIBLE_OWN_LOGINS="alice",
            CRUCIBLE_MAX_CONCURRENT_RUNS=str(prs + 10),
        )
        empty = {**env, "CRUCIBLE_HOME": str(work / "empty-home")}
        empty["CRUCIBLE_DATABASE_URL"] = f"sqlite:///{work / 'empty.db'}"
        subprocess.run([sys.executable, "-m", "controller.cli.main", "db", "upgrade"], env=empty, check=True)
        with serving(empty, work / "serve-empty.log") as (proc, _url):
            time.sleep(3)
            floor = sampled_rss(proc.pid, 5)
        log(f"idle server, no runs: {floor:.0f} MB")
        out = {}
        for arm in arms:
            (work / arm).mkdir()
            park = {"CRUCIBLE_PARK_WATCHING": "true" if arm == "parked" else "false"}
            # Parked runs leave their thread: 8 at once drive the 1,000 baselines. With a thread per
            # watching run every run must be allowed its own (the only way that path holds them all).
            if arm == "parked":
                park["CRUCIBLE_MAX_CONCURRENT_RUNS"] = "8"
            out[arm] = idle_server(work / arm, {**env, **park}, source, handle.api_url, prs, idle_s, limit_s)
            log(f"{arm}: {out[arm]}")
    return floor, out


def report_cpu(cpu: CpuPerTurn, args: argparse.Namespace) -> None:
    """Every CPU figure, each as a ratio against the turn's own commands measured in this run."""
    turn = cpu.commands.turn
    mix = cpu.mix
    print(
        f"cpu of the served path (scheduler, threaded local broker, {args.concurrent} runs at once, "
        f"{'PostgreSQL' if args.postgres else 'SQLite'}; "
        f"load {os.getloadavg()[0]:.1f}); the turn's own commands: {turn * 1000:.2f} ms "
        f"(agent {cpu.commands.agent * 1000:.2f}, metric {cpu.commands.metric * 1000:.2f})"
    )
    print(
        f"  {mix.runs} runs x {args.turns} turns ({mix.decided} decided, {mix.wall:.1f} s wall), per "
        f"decided turn, run setup included: controller {cpu.mix_per_turn * 1000:.1f} ms, "
        f"ratio {cpu.mix_per_turn / turn:.1f}x"
    )
    print(
        f"    of which this process's threads {mix.own / mix.decided * 1000:.1f} ms, its waited children "
        f"(git and the commands) {mix.children / mix.decided * 1000:.1f} ms"
    )
    print(
        f"  steady state ({cpu.long.runs} runs x {args.steady_turns} turns against x 1, "
        f"{cpu.long.wall:.1f} + {cpu.short.wall:.1f} s wall): a turn costs the controller "
        f"{cpu.per_turn * 1000:.1f} ms, ratio {cpu.per_turn / turn:.1f}x (target <= 5x)"
    )
    threads, children = cpu.per_turn_split
    print(
        f"    of which this process's threads {threads * 1000:.1f} ms, its waited children "
        f"{children * 1000:.1f} ms (git, and the turn's own commands: {turn * 1000:.2f} ms)"
    )
    print(
        f"  per run besides its turns (claim, checkouts, baseline, finish): {cpu.per_run * 1000:.1f} ms, "
        f"ratio {cpu.per_run / turn:.1f}x a turn's commands"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--turns", type=int, default=2, help="search turns per run")
    parser.add_argument("--concurrent", type=int, default=8, help="max_concurrent_runs")
    parser.add_argument("--prs", type=int, default=1000, help="PRs the idle server watches")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds the statements are counted over")
    parser.add_argument("--only", choices=["parked", "threads"], help="measure one idle server only")
    parser.add_argument(
        "--settle-limit", type=float, default=3600.0, help="seconds to wait for every run to watch at most"
    )
    parser.add_argument("--skip-cpu", action="store_true", help="measure the idle servers only")
    parser.add_argument("--skip-rss", action="store_true", help="measure the CPU per turn only")
    parser.add_argument(
        "--steady-runs", type=int, default=8, help="runs of the steady-state drives (default: 8)"
    )
    parser.add_argument(
        "--steady-turns", type=int, default=25, help="turns of each run of the long steady-state drive"
    )
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "crucible-bench" / "scheduler")
    parser.add_argument("--quick", action="store_true", help="20 runs and 100 PRs")
    parser.add_argument("--strict", action="store_true", help="exit 1 when RSS is over the target")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (printed) for a look")
    parser.add_argument(
        "--postgres",
        metavar="ADMIN_URL",
        help="drive the CPU runs on PostgreSQL databases made through this admin URL (dropped after)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.prs = 20, 100
    arms = [args.only] if args.only else ["parked", "threads"]
    work = Path(tempfile.mkdtemp(prefix="crucible-bench-sched-"))
    if args.keep:
        log(f"work directory: {work}")
    try:
        if not args.skip_cpu:
            (work / "cpu").mkdir()
            cpu = cpu_per_turn(
                work / "cpu",
                args.runs,
                args.turns,
                args.concurrent,
                args.steady_runs,
                args.steady_turns,
                args.postgres,
            )
            report_cpu(cpu, args)
        if args.skip_rss:
            return 0
        (work / "rss").mkdir()
        floor, idle = idle_rss(work / "rss", args.cache, args.prs, args.idle, arms, args.settle_limit)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"idle crucible serve watching {args.prs} PRs (floor: {floor:.0f} MB with no runs)")
    for arm, got in idle.items():
        name = "parked (ADR-0020)" if arm == "parked" else "a thread per watching run"
        if got.stopped:
            print(f"  {name}: {got.stopped} runs stopped instead of watching")
            continue
        target = "met" if got.rss_mb <= RSS_TARGET_MB else "NOT met"
        settled = "all" if got.watching == args.prs else f"only {got.watching} of"
        print(
            f"  {name}: {settled} {args.prs} watching after {got.settle_s:.0f} s; {got.rss_mb:.0f} MB "
            f"(ratio {got.rss_mb / floor:.2f}x the floor; target <= {RSS_TARGET_MB:.0f} MB: {target}); "
            f"{got.statements_per_s:.1f} SQL statements/s idle; {got.threads} threads"
        )
    if len(idle) == 2 and not any(got.stopped for got in idle.values()):
        parked, threads = idle["parked"], idle["threads"]
        print(
            f"  parked against a thread each: RSS {parked.rss_mb / threads.rss_mb:.2f}x, "
            f"statements/s {parked.statements_per_s / max(threads.statements_per_s, 1e-9):.4f}x"
        )
    if any(got.stopped or got.watching < args.prs for got in idle.values()):
        return 1
    parked_rss = idle["parked"].rss_mb if "parked" in idle else 0.0
    return 1 if args.strict and parked_rss > RSS_TARGET_MB else 0


if __name__ == "__main__":
    sys.exit(main())

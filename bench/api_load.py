"""Read latency of the operator API under load, as a ratio against ``/healthz`` measured in the same run.

A database holds ``--runs`` runs with ``--turns`` decided turns in all (each with two samples), then
statistics are gathered (``ANALYZE`` on PostgreSQL: a database in service has them, autovacuum sees to
it). The app of ``crucible serve`` runs in a process of its own, served the way ``crucible serve``
serves it (``controller.api.serve.run_server``: one uvicorn worker, access log on), and ``--clients``
threads of this process request for ``--seconds`` each:
  floor  ``GET /healthz`` (no I/O: the cost of HTTP, routing and the client itself)
  runs   ``GET /api/runs`` (the first page, 50 runs)
  turns  ``GET /api/runs/{id}/turns`` (a page of 100 turns from the middle of the largest run)
Each arm runs alone, one after the other. Printed: p50/p99 per arm, p99 against the floor's, and the
server's CPU per request, also against the floor's (with one worker and 16 clients p99 is roughly 16
times it, and it is the figure the neighbours' load disturbs least), with the load average before and
after. Both pages are answered by ``api/hotpath.py`` once warm (ADR-0021).

One worker because that is what a replica runs: ``crucible serve`` keeps its scheduler, feedback hub
and webhook writer in the serving process, and scales by replicas on one database, not by forking
workers. The server in a process of its own because it is one in service: with the clients in the same
interpreter, the floor measured mostly their contention for the GIL.

    python bench/api_load.py [--database-url postgresql+psycopg://…] [--runs 100] [--turns 50000]
                             [--clients 16] [--seconds 10]

Target (issue 8): p99 <= 50 ms for runs and turns at 16 clients on PostgreSQL with 100 runs and
50,000 turns. Without --database-url a temporary SQLite file is used.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import sqlalchemy as sa

from controller.services.views.schemas import RoundRequest
from controller.store import NewRun, Store
from controller.store.models import SampleRow, TurnRow

TOKEN = "bench-token"
TARGET_MS = 50.0


@dataclass(frozen=True)
class Arm:
    name: str
    latencies: list[float]
    server_cpu_s: float = 0.0  # the server process's CPU time during the arm (Linux; 0 elsewhere)

    @property
    def cpu_ms(self) -> float:
        """Server CPU per request: the figure the neighbours' load disturbs least."""
        return self.server_cpu_s / max(1, len(self.latencies)) * 1000

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


class _NoScheduler:
    def cancel(self, run_id: str) -> str:
        raise NotImplementedError

    def resume(self, run_id: str) -> str:
        raise NotImplementedError

    def steer(self, run_id: str, text: str, component: str | None = None) -> RoundRequest:
        raise NotImplementedError

    def wake(self) -> None:
        pass


def populate(url: str, runs: int, turns: int) -> list[str]:
    """``runs`` runs (run 0 holds half the turns, the rest share the other half), turns inserted in bulk."""
    now = datetime.now(UTC)
    ids = [f"bench-{i:04d}" for i in range(runs)]
    with Store.open(url, upgrade=True) as store:
        for run_id in ids:
            store.create_run(
                NewRun(
                    id=run_id,
                    spec_text="",
                    spec_fingerprint="f",
                    spec_path=None,
                    objective=f"benchmark {run_id}",
                    metric_name="m",
                    direction="minimize",
                    turns_planned=turns,
                )
            )
    share = [turns // 2] + [max(1, (turns - turns // 2) // max(1, runs - 1))] * (runs - 1)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for run_id, count in zip(ids, share, strict=True):
            rows, samples = [], []
            for n in range(1, count + 1):
                rows.append(
                    {
                        "run_id": run_id,
                        "number": n,
                        "round": 0,
                        "phase": "decided",
                        "started_at": now,
                        "decided_at": now,
                        "outcome": "rejected",
                        "reason": "not_improved",
                        "value": float(n),
                        "p_value": 0.5,
                        "hypothesis": f"try {n}",
                        "changed_paths": ["src/a.py"],
                        "commits": {},
                        "cost_usd": 0.0,
                        "tokens": 0,
                        "duration_s": 1.0,
                        "detail": "",
                    }
                )
                for arm in ("candidate", "champion"):
                    samples.append(
                        {
                            "run_id": run_id,
                            "turn": n,
                            "arm": arm,
                            "sample_index": 0,
                            "values": {"m": 1.0},
                            "valid": True,
                        }
                    )
            conn.execute(sa.insert(TurnRow), rows)
            conn.execute(sa.insert(SampleRow), samples)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("ANALYZE"))
    engine.dispose()
    return ids


def serve(url: str, home: str, port: int) -> None:
    """The child: the app of ``crucible serve`` without its scheduler (reads are measured, and the
    benchmark's runs are never driven), served as ``crucible serve`` serves it."""
    from controller.api.app import create_app
    from controller.api.auth import ApiTokens
    from controller.api.serve import run_server
    from controller.config.settings import Settings

    with Store.open(url) as store:
        settings = Settings(home=Path(home), database_url=url)
        app = create_app(settings, store, ApiTokens(TOKEN), _NoScheduler())
        run_server(app, "127.0.0.1", port)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of process ``pid`` so far (``/proc``; 0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def server_process(url: str, home: str) -> Iterator[tuple[str, int]]:
    port = _free_port()
    argv = [sys.executable, __file__, "--serve-child", "--database-url", url, "--home", home]
    out = subprocess.DEVNULL  # the access log is written, as in service, and thrown away
    child = subprocess.Popen([*argv, "--port", str(port)], stdout=out, stderr=out)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if child.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.1)
        yield base, child.pid
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)


def load(base: str, path: str, clients: int, seconds: float) -> Arm:
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client() -> None:
        mine = []
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            while True:  # at least one request each, however late a loaded machine starts the thread
                start = time.perf_counter()
                response = http.get(path)
                mine.append(time.perf_counter() - start)
                response.raise_for_status()
                if time.monotonic() >= deadline:
                    break
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Arm(path, latencies)


def run(args: argparse.Namespace) -> list[Arm]:
    with tempfile.TemporaryDirectory(prefix="crucible-apiload-") as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'crucible.db'}"
        ids = populate(url, args.runs, args.turns)
        middle = max(1, args.turns // 4)
        try:
            with server_process(url, str(Path(tmp) / "home")) as (base, pid):
                paths = {
                    "floor": "/healthz",
                    "runs": "/api/runs",
                    "turns": f"/api/runs/{ids[0]}/turns?after={middle}&limit=100",
                }
                for path in paths.values():  # warm up: connections, caches, the first prepared statements
                    load(base, path, args.clients, min(1.0, args.seconds))
                arms = []
                for name, path in paths.items():
                    before = cpu_seconds(pid)
                    latencies = load(base, path, args.clients, args.seconds).latencies
                    arms.append(Arm(name, latencies, cpu_seconds(pid) - before))
        finally:
            if args.database_url:
                _delete(url)
    return arms


def _delete(url: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for table in ("samples", "turns", "events"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE run_id LIKE 'bench-%'"))
        conn.execute(sa.text("DELETE FROM runs WHERE id LIKE 'bench-%'"))
    engine.dispose()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--turns", type=int, default=50_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--serve-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_child:
        serve(args.database_url, args.home, args.port)
        return 0
    load_before = os.getloadavg()[0]
    arms = run(args)
    floor = arms[0]
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (2 cores: ~2 is busy)")
    header = f"{'arm':<6} {'requests':>8} {'p50 ms':>8} {'p99 ms':>8} {'p99/floor':>9}"
    print(f"{header} {'cpu ms/req':>10} {'cpu/floor':>9}")
    for arm in arms:
        cpu_ratio = arm.cpu_ms / floor.cpu_ms if floor.cpu_ms else float("nan")  # no /proc: no figure
        print(
            f"{arm.name:<6} {len(arm.latencies):>8} {arm.pct(0.5):>8.1f} {arm.pct(0.99):>8.1f} "
            f"{arm.pct(0.99) / floor.pct(0.99):>9.2f} {arm.cpu_ms:>10.2f} {cpu_ratio:>9.2f}"
        )
    worst = max(arm.pct(0.99) for arm in arms[1:])
    print(f"worst p99 {worst:.1f} ms (target <= {TARGET_MS:g} ms at {args.clients} clients)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

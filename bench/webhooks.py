"""Webhook deliveries per second accepted durably, as a ratio against the floor measured in the same run.

Measured: 16 concurrent clients over loopback POST one real GitHub payload (a
``pull_request_review_comment`` created event, 23 kB as compact JSON) to ``POST /webhooks/github``,
each request with a fresh ``X-GitHub-Delivery`` uuid so every one is really stored; a delivery counts
when it gets a 202.
Crucible = ``webhook_router`` served exactly as ``crucible loop --listen`` serves it
           (``controller.cli.listen.webhook_server``: one uvicorn server in a thread), storing into
           SQLite in a temp dir, or into ``--database-url``.
Floor    = a bare FastAPI endpoint, served the same way, that reads the raw body, checks the signature
           with the same ``verify_signature`` and answers 202: everything GitHub's contract needs except
           storing.

Each server runs in its own process (so the clients do not share its GIL) and is loaded alone: the arms
alternate (floor, crucible, floor, crucible, ...) for ``--rounds`` rounds after a warmup, so a noisy,
shared machine slows both alike. Afterwards every delivery the crucible arm sent is looked up in the
store: the stored count must equal its 202 count (exit 1 otherwise, or when any request failed).
Rows the benchmark wrote into a ``--database-url`` database are deleted again at the end.

    python bench/webhooks.py [--seconds 5] [--rounds 3] [--warmup 1] [--clients 16]
                             [--database-url postgresql+psycopg://postgres@127.0.0.1:5432/test]

Target (issue 4): crucible/floor >= 0.5 and crucible p99 <= 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from controller.cli.listen import serve_in_thread, webhook_server
from controller.forge.webhooks import signature_for, verify_signature
from controller.store import migrate
from controller.store.store import Store

# GitHub's own example, kept in the repository with the other test data (tests/testdata/README.md).
ORACLES = Path(__file__).resolve().parents[1] / "tests" / "testdata" / "github-webhooks"
PAYLOAD = ORACLES / "pull_request_review_comment.created.0.json"
SECRET = "bench-secret"
HOST = "127.0.0.1"
PATH = "/webhooks/github"
TARGET_RATIO = 0.5
TARGET_P99_MS = 50.0


@dataclass
class Arm:
    """What one arm (floor or crucible) did over all its measured rounds (warmup excluded)."""

    name: str
    seconds: float = 0.0
    accepted: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    round_rates: list[float] = field(default_factory=list)
    server_cpu: float = 0.0  # CPU seconds the server process used while measured
    client_cpu: float = 0.0  # CPU seconds this (client) process used while measured

    @property
    def rate(self) -> float:
        return self.accepted / self.seconds if self.seconds else 0.0


@dataclass
class Report:
    floor: Arm
    crucible: Arm
    sent_to_store: int  # deliveries the crucible server was sent, warmup included
    accepted_by_store: int  # of those, answered 202
    stored: int  # of those, found in the store afterwards

    @property
    def ratio(self) -> float:
        return self.crucible.rate / self.floor.rate if self.floor.rate else 0.0

    @property
    def durable(self) -> bool:
        return self.stored == self.accepted_by_store


@dataclass
class Burst:
    """The result of one timed burst of requests against one server."""

    seconds: float
    sent: list[str]  # delivery ids
    accepted: list[str]  # delivery ids answered 202
    latencies: list[float]


# -- the servers (run in child processes: ``--serve floor|crucible``) -----------------------------


def floor_app(secret: str) -> FastAPI:
    """The least a receiver can do: read the raw body, check the signature, answer 202."""
    key = secret.encode()
    app = FastAPI(title="floor", docs_url=None, redoc_url=None, openapi_url=None)

    @app.post(PATH)
    async def receive(request: Request) -> JSONResponse:
        body = await request.body()
        if not verify_signature(key, body, request.headers.get("x-hub-signature-256")):
            return JSONResponse({"detail": "missing or invalid X-Hub-Signature-256"}, status_code=401)
        return JSONResponse({"status": "queued"}, status_code=202)

    return app


@contextmanager
def floor_server(secret: str, host: str, port: int) -> Iterator[str]:
    """The floor app served with exactly the uvicorn settings of ``webhook_server`` (no lifespan:
    it has no writer to start)."""
    with serve_in_thread(floor_app(secret), host, port, lifespan="off", name="floor-webhooks") as url:
        yield url


def serve(kind: str, port: int, database_url: str) -> int:
    """Serve until stdin closes (the parent closes it to stop us, or by dying)."""
    if kind == "floor":
        with floor_server(SECRET, HOST, port):
            sys.stdin.read()
        return 0
    with Store.open(database_url) as store, webhook_server(store, SECRET, HOST, port, threading.Event().set):
        sys.stdin.read()
    return 0


@contextmanager
def server_process(kind: str, database_url: str) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A child process starting to serve ``kind`` on a free loopback port; yields (port, process)."""
    port = free_port()
    args = [sys.executable, str(Path(__file__).resolve()), "--serve", kind, "--port", str(port)]
    proc = subprocess.Popen([*args, "--database-url", database_url], stdin=subprocess.PIPE)
    try:
        yield port, proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_until_answering(port: int, proc: subprocess.Popen[bytes]) -> None:
    url = f"http://{HOST}:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url + "/", timeout=1)  # any answer (404) means it is serving
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server at {url} did not start") from None
            time.sleep(0.05)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads) and of its live descendants (the
    webhook server stores in a child process, whose work counts too); 0 where /proc is missing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(cpu_seconds(child) for child in _children(pid))


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


# -- the clients ----------------------------------------------------------------------------------


async def burst(port: int, body: bytes, event: str, clients: int, seconds: float) -> Burst:
    """``clients`` concurrent keep-alive connections, each posting deliveries back to back for ``seconds``.

    A plain HTTP/1.1 writer and reader, not httpx: at 16 connections httpx spends ~3 ms of client CPU
    per request, so on a 2-core machine it saturated before the floor server did and measured itself.
    """
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: {HOST}:{port}\r\nUser-Agent: GitHub-Hookshot/bench\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nX-GitHub-Event: {event}\r\n"
        f"X-Hub-Signature-256: {signature_for(SECRET.encode(), body)}\r\nX-GitHub-Delivery: "
    ).encode()
    result = Burst(0.0, [], [], [])
    start = time.perf_counter()
    await asyncio.gather(*(client(port, head, body, start + seconds, result) for _ in range(clients)))
    result.seconds = time.perf_counter() - start
    return result


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def client(port: int, head: bytes, body: bytes, deadline: float, result: Burst) -> None:
    """One client: a keep-alive connection (reopened after an error), one request at a time."""
    connection: Connection | None = None
    try:
        while time.perf_counter() < deadline:
            delivery = str(uuid.uuid4())
            result.sent.append(delivery)
            t0 = time.perf_counter()
            try:
                connection = connection or await asyncio.open_connection(HOST, port)
                connection[1].write(b"%s%s\r\n\r\n%s" % (head, delivery.encode(), body))
                status, keep_alive = await read_response(connection[0])
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                status, keep_alive = 0, False
            else:
                result.latencies.append(time.perf_counter() - t0)
            if status == 202:
                result.accepted.append(delivery)
            if not keep_alive:
                await close(connection)
                connection = None
    finally:
        await close(connection)


async def close(connection: Connection | None) -> None:
    if connection is not None:
        connection[1].close()
        with suppress(OSError):
            await connection[1].wait_closed()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """One HTTP/1.1 response (status, whether the connection stays open); ValueError if unreadable."""
    status_line, *lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower().split("\r\n")
    headers = {name.strip(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    version, status, *_ = [*status_line.split(), "", ""]
    if not version.startswith("http/1.") or not status.isdigit() or "content-length" not in headers:
        raise ValueError(f"unexpected response head {status_line!r}")
    await reader.readexactly(int(headers["content-length"]))
    return int(status), headers.get("connection") != "close"


def measure(arm: Arm, port: int, pid: int, body: bytes, event: str, options: argparse.Namespace) -> Burst:
    server0, client0 = cpu_seconds(pid), time.process_time()
    result = asyncio.run(burst(port, body, event, options.clients, options.seconds))
    arm.server_cpu += cpu_seconds(pid) - server0
    arm.client_cpu += time.process_time() - client0
    arm.seconds += result.seconds
    arm.accepted += len(result.accepted)
    arm.failed += len(result.sent) - len(result.accepted)
    arm.latencies += result.latencies
    arm.round_rates.append(len(result.accepted) / result.seconds)
    return result


# -- durability -----------------------------------------------------------------------------------


def stored_ids(database_url: str, ids: Sequence[str], *, delete: bool = False) -> set[str]:
    """Which of ``ids`` are stored as deliveries (then deleted from the store when ``delete``)."""
    deliveries = sa.table("deliveries", sa.column("id"))
    engine = migrate.make_engine(database_url)
    found: set[str] = set()
    try:
        with engine.begin() as conn:
            for i in range(0, len(ids), 500):
                chunk = list(ids[i : i + 500])
                found.update(conn.scalars(sa.select(deliveries.c.id).where(deliveries.c.id.in_(chunk))))
                if delete:
                    conn.execute(sa.delete(deliveries).where(deliveries.c.id.in_(chunk)))
    finally:
        engine.dispose()
    return found


# -- the benchmark --------------------------------------------------------------------------------


def run(options: argparse.Namespace) -> Report:
    """The whole benchmark: servers up, warmup, alternating rounds, then the durability check."""
    if options.database_url is None:
        with tempfile.TemporaryDirectory(prefix="crucible-bench-") as tmp:
            return run_on(options, f"sqlite:///{Path(tmp) / 'crucible.db'}", cleanup=False)
    return run_on(options, options.database_url, cleanup=True)


def run_on(options: argparse.Namespace, database_url: str, *, cleanup: bool) -> Report:
    payload = json.loads(options.payload.read_text())
    body = json.dumps(payload, separators=(",", ":")).encode()  # GitHub sends compact JSON
    event = options.payload.name.split(".")[0]  # pull_request_review_comment.created.0.json
    shown = sa.make_url(database_url).render_as_string(hide_password=True)
    print(
        f"{options.clients} clients, {options.seconds:g} s per arm x {options.rounds} rounds; "
        f"{event} payload of {len(body)} bytes; store {shown}",
        flush=True,
    )
    Store.open(database_url, upgrade=True).close()
    floor, crucible = Arm("floor"), Arm("crucible")
    sent: list[str] = []
    accepted: list[str] = []
    with (
        server_process("floor", database_url) as (floor_port, floor_proc),
        server_process("crucible", database_url) as (crucible_port, crucible_proc),
    ):
        wait_until_answering(floor_port, floor_proc)  # both start at once: half the waiting
        wait_until_answering(crucible_port, crucible_proc)
        asyncio.run(burst(floor_port, body, event, options.clients, options.warmup))
        warm = asyncio.run(burst(crucible_port, body, event, options.clients, options.warmup))
        sent += warm.sent
        accepted += warm.accepted
        for n in range(1, options.rounds + 1):
            measure(floor, floor_port, floor_proc.pid, body, event, options)
            done = measure(crucible, crucible_port, crucible_proc.pid, body, event, options)
            sent += done.sent
            accepted += done.accepted
            print(
                f"round {n}: floor {floor.round_rates[-1]:.0f}/s, crucible {crucible.round_rates[-1]:.0f}/s, "
                f"ratio {crucible.round_rates[-1] / max(floor.round_rates[-1], 1e-9):.2f}",
                flush=True,
            )
    stored = stored_ids(database_url, sent, delete=cleanup)
    return Report(floor, crucible, len(sent), len(accepted), len(stored))


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``values``; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def describe(arm: Arm) -> str:
    per = arm.accepted or 1
    return (
        f"{arm.name:>8}: {arm.rate:7.0f} deliveries/s ({arm.accepted} in {arm.seconds:.1f} s, "
        f"{arm.failed} failed), p50 {percentile(arm.latencies, 50) * 1000:.1f} ms, "
        f"p99 {percentile(arm.latencies, 99) * 1000:.1f} ms; server CPU {arm.server_cpu / per * 1000:.2f} "
        f"ms/delivery, client CPU {arm.client_cpu / arm.seconds * 100 if arm.seconds else 0:.0f}% of a core"
    )


def print_report(report: Report) -> None:
    p99_ms = percentile(report.crucible.latencies, 99) * 1000
    print(describe(report.floor))
    print(describe(report.crucible))
    ratio_ok = "met" if report.ratio >= TARGET_RATIO else "MISSED"
    p99_ok = "met" if p99_ms <= TARGET_P99_MS else "MISSED"
    print(f"ratio = crucible/floor = {report.ratio:.2f} (target >= {TARGET_RATIO}: {ratio_ok})")
    print(f"crucible p99 = {p99_ms:.1f} ms (target <= {TARGET_P99_MS:.0f} ms: {p99_ok})")
    if report.floor.client_cpu > 0.9 * report.floor.seconds:
        print("warning: the clients used a whole core in the floor arm; the floor may be the clients' limit")
    verdict = "ok" if report.durable else "MISMATCH"
    print(
        f"durability: {report.accepted_by_store} of {report.sent_to_store} deliveries answered 202, "
        f"{report.stored} stored ({verdict})"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="per arm and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds per arm, before round 1")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--payload", type=Path, default=PAYLOAD, help="a GitHub webhook example")
    parser.add_argument(
        "--database-url", help="store into this database instead of SQLite in a temp dir (rows removed after)"
    )
    parser.add_argument("--serve", choices=["floor", "crucible"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    if options.serve:
        return serve(options.serve, options.port, options.database_url)
    report = run(options)
    print_report(report)
    failed = report.floor.failed + report.crucible.failed
    return 0 if report.durable and not failed else 1


if __name__ == "__main__":
    sys.exit(main())

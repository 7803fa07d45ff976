"""Oversized bundle uploads against a controller: its peak memory and how soon each is refused (issue 21).

A controller (the real app with its worker routes, SQLite, uvicorn) runs in a child process of its
own, so its memory is its own: ``/proc/<pid>/status``'s ``VmHWM`` is its peak resident set. This
process seeds a run and mints round tokens in the same database, then:

1. the floor: one normal small upload (a 64 KiB body; the controller reads it whole and refuses it as
   no git bundle), its answer time, and the controller's peak memory after it;
2. three uploads at once, each streamed in 1 MiB chunks without a ``Content-Length`` (so the cap can
   only be enforced while reading), each larger than the cap; for each, the time from the moment its
   sent bytes crossed the cap to its 413, and the controller's peak memory afterwards. Each upload is
   sent over a raw socket watched for the answer while the body is still going out, so the time is the
   server's (a client that reads only after its whole body, as httpx does, times its own sending).

Printed: the floor's answer time and peak memory, each oversized upload's time to 413 and its ratio to
the floor's answer time, how soon after the last 413 all three refusals were recorded (their tokens
revoked: the record follows the answer), the peak memory with the three against the floor's, and the
targets (issue 21): under 300 MB resident and each 413 within a second of crossing the cap.

    python bench/upload.py [--cap-mib 512] [--over-mib 64]
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from controller.config.settings import Settings
from controller.domain.enums import RunStatus
from controller.domain.jobs import RoundJob
from controller.services.remote.remote_rounds import RemoteRounds, token_hash
from controller.store import ComponentRecord, NewRun, Store

MIB = 1024 * 1024
# The smallest valid spec: the controller parses the run's spec before it looks at a bundle (a junk
# spec made the floor a 422 about the spec, not the refusal of a junk bundle it is meant to time).
SPEC = """objective = "x"
[agent]
command = "true"
[metric]
command = "true"
name = "m"
direction = "minimize"
[[component]]
name = "app"
repo = "."
"""
CHUNK = b"\0" * MIB

# The controller, in its own process: the app with its worker routes on a free port, printed first.
SERVER = """
import socket, sys, uvicorn
from pathlib import Path
from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import Settings
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store import Store

url, home, cap = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
store = Store.open(url)
settings = Settings(home=home, database_url=url)
remote = RemoteRounds(settings, store, controller_url="http://unused")
remote.max_bundle_bytes = cap


class NoControl:
    def cancel(self, run_id): raise AssertionError
    def resume(self, run_id): raise AssertionError
    def steer(self, run_id, text, component=None): raise AssertionError
    def wake(self): return None


app = create_app(settings, store, ApiTokens("operator-token-0123456789"), NoControl(), remote=remote)
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
"""


def peak_mb(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def seed(url: str, home: Path, count: int) -> list[str]:
    """A running run and ``count`` round tokens of it (one upload per token at a time)."""
    with Store.open(url, upgrade=True) as store:
        store.create_run(
            NewRun(
                id="rb",
                spec_text=SPEC,
                spec_fingerprint="fp",
                spec_path=None,
                objective="x",
                metric_name="m",
                direction="minimize",
                turns_planned=10,
            )
        )
        sha = "a" * 40
        store.add_component(
            ComponentRecord(
                run_id="rb", name="app", repo="/src/app", base_ref="main", base_sha=sha, head_sha=sha
            )
        )
        store.set_run_status("rb", RunStatus.RUNNING)
        remote = RemoteRounds(Settings(home=home, database_url=url), store, controller_url="http://unused")
        tokens = []
        for round in range(count):
            job = RoundJob(run_id="rb", round=round, turns=1, first_turn=round + 1, heads={"app": sha})
            tokens.append(remote.mint_worker_env(job)["CRUCIBLE_WORKER_TOKEN"])
        return tokens


def wait_revoked(url: str, tokens: list[str], bound_s: float = 60.0) -> int:
    """How many of ``tokens`` are revoked once all are, or ``bound_s`` passed: the refusal of an
    oversized upload is recorded (and its token revoked) after its 413."""
    deadline = time.monotonic() + bound_s
    with Store.open(url) as store:
        while True:
            grants = [store.worker_round_by_token(token_hash(t)) for t in tokens]
            revoked = sum(1 for g in grants if g is not None and g.revoked_at is not None)
            if revoked == len(tokens) or time.monotonic() > deadline:
                return revoked
            time.sleep(0.02)


def upload(port: int, token: str, size: int, cap: int) -> tuple[int | None, float]:
    """Stream ``size`` bytes as a chunked bundle with ``token`` over a raw socket; (the answer's status,
    None if the server closed without one reaching us; seconds from the moment the sent bytes passed
    ``cap`` to the server's answer).

    The socket is watched for the answer while the body is still being sent: a client that reads only
    after sending its whole body (httpx does) would time its own sending of the rest, not the server."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = (
        f"POST /api/worker/runs/rb/bundle HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/octet-stream\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    frame = b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n"
    sock.sendall(head.encode())
    sock.setblocking(False)
    pending, left, sent, crossed = memoryview(b""), size, 0, 0.0
    with sock:
        while True:
            if not pending and left > 0:
                pending, left = memoryview(frame), left - len(CHUNK)
            elif not pending and left == 0:
                pending, left = memoryview(b"0\r\n\r\n"), -1
            readable, _, _ = select.select([sock], [sock] if pending else [], [], 600)
            if readable:
                break
            try:
                n = sock.send(pending)
            except OSError:  # the server closed the connection: it answered and stopped reading
                break
            pending, sent = pending[n:], sent + n
            if not crossed and sent > cap:
                crossed = time.perf_counter()
        answered = time.perf_counter()
        sock.setblocking(True)
        sock.settimeout(10)
        try:
            line = sock.recv(64)
        except OSError:
            line = b""
    status = int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else None
    return status, answered - (crossed or answered)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cap-mib", type=int, default=512, help="the controller's upload cap (512 MiB)")
    parser.add_argument("--over-mib", type=int, default=64, help="how far past the cap each upload goes")
    args = parser.parse_args()
    cap = args.cap_mib * MIB
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        tokens = seed(url, Path(tmp) / "home", 4)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, url, str(Path(tmp) / "home"), str(cap)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert server.stdout is not None
            base = f"http://127.0.0.1:{server.stdout.readline().strip()}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"{base}/api/worker/runs/rb/job", headers={"Authorization": "Bearer x"})
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            started = peak_mb(server.pid)
            headers = {"Authorization": f"Bearer {tokens[0]}"}
            t0 = time.perf_counter()
            small = httpx.post(f"{base}/api/worker/runs/rb/bundle", content=b"\0" * 65536, headers=headers)
            floor_s = time.perf_counter() - t0
            floor_mb = peak_mb(server.pid)
            results: list[tuple[int | None, float]] = [(0, 0.0)] * 3
            port = int(base.rsplit(":", 1)[1])

            def one(i: int) -> None:
                results[i] = upload(port, tokens[i + 1], cap + args.over_mib * MIB, cap)

            threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            answered = time.perf_counter()
            recorded = wait_revoked(url, tokens[1:])
            recorded_s = time.perf_counter() - answered
            peak = peak_mb(server.pid)
        finally:
            server.terminate()
            server.wait()
    print(f"controller at start: peak {started:.0f} MB resident")
    print(
        f"floor: a 64 KiB upload answered {small.status_code} in {floor_s * 1000:.0f} ms; "
        f"peak {floor_mb:.0f} MB"
    )
    for i, (status, after) in enumerate(results):
        print(
            f"oversized upload {i + 1}: {status or 'closed without an answer'} {after:.2f} s after "
            "crossing the cap "
            f"({after / floor_s:.1f}x floor)"
        )
    print(
        f"refusals recorded (tokens revoked): {recorded} of 3, {recorded_s:.2f} s after the last 413 "
        "(the record follows the answer)"
    )
    print(
        f"peak with three oversized uploads at once: {peak:.0f} MB ({peak / floor_mb:.2f}x floor; "
        f"target < 300 MB); slowest 413: {max(a for _s, a in results):.2f} s after the cap (target < 1 s)"
    )
    return 0 if all(s == 413 for s, _a in results) and recorded == 3 else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""``crucible loop --dashboard HOST:PORT``: the run's pages served by the loop's own process, read-only,
behind the token of the link it prints; the running turn's step and samples as they arrive; and the
process still ends promptly on SIGTERM while a browser follows the run's event stream."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from controller.api.dashboard.session import COOKIE
from tests.api.gated_loop import SAMPLES, GatedLoop, start_gated_loop
from tests.e2e.conftest import run_cli_in_process

pytestmark = pytest.mark.slow
EXIT_S = 20  # SIGTERM and Ctrl-C end the process within this (docs/cli.md)


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[GatedLoop]:
    started = start_gated_loop(tmp_path)
    yield started
    started.stop()


def _base(link: str) -> str:
    parts = urlsplit(link)
    return f"{parts.scheme}://{parts.netloc}"


def test_the_printed_link_logs_in_read_only_and_the_page_shows_the_running_turn(loop: GatedLoop) -> None:
    link = loop.link()
    base = _base(link)
    loop.allow(SAMPLES + 1)  # the baseline, then the champion's first sample of turn 1
    loop.wait_for("turn 1's second sample to be taken", lambda: loop.taken() >= SAMPLES + 2)
    run_id = loop.run_id()
    with httpx.Client(base_url=base, timeout=30) as anonymous:
        assert anonymous.get(f"/runs/{run_id}").status_code == 303  # to /login: a session is needed
        assert anonymous.get("/login", params={"token": "wrong"}).status_code == 401
    with httpx.Client(timeout=30) as client:
        landed = client.get(link)
        assert landed.status_code == 303 and landed.headers["location"] == f"/runs/{run_id}"
        assert "httponly" in landed.headers["set-cookie"].lower() and client.cookies.get(COOKIE)
        # The running turn's progress reaches the record up to a second after it happened (ADR-0046).
        sampled = '<td class="values">10</td>'
        loop.wait_for(
            "the champion's sample on the page", lambda: sampled in client.get(f"{base}/runs/{run_id}").text
        )
        page = client.get(f"{base}/runs/{run_id}")
        assert page.status_code == 200
        html = page.text
        assert "Turn 1 (round 0) is running" in html
        assert '<strong id="turn-live-step">measuring champion vs candidate</strong>' in html
        assert '<tr data-arm="champion"><th>champion</th><td class="values">10</td>' in html
        assert "confirm/cancel" not in html  # read-only: no buttons
        assert client.get(f"{base}/runs/{run_id}/confirm/cancel").status_code == 404  # no such routes
        assert client.get(f"{base}/api/runs/{run_id}").status_code == 404  # only the pages are served
        assert client.get(f"{base}/").status_code == 200  # the runs list of this CRUCIBLE_HOME
    loop.allow(10**6)
    assert loop.proc.wait(timeout=120) == 0, loop.stderr()
    address = urlsplit(link)
    with pytest.raises(OSError):  # it stopped with the loop
        socket.create_connection((address.hostname or "", address.port or 0), timeout=5).close()


def test_the_turns_report_their_steps_and_every_sample(loop: GatedLoop) -> None:
    loop.link()
    loop.allow(10**6)
    assert loop.proc.wait(timeout=120) == 0, loop.stderr()
    run_id = loop.run_id()
    shown = _events(loop, run_id)
    steps = [(e["step"], tuple(e.get("arms", ()))) for e in shown if e["kind"] == "turn_step"]
    assert steps == [
        ("proposing", ()),
        ("measuring", ("champion", "candidate")),
        ("deciding", ()),
    ], steps
    samples = [(e["arm"], e["index"], e["value"], e["valid"]) for e in shown if e["kind"] == "sample"]
    assert sorted(samples) == sorted(
        [("champion", i, 10.0, True) for i in range(SAMPLES)]
        + [("candidate", i, 9.0, True) for i in range(SAMPLES)]
    )
    kinds = [e["kind"] for e in shown]
    assert kinds.index("turn_started") < kinds.index("turn_step") < kinds.index("accepted")


def _events(loop: GatedLoop, run_id: str) -> list[dict[str, Any]]:
    argv = [sys.executable, "-c", "from controller.cli.main import main; main()", "runs", "show", run_id]
    shown = subprocess.run([*argv, "--events"], capture_output=True, text=True, timeout=60, cwd=loop.gate)
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines() if line.strip()]


def test_sigterm_ends_the_loop_promptly_while_a_browser_follows_the_stream(loop: GatedLoop) -> None:
    link = loop.link()
    loop.allow(SAMPLES)  # the baseline; turn 1 then waits in its measurement, the run still going
    loop.wait_for("turn 1's first sample to be taken", lambda: loop.taken() >= SAMPLES + 1)
    run_id = loop.run_id()
    opened = threading.Event()
    received: list[str] = []

    def follow() -> None:
        with httpx.Client(timeout=60) as client:
            client.get(link)
            url = f"{_base(link)}/runs/{run_id}/live"
            try:
                with client.stream("GET", url) as stream:
                    opened.set()
                    received.extend(stream.iter_lines())
            except httpx.HTTPError:
                pass  # cut off by the server going away: what this test is about
            opened.set()

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    assert opened.wait(30)
    loop.proc.send_signal(signal.SIGTERM)
    code = loop.proc.wait(timeout=EXIT_S)
    assert code != 0 and "still running" in loop.stderr(), loop.stderr()
    follower.join(30)
    assert any(line == "event: turn_step" for line in received)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--dashboard", "nonsense"], "--dashboard wants HOST:PORT"),
        (["--dashboard", "127.0.0.1:99999"], "--dashboard wants HOST:PORT"),
        (["--dashboard", "127.0.0.1:0", "--server", "http://127.0.0.1:9"], "--dashboard is for local runs"),
    ],
)
def test_a_bad_dashboard_address_is_a_usage_error_before_anything_starts(
    tmp_path: Path, args: list[str], says: str
) -> None:
    """In this process, as the console script's ``main`` runs it: the gated loops above start the real
    ``crucible loop --dashboard`` as a process, and tests/e2e a ``loop`` usage error as one."""
    (tmp_path / "crucible.toml").write_text("objective = 'x'\n")
    done = run_cli_in_process(["loop", *args], cwd=tmp_path)
    assert done.code == 2 and says in done.stderr, done.stderr

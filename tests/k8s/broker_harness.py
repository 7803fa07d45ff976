"""The contract suite's stand-in controller for ``KubernetesBroker`` tests on the real control plane.

Every round is a real Job whose pod the process node runs: ``round_pod.py``, a stand-in for ``crucible
worker`` that reaches the small controller served here over HTTP with the token from the round's Secret.
That controller runs the suite's scripted runner for the token's round, so the tests' gates decide when a
round ends, and answers ``remote_outcome`` with what the runner returned, as the worker API does.
"""

from __future__ import annotations

import http.server
import json
import secrets
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from controller.brokers.base import RoundOutcome
from controller.brokers.kubernetes import manifest
from controller.brokers.kubernetes.broker import KubernetesBroker
from controller.config.broker import BrokerSpec
from controller.domain.errors import CrucibleError
from controller.domain.jobs import RoundJob
from tests.brokers.test_contract import Script
from tests.k8s.conftest import ControlPlane, wait_until
from tests.support.waiting import SHUTDOWN_POLL_S

POD_COMMAND = (sys.executable, str(Path(__file__).with_name("round_pod.py")))
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def loop_spec(namespace: str, deadline: int = 300) -> BrokerSpec:
    """The ``[broker]`` table of the tests' runs: small requests, the given namespace and deadline."""
    return BrokerSpec(
        kind="kubernetes",
        image="crucible:test",
        namespace=namespace,
        resources={"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}},
        deadline=deadline,
        ttl=600,
    )


class FakeController:
    """The controller's side of remote rounds, reduced to what the broker contract needs (see above)."""

    def __init__(self, script: Script, core: client.CoreV1Api, namespace: str) -> None:
        self.script = script
        self.core = core
        self.namespace = namespace
        self.tokens: dict[str, RoundJob] = {}
        # Per launch (run, round, attempt); ``remote_outcome`` answers for a round's latest attempt.
        self.outcomes: dict[tuple[str, int, int], RoundOutcome] = {}
        self.errors: dict[tuple[str, int, int], str] = {}
        self.done: dict[tuple[str, int, int], threading.Event] = {}
        self.cancel: dict[tuple[str, int, int], threading.Event] = {}
        self.lock = threading.Lock()
        self.deadline = 300
        self.minted: list[tuple[str, int]] = []
        self.revoked: list[tuple[str, int]] = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
        ).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def mint_worker_env(self, job: RoundJob) -> dict[str, str]:
        token = secrets.token_urlsafe(16)
        with self.lock:
            self.tokens[token] = job
            self.minted.append(job.key)
        return {
            "CRUCIBLE_CONTROLLER_URL": self.url,
            "CRUCIBLE_WORKER_TOKEN": token,
            "CRUCIBLE_RUN_ID": job.run_id,
            "CRUCIBLE_ROUND": str(job.round),
        }

    def revoke(self, run_id: str, round: int) -> None:
        with self.lock:
            self.revoked.append((run_id, round))
            for token, job in list(self.tokens.items()):
                if job.key == (run_id, round):
                    del self.tokens[token]

    def remote_outcome(self, run_id: str, round: int) -> RoundOutcome | None:
        with self.lock:
            attempts = [key for key in self.done if key[:2] == (run_id, round)]
            return self.outcomes.get(max(attempts)) if attempts else None

    def spec_for(self, run_id: str) -> BrokerSpec:
        return loop_spec(self.namespace, self.deadline)

    def start(self, job: RoundJob) -> None:
        key = job.launch_key
        with self.lock:
            if key in self.done:
                return
            self.done[key] = threading.Event()
            self.cancel.setdefault(key, threading.Event())
        # A worker runs only once its container runs: the runner starts after the pod is Running.
        threading.Thread(target=self._run, args=(job,), daemon=True).start()

    def _run(self, job: RoundJob) -> None:
        key = job.launch_key
        name = manifest.job_name(job.run_id, job.round, job.attempt)
        wait_until(lambda: self._pod_running(name), what=f"the pod of {name} to run")
        try:
            outcome = self.script(job, self.cancel[key])
            with self.lock:
                self.outcomes[key] = outcome
        except CrucibleError as exc:
            with self.lock:
                self.errors[key] = str(exc)
        finally:
            self.done[key].set()

    def _pod_running(self, job_name: str) -> bool:
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=f"job-name={job_name}").items
        return any(p.status is not None and p.status.phase == "Running" for p in pods)

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        controller = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _job(self) -> RoundJob | None:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                with controller.lock:
                    return controller.tokens.get(token)

            def _answer(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                job = self._job()
                if job is None:
                    self._answer(401, {"detail": "bad token"})
                elif self.path == "/start":
                    controller.start(job)
                    self._answer(200, None)
                elif self.path == "/cancel":
                    controller.cancel.setdefault(job.launch_key, threading.Event()).set()
                    self._answer(200, None)
                else:
                    self._answer(404, None)

            def do_GET(self) -> None:
                job = self._job()
                if job is None:
                    self._answer(401, {"detail": "bad token"})
                    return
                done = controller.done.get(job.launch_key)
                finished = done is not None and done.is_set()
                self._answer(200, {"done": finished, "error": controller.errors.get(job.launch_key)})

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def harness(
    control_plane: ControlPlane, namespace: Callable[..., str]
) -> Iterator[tuple[FakeController, Script]]:
    script = Script()
    ns = namespace(labels=RESTRICTED)
    controller = FakeController(script, client.CoreV1Api(control_plane.api), ns)
    yield controller, script
    for release in script.release.values():
        release.set()
    for cancel in controller.cancel.values():
        cancel.set()
    controller.close()


def make_broker(control_plane: ControlPlane, controller: FakeController) -> KubernetesBroker:
    return KubernetesBroker(
        control_plane.api,
        mint_worker_env=controller.mint_worker_env,
        remote_outcome=controller.remote_outcome,
        spec_for=controller.spec_for,
        revoke=controller.revoke,
        command=POD_COMMAND,
        poll_s=0.05,
    )

"""Per-round overhead of the Kubernetes broker against the local broker, measured in the same run.

Both brokers run the same trivial round (a runner that returns at once) ``--rounds`` times, one after
another. Through the local broker a round is a thread; through ``KubernetesBroker`` it is a real Job on
the control plane ``scripts/k8s/up`` starts: the Job and its token Secret are created, the process node
runs the pod's command (the contract suite's stand-in worker, which reaches a stand-in controller over
HTTP with the token from the Secret), the runner runs once the pod is Running, and the broker reads the
outcome back. Printed:

- the per-round wall time of each path, and their difference: the Kubernetes path's overhead
  (Job create -> pod running -> outcome back -> the broker reports it);
- the overhead of the last third of the rounds against the first third (it must not grow with the
  number of Jobs the namespace has seen);
- this process's CPU time per Kubernetes round (the broker, its pod watch and the stand-in controller).

    python bench/broker.py [--rounds 30]

Target (issue 9): overhead <= 2 s a round here, late/early <= ~1.2.
Not measured here: the real worker's own work (fetching bundles, running turns, sending its bundle back),
which depends on the project; see ADR-0015.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from controller.brokers.local import LocalBroker  # noqa: E402
from controller.domain.jobs import RoundJob, RoundState  # noqa: E402
from tests.brokers.test_contract import Script  # noqa: E402
from tests.k8s.broker_harness import FakeController, make_broker  # noqa: E402
from tests.k8s.conftest import ControlPlane, wait_until  # noqa: E402


def k8s_env() -> dict[str, str]:
    out = subprocess.run(["bash", str(ROOT / "scripts/k8s/env")], capture_output=True, text=True, check=True)
    values = {}
    for line in out.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        values[name] = shlex.split(value)[0] if value else ""
    return values


def job(round: int) -> RoundJob:
    return RoundJob(run_id="rbench", round=round, turns=1, first_turn=1, heads={"a": "0" * 40})


def timed_rounds(broker: object, rounds: int) -> list[float]:
    walls = []
    for n in range(rounds):
        start = time.perf_counter()
        broker.launch(job(n))  # type: ignore[attr-defined]
        report = broker.wait("rbench", n, 120)  # type: ignore[attr-defined]
        walls.append(time.perf_counter() - start)
        if report.state is not RoundState.SUCCEEDED:
            raise SystemExit(f"round {n} ended {report.state}: {report.error}")
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    env = k8s_env()
    kubeconfig = Path(env["CRUCIBLE_K8S_KUBECONFIG"])
    if not kubeconfig.exists():
        raise SystemExit("no control plane: start it with `bash scripts/k8s/up`")
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    plane = ControlPlane(kubeconfig, env["CRUCIBLE_K8S_KUBECTL"], api, env["CRUCIBLE_K8S_NODE"])
    core = client.CoreV1Api(api)
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels=labels)))
    try:
        wait_until(
            lambda: any(
                sa.metadata is not None and sa.metadata.name == "default"
                for sa in core.list_namespaced_service_account(ns).items
            ),
            what="the namespace's default ServiceAccount",
        )
        local_script = Script(blocking=False)
        local = timed_rounds(LocalBroker(local_script, inline=False), args.rounds)

        script = Script(blocking=False)
        controller = FakeController(script, core, ns)
        broker = make_broker(plane, controller)
        cpu = time.process_time()
        remote = timed_rounds(broker, args.rounds)
        cpu = time.process_time() - cpu
        broker.close()
        controller.close()
    finally:
        core.delete_namespace(ns, propagation_policy="Background")

    overhead = [r - statistics.median(local) for r in remote]
    third = max(1, args.rounds // 3)
    early, late = statistics.median(overhead[:third]), statistics.median(overhead[-third:])
    print(f"rounds: {args.rounds} through each broker")
    print(f"local broker:      median {statistics.median(local) * 1000:8.1f} ms a round")
    print(
        f"kubernetes broker: median {statistics.median(remote) * 1000:8.1f} ms a round "
        f"(max {max(remote):.2f} s)"
    )
    print(
        f"overhead of the kubernetes path: median {statistics.median(overhead):.2f} s a round (target <= 2 s)"
    )
    print(
        f"late/early overhead: {late / early:.2f} "
        f"(first {third} rounds {early:.2f} s, last {third} {late:.2f} s)"
    )
    print(f"controller CPU per kubernetes round: {cpu / args.rounds * 1000:.0f} ms")


if __name__ == "__main__":
    main()

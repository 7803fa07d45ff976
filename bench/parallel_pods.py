"""Wall time per kept improvement with a pod per hypothesis (N = 4) against N = 1, through the real
control plane, in the same run (issue 9, ADR-0018).

The workload is the noisefix-like mix of ADR-0010 and ADR-0016 made real: ``--knobs`` on/off knobs in
``conf.json``, a fifth of them (``--good``) a true 3% improvement each when switched on, the others
doing nothing; the metric multiplies them and adds 2% Gaussian noise. Its run time is dominated by
sleeping (``--sleep`` seconds a run), not CPU, so four pods measuring at once on this 2-core machine are
not CPU-bound (the caveat below). The knobs agent proposes (instantly; a real agent's proposal time
would run in parallel too, which this leaves out). Both arms run the same spec through the run service
and the Kubernetes path:

- N = 1: one Job for the round; its pod runs the turns one after another, the sequential rule on;
- N = 4: the controller drives the turns; four warm hypothesis pods (ADR-0031), started in the first
  turn, take each turn's four hypotheses (the fixed rule, Holm).

Each arm runs ``--hypotheses`` hypotheses in all (N = 1: that many turns; N = 4: a quarter as many
turns), ``--pairs`` times alternated. Printed: wall time, kept true improvements, kept do-nothing
changes per arm, and the ratio of wall time per kept improvement (N = 4 over N = 1; < 1 is faster).

    python bench/parallel_pods.py [--pairs 1] [--knobs 20] [--hypotheses 16] [--sleep 0.25]

Caveats: kept improvements are few per run, so the ratio is noisy (the simulated figure of ADR-0016,
0.56, comes from 10,000 turns); pods here are local processes on a loaded shared 2-core machine (each
pod's Python start-up and git work is CPU, so four at once compete), where a cluster would give each
pod its own cores.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from controller.api.app import create_app  # noqa: E402
from controller.api.auth import ApiTokens  # noqa: E402
from controller.brokers.kubernetes.broker import KubernetesBroker  # noqa: E402
from controller.brokers.kubernetes.hypotheses import HypothesisPods  # noqa: E402
from controller.brokers.local import LocalBroker  # noqa: E402
from controller.config.options import RunOptions  # noqa: E402
from controller.config.settings import Settings  # noqa: E402
from controller.config.spec import Spec, load_spec  # noqa: E402
from controller.domain.enums import Outcome, RunStatus  # noqa: E402
from controller.forge.base import Forge  # noqa: E402
from controller.localforge.server import serve_in_thread  # noqa: E402
from controller.services.control.recovery import stored_spec  # noqa: E402
from controller.services.control.service import RunService  # noqa: E402
from controller.services.remote.remote_rounds import RemoteRounds  # noqa: E402
from controller.services.views.schemas import RoundRequest  # noqa: E402
from controller.store import Store  # noqa: E402
from controller.wiring import compose_service  # noqa: E402

WORKER = (sys.executable, "-m", "controller.cli.main", "worker")
OPERATOR = "bench-operator-token-0123456789"

BENCH = """
import json, random, time
conf = json.load(open("conf.json"))
good = json.load(open("good.json"))
time.sleep({sleep})
value = 100.0
for key, on in conf.items():
    if on and key in good:
        value *= 0.97
print(f"METRIC m={{value * (1 + random.gauss(0, 0.02)):.6f}}")
"""

SPEC = """
objective = "bring m down"
turns = {turns}

[agent]
builtin = "knobs"
seed = {seed}
{knobs}
[sandbox]
mode = "none"

[metric]
command = "python3 bench.py"
name = "m"
direction = "minimize"
samples = 10
warmups = 0
confidence = 0.95

[[component]]
name = "app"
repo = "."
mutable = ["conf.json"]

[broker]
kind = "kubernetes"
parallel = {parallel}
image = "crucible:test"
namespace = "{namespace}"
resources = {{ requests = {{ cpu = "10m", memory = "64Mi" }}, limits = {{ memory = "1Gi" }} }}
deadline = "30m"
"""


@dataclass
class Arm:
    parallel: int
    wall_s: float
    kept_true: int
    kept_null: int
    turns: int
    turn_s: float = 0.0  # the turns' own wall time, started to decided
    slowest_s: float = 0.0  # of which the slowest hypothesis of each turn, as its pod timed it


def k8s_env() -> dict[str, str]:
    out = subprocess.run(["bash", str(ROOT / "scripts/k8s/env")], capture_output=True, text=True, check=True)
    values = {}
    for line in out.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        values[name] = shlex.split(value)[0] if value else ""
    return values


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def make_repo(where: Path, knobs: int, good: list[str], sleep: float) -> Path:
    where.mkdir(parents=True)
    git(where, "init", "-q", "-b", "main")
    git(where, "config", "user.email", "bench@example.com")
    git(where, "config", "user.name", "Bench")
    (where / "conf.json").write_text(json.dumps({f"k{i}": 0 for i in range(knobs)}))
    (where / "good.json").write_text(json.dumps(good))
    (where / "bench.py").write_text(BENCH.format(sleep=sleep))
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", "initial")
    return where


def write_spec(
    repo: Path, parallel: int, turns: int, knobs: int, seed: int, namespace: str, pair: int
) -> Path:
    table = "".join(
        f'[[agent.knob]]\nfile = "conf.json"\nkey = "k{i}"\nvalues = [0, 1]\n' for i in range(knobs)
    )
    path = repo / f"crucible-{parallel}-{pair}.toml"
    path.write_text(SPEC.format(turns=turns, seed=seed, knobs=table, parallel=parallel, namespace=namespace))
    git(repo, "add", path.name)
    git(repo, "commit", "-q", "-m", f"spec for parallel = {parallel}, pair {pair}")
    return path


def run_arm(service: RunService, store: Store, spec_path: Path, good: list[str]) -> Arm:
    spec = load_spec(spec_path)
    run_id = service.create(spec, spec_path.read_text(), spec_path, RunOptions())
    start = time.perf_counter()
    result = service.drive(run_id)
    wall = time.perf_counter() - start
    if result.status is not RunStatus.COMPLETED:
        raise SystemExit(f"run {run_id} ended {result.status}: {result.message}")
    kept_true = kept_null = 0
    turns = store.list_turns(run_id)
    turn_s = slowest_s = 0.0
    for turn in turns:
        if turn.outcome is Outcome.ACCEPTED:
            key = (turn.hypothesis or "").split(" ")[1]
            if key in good:
                kept_true += 1
            else:
                kept_null += 1
        if turn.decided_at is not None:
            turn_s += (turn.decided_at - turn.started_at).total_seconds()
        slowest_s += max(
            (h.duration_s or 0.0 for h in store.list_hypotheses(run_id, turn.number)), default=0.0
        )
    return Arm(spec.broker.parallel, wall, kept_true, kept_null, len(turns), turn_s, slowest_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--knobs", type=int, default=20)
    parser.add_argument("--good", type=float, default=0.2, help="the share of knobs that improve")
    parser.add_argument("--hypotheses", type=int, default=16, help="per arm (a multiple of 4)")
    parser.add_argument("--sleep", type=float, default=0.25, help="seconds of each metric run")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    env = k8s_env()
    kubeconfig = Path(env["CRUCIBLE_K8S_KUBECONFIG"])
    if not kubeconfig.exists():
        raise SystemExit("no control plane: start it with `bash scripts/k8s/up`")
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels=labels)))
    arms: list[Arm] = []
    try:
        with tempfile.TemporaryDirectory(prefix="parallel-pods-") as tmp:
            arms = measure(Path(tmp), api, ns, args)
    finally:
        core.delete_namespace(ns, propagation_policy="Background")
        api.close()
    report(arms, args)


def measure(tmp: Path, api: Any, ns: str, args: argparse.Namespace) -> list[Arm]:
    # Its own stream: a Random(seed) shared with the knobs walk's shuffle would line the good knobs up
    # with the end of the walk.
    rng = random.Random(f"good knobs {args.seed}")
    good = sorted(rng.sample([f"k{i}" for i in range(args.knobs)], max(1, round(args.knobs * args.good))))
    repo = make_repo(tmp / "app", args.knobs, good, args.sleep)
    url_db = f"sqlite:///{tmp / 'crucible.db'}"
    arms: list[Arm] = []
    with Store.open(url_db, upgrade=True) as store:
        settings = Settings(home=tmp / "home", database_url=url_db)
        remote = RemoteRounds(settings, store, controller_url="http://unused")
        app = create_app(settings, store, ApiTokens(OPERATOR), _Control(), remote=remote)
        with serve_in_thread(app) as url:
            remote.controller_url = url
            spec_for = lambda run_id: stored_spec(store, run_id).broker  # noqa: E731
            rounds = KubernetesBroker(
                api,
                mint_worker_env=remote.mint_worker_env,
                remote_outcome=remote.remote_outcome,
                revoke=remote.revoke,
                spec_for=spec_for,
                command=WORKER,
            )
            pods = HypothesisPods(
                api,
                mint_slot_env=remote.mint_slot_env,
                slots=remote.slots,
                spec_for=spec_for,
                command=WORKER,
            )
            one = compose_service(settings, store, environ={}, forge_for=_no_forge, broker=lambda _r: rounds)
            four = compose_service(
                settings,
                store,
                environ={},
                forge_for=_no_forge,
                broker=lambda runner: LocalBroker(runner, inline=True),
                hypotheses=lambda _run: pods,
            )
            for pair in range(args.pairs):
                seed = args.seed + pair  # each pair walks the knobs in another order, both arms alike
                turns = {1: args.hypotheses, 4: max(1, args.hypotheses // 4)}
                specs = {n: write_spec(repo, n, turns[n], args.knobs, seed, ns, pair) for n in (1, 4)}
                order = [(1, one), (4, four)] if pair % 2 == 0 else [(4, four), (1, one)]
                for parallel, service in order:
                    arm = run_arm(service, store, specs[parallel], good)
                    arms.append(arm)
                    print(
                        f"pair {pair + 1}, N = {parallel}: {arm.wall_s:6.1f} s, {arm.turns} turns, kept "
                        f"{arm.kept_true} true improvement(s), {arm.kept_null} do-nothing change(s)",
                        flush=True,
                    )
            rounds.close()
            pods.close()
    return arms


def report(arms: list[Arm], args: argparse.Namespace) -> None:
    per: dict[int, tuple[float, int, int]] = {}
    for parallel in (1, 4):
        mine = [a for a in arms if a.parallel == parallel]
        per[parallel] = (
            sum(a.wall_s for a in mine),
            sum(a.kept_true for a in mine),
            sum(a.kept_null for a in mine),
        )
    print(
        f"{args.knobs} knobs, {args.good:.0%} of them a 3% improvement, 2% noise, samples 10, "
        f"metric {args.sleep} s a run; {args.hypotheses} hypotheses per arm, {args.pairs} pair(s)"
    )
    for parallel, (wall, kept, null) in per.items():
        rate = f"{wall / kept:.1f} s per kept improvement" if kept else "no improvement kept"
        print(f"N = {parallel}: {wall:.1f} s in all, {kept} kept, {null} do-nothing kept: {rate}")
    (w1, k1, _), (w4, k4, _) = per[1], per[4]
    if k1 and k4:
        print(f"wall time per kept improvement, N = 4 / N = 1: ratio {(w4 / k4) / (w1 / k1):.2f}")
    else:
        print("ratio: undefined (an arm kept no improvement; raise --pairs or --hypotheses)")
    print(f"plain wall time, N = 4 / N = 1 (4x the hypotheses per turn): {w4 / w1:.2f}")
    fours = [a for a in arms if a.parallel == 4]
    turns = sum(a.turns for a in fours)
    if turns:
        sleeping = 2 * 10 * args.sleep
        turn_s, slowest = sum(a.turn_s for a in fours) / turns, sum(a.slowest_s for a in fours) / turns
        print(
            f"N = 4: {w4 / turns:.1f} s a turn (baseline included); a turn from start to decision "
            f"{turn_s:.1f} s, of which the slowest hypothesis in its pod {slowest:.1f} s (its metric "
            f"sleeping {sleeping:.1f} s of it, 10 pairs); the rest is handing out, fetching and deciding"
        )


def _no_forge(spec: Spec) -> Forge:
    raise AssertionError("these runs do not publish")


class _Control:
    def cancel(self, run_id: str) -> str:
        return "cancelling"

    def resume(self, run_id: str) -> str:
        return "resuming"

    def steer(self, run_id: str, text: str, component: str | None = None) -> RoundRequest:
        raise NotImplementedError("the benchmark steers no run")

    def wake(self) -> None:
        return None


if __name__ == "__main__":
    main()

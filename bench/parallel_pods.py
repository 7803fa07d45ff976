"""Wall time per kept improvement with a pod per hypothesis (N = 4) against N = 1, through the real
control plane, in the same run (issue 9, ADR-0018, ADR-0034).

The workload is the noisefix-like mix of ADR-0010 and ADR-0016 made real: ``--knobs`` on/off knobs in
``conf.json``, a fifth of them (``--good``) a true 3% improvement each when switched on, the others
doing nothing; the metric multiplies them and adds 2% Gaussian noise. The knobs agent proposes
(instantly; a real agent's proposal time would run in parallel too, which this leaves out). Both arms
run the same spec through the run service and the Kubernetes path:

- N = 1: one Job for the round; its pod runs the turns one after another, the sequential rule on;
- N = 4: the controller drives the turns; four warm hypothesis pods (ADR-0034), started in the first
  turn, take each turn's four hypotheses (sequential looks per hypothesis, Holm across the four).

What it measures depends on the metric (``--metric``), and the report says which:

- ``sleep`` (the default): each run sleeps ``--sleep`` seconds and computes the value with ``awk``,
  a few milliseconds of CPU, as a benchmark waiting on I/O, a GPU or a remote service does. Four pods
  then wait side by side whatever the cores: the ratio is **crucible's parallelism**, what four pods
  on a cluster with a core each would show, less this machine's contention for crucible's own work.
- ``python``: each run is a Python start (tens of milliseconds of CPU) before the same sleep. On this
  2-core machine shared with other work, four pods' metric runs compete for the cores that N = 1's
  one pod has to itself: the ratio is then **this machine's**, bounded by its cores, not crucible's.

Each arm runs ``--hypotheses`` hypotheses in all (N = 1: that many turns; N = 4: a quarter as many
turns), ``--pairs`` times alternated. Printed: wall time, kept true improvements, kept do-nothing
changes per arm, the ratio of wall time per kept improvement (N = 4 over N = 1; < 1 is faster), and
where an N = 4 turn's time went: the controller between turns, launching, handing the hypotheses out,
the slowest hypothesis's parts in its pod (from the pod's log: waiting, fetching the job and the
champion, setting up the arms, the commands, crucible's own work around them, reporting) and the
decision, beside the metric's own sleep, which no implementation can cut.

    python bench/parallel_pods.py [--pairs 1] [--knobs 20] [--hypotheses 16] [--sleep 0.25] [--metric sleep]
        [--profile DIR]   # each pod's worker under cProfile, a file per process

Caveats: kept improvements are few per run, so the ratio is noisy (the simulated figure of ADR-0016,
0.56, comes from 10,000 turns): raise ``--knobs`` and ``--hypotheses`` (with ``--good``) for more keeps
per arm; ADR-0040's figure is ``--pairs 3 --knobs 40 --good 0.25 --hypotheses 40`` (10-11 keeps an
arm, about 13 minutes). Pods here are local processes on a loaded shared 2-core machine (each pod's
Python start-up and git work is CPU, so four at once compete), where a cluster would give each pod its
own cores. The sleep-only ratio is the floor for this workload: a turn of four waits for the slowest
of four sequential measurements and keeps one at most (ADR-0040 measured 0.47; simulated with the
loop's own decisions, ``python bench/decisions.py --pods-walk 1000``, it is 0.40 for the configuration
above with an sd of 0.044 between runs, ADR-0047).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from controller.api.app import create_app  # noqa: E402
from controller.api.auth import ApiTokens  # noqa: E402
from controller.brokers.kubernetes import manifest  # noqa: E402
from controller.brokers.kubernetes.broker import KubernetesBroker  # noqa: E402
from controller.brokers.kubernetes.hypotheses import HypothesisPods  # noqa: E402
from controller.brokers.local import LocalBroker  # noqa: E402
from controller.config.options import RunOptions  # noqa: E402
from controller.config.settings import Settings  # noqa: E402
from controller.config.spec import Spec, load_spec  # noqa: E402
from controller.domain.enums import Outcome, RunStatus  # noqa: E402
from controller.forge.base import Forge  # noqa: E402
from controller.localforge.server import serve_in_thread  # noqa: E402
from controller.services.control.service import RunService  # noqa: E402
from controller.services.remote.remote_rounds import RemoteRounds  # noqa: E402
from controller.services.views.schemas import RoundRequest  # noqa: E402
from controller.services.views.specs import stored_spec  # noqa: E402
from controller.store import Store  # noqa: E402
from controller.wiring import compose_service  # noqa: E402

WORKER = (sys.executable, "-m", "controller.cli.main", "worker")
# ``--profile DIR``: each pod's worker under cProfile, one file per process (``pstats`` reads them).
PROFILED = (
    "import cProfile, os, runpy, sys; out = os.path.join(sys.argv[1], f'pod-{os.getpid()}.prof'); "
    "sys.argv = ['crucible', 'worker']; "
    "cProfile.run(\"runpy.run_module('controller.cli.main', run_name='__main__')\", out)"
)
OPERATOR = "bench-operator-token-0123456789"

# The CPU-bound metric: a Python start per run (about 30 ms of CPU here, more under load).
PYTHON_BENCH = """
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

# The CPU-light metric: the same value from sh, sleep, od and awk (a few ms of CPU). mawk seeds its
# generator with a constant unless told, so the seed comes from /dev/urandom.
SLEEP_BENCH = """sleep {sleep}
exec awk -v seed="$(od -An -N4 -tu4 /dev/urandom)" -v good="{good}" '
BEGIN {{
  srand(seed + 0); n = split(good, names, " "); for (i = 1; i <= n; i++) isgood["\\"" names[i] "\\""] = 1
  while ((getline line < "conf.json") > 0) text = text line
  value = 100.0
  while (match(text, /"k[0-9]+"[ \\t]*:[ \\t]*[0-9]+/)) {{
    pair = substr(text, RSTART, RLENGTH); text = substr(text, RSTART + RLENGTH)
    split(pair, kv, ":"); key = kv[1]; gsub(/[ \\t]/, "", key)
    if (kv[2] + 0 && (key in isgood)) value *= 0.97
  }}
  u = rand(); if (u < 1e-12) u = 1e-12
  z = sqrt(-2 * log(u)) * cos(6.283185307179586 * rand())
  printf "METRIC m=%.6f\\n", value * (1 + 0.02 * z)
}}'
"""

METRICS = {
    "sleep": ("sh bench.sh", "bench.sh", SLEEP_BENCH),
    "python": ("python3 bench.py", "bench.py", PYTHON_BENCH),
}
MEASURES = {
    "sleep": "crucible's parallelism (a CPU-light metric that sleeps, as one waiting on I/O or a GPU)",
    "python": "this machine's (each metric run a Python start: four pods' runs compete for its cores)",
}

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
command = "{command}"
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


PARTS = ("job", "fetch", "context", "tried", "commands", "report", "finish")  # a warm pod's log line


@dataclass
class Turn:
    """Where one turn's wall time went (seconds). An N = 4 turn waits for its slowest hypothesis, so
    its parts are that hypothesis's: offered, taken by its pod, run there (the pod's own log line:
    ``PARTS``), reported, then the decision."""

    number: int
    wall: float  # started -> decided
    between: float  # the previous decision (or the run's baseline) -> started
    samples: int  # measured, both arms (N = 4: of the slowest hypothesis)
    launch: float = 0.0  # started -> the slowest hypothesis offered (N = 4)
    hand_out: float = 0.0  # offered -> its pod took it
    in_pod: float = 0.0  # taken -> reported
    decide: float = 0.0  # its report -> the turn's decision
    pod: Mapping[str, float] = field(default_factory=dict)
    kept: bool = False
    by_index: Mapping[int, int] = field(default_factory=dict)  # N = 4: each hypothesis's samples
    after_keep: bool = False  # the turn before kept: what was taken ahead of this one was void
    held: float | None = None  # N = 4: started -> the first report of a hypothesis taken ahead of it
    taken: float | None = None  # N = 4: started -> the last of its hypotheses taken by its pod


@dataclass
class Arm:
    parallel: int
    wall_s: float
    kept_true: int
    kept_null: int
    turns: int
    tried_null: int = 0  # do-nothing hypotheses tried: the false-keep rate's denominator
    breakdown: list[Turn] = field(default_factory=list)
    ahead: int = 0  # N = 4, speculative turns (ADR-0051): recorded hypotheses taken before their turn began
    voided: int = 0  # hypotheses taken ahead and withdrawn (the turn before kept, or the run stopped)


def k8s_env() -> dict[str, str]:
    out = subprocess.run(["bash", str(ROOT / "scripts/k8s/env")], capture_output=True, text=True, check=True)
    values = {}
    for line in out.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        values[name] = shlex.split(value)[0] if value else ""
    return values


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def make_repo(where: Path, knobs: int, good: list[str], sleep: float, metric: str = "sleep") -> Path:
    where.mkdir(parents=True)
    git(where, "init", "-q", "-b", "main")
    git(where, "config", "user.email", "bench@example.com")
    git(where, "config", "user.name", "Bench")
    (where / "conf.json").write_text(json.dumps({f"k{i}": 0 for i in range(knobs)}))
    (where / "good.json").write_text(json.dumps(good))
    _command, name, script = METRICS[metric]
    (where / name).write_text(script.format(sleep=sleep, good=" ".join(good)))
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", "initial")
    return where


def write_spec(
    repo: Path,
    parallel: int,
    turns: int,
    knobs: int,
    seed: int,
    namespace: str,
    pair: int,
    metric: str = "sleep",
) -> Path:
    table = "".join(
        f'[[agent.knob]]\nfile = "conf.json"\nkey = "k{i}"\nvalues = [0, 1]\n' for i in range(knobs)
    )
    path = repo / f"crucible-{parallel}-{pair}.toml"
    command = METRICS[metric][0]
    text = SPEC.format(
        turns=turns, seed=seed, knobs=table, parallel=parallel, namespace=namespace, command=command
    )
    path.write_text(text)
    git(repo, "add", path.name)
    git(repo, "commit", "-q", "-m", f"spec for parallel = {parallel}, pair {pair}")
    return path


def is_true(hypothesis: str | None, good: list[str]) -> bool:
    """``set k3 in conf.json: 0 -> 1``: a good knob switched on is a true improvement."""
    words = (hypothesis or "").split(" ")
    return len(words) > 1 and words[1] in good and words[-1] == "1"


def run_arm(
    service: RunService,
    store: Store,
    spec_path: Path,
    good: list[str],
    db: Path,
    pod_logs: Callable[[str], dict[tuple[int, int], dict[str, float]]] | None = None,
) -> Arm:
    spec = load_spec(spec_path)
    run_id = service.create(spec, spec_path.read_text(), spec_path, RunOptions())
    start = time.perf_counter()
    result = service.drive(run_id)
    wall = time.perf_counter() - start
    if result.status is not RunStatus.COMPLETED:
        raise SystemExit(f"run {run_id} ended {result.status}: {result.message}")
    kept_true = kept_null = tried_null = 0
    turns = store.list_turns(run_id)
    for turn in turns:
        if turn.outcome is Outcome.ACCEPTED:
            if is_true(turn.hypothesis, good):
                kept_true += 1
            else:
                kept_null += 1
    if spec.broker.parallel == 1:
        tried_null = sum(not is_true(t.hypothesis, good) for t in turns if t.number > 0)
    else:
        tried_null = sum(not is_true(h.hypothesis, good) for h in store.list_hypotheses(run_id))
    logs = pod_logs(run_id) if pod_logs is not None and spec.broker.parallel > 1 else {}
    breakdown = timeline(store, db, run_id, logs)
    arm = Arm(spec.broker.parallel, wall, kept_true, kept_null, len(turns), tried_null, breakdown)
    if spec.broker.parallel > 1:
        arm.ahead, arm.voided = speculation(store, db, run_id)
    return arm


def speculation(store: Store, db_path: Path, run_id: str) -> tuple[int, int]:
    """(recorded hypotheses whose pod took them before their turn started, grants withdrawn): what
    speculative turns (ADR-0051) ran ahead and kept, and what they ran ahead for nothing."""
    db = sqlite3.connect(db_path)
    try:
        taken: dict[tuple[int, int], float] = {}
        voided = 0
        for job, created, outcome in db.execute(
            "SELECT job, created_at, outcome FROM worker_rounds WHERE run_id = ? ORDER BY id", (run_id,)
        ):
            scope = json.loads(job).get("hypothesis")
            if scope is None:
                continue
            taken[(scope["turn"], scope["index"])] = _at(created)  # the last grant: the one that reported
            if outcome is not None and "withdrawn" in (json.loads(outcome) or {}):
                voided += 1
    finally:
        db.close()
    started = {t.number: _at(t.started_at) for t in store.list_turns(run_id)}
    recorded = [(h.turn, h.index) for h in store.list_hypotheses(run_id)]
    ahead = sum(1 for key in recorded if key in taken and taken[key] < started[key[0]])
    return ahead, voided


def _at(value: datetime | str) -> float:
    """A stored time as seconds (SQLite's text is UTC without its zone; the records' are aware)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value + "+00:00" if "+" not in value else value)
    return value.timestamp()


def timeline(
    store: Store, db_path: Path, run_id: str, logs: Mapping[tuple[int, int], Mapping[str, float]]
) -> list[Turn]:
    """Each decided turn's parts, from the controller's record: the turns' start and decision, and for
    N > 1 each hypothesis's offer and take (its two grants, ``worker_rounds``) and report time."""
    db = sqlite3.connect(db_path)
    try:
        reported = {
            (t, i): _at(at)
            for t, i, at in db.execute(
                "SELECT turn, idx, reported_at FROM hypotheses WHERE run_id = ?", (run_id,)
            )
        }
        grants: dict[tuple[int, int], list[float]] = {}
        for job, created in db.execute(
            "SELECT job, created_at FROM worker_rounds WHERE run_id = ? ORDER BY id", (run_id,)
        ):
            scope = json.loads(job).get("hypothesis")
            if scope is not None:
                grants.setdefault((scope["turn"], scope["index"]), []).append(_at(created))
        started_run = db.execute("SELECT created_at FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    finally:
        db.close()
    hypotheses: dict[int, dict[int, int]] = {}
    for h in store.list_hypotheses(run_id):
        hypotheses.setdefault(h.turn, {})[h.index] = len(h.samples)
    samples: dict[int, int] = {}
    for sample in store.list_samples(run_id):
        samples[sample.turn] = samples.get(sample.turn, 0) + 1
    out: list[Turn] = []
    previous = _at(started_run)
    kept_before = False
    for turn in store.list_turns(run_id):
        if turn.number == 0 or turn.decided_at is None:
            continue
        started, decided = _at(turn.started_at), _at(turn.decided_at)
        row = Turn(turn.number, decided - started, started - previous, samples.get(turn.number, 0))
        row.kept = turn.outcome is Outcome.ACCEPTED
        row.after_keep, kept_before = kept_before, row.kept
        row.by_index = dict(hypotheses.get(turn.number, {}))
        previous = decided
        mine = {i: at for (t, i), at in reported.items() if t == turn.number}
        ahead = [i for i in mine if grants.get((turn.number, i), [started])[-1] < started]
        held = [mine[i] - started for i in ahead]
        row.held = min(held) if held else None
        takes = [grants[(turn.number, i)][-1] - started for i in mine if (turn.number, i) in grants]
        row.taken = max(takes) if takes else None
        if mine:
            slowest = max(mine, key=lambda i: mine[i])
            offered = grants.get((turn.number, slowest), [])
            row.samples = hypotheses.get(turn.number, {}).get(slowest, 0)
            row.decide = decided - mine[slowest]
            if len(offered) >= 2:  # the last offer, then the pod's take (a void or restart adds more)
                row.launch = offered[-2] - started  # < 0: taken ahead of its turn (ADR-0051)
                row.hand_out = offered[-1] - offered[-2]
                row.in_pod = mine[slowest] - offered[-1]
            row.pod = dict(logs.get((turn.number, slowest), {}))
        out.append(row)
    return out


_LOG_LINE = re.compile(r"^slot (\d+) turn (\d+): (.*)$")


def parse_pod_log(text: str) -> dict[tuple[int, int], dict[str, float]]:
    """(turn, index) -> the parts a warm pod logged for that hypothesis (``worker.run_slot``)."""
    out: dict[tuple[int, int], dict[str, float]] = {}
    for line in text.splitlines():
        found = _LOG_LINE.match(line.strip())
        if found is None:
            continue
        parts = dict(part.split("=", 1) for part in found.group(3).split())
        out[(int(found.group(2)), int(found.group(1)))] = {k: float(v) for k, v in parts.items()}
    return out


def read_pod_logs(core: Any, namespace: str, run_id: str) -> dict[tuple[int, int], dict[str, float]]:
    """The hypothesis pods' log lines of run ``run_id``, once every pod exited (a pod writes a
    hypothesis's line after its report; it exits at its next look once the run completed)."""
    selector = f"{manifest.LABEL_RUN}={manifest.run_label(run_id)},{manifest.LABEL_TURN}"
    deadline = time.monotonic() + 60
    while True:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        done = all(p.status.phase in ("Succeeded", "Failed") for p in pods)
        if done or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    out: dict[tuple[int, int], dict[str, float]] = {}
    for pod in pods:
        out.update(parse_pod_log(core.read_namespaced_pod_log(pod.metadata.name, namespace)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--knobs", type=int, default=20)
    parser.add_argument("--good", type=float, default=0.2, help="the share of knobs that improve")
    parser.add_argument("--hypotheses", type=int, default=16, help="per arm (a multiple of 4)")
    parser.add_argument("--sleep", type=float, default=0.25, help="seconds of each metric run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--metric", choices=sorted(METRICS), default="sleep", help="see the docstring")
    parser.add_argument("--profile", type=Path, default=None, help="a cProfile file per pod in this folder")
    parser.add_argument(
        "--speculate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="N = 4: free pods start the next turn's hypotheses before a turn is decided (ADR-0051)",
    )
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.1f}", flush=True)
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
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def measure(tmp: Path, api: Any, ns: str, args: argparse.Namespace) -> list[Arm]:
    # Its own stream: a Random(seed) shared with the knobs walk's shuffle would line the good knobs up
    # with the end of the walk.
    rng = random.Random(f"good knobs {args.seed}")
    good = sorted(rng.sample([f"k{i}" for i in range(args.knobs)], max(1, round(args.knobs * args.good))))
    repo = make_repo(tmp / "app", args.knobs, good, args.sleep, args.metric)
    db = tmp / "crucible.db"
    url_db = f"sqlite:///{db}"
    core = client.CoreV1Api(api)
    worker = WORKER
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        worker = (sys.executable, "-c", PROFILED, str(args.profile.resolve()))
    logs = lambda run_id: read_pod_logs(core, ns, run_id)  # noqa: E731
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
                command=worker,
            )
            pods = HypothesisPods(
                api,
                mint_slot_env=remote.mint_slot_env,
                slots=remote.slots,
                spec_for=spec_for,
                command=worker,
                speculative=args.speculate,
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
                specs = {
                    n: write_spec(repo, n, turns[n], args.knobs, seed, ns, pair, args.metric) for n in (1, 4)
                }
                order = [(1, one), (4, four)] if pair % 2 == 0 else [(4, four), (1, one)]
                for parallel, service in order:
                    arm = run_arm(service, store, specs[parallel], good, db, logs)
                    arms.append(arm)
                    print(
                        f"pair {pair + 1}, N = {parallel}: {arm.wall_s:6.1f} s, {arm.turns} turns, kept "
                        f"{arm.kept_true} true improvement(s), {arm.kept_null} do-nothing change(s); "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
            rounds.close()
            pods.close()
    return arms


def report(arms: list[Arm], args: argparse.Namespace) -> None:
    per: dict[int, tuple[float, int, int, int]] = {}
    for parallel in (1, 4):
        mine = [a for a in arms if a.parallel == parallel]
        per[parallel] = (
            sum(a.wall_s for a in mine),
            sum(a.kept_true for a in mine),
            sum(a.kept_null for a in mine),
            sum(a.tried_null for a in mine),
        )
    metric = getattr(args, "metric", "sleep")
    print(f"metric: {metric}; this measures {MEASURES[metric]}")
    print(
        f"{args.knobs} knobs, {args.good:.0%} of them a 3% improvement, 2% noise, samples 10, "
        f"metric {args.sleep} s a run; {args.hypotheses} hypotheses per arm, {args.pairs} pair(s)"
    )
    for parallel, (wall, kept, null, tried) in per.items():
        rate = f"{wall / kept:.1f} s per kept improvement" if kept else "no improvement kept"
        false = f" ({null / tried:.1%} of {tried} tried)" if tried else ""
        print(f"N = {parallel}: {wall:.1f} s in all, {kept} kept, {null} do-nothing kept{false}: {rate}")
    (w1, k1, _, _), (w4, k4, _, _) = per[1], per[4]
    if k1 and k4:
        print(f"wall time per kept improvement, N = 4 / N = 1: ratio {(w4 / k4) / (w1 / k1):.2f}")
    else:
        print("ratio: undefined (an arm kept no improvement; raise --pairs or --hypotheses)")
    print(f"plain wall time, N = 4 / N = 1 (4x the hypotheses per turn): {w4 / w1:.2f}")
    fours = [a for a in arms if a.parallel == 4]
    turns = sum(a.turns for a in fours)
    if turns:
        print(f"N = 4: {w4 / turns:.1f} s a turn (baseline included)")
    ahead, voided = sum(a.ahead for a in fours), sum(a.voided for a in fours)
    recorded = 4 * turns
    print(
        f"speculative turns {'on' if getattr(args, 'speculate', True) else 'off'}: {ahead} recorded "
        f"hypotheses were taken before their turn began (of about {recorded}), {voided} taken ahead were void"
    )
    breakdown(arms, args.sleep)


def speculative_floor(turns: list[Turn], sleep: float, ahead: bool = True) -> float:
    """The metric's sleep alone for these turns' decisions with speculative turns (ADR-0051): slot ``i``
    starts hypothesis ``i`` of turn k when its hypothesis of turn k - 1 ended, once turn k - 2 is
    decided (one turn ahead); after a keep in turn k - 1 its hypotheses of turn k start again at that
    decision (the void work cancelled at once); a turn is decided when all of its hypotheses ended,
    not before the turn before. Time in seconds of sleep. ``ahead=False``: every hypothesis of turn k
    starts at turn k - 1's decision (no speculation), the same schedule otherwise."""
    free: dict[int, float] = {}
    decided = [0.0, 0.0]  # the decisions of turns k - 2 and k - 1
    kept_before = False
    for turn in sorted(turns, key=lambda t: t.number):
        ends = []
        for index, samples in turn.by_index.items():
            start = max(free.get(index, 0.0), decided[-1] if kept_before or not ahead else decided[-2])
            free[index] = start + samples * sleep
            ends.append(free[index])
        decided = [decided[-1], max([decided[-1], *ends])]
        kept_before = turn.kept
    return decided[-1]


def breakdown(arms: list[Arm], sleep: float) -> None:
    """Where a turn's time went, per arm (means over turns, so the parts add up to the turn), and the
    ratio the metric's sleep alone would give: what is left when crucible costs nothing."""
    floors: dict[int, float] = {}
    for parallel in (1, 4):
        mine = [a for a in arms if a.parallel == parallel]
        turns = [t for a in mine for t in a.breakdown]
        kept = sum(a.kept_true for a in mine)
        floors[parallel] = sum(t.samples for t in turns) * sleep / kept if kept else 0.0
        if parallel == 4:  # the first turn starts the pods: shown apart
            first = [t for t in turns if t.number == 1]
            turns = [t for t in turns if t.number > 1]
        if not turns:
            continue

        def mean(values: list[float]) -> float:
            return statistics.fmean(values) if values else 0.0

        wall, samples = mean([t.wall for t in turns]), mean([t.samples for t in turns])
        between = mean([t.between for t in turns])
        head = (
            f"N = {parallel}, {len(turns)} turns: a turn {wall:.2f} s from start to decision, "
            f"{between:.2f} s between turns; {samples:.1f} samples ({samples * sleep:.2f} s of sleep)"
        )
        if parallel == 1:
            print(head)
            continue
        print(head.replace("samples", "samples of the slowest hypothesis", 1))
        print(
            f"  along the slowest hypothesis: launch {mean([t.launch for t in turns]):.2f}, hand out "
            f"{mean([t.hand_out for t in turns]):.2f}, in its pod {mean([t.in_pod for t in turns]):.2f}, "
            f"its report to the decision {mean([t.decide for t in turns]):.2f}"
        )
        for label, which in (("", turns), (", after a keep", [t for t in turns if t.after_keep])):
            logged = [t.pod for t in which if t.pod]
            if logged:
                parts = ", ".join(f"{name} {mean([p.get(name, 0.0) for p in logged]):.2f}" for name in PARTS)
                print(f"  in its pod ({len(logged)} logged{label}): {parts}")
        after = [t.wall for t in turns if t.after_keep]
        held = [t.held for t in turns if not t.after_keep and t.held is not None]
        taken = [t.taken for t in turns if t.after_keep and t.taken is not None]
        print(
            f"  after a keep ({len(after)} turns): a turn {mean(after):.2f} s, its last hypothesis taken "
            f"{mean(taken):.2f} s after its start (the void ones stopped first); after none "
            f"({len(turns) - len(after)}): {mean([t.wall for t in turns if not t.after_keep]):.2f} s, "
            f"its first report of a hypothesis taken ahead {mean(held):.2f} s after its start"
        )
        if first:
            print(
                f"  first turns (pods starting): {mean([t.wall for t in first]):.2f} s, of which hand out "
                f"{mean([t.hand_out for t in first]):.2f}"
            )
    if floors[1] and floors[4]:
        print(
            f"with nothing but the metric's sleep (no crucible cost, perfect parallelism, a turn waiting "
            f"for its slowest hypothesis, no speculation): ratio {floors[4] / floors[1]:.2f}"
        )
        fours = [a for a in arms if a.parallel == 4]
        kept4 = sum(a.kept_true for a in fours)
        without = sum(speculative_floor(a.breakdown, sleep, ahead=False) for a in fours) / kept4
        ahead = sum(speculative_floor(a.breakdown, sleep) for a in fours) / kept4
        print(
            f"  with each N = 4 turn's hypotheses side by side (the same decisions): without speculation "
            f"{without / floors[1]:.2f}, one turn ahead {ahead / floors[1]:.2f}"
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

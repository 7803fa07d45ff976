"""The real-run part of ``bench/decisions.py``: ``crucible loop`` on a small noisy fixture.

The fixture's metric reads two knobs from ``config/knobs.toml``: ``noise_knob`` changes nothing (every
change of it is a do-nothing change), and each step up of ``speed`` makes the score 3% better (a step
down 3% worse). The metric adds Gaussian noise of the asked size and a slow drift. The built-in knobs
proposer walks both knobs from a seed, so one run holds do-nothing changes, true improvements and
regressions; the same seed is run with ``sequential = true`` and ``false``, and each decided turn is
classified from its proposal in the event stream.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

METRIC = """\
import os, random, tomllib
from pathlib import Path

knobs = tomllib.loads(Path("config/knobs.toml").read_text())
counter = Path(os.environ["BENCH_COUNTER"])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
noise = random.gauss(0.0, float(os.environ["BENCH_NOISE"]))
value = 100.0 * 0.97 ** knobs["speed"] * (1 + 0.001 * n) * (1 + noise)
print(f"METRIC score={value:.6f}")
"""

SPEC = """\
objective = "lower the score"
turns = {turns}

[agent]
builtin = "knobs"
seed = {seed}
env_allow = ["BENCH_COUNTER", "BENCH_NOISE"]

[[agent.knob]]
file = "config/knobs.toml"
key = "noise_knob"
values = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]

[[agent.knob]]
file = "config/knobs.toml"
key = "speed"
values = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]

[sandbox]
mode = "none"

[metric]
command = "python3 tools/metric.py"
name = "score"
direction = "minimize"
samples = {samples}
warmups = 0
confidence = 0.95
interleave = true
sequential = {sequential}

[[component]]
name = "app"
repo = "repo"
base = "main"
mutable = ["config/**"]
protected = ["tools/**"]
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _fixture(root: Path, turns: int, samples: int, sequential: bool, seed: int) -> Path:
    repo = root / "repo"
    (repo / "config").mkdir(parents=True)
    (repo / "tools").mkdir()
    (repo / "config" / "knobs.toml").write_text("noise_knob = 0\nspeed = 0\n")
    (repo / "tools" / "metric.py").write_text(METRIC)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "add", "-A")
    _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "fixture")
    spec = root / "crucible.toml"
    spec.write_text(SPEC.format(turns=turns, samples=samples, sequential=str(sequential).lower(), seed=seed))
    return spec


def _crucible(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    argv = [sys.executable, "-c", "from controller.cli.main import main; main()", *args]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"crucible {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def one_run(turns: int, samples: int, noise: float, sequential: bool, seed: int) -> dict[str, list[int]]:
    """Per class of change (do-nothing, better, worse): the turns' keeps (0/1) and samples per arm."""
    with tempfile.TemporaryDirectory(prefix="crucible-decisions-") as tmp:
        root = Path(tmp)
        spec = _fixture(root, turns, samples, sequential, seed)
        env = dict(os.environ)
        repo_root = str(Path(__file__).resolve().parents[1])
        env.update(
            CRUCIBLE_HOME=str(root / "home"),
            BENCH_COUNTER=str(root / "counter"),
            BENCH_NOISE=str(noise),
            PYTHONPATH=repo_root + os.pathsep + env.get("PYTHONPATH", ""),
        )
        env.pop("CRUCIBLE_DATABASE_URL", None)
        view = json.loads(_crucible(["loop", "--spec", str(spec), "--json"], root, env).splitlines()[-1])
        events = _crucible(["runs", "show", view["run_id"], "--events"], root, env)
    kinds: dict[int, str] = {}
    for line in events.splitlines():
        event = json.loads(line)
        proposal = event.get("proposal")
        if isinstance(proposal, dict) and "turn" in event:
            if proposal["key"] == "noise_knob":
                kinds[event["turn"]] = "do-nothing"
            else:
                kinds[event["turn"]] = "better" if proposal["new"] > proposal["old"] else "worse"
    out: dict[str, list[int]] = {"do-nothing": [], "better": [], "worse": [], "samples": []}
    for turn in view["turns"]:
        kind = kinds.get(turn["turn"])
        if kind is None or turn["outcome"] not in ("accepted", "rejected"):
            continue
        out[kind].append(int(turn["outcome"] == "accepted"))
        out["samples"].append(len(turn["samples"]))
    return out


def run_real(turns: int, samples: int, noise: float, seed: int = 3) -> None:
    print(f"\nreal runs: crucible loop, {turns} turns each, samples = {samples}, noise {noise:.0%}, ", end="")
    print(f"seed {seed}")
    mean_samples: dict[bool, float] = {}
    for sequential in (False, True):
        result = one_run(turns, samples, noise, sequential, seed)
        label = "sequential" if sequential else "fixed"
        rates = {kind: f"{sum(v)}/{len(v)}" for kind, v in result.items() if kind != "samples"}
        mean_samples[sequential] = statistics.fmean(result["samples"]) if result["samples"] else float("nan")
        print(
            f"  {label:10}: kept do-nothing {rates['do-nothing']}, kept 3% better {rates['better']}, "
            f"kept 3% worse {rates['worse']}; mean samples per arm {mean_samples[sequential]:.2f}"
        )
    print(f"  mean samples, sequential / fixed = {mean_samples[True] / mean_samples[False]:.2f}")

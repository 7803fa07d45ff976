"""Server time of the dashboard's run page for a 500-turn run, against the runs list of an empty database
and against the same run page when every turn ran a single hypothesis.

Arms, each a real HTTP GET over loopback to ``create_app`` served by uvicorn in a thread (the way the
api tests serve it), authenticated with a bearer token, on SQLite files in a temp dir:
  floor     ``GET /`` on an empty, migrated database (the page machinery: routing, auth, templates)
  run-page  ``GET /runs/{id}`` of a run with ``--turns`` decided turns (every third kept, every
            seventh failed, three samples each, two refinement rounds) and a real one-commit diff:
            the chart, the turn table, the diff and everything else the page reads
  parallel  the same page of the same run, except that every turn ran ``--parallel`` hypotheses
            (``broker.parallel``, ADR-0016), each reported with three samples a side, so the turn table
            carries a folded row under each turn (the latest twenty unfolded into a table of N rows)
  fragment  ``GET /runs/{id}/fragment`` of the parallel run: what the live script re-fetches after
            each event
The arms alternate for ``--repeat`` rounds after a warmup, so a noisy, shared machine slows all alike;
medians are printed, with the ratios against the floor, and the parallel page's against the run page
of one (its own floor: what N hypotheses add to the page, issue 23).

    python bench/dashboard.py [--turns 500] [--repeat 15] [--parallel 3]

Targets: run-page median <= 300 ms on SQLite (issue 10), parallel median <= 300 ms (issue 23). Exit 1
when either is slower.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import Settings
from controller.domain.enums import EventKind, Outcome, Reason, SampleArm
from controller.localforge.server import serve_in_thread
from controller.services.views.layout import RunLayout
from controller.services.views.schemas import RoundRequest
from controller.store import NewRun, Store
from controller.store.records import ChampionUpdate, ComponentRecord, HypothesisReport, TurnDecision

TARGET_MS = 300.0
TOKEN = "bench-token-0123456789"


class _Control:
    def cancel(self, run_id: str) -> str:
        return ""

    def resume(self, run_id: str) -> str:
        return ""

    def steer(self, run_id: str, text: str, component: str | None = None) -> RoundRequest:
        raise NotImplementedError("the benchmark steers no run")

    def wake(self) -> None:
        return None


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _clone(path: Path) -> tuple[str, str]:
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "b@example.com")
    _git(path, "config", "user.name", "bench")
    (path / "a.py").write_text("".join(f"x{i} = {i}\n" for i in range(200)))
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "base")
    base = _git(path, "rev-parse", "HEAD")
    (path / "a.py").write_text("".join(f"x{i} = {i * 2}\n" for i in range(200)))
    _git(path, "commit", "-qam", "kept")
    return base, _git(path, "rev-parse", "HEAD")


def _hypotheses(
    store: Store, run_id: str, n: int, parallel: int, reason: Reason, value: float | None
) -> dict[int, tuple[Reason, str]] | None:
    """Report turn ``n``'s ``parallel`` hypotheses; #0 is the turn's own, the others superseded (when
    it was kept) or with its reason. None for a turn of one."""
    if parallel <= 1:
        return None
    final = {}
    for index in range(parallel):
        own = value if value is None or index == 0 else value * (1 + 0.001 * index)
        samples = [] if own is None else [(SampleArm.CANDIDATE, i, {"m": own}, True) for i in range(3)]
        samples += [] if own is None else [(SampleArm.CHAMPION, i, {"m": 100.0}, True) for i in range(3)]
        text = f"hypothesis {n}.{index}: memoise the parser's lookups"
        report = HypothesisReport(
            index, reason, own, 100.0 if own else None, None, 0.01, text, samples=tuple(samples)
        )
        store.report_hypothesis(run_id, n, report)
        superseded = reason is Reason.IMPROVED and index > 0
        final[index] = (Reason.SUPERSEDED if superseded else reason, "detail")
    return final


def seed(store: Store, settings: Settings, run_id: str, turns: int, parallel: int = 1) -> None:
    store.create_run(NewRun(run_id, "", "f", None, "make it faster", "m", "minimize", turns))
    base, head = _clone(RunLayout(settings.run_dir(run_id), ("app",)).checkout("candidate", "app"))
    store.add_component(ComponentRecord(run_id, "app", "app", "main", base, base))
    store.start_baseline(run_id)
    store.set_baseline(run_id, 100.0, {"value": 100.0})
    best = 100.0
    for n in range(1, turns + 1):
        store.start_turn(run_id, n, 0 if n <= turns * 0.8 else 1 if n <= turns * 0.9 else 2)
        kept, failed = n % 3 == 0, n % 7 == 0 and n % 3 != 0
        value = None if failed else best * (0.999 if kept else 1.01)
        outcome = Outcome.ACCEPTED if kept else Outcome.FAILED if failed else Outcome.REJECTED
        decision = TurnDecision(
            outcome,
            Reason.IMPROVED if kept else Reason.AGENT_FAILED if failed else Reason.NOT_IMPROVED,
            value=value,
            p_value=0.01,
            hypothesis=f"hypothesis number {n}: cache the parsed configuration between calls",
            commits={"app": head} if kept else {},
            cost_usd=0.02,
            duration_s=12.0,
        )
        samples = [] if value is None else [(SampleArm.CANDIDATE, i, {"m": value}, True) for i in range(3)]
        hypotheses = _hypotheses(store, run_id, n, parallel, decision.reason, value)
        store.decide_turn(
            run_id,
            n,
            decision,
            champion=ChampionUpdate(value, n) if kept and value is not None else None,
            component_heads={"app": head} if kept else {},
            event=(EventKind(str(outcome)), {"turn": n}),
            samples=samples,
            hypotheses=hypotheses,
        )
        best = value if kept and value is not None else best


def _time(client: httpx.Client, path: str) -> float:
    start = time.perf_counter()
    response = client.get(path)
    elapsed = time.perf_counter() - start
    response.raise_for_status()
    return elapsed * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--parallel", type=int, default=3, help="hypotheses per turn (broker.parallel)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="crucible-bench-dashboard-") as tmp:
        root = Path(tmp)
        times: dict[str, list[float]] = {"floor": [], "run-page": [], "parallel": [], "fragment": []}
        empty_url, full_url = f"sqlite:///{root / 'empty.db'}", f"sqlite:///{root / 'full.db'}"
        with Store.open(empty_url, upgrade=True) as empty, Store.open(full_url, upgrade=True) as full:
            settings = Settings(home=root / "home", database_url=full_url)
            seed(full, settings, "one", args.turns)
            seed(full, settings, "par", args.turns, args.parallel)
            tokens = ApiTokens(TOKEN)
            apps = [create_app(settings, s, tokens, _Control()) for s in (empty, full)]
            headers = {"Authorization": f"Bearer {TOKEN}"}
            with serve_in_thread(apps[0]) as floor_url, serve_in_thread(apps[1]) as full_url_http:
                floor = httpx.Client(base_url=floor_url, headers=headers, timeout=60)
                page = httpx.Client(base_url=full_url_http, headers=headers, timeout=60)
                for i in range(args.repeat + 2):  # two warmup rounds
                    round_times = {
                        "floor": _time(floor, "/"),
                        "run-page": _time(page, "/runs/one"),
                        "parallel": _time(page, "/runs/par"),
                        "fragment": _time(page, "/runs/par/fragment"),
                    }
                    if i >= 2:
                        for name, ms in round_times.items():
                            times[name].append(ms)
                floor.close()
                page.close()
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"turns={args.turns} parallel={args.parallel} repeat={args.repeat} "
        "(medians, ms; ratio vs the empty runs list, and vs the run page of one)"
    )
    for name, ms in medians.items():
        print(f"  {name:<9} {ms:8.1f} ms   x{ms / medians['floor']:.1f}   x{ms / medians['run-page']:.2f}")
    ok = True
    for name in ("run-page", "parallel"):
        verdict = "ok" if medians[name] <= TARGET_MS else "TOO SLOW"
        ok = ok and medians[name] <= TARGET_MS
        print(f"{name} median {medians[name]:.1f} ms vs target <= {TARGET_MS:.0f} ms: {verdict}")
    ratio = medians["parallel"] / medians["run-page"]
    print(f"parallel / run-page (N = {args.parallel} vs N = 1): {ratio:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

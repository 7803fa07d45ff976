"""What the controller's recount of a worker's decisions costs (issue 21, ADR-0031).

A controller (the real app with its worker routes, SQLite, uvicorn on loopback) receives turn
decisions from an ``HttpLedger`` with a round's token, as ``crucible worker`` sends them: ten pairs
of interleaved samples with a guard metric, sequential measurement at confidence 0.95, some turns kept
(their commits proved as a verified bundle would) and the rest rejected, each decision computed by
``stats.verdicts.turn_verdict`` as the worker's turn path computes it. Each such decision is recounted
by the controller before it is stored. The floor, measured in the same run and interleaved with it, is
the same decision sent the same way to the same controller with the recount switched off (the
module's ``recount_decision`` replaced by one that accepts everything, in this process only): what
the controller did before it recomputed anything.

Printed: the median wall time of a recounted decision and of the floor, their ratio and difference
(what the recount adds to every turn of a remote round), the recount's own CPU time per decision
(``recount_decision`` alone), and that difference against the per-round overhead of the Kubernetes
path ``bench/broker.py`` measures (``--round-overhead``, seconds; a round of ``--turns`` turns).

    python bench/recount.py [--decisions 60] [--round-overhead 1.0] [--turns 10]

Target (issue 21): a Kubernetes round's overhead stays within 1.1x with the recount.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import Settings
from controller.config.spec import parse_spec
from controller.domain.enums import EventKind, Outcome, RunStatus, SampleArm
from controller.domain.jobs import RoundJob
from controller.localforge.server import serve_in_thread
from controller.services.remote import remote_rounds
from controller.services.remote.recount import Reference, keep_rule, recount_decision
from controller.services.remote.remote_rounds import RemoteRounds, token_hash
from controller.services.views.schemas import RoundRequest
from controller.stats import Arm
from controller.stats.verdicts import TurnRule, sequential_design, turn_verdict
from controller.store import ChampionUpdate, ComponentRecord, NewRun, Store, TurnDecision
from controller.store.http_ledger import HttpLedger
from controller.store.records import Sample

SPEC = """
objective = "x"
[agent]
command = "true"
[metric]
command = "true"
name = "ms"
direction = "minimize"
samples = 10
min_samples = 3
confidence = 0.95
[[metric.guard]]
name = "rss"
direction = "minimize"
tolerance = "5%"
[[component]]
name = "app"
repo = "."
"""
BASE = "a" * 40


class _NoControl:
    def cancel(self, run_id: str) -> str:
        raise AssertionError("not used")

    def resume(self, run_id: str) -> str:
        raise AssertionError("not used")

    def steer(self, run_id: str, text: str, component: str | None = None) -> RoundRequest:
        raise AssertionError("not used")

    def wake(self) -> None:
        raise AssertionError("not used")


def _turn(rng: random.Random, better: bool) -> tuple[list[Sample], TurnDecision, ChampionUpdate | None]:
    """One turn's samples (A B B A pairs, until the sequential looks stop) and the worker's decision."""
    spec = parse_spec(SPEC, Path("/tmp"))
    effect = 0.9 if better else 1.0
    champion = [100 * rng.gauss(1, 0.01) for _ in range(10)]
    candidate = [100 * effect * rng.gauss(1, 0.01) for _ in range(10)]
    rss = [50 * rng.gauss(1, 0.005) for _ in range(20)]
    rule = TurnRule(keep=keep_rule(spec), design=sequential_design(spec.metric))
    base = Arm(tuple(champion), {"rss": tuple(rss[:10])})
    for pairs in range(3, 11):  # as the live looks stop the measurement
        cand = Arm(tuple(candidate[:pairs]), {"rss": tuple(rss[10 : 10 + pairs])})
        champ = Arm(tuple(champion[:pairs]), {"rss": tuple(rss[:pairs])})
        try:
            found = turn_verdict(rule, cand, champ, lambda: base)
        except ValueError:
            continue
        break
    samples: list[Sample] = []
    for i in range(pairs):
        samples.append((SampleArm.CHAMPION, i, {"ms": champion[i], "rss": rss[i]}, True))
        samples.append((SampleArm.CANDIDATE, i, {"ms": candidate[i], "rss": rss[10 + i]}, True))
    if found.verdict.keep:
        samples += [(SampleArm.BASE, i, {"ms": champion[i], "rss": rss[i]}, True) for i in range(10)]
    verdict = found.verdict
    decision = TurnDecision(
        outcome=Outcome.ACCEPTED if verdict.keep else Outcome.REJECTED,
        reason=verdict.reason,
        value=verdict.candidate_median,
        p_value=found.p_value,
        commits={"app": "b" * 40} if verdict.keep else {},
        pairs=found.pairs,
        sequential_stop=found.stop,
    )
    return samples, decision, ChampionUpdate(verdict.candidate_median, 0) if verdict.keep else None


def _accept_all(*_args: object, **_kwargs: object) -> str | None:
    return None


def _switch(*, on: bool) -> None:
    """The controller's recount on, or off (the floor): the name ``remote_rounds`` calls it by."""
    vars(remote_rounds)["recount_decision"] = recount_decision if on else _accept_all


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--decisions", type=int, default=60, help="recounted decisions (and as many floors)")
    parser.add_argument("--round-overhead", type=float, default=1.0, help="bench/broker.py's, seconds")
    parser.add_argument("--turns", type=int, default=10, help="turns of a round, for the round figure")
    args = parser.parse_args()
    rng = random.Random(21)
    turns = [_turn(rng, better=i % 3 == 0) for i in range(args.decisions)]
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        with Store.open(url, upgrade=True) as store:
            settings = Settings(home=Path(tmp) / "home", database_url=url)
            remote = RemoteRounds(settings, store, controller_url="http://unused")
            app = create_app(
                settings, store, ApiTokens("operator-token-0123456789"), _NoControl(), remote=remote
            )
            with serve_in_thread(app) as base_url:
                store.create_run(
                    NewRun(
                        id="rb",
                        spec_text=SPEC,
                        spec_fingerprint="fp",
                        spec_path=None,
                        objective="x",
                        metric_name="ms",
                        direction="minimize",
                        turns_planned=10**5,
                    )
                )
                store.add_component(
                    ComponentRecord(
                        run_id="rb",
                        name="app",
                        repo="/src/app",
                        base_ref="main",
                        base_sha=BASE,
                        head_sha=BASE,
                    )
                )
                store.set_run_status("rb", RunStatus.RUNNING)
                job = RoundJob(run_id="rb", round=0, turns=10**5, first_turn=1, heads={"app": BASE})
                token = remote.mint_worker_env(job)["CRUCIBLE_WORKER_TOKEN"]
                store.prove_worker_heads(token_hash(token), {"app": "b" * 40})
                recounted: list[float] = []
                floor: list[float] = []
                number = 0
                with HttpLedger(base_url, token) as ledger:
                    for samples, decision, champion in turns:
                        for honest in (True, False):
                            number += 1
                            store.start_turn("rb", number, 0)
                            _switch(on=honest)
                            sent = decision
                            moved = None if champion is None else ChampionUpdate(champion.value, number)
                            kind = {
                                Outcome.ACCEPTED: EventKind.ACCEPTED,
                                Outcome.REJECTED: EventKind.REJECTED,
                            }
                            event = {
                                "turn": number,
                                "round": 0,
                                "outcome": str(sent.outcome),
                                "reason": str(sent.reason),
                            }
                            started = time.perf_counter()
                            ledger.decide_turn(
                                "rb",
                                number,
                                sent,
                                champion=moved,
                                component_heads=dict(sent.commits),
                                event=(kind.get(sent.outcome, EventKind.FAILED), event),
                                samples=samples,
                            )
                            (recounted if honest else floor).append(time.perf_counter() - started)
                _switch(on=True)
    spec = parse_spec(SPEC, Path("/tmp"))
    at_base = Reference(champion=lambda: Arm(()), champion_is_base=lambda: True)
    cpu = time.process_time()
    for samples, decision, champion in turns:
        recount_decision(
            spec,
            job,
            1,
            decision,
            champion=champion and ChampionUpdate(champion.value, 1),
            component_heads=dict(decision.commits),
            samples=samples,
            reference=at_base,
        )
    cpu_each = (time.process_time() - cpu) / len(turns)
    kept = sum(1 for _s, d, _c in turns if d.outcome is Outcome.ACCEPTED)
    r, f = statistics.median(recounted), statistics.median(floor)
    added = r - f
    print(f"decisions: {len(turns)} recounted ({kept} kept) and {len(turns)} floor, interleaved")
    print(f"recounted decision: median {r * 1000:.2f} ms; floor (recount off): {f * 1000:.2f} ms")
    print(f"ratio recounted / floor: {r / f:.2f}  ({added * 1000:+.2f} ms a decision)")
    print(f"recount_decision alone: {cpu_each * 1000:.3f} ms CPU a decision")
    # The larger of the two: the wall difference drowns in noise on a loaded machine, the CPU does not.
    per_turn = max(added, cpu_each)
    round_s = args.round_overhead + args.turns * per_turn
    print(
        f"a Kubernetes round of {args.turns} turns: overhead {args.round_overhead:.2f} s -> {round_s:.3f} s "
        f"= {round_s / args.round_overhead:.3f}x (target <= 1.1x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

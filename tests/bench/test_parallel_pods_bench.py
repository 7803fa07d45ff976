"""``bench/parallel_pods.py``: its workload is the mix it says, and its ratio is per kept improvement.

The measurement itself needs the control plane and minutes; these check the parts a wrong figure would
come from: the metric scripts (only the good knobs improve them, with the noise the bench says), the
report's arithmetic, and the reading of a warm pod's log line into a turn's breakdown.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.loading import load_bench


@pytest.mark.parametrize("kind", ["sleep", "python"])
def test_only_the_good_knobs_improve_the_metric(kind: str, tmp_path: Path) -> None:
    bench = load_bench("parallel_pods")
    repo = bench.make_repo(tmp_path / "app", 3, ["k1"], 0.0, kind)
    command = bench.METRICS[kind][0].replace("python3", shlex.quote(sys.executable))

    def metric(conf: dict[str, int]) -> tuple[float, float]:
        # Indented as the knobs agent writes it back (the awk script reads either layout).
        (repo / "conf.json").write_text(json.dumps(conf, indent=2))
        runs = [
            subprocess.run(command, shell=True, cwd=repo, capture_output=True, text=True, check=True)
            for _ in range(40)
        ]
        values = [float(r.stdout.strip().removeprefix("METRIC m=")) for r in runs]
        return statistics.median(values), statistics.stdev(values) / statistics.fmean(values)

    off, noise = metric({"k0": 0, "k1": 0, "k2": 0})
    assert 0.01 < noise < 0.03, "2% Gaussian noise, each run drawing its own"
    assert metric({"k0": 1, "k1": 0, "k2": 1})[0] == pytest.approx(off, rel=0.02), "do-nothing knobs"
    assert metric({"k0": 0, "k1": 1, "k2": 0})[0] == pytest.approx(off * 0.97, rel=0.02), "a 3% improvement"


def test_the_ratio_is_wall_time_per_kept_improvement(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_bench("parallel_pods")
    arms = [bench.Arm(1, 100.0, 2, 0, 16), bench.Arm(4, 60.0, 3, 1, 4)]
    args = argparse.Namespace(knobs=20, good=0.2, sleep=0.25, hypotheses=16, pairs=1)
    bench.report(arms, args)
    out = capsys.readouterr().out
    assert f"ratio {(60 / 3) / (100 / 2):.2f}" in out
    assert "N = 4: 15.0 s a turn" in out


def test_a_warm_pods_log_line_is_read_into_the_parts_of_its_hypothesis() -> None:
    bench = load_bench("parallel_pods")
    log = (
        "slot 2 turn 3: waited=0.500 job=0.010 fetch=0.020 context=0.300 tried=5.000 commands=4.500 "
        "report=0.050 finish=0.010\nround 0 of run r1: slot 2: 1 hypotheses\n"
    )
    assert bench.parse_pod_log(log) == {
        (3, 2): {
            "waited": 0.5,
            "job": 0.01,
            "fetch": 0.02,
            "context": 0.3,
            "tried": 5.0,
            "commands": 4.5,
            "report": 0.05,
            "finish": 0.01,
        }
    }


def test_the_breakdown_averages_the_turns_and_gives_the_sleep_only_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_bench("parallel_pods")
    one = [bench.Turn(n, wall=6.0, between=0.5, samples=20) for n in range(1, 5)]
    four = [
        bench.Turn(1, wall=12.0, between=1.0, samples=20, hand_out=5.0),
        bench.Turn(2, wall=8.0, between=1.0, samples=20, launch=0.2, hand_out=0.1, in_pod=7.0, decide=0.7),
    ]
    arms = [bench.Arm(1, 30.0, 2, 0, 4, breakdown=one), bench.Arm(4, 22.0, 2, 0, 2, breakdown=four)]
    bench.breakdown(arms, 0.25)
    out = capsys.readouterr().out
    assert "N = 1, 4 turns: a turn 6.00 s from start to decision, 0.50 s between turns" in out
    assert "launch 0.20, hand out 0.10, in its pod 7.00, its report to the decision 0.70" in out
    assert "first turns (pods starting): 12.00 s, of which hand out 5.00" in out
    # Sleep per kept improvement: N = 1, 4 turns x 20 samples x 0.25 s / 2; N = 4, 2 x 20 x 0.25 / 2.
    assert "ratio 0.50" in out


def test_the_breakdown_shows_turns_after_a_keep_apart_and_when_the_held_hypotheses_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_bench("parallel_pods")
    one = [bench.Turn(n, wall=3.0, between=0.1, samples=10) for n in range(1, 5)]
    four = [
        bench.Turn(1, wall=12.0, between=1.0, samples=20),
        bench.Turn(2, wall=4.0, between=0.0, samples=16, held=0.3),
        bench.Turn(
            3, wall=5.0, between=0.0, samples=16, after_keep=True, held=0.9, taken=0.35, pod={"fetch": 0.4}
        ),
        bench.Turn(4, wall=3.0, between=0.0, samples=16, held=0.1),
        bench.Turn(5, wall=4.0, between=0.0, samples=16),
    ]
    arms = [bench.Arm(1, 12.0, 2, 0, 4, breakdown=one), bench.Arm(4, 28.0, 2, 0, 5, breakdown=four)]
    bench.breakdown(arms, 0.25)
    out = capsys.readouterr().out
    # The held reports of the turns after none (0.3, 0.1); turn 3's were void, its 0.9 a new hypothesis's.
    assert "after a keep (1 turns): a turn 5.00 s, its last hypothesis taken 0.35 s after its start" in out
    assert "after none (3): 3.67 s" in out
    assert "its first report of a hypothesis taken ahead 0.20 s after its start" in out
    assert "in its pod (1 logged, after a keep): job 0.00, fetch 0.40" in out


def test_the_speculative_floor_starts_a_free_slots_next_hypothesis_unless_the_turn_before_kept() -> None:
    bench = load_bench("parallel_pods")

    def turn(number: int, kept: bool, *samples: int) -> object:
        return bench.Turn(number, 0.0, 0.0, max(samples), kept=kept, by_index=dict(enumerate(samples)))

    # Sleep 1 s a sample. Turn 1: slots end at 2 and 8 (decided at 8). Turn 2 (2 and 4 samples): slot 0
    # starts at 2, ends at 4; slot 1 at 8, ends at 12. Turn 2 kept, so turn 3 (6, 1) starts at 12: 18.
    turns = [turn(1, False, 2, 8), turn(2, True, 2, 4), turn(3, False, 6, 1)]
    assert bench.speculative_floor(turns, 1.0) == 18.0
    assert bench.speculative_floor(turns, 1.0, ahead=False) == 8 + 4 + 6
    # Without the keep, turn 3's slot 0, free at 4, starts once turn 1 is decided (8: one turn ahead),
    # ends at 14; slot 1 starts at 12, ends at 13.
    turns[1] = turn(2, False, 2, 4)
    assert bench.speculative_floor(turns, 1.0) == 14.0

"""``bench/parallel_pods.py``: its workload is the mix it says, and its ratio is per kept improvement.

The measurement itself needs the control plane and minutes; these check the parts a wrong figure would
come from: the metric script (only the good knobs improve it) and the report's arithmetic.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.loading import load_bench


def test_only_the_good_knobs_improve_the_metric(tmp_path: Path) -> None:
    bench = load_bench("parallel_pods")
    repo = bench.make_repo(tmp_path / "app", 3, ["k1"], 0.0)

    def metric(conf: dict[str, int]) -> float:
        (repo / "conf.json").write_text(json.dumps(conf))
        runs = [
            subprocess.run([sys.executable, "bench.py"], cwd=repo, capture_output=True, text=True, check=True)
            for _ in range(30)
        ]
        values = sorted(float(r.stdout.strip().split("=")[1]) for r in runs)
        return values[len(values) // 2]

    off = metric({"k0": 0, "k1": 0, "k2": 0})
    assert metric({"k0": 1, "k1": 0, "k2": 1}) == pytest.approx(off, rel=0.02), "do-nothing knobs"
    assert metric({"k0": 0, "k1": 1, "k2": 0}) == pytest.approx(off * 0.97, rel=0.02), "a 3% improvement"


def test_the_ratio_is_wall_time_per_kept_improvement(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_bench("parallel_pods")
    arms = [bench.Arm(1, 100.0, 2, 0, 16), bench.Arm(4, 60.0, 3, 1, 4)]
    args = argparse.Namespace(knobs=20, good=0.2, sleep=0.25, hypotheses=16, pairs=1)
    bench.report(arms, args)
    out = capsys.readouterr().out
    assert f"ratio {(60 / 3) / (100 / 2):.2f}" in out
    assert "N = 4: 15.0 s a turn" in out

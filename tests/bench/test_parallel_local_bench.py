"""``bench/parallel_local.py`` runs end to end on a tiny workload and reports consistent ratios."""

from __future__ import annotations

import pytest

from tests.bench.loading import load_bench


def test_the_concurrency_bench_reports_both_conditions(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_bench("parallel_local")
    out = bench.run(samples=3, n=20_000)
    assert out["alone_median"] > 0 and out["together_median"] > 0
    assert out["slowdown"] == pytest.approx(out["together_median"] / out["alone_median"])
    assert out["noise_ratio"] == pytest.approx(out["together_cv"] / out["alone_cv"])
    assert "slowdown ratio" in capsys.readouterr().out

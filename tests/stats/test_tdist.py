"""Student's t distribution function against scipy (a dev dependency only; the controller has none)."""

from __future__ import annotations

import math

import pytest

from controller.stats.tdist import betainc, t_cdf

scipy_stats = pytest.importorskip("scipy.stats")
scipy_special = pytest.importorskip("scipy.special")


@pytest.mark.parametrize("df", [1, 2, 3, 4.5, 7, 17, 30, 120, 1000])
@pytest.mark.parametrize("t", [-40.0, -6.0, -2.3, -1.0, -1e-6, 0.0, 0.4, 1.7, 3.2, 9.0, 60.0])
def test_t_cdf_agrees_with_scipy(t: float, df: float) -> None:
    assert t_cdf(t, df) == pytest.approx(float(scipy_stats.t.cdf(t, df)), rel=1e-10, abs=1e-14)


@pytest.mark.parametrize(("a", "b"), [(0.5, 0.5), (1.5, 0.5), (10.0, 0.5), (2.0, 3.0), (50.0, 0.5)])
@pytest.mark.parametrize("x", [0.0, 1e-9, 0.01, 0.3, 0.5, 0.77, 0.999, 1.0])
def test_betainc_agrees_with_scipy(a: float, b: float, x: float) -> None:
    assert betainc(a, b, x) == pytest.approx(float(scipy_special.betainc(a, b, x)), rel=1e-10, abs=1e-14)


def test_infinities_and_bad_arguments() -> None:
    assert t_cdf(math.inf, 3) == 1.0 and t_cdf(-math.inf, 3) == 0.0
    with pytest.raises(ValueError, match="df"):
        t_cdf(1.0, 0)
    with pytest.raises(ValueError, match="NaN"):
        t_cdf(math.nan, 3)
    with pytest.raises(ValueError, match="x"):
        betainc(1.0, 1.0, 1.5)

"""Why the local broker measures parallel hypotheses one after another (ADR-0016, decision 5).

With ``broker.parallel = N`` and the local broker, the N hypotheses could be measured at the same time
(as the cores allow) or one after another. This measures what measuring two at once does to a
CPU-bound metric on this machine, in the same run: a small benchmark (a fixed amount of Python work,
timed) is run ``--samples`` times alone and ``--samples`` times while an identical one runs beside it,
alternating the two conditions so that drift of the shared machine hits both alike.

Printed: the median time and the coefficient of variation (noise) of each condition, and their ratios
(together / alone). The keep rule's power falls with the noise, and a metric that runs slower beside a
neighbour measures the neighbour, not the change; one after another costs wall time instead (N times
the turn), which pods avoid by running on separate nodes.

    python bench/parallel_local.py              # ~1 minute
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

WORK = "s = 0\nfor i in range({n}):\n    s += i * i % 7\n"


def _timed(n: int, beside: bool) -> float:
    """Wall time of one benchmark run, with an identical run started beside it when ``beside``."""
    code = WORK.format(n=n)
    neighbour = subprocess.Popen([sys.executable, "-c", code]) if beside else None
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    elapsed = time.perf_counter() - started
    if neighbour is not None:
        neighbour.wait()
    return elapsed


def run(samples: int, n: int) -> dict[str, float]:
    alone: list[float] = []
    together: list[float] = []
    for i in range(samples):
        order = (False, True) if i % 2 == 0 else (True, False)
        for beside in order:
            (together if beside else alone).append(_timed(n, beside))
    out = {
        "alone_median": statistics.median(alone),
        "together_median": statistics.median(together),
        "alone_cv": statistics.stdev(alone) / statistics.fmean(alone),
        "together_cv": statistics.stdev(together) / statistics.fmean(together),
    }
    out["slowdown"] = out["together_median"] / out["alone_median"]
    out["noise_ratio"] = out["together_cv"] / out["alone_cv"]
    print(f"{samples} samples per condition, {n} loop iterations per run")
    alone_text = f"median {out['alone_median']:.3f} s, coefficient of variation {out['alone_cv']:.3f}"
    print(f"  alone:          {alone_text}")
    print(
        f"  beside another: median {out['together_median']:.3f} s, coefficient of variation "
        f"{out['together_cv']:.3f}"
    )
    print(
        f"  together / alone: slowdown ratio {out['slowdown']:.2f}, noise ratio {out['noise_ratio']:.2f} "
        "(the floor, 1.00, is the alone condition measured in the same run)"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=2_000_000)
    args = parser.parse_args(argv)
    run(args.samples, args.iterations)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Measurement: warmups, then the interleaved A B B A … schedule across arms (docs/keep-rule.md).

Each arm is a workspace root (a checkout, or a directory of checkouts for a composite run). Samples are
parsed from the whole output, an invalid sample makes the measurement invalid, and the caller stores every
raw sample whether or not it was valid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from controller.config.spec import MetricSpec
from controller.domain.enums import SampleArm
from controller.engine.protocol import parse_metric_sample
from controller.services.execution.execute import Executor
from controller.stats import Arm, interleaved_order


@dataclass(frozen=True)
class ArmRoot:
    arm: SampleArm
    root: Path


@dataclass
class Measurement:
    """Raw samples per arm, in the order measured, plus the first reason the measurement is unusable."""

    samples: dict[SampleArm, list[dict[str, float]]] = field(default_factory=dict)
    raw: list[tuple[SampleArm, int, dict[str, float], bool]] = field(default_factory=list)
    error: str | None = None
    timed_out: bool = False
    cancelled: bool = False

    def arm(self, which: SampleArm, metric: str, guards: Sequence[str]) -> Arm:
        rows = self.samples.get(which, [])
        return Arm(
            primary=tuple(r[metric] for r in rows),
            guards={g: tuple(r[g] for r in rows) for g in guards},
        )


def schedule(arms: Sequence[SampleArm], samples: int, warmups: int) -> list[tuple[SampleArm, bool]]:
    """(arm, is_warmup) in execution order: warmups of every arm first, then the measured order.

    Two arms follow ``interleaved_order`` (A B B A …: a linear drift cancels); a single arm is measured
    ``samples`` times; three arms rotate A B C C B A … so no arm always goes first.
    """
    out: list[tuple[SampleArm, bool]] = [(a, True) for _ in range(warmups) for a in arms]
    if len(arms) == 1:
        out += [(arms[0], False)] * samples
    elif len(arms) == 2:
        names = {"A": arms[0], "B": arms[1]}
        out += [(names[x], False) for x in interleaved_order(samples)]
    else:
        forward = list(arms)
        for i in range(samples):
            seq = forward if i % 2 == 0 else list(reversed(forward))
            out += [(a, False) for a in seq]
    return out


PairCheck = Callable[["Measurement", int], bool]
"""Called after each completed pair of a two-arm measurement (each sample of a one-arm one) with the
pairs so far; True stops it."""

SampleSink = Callable[[SampleArm, int, dict[str, float], bool], None]
"""Called with each measured sample as it arrives (arm, index, values, valid); warmups are not."""


def measure(
    executor: Executor,
    metric: MetricSpec,
    arms: Sequence[ArmRoot],
    *,
    protocol: Mapping[str, str],
    log_prefix: Path | None = None,
    after_pair: PairCheck | None = None,
    on_sample: SampleSink | None = None,
) -> Measurement:
    """Run the metric command on ``arms`` following ``schedule``; stop at the first invalid sample, or
    when ``after_pair`` (sequential measurement) says the evidence so far decides."""
    required = [metric.name, *(g.name for g in metric.guards)]
    roots = {a.arm: a.root for a in arms}
    result = Measurement(samples={a.arm: [] for a in arms})
    index: dict[SampleArm, int] = {a.arm: 0 for a in arms}
    pairs = 0
    for n, (arm, warmup) in enumerate(schedule([a.arm for a in arms], metric.samples, metric.warmups)):
        log = None if log_prefix is None else log_prefix.with_name(f"{log_prefix.stem}-{n:03d}-{arm}.log")
        run = executor.run(
            metric.command,
            cwd=roots[arm],
            timeout=metric.timeout,
            writable=[roots[arm]],
            protocol=protocol,
            log=log,
        )
        if run.cancelled:
            result.cancelled = True
            result.error = "cancelled during measurement"
            return result
        if run.timed_out:
            result.timed_out = True
            result.error = f"metric command timed out after {metric.timeout:g}s ({arm})"
            return result
        if warmup:
            continue
        sample = parse_metric_sample(run.matched_lines, required)
        error = sample.error
        if run.start_problem:  # it never ran: say why rather than that its output lacked the metric
            error = f"metric command exited {run.returncode}: {run.start_problem}"
        elif error is None and run.returncode != 0:
            error = f"metric command exited {run.returncode}"
        result.raw.append((arm, index[arm], sample.values if error is None else {}, error is None))
        if on_sample is not None:
            on_sample(*result.raw[-1])
        index[arm] += 1
        if error is not None:
            result.error = f"{error} ({arm} sample {index[arm]})"
            return result
        result.samples[arm].append(sample.values)
        # A look after each complete pair, or after each sample of a lone arm (``interleave = false``).
        if after_pair is not None and len(arms) <= 2 and len(set(index.values())) == 1:
            pairs += 1
            if after_pair(result, pairs):
                return result
    return result

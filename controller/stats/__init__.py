"""stats layer (docs/architecture.md): the noise-aware keep rule, decided purely over measured samples.

The engine measures and stores samples; this package only decides, so its rules are tested with numbers
in and verdicts out.
"""

from controller.stats.keep import (
    MIN_SAMPLES_FOR_TEST,
    Arm,
    GuardRule,
    KeepRule,
    KeepVerdict,
    Tolerance,
    decide_hold,
    decide_keep,
    guard_check,
    holds_score,
    median,
    needs_base_arm,
)
from controller.stats.mannwhitney import mann_whitney_less_p
from controller.stats.schedule import CANDIDATE, CHAMPION, interleaved_order

__all__ = [
    "CANDIDATE",
    "CHAMPION",
    "MIN_SAMPLES_FOR_TEST",
    "Arm",
    "GuardRule",
    "KeepRule",
    "KeepVerdict",
    "Tolerance",
    "decide_hold",
    "decide_keep",
    "guard_check",
    "holds_score",
    "interleaved_order",
    "mann_whitney_less_p",
    "median",
    "needs_base_arm",
]

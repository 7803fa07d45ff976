"""The order in which an interleaved turn measures the champion and the candidate (docs/keep-rule.md).

A shared machine drifts (thermal state, other tenants, caches). Measuring A B B A A B B A … puts each
arm's samples symmetrically around the same instants, so a steady linear drift shifts both arms alike
instead of favouring whichever arm was measured later. Kept pure so the simulation tests use the very
order the engine uses.
"""

from __future__ import annotations

CHAMPION = "A"
CANDIDATE = "B"
_PATTERN = (CHAMPION, CANDIDATE, CANDIDATE, CHAMPION)


def interleaved_order(samples: int) -> list[str]:
    """Arm order of the measured samples (warmups excluded): "A","B","B","A","A","B",… of length 2*samples.

    "A" is the champion and "B" the candidate; every even-length prefix holds as many A as B, so each arm
    gets exactly ``samples`` samples. Raises ValueError for a negative count.
    """
    if samples < 0:
        raise ValueError(f"samples: must be >= 0, got {samples}")
    return [_PATTERN[i % len(_PATTERN)] for i in range(2 * samples)]

"""Start-up cost of the ``crucible`` command, as a ratio against ``python -c pass`` measured in the same run.

Arms (each a fresh interpreter, run ``--repeat`` times, best and median kept):
  floor      ``python -c pass``
  help       ``crucible --help``
  runs-list  ``crucible runs list`` on a fresh, migrated SQLite database (read with ``sqlite3``: neither
             SQLAlchemy nor pydantic, FastAPI, the forge or Alembic is imported; ADR-0013)

    python bench/cli_start.py [--repeat 15]

Target (issue 8 deliverable 10): each ratio <= 4 (medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

TARGET = 4.0


@dataclass(frozen=True)
class Arm:
    name: str
    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def best(self) -> float:
        return min(self.times)


def _time(argv: list[str], env: dict[str, str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def run(repeat: int) -> list[Arm]:
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="crucible-clistart-") as home:
        env = {**os.environ, "CRUCIBLE_HOME": home}
        env.pop("CRUCIBLE_DATABASE_URL", None)
        crucible = [py, "-m", "controller.cli.main"]
        subprocess.run([*crucible, "db", "upgrade"], env=env, check=True, stdout=subprocess.DEVNULL)
        # Interleaved, one of each per round, so a noisy neighbour hits every arm alike.
        arms: dict[str, list[float]] = {"floor": [], "help": [], "runs-list": []}
        commands = {
            "floor": [py, "-c", "pass"],
            "help": [*crucible, "--help"],
            "runs-list": [*crucible, "runs", "list"],
        }
        for argv in commands.values():
            _time(argv, env, 1)  # warm the page cache and the bytecode
        for _ in range(repeat):
            for name, argv in commands.items():
                arms[name] += _time(argv, env, 1)
    return [Arm(name, times) for name, times in arms.items()]


def main(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    arms = run(args.repeat)
    floor = arms[0]
    print(f"{'arm':<10} {'median s':>9} {'best s':>8} {'ratio':>6}")
    worst = 0.0
    for arm in arms:
        ratio = arm.median / floor.median
        if arm is not floor:
            worst = max(worst, ratio)
        print(f"{arm.name:<10} {arm.median:>9.3f} {arm.best:>8.3f} {ratio:>6.2f}")
    print(f"worst ratio {worst:.2f} (target <= {TARGET:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

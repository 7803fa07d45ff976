"""Controller overhead per turn, as a ratio against the floor measured in the same run.

Overhead = a turn's wall time minus the time spent inside the agent, validation and metric commands.
Floor    = the git work a turn cannot avoid, done directly on a clone of the same repository: the status
           scan the policy check needs, restore with ``reset --hard`` + ``clean``, a commit (``add -A`` +
           ``commit``, since a kept change may add files) and a diff.

It counts, over the turns only, the git processes a turn starts and the transactions it commits (ADR-0046:
about 7 and 4.5 on the small repository, the run's setup aside).

One floor repetition runs after each turn, so both see the same load (on a shared machine the load moves
within a minute: a floor measured after all the turns compared them with another machine). It prints the
ratio for a small repository and for a generated one of 20,000 files (generated once with
``git fast-import`` into the cache directory and reused), the medians of kept and rejected turns (the
bench's agent alternates them), and the overhead of early vs late turns of a long run on the small
repository (it must not grow with the number of turns recorded).

    python bench/turn_overhead.py [--files 20000] [--turns 20] [--long-turns 500] [--cache DIR]

Target (issue 23): ratio <= 1.5 on both repositories; late/early <= 1.1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.services.execution.runs import create_run, open_context
from controller.services.execution.turn import run_turn
from controller.store.store import Store
from controller.wiring import process_environment

SPEC = """
objective = "benchmark the controller's own overhead"
turns = {turns}
[agent]
command = "echo $((CRUCIBLE_TURN % 2 * CRUCIBLE_TURN)) > src/f0.txt"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC m=$(cat src/f0.txt)"
name = "m"
direction = "maximize"
samples = 1
warmups = 0
confidence = 0
[budget]
max_consecutive_failures = 10000
[[component]]
name = "bench"
repo = "{repo}"
base = "main"
mutable = ["src/**"]
"""


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=True)
    return out.stdout.decode()


def make_repo(path: Path, files: int) -> Path:
    """A repository with ``files`` small files under src/, built with fast-import (no working tree)."""
    if (path / "done").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    chunks = [b"commit refs/heads/main\n", b"committer bench <b@b> 1700000000 +0000\n", b"data 5\ninit\n"]
    chunks.append(b"M 100644 inline src/f0.txt\ndata 2\n0\n\n")
    for i in range(1, files):
        body = f"file {i}\n".encode()
        name = f"src/d{i // 1000:03d}/f{i}.txt".encode()
        chunks.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name, len(body), body))
    git(path, "fast-import", "--quiet", stdin=b"".join(chunks))
    git(path, "checkout", "-q", "main")
    (path / "done").write_text("ok")
    return path


class Counts:
    """Git processes started and transactions committed while ``active`` (a turn runs, not the floor)."""

    def __init__(self) -> None:
        self.active = False
        self.git = 0
        self.commits = 0
        self.turns = 0
        original = subprocess.Popen.__init__
        counts = self

        def counting(self: subprocess.Popen[bytes], args: Any, *rest: Any, **kwargs: Any) -> None:
            if counts.active and isinstance(args, list | tuple) and os.path.basename(str(args[0])) == "git":
                counts.git += 1
            original(self, args, *rest, **kwargs)

        subprocess.Popen.__init__ = counting  # type: ignore[method-assign,assignment]

    def watch(self, store: Store) -> None:
        def committed(_connection: object) -> None:
            if self.active:
                self.commits += 1

        sa.event.listen(store._engine, "commit", committed)

    def line(self) -> str:
        turns = max(self.turns, 1)
        return f"per turn: {self.git / turns:.2f} git processes, {self.commits / turns:.2f} transactions"


COUNTS = Counts()


def measure_turns(
    home: Path, repo: Path, turns: int, between: Callable[[], None] | None = None
) -> list[float]:
    """Run ``turns`` turns and return each one's overhead (wall time minus command time); ``between``
    runs after each turn (the floor's repetition). ``COUNTS`` counts the turns' git and transactions."""
    spec_dir = Path(tempfile.mkdtemp(dir=home))
    spec_path = spec_dir / "crucible.toml"
    spec_path.write_text(SPEC.format(turns=turns, repo=repo))
    spec = load_spec(spec_path)
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'bench.db'}")
    store = Store.open(settings.database_url, upgrade=True)
    COUNTS.watch(store)
    run_id = create_run(store, spec, spec_path.read_text(), spec_path)
    ctx = open_context(settings, store, run_id, spec, environ=process_environment())
    from controller.services.execution.baseline import run_baseline

    assert run_baseline(ctx) is None
    overheads = []
    for n in range(1, turns + 1):
        before_cmd = ctx.executor.command_seconds
        COUNTS.active = True
        t0 = time.perf_counter()
        run_turn(ctx, n, 0, None)
        wall = time.perf_counter() - t0
        COUNTS.active, COUNTS.turns = False, COUNTS.turns + 1
        overheads.append(wall - (ctx.executor.command_seconds - before_cmd))
        if between is not None:
            between()
    store.close()
    return overheads


class Floor:
    """The unavoidable git work of one turn, done directly on a clone of the bench's repository."""

    def __init__(self, home: Path, repo: Path) -> None:
        self.checkout = home / f"floor-{repo.name}"
        git(home, "clone", "-q", "--shared", str(repo), str(self.checkout))
        self.base = git(self.checkout, "rev-parse", "HEAD").strip()
        self.times: list[float] = []

    def __call__(self) -> None:
        checkout, base = self.checkout, self.base
        (checkout / "src" / "f0.txt").write_text(f"floor {len(self.times)}\n")
        t0 = time.perf_counter()
        git(checkout, "status", "--porcelain=v1", "-z", "--untracked-files=all")
        git(checkout, "add", "-A")  # a kept turn may add files: commit -a alone would miss them
        git(
            checkout,
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-qm",
            "floor",
        )
        git(checkout, "diff", base, "HEAD")
        git(checkout, "reset", "-q", "--hard", base)
        git(checkout, "clean", "-ffdxq")
        self.times.append(time.perf_counter() - t0)


def bench_repo(label: str, home: Path, repo: Path, turns: int) -> float:
    floor = Floor(home, repo)
    floor()  # a first repetition warms the clone's index and the page cache, as the run's baseline does
    floor.times.clear()
    COUNTS.git = COUNTS.commits = COUNTS.turns = 0
    overheads = measure_turns(home, repo, turns, between=floor)
    median, floor_median = statistics.median(overheads), statistics.median(floor.times)
    ratio = median / floor_median
    # The agent writes a better value on odd turns (kept) and the base's on even ones (rejected).
    kept, rejected = statistics.median(overheads[0::2]), statistics.median(overheads[1::2])
    print(
        f"{label}: overhead/turn median {median * 1000:.1f} ms (kept {kept * 1000:.1f}, rejected "
        f"{rejected * 1000:.1f}), floor median {floor_median * 1000:.1f} ms, ratio {ratio:.2f} "
        f"(target <= 1.5); {COUNTS.line()}"
    )
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--long-turns", type=int, default=500)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "crucible-bench",
    )
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    home = args.cache / "home"
    if home.exists():
        shutil.rmtree(home)  # once per invocation, never in a loop
    home.mkdir()
    small = make_repo(args.cache / "small-repo", 50)
    big = make_repo(args.cache / f"big-repo-{args.files}", args.files)
    bench_repo("small repo (50 files)", home, small, args.turns)
    bench_repo(f"big repo ({args.files} files)", home, big, args.turns)
    if args.long_turns:
        overheads = measure_turns(home, small, args.long_turns)
        early = statistics.median(overheads[:20])
        late = statistics.median(overheads[-20:])
        print(
            f"long run ({args.long_turns} turns, small repo): overhead early {early * 1000:.1f} ms, "
            f"late {late * 1000:.1f} ms, late/early {late / early:.2f} (must not grow)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The repository stands on its own: no tracked file refers to a path outside the clone.

A user's clone has nothing beside it. A test that reads a sibling folder of the checkout passes on the
machine it was written on and fails everywhere else, and a README that sends readers to one leaves them
with a dead link; both happened (issue 12). This test reads every tracked text file for relative paths
that climb above the repository root, for ``Path(__file__)`` chains that do, and for absolute paths of
the development machine.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
# ``../x`` (any number of ``../``) followed by a name; resolved against the file's own folder.
RELATIVE = re.compile(r"(?<![\w./])((?:\.\./)+)([\w.-]+)")
# ``parents[N]`` optionally followed by ``.parent`` steps, on a path built from ``__file__``.
PARENTS = re.compile(r"__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]((?:\.parent\b)*)")
PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\))?((?:\.parent\b)+)")
# The folder the project's notes lived in beside the checkout, named anywhere (``issues show 12``).
SIBLING = re.compile(r"\.\./shared\b")
MACHINE = re.compile(r"(?<![\w/])/work/(?:shared|wt|main)\b")


def tracked_files() -> list[str]:
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, f"the tests run from a git clone: git ls-files failed: {proc.stderr}"
    return [name for name in proc.stdout.split("\0") if name]


def escapes(relative_to: PurePosixPath, climbs: int) -> bool:
    """Whether going up ``climbs`` folders from ``relative_to`` (a folder inside the repo) leaves it."""
    return climbs > len(relative_to.parts)


def problems_in(name: str, text: str) -> list[str]:
    folder = PurePosixPath(name).parent
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in RELATIVE.finditer(line):
            if escapes(folder, match.group(1).count("../")):
                found.append(f"{name}:{number}: {match.group(0)} is outside the repository")
        for match in PARENTS.finditer(line):
            # parents[0] is the file's folder, so parents[N] climbs N folders, each .parent one more.
            if escapes(folder, int(match.group(1)) + match.group(2).count(".parent")):
                found.append(f"{name}:{number}: {match.group(0)} climbs out of the repository")
        for match in PARENT_CHAIN.finditer(line):
            # the first .parent is the file's own folder
            if escapes(folder, match.group(1).count(".parent") - 1):
                found.append(f"{name}:{number}: {match.group(0)} climbs out of the repository")
        if SIBLING.search(line):
            found.append(f"{name}:{number}: refers to the shared folder beside the checkout")
        if MACHINE.search(line):
            found.append(f"{name}:{number}: an absolute path of the development machine")
    return found


def test_no_tracked_file_refers_outside_the_repository() -> None:
    problems = []
    for name in tracked_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the worktree but still in the index
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        problems += problems_in(name, text)
    assert not problems, "\n".join(problems)


def test_the_guard_finds_what_it_is_for() -> None:
    # Built from pieces so that this file itself does not trip the guard.
    sibling = "../" + "shared"
    here = "Path(__file" + "__)"
    assert problems_in("README.md", f"see {sibling}/DESIGN.md")
    assert problems_in(".ci/run", f"# see {sibling} and the README")
    assert problems_in("tests/webhooks/x.py", f'A = "{"../" * 2}{"../"}shared/oracles"')
    assert problems_in("tests/webhooks/x.py", f"{here}.resolve().parents[2].parent / 'shared'")
    assert problems_in("bench/x.py", f"{here}.parent.parent.parent / 'shared'")
    assert problems_in("docs/x.md", "read " + "/work/" + "shared/DESIGN.md")
    # inside the repository: fine
    assert not problems_in("tests/webhooks/x.py", f"{here}.resolve().parents[2] / 'tests'")
    assert not problems_in("docs/x.md", "see ../README.md and ../adr/0001-overall-design.md")
    assert not problems_in("bench/x.py", f"{here}.parent.parent / 'tests'")
    assert not problems_in("x.md", "see https://github.com/a/b/../c and ./x")

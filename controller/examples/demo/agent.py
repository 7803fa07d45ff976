"""The demo's example agent: tunes config.toml, and in refinement rounds acts on the reviewers' words.

Round 0 walks a short list of ideas (one per turn). In a refinement round it reads the quoted review
feedback in CANDIDATE.md: every ``key = value`` it finds for a key that exists in config.toml is applied,
and a comment crediting the reviewer is written next to it. It never commits: crucible does.
"""

import os
import re
from pathlib import Path

CONFIG = Path("config.toml")
IDEAS = [
    ("cache", "size_mb", "64"),
    ("workers", "count", "2"),
    ("cache", "size_mb", "128"),
    ("cache", "size_mb", "256"),
    ("cache", "size_mb", "512"),
    ("batch", "size", "2"),
]
ASSIGNMENT = re.compile(r"\b([a-z_]+)\.([a-z_]+)\s*(?:=|to)\s*([0-9]+)")


def set_value(text: str, table: str, key: str, value: str, note: str = "") -> tuple[str, bool]:
    """Set ``key`` inside ``[table]``; True when the file changed."""
    out, current, changed = [], None, False
    for line in text.splitlines():
        header = re.match(r"\s*\[([^\]]+)\]", line)
        if header:
            current = header.group(1).strip()
        match = re.match(rf"(\s*{key}\s*=\s*)([^#\s]+)(.*)", line)
        if current == table and match and match.group(2) != value:
            line = f"{match.group(1)}{value}{match.group(3)}"
            changed = True
            if note:
                out.append(f"# {note}")
        out.append(line)
    return "\n".join(out) + "\n", changed


def refine(candidate: str) -> None:
    text = CONFIG.read_text()
    author = "a reviewer"
    for line in candidate.splitlines():
        if line.startswith("From @"):
            author = line[5:].split(" ", 1)[0].rstrip(":")
        if not line.startswith("> "):
            continue
        for table, key, value in ASSIGNMENT.findall(line):
            text, changed = set_value(text, table, key, value, f"{table}.{key} = {value}, as {author} asked")
            if changed:
                print(f"HYPOTHESIS: {author}: set {table}.{key} = {value}")
    CONFIG.write_text(text)


def tried_since_last_keep(candidate: str) -> set[str]:
    """Hypotheses rejected since the champion last changed (read from CANDIDATE.md's history)."""
    tried: set[str] = set()
    for line in candidate.splitlines():
        if line.startswith("- turn "):
            if ": accepted " in line:
                tried.clear()
            else:
                tried.add(line.rsplit(": ", 1)[-1])
    return tried


def explore(turn: int, candidate: str) -> None:
    text = CONFIG.read_text()
    tried = tried_since_last_keep(candidate)
    for table, key, value in IDEAS[(turn - 1) % len(IDEAS) :] + IDEAS[: (turn - 1) % len(IDEAS)]:
        if f"set {table}.{key} to {value}" in tried:
            continue
        text, changed = set_value(text, table, key, value)
        if changed:
            CONFIG.write_text(text)
            print(f"HYPOTHESIS: set {table}.{key} to {value}")
            return


CANDIDATE = Path(os.environ["CRUCIBLE_CANDIDATE"]).read_text()
if os.environ.get("CRUCIBLE_ROUND", "0") != "0":
    refine(CANDIDATE)
else:
    explore(int(os.environ.get("CRUCIBLE_TURN", "1")), CANDIDATE)

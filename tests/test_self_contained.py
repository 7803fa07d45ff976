"""The repository stands on its own: no tracked file refers to a path outside the clone.

A user's clone has nothing beside it. A test that reads a sibling folder of the checkout passes on the
machine it was written on and fails everywhere else, and a README that sends readers to one leaves them
with a dead link; both happened (issue 12). This test reads every tracked text file for relative paths
that climb above the repository root, for ``Path(__file__)`` chains that do, and for absolute paths of
the development machine; and for citations of documents the repository lacks: a bare file name in
capitals (as ``README.md``), a section or rule of one (as ``README §2``), a path under ``docs/`` or
``adr/`` outside the tests (whose fixtures make up such paths), or an ``ADR-NNNN`` with no file (issue 22:
code cited a design file and a style guide 86 times that no clone had).
"""

from __future__ import annotations

import functools
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
# A document cited by its name alone (not a path such as ``src/NOTE.md`` in a test's fixture).
DOCUMENT = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9_-]*\.md)\b")
# A document cited by section or rule: ``README §2``, ``README.md §2``, ``README.md section 2`` (and
# ``\u00a7``, the section sign as JSON escapes it).
SECTION = re.compile(
    r"\b([A-Z][A-Z0-9_]{2,})(?:\.md)?\s*(?:§|\\u00a7)|\b([A-Z][A-Z0-9_]{2,})\.md,?\s+(?:section|rule)s?\b"
)
DOC_PATH = re.compile(r"(?<![\w/.-])((?:docs|adr)/[\w./-]*?\.md)\b")
ADR = re.compile(r"\bADR-(\d{4})\b")
# Documents crucible writes at run time, cited by name but never part of the repository.
WRITTEN_AT_RUN_TIME = {"CANDIDATE.md"}
# Third-party data kept verbatim (GitHub's OpenAPI description cites GitHub's own files).
THIRD_PARTY = ("tests/testdata/",)


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


@functools.lru_cache(maxsize=4)
def _citable(files: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The file names a citation may name and the ADR numbers, from ``files``: made once per set of
    files, not once per cited file (829 files x ~900 paths took the whole test ~5 s)."""
    names = frozenset({PurePosixPath(f).name for f in files} | WRITTEN_AT_RUN_TIME)
    adrs = frozenset(PurePosixPath(f).name[:4] for f in files if f.startswith("adr/"))
    return names, adrs


def missing_citations(name: str, text: str, files: set[str]) -> list[str]:
    """Citations in ``text`` (the file ``name``) of documents that are not among ``files``."""
    if name.startswith(THIRD_PARTY):
        return []
    names, adrs = _citable(frozenset(files))
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        cited = [m.group(1) for m in DOCUMENT.finditer(line)]
        cited += [f"{m.group(1) or m.group(2)}.md" for m in SECTION.finditer(line)]
        found += [
            f"{name}:{number}: cites {doc}, which the repository lacks" for doc in cited if doc not in names
        ]
        if not name.startswith("tests/"):
            found += [
                f"{name}:{number}: cites {m.group(1)}, which the repository lacks"
                for m in DOC_PATH.finditer(line)
                if m.group(1) not in files
            ]
        found += [
            f"{name}:{number}: cites ADR-{m.group(1)}, which adr/ lacks"
            for m in ADR.finditer(line)
            if m.group(1) not in adrs
        ]
    return found


def test_no_tracked_file_refers_outside_the_repository() -> None:
    problems = []
    for name, text in tracked_texts():
        problems += problems_in(name, text)
    assert not problems, "\n".join(problems)


def test_every_document_cited_is_in_the_repository() -> None:
    files = set(tracked_files())
    problems = []
    for name, text in tracked_texts():
        problems += missing_citations(name, text, files)
    assert not problems, "\n".join(problems)


def tracked_texts() -> list[tuple[str, str]]:
    texts = []
    for name in tracked_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the worktree but still in the index
            continue
        try:
            texts.append((name, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            continue  # binary
    return texts


def test_the_guard_finds_what_it_is_for() -> None:
    # Built from pieces so that this file itself does not trip the guard.
    sibling = "../" + "shared"
    here = "Path(__file" + "__)"
    assert problems_in("README.md", f"see {sibling}/" + "DESIGN" + ".md")
    assert problems_in(".ci/run", f"# see {sibling} and the README")
    assert problems_in("tests/webhooks/x.py", f'A = "{"../" * 2}{"../"}shared/oracles"')
    assert problems_in("tests/webhooks/x.py", f"{here}.resolve().parents[2].parent / 'shared'")
    assert problems_in("bench/x.py", f"{here}.parent.parent.parent / 'shared'")
    assert problems_in("docs/x.md", "read " + "/work/" + "shared/" + "DESIGN" + ".md")
    # inside the repository: fine
    assert not problems_in("tests/webhooks/x.py", f"{here}.resolve().parents[2] / 'tests'")
    assert not problems_in("docs/x.md", "see ../README.md and ../adr/0001-overall-design.md")
    assert not problems_in("bench/x.py", f"{here}.parent.parent / 'tests'")
    assert not problems_in("x.md", "see https://github.com/a/b/../c and ./x")


def test_the_citation_guard_finds_what_it_is_for() -> None:
    files = {"README.md", "CONTRIBUTING.md", "docs/spec.md", "adr/0003-the-seam.md", "controller/x.py"}
    # Built from pieces so that this file itself does not trip the guard.
    design, style = "DES" + "IGN", "STY" + "LE"
    assert missing_citations("controller/x.py", f'"""The run spec ({design}.md §3)."""', files)
    assert missing_citations("controller/x.py", f"# the steps of {design} §4-5", files)
    assert missing_citations("controller/x.py", f"(see {design}.md section 9)", files)
    assert missing_citations("controller/x.py", f"({style}.md rule 7)", files)
    assert missing_citations("docs/x.md", f'"description": "the keep rule ({design} \\u00a77)"', files)
    assert missing_citations("controller/x.py", "(see docs/" + "gone.md)", files)
    assert not missing_citations("tests/x.py", "(see docs/" + "gone.md)", files)  # a fixture's path
    assert missing_citations("controller/x.py", "(ADR-" + "0999)", files)
    # what the repository has, what crucible writes at run time, and file names in a test's data: fine
    assert not missing_citations(
        "controller/x.py", "(CONTRIBUTING.md, rule 7; docs/spec.md; ADR-0003)", files
    )
    assert not missing_citations("controller/x.py", "the README.md table, README §Layout", files)
    assert not missing_citations("controller/x.py", "renders CANDIDATE.md for the agent", files)
    assert not missing_citations("tests/x.py", 'team.bob_commits(branch, "src/NOTE.md", "a note")', files)
    assert not missing_citations("tests/testdata/api.json", f"{design}.md", files)

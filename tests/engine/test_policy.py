"""The path policy: mutable, protected and the implicit protection of the evaluator."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.engine.policy import PolicyVerdict, check_paths, evaluator_paths


def check(
    changed: list[str],
    mutable: list[str],
    protected: tuple[str, ...] | list[str] = (),
    evaluator: tuple[str, ...] = (),
) -> PolicyVerdict:
    return check_paths(changed, mutable=mutable, protected=protected, evaluator_paths=evaluator)


def test_paths_inside_mutable_are_allowed() -> None:
    verdict = check(["src/a.py", "src/pkg/deep/b.py"], ["src/**"])
    assert verdict == PolicyVerdict(ok=True, violations=(), evaluator=())


def test_nothing_changed_is_allowed_and_empty_mutable_allows_nothing() -> None:
    assert check([], ["src/**"]).ok
    assert check(["src/a.py"], []).violations == ("src/a.py: outside mutable",)


def test_outside_mutable_protected_and_evaluator_each_named_once_sorted() -> None:
    verdict = check(
        ["src/x.py", "README.md", "src/gen/a.py", "bench.py", "README.md", "src/ok.py"],
        ["src/**", "bench.py"],
        ["src/gen/**", "src/x.py"],
        ("bench.py",),
    )
    assert not verdict.ok
    assert verdict.violations == (
        "README.md: outside mutable",
        "bench.py: evaluator file",
        "src/gen/a.py: protected",
        "src/x.py: protected",
    )
    assert verdict.evaluator == ("bench.py",)


def test_evaluator_files_are_refused_even_when_mutable_and_not_protected() -> None:
    verdict = check(["conf/b.json", "conf/a.json"], ["**"], [], ("conf/b.json",))
    assert verdict.violations == ("conf/b.json: evaluator file",)
    assert verdict.evaluator == ("conf/b.json",)


def test_an_evaluator_file_outside_mutable_is_reported_as_outside_mutable() -> None:
    verdict = check(["bench.py"], ["src/**"], [], ("bench.py",))
    assert verdict.violations == ("bench.py: outside mutable",)
    assert verdict.evaluator == ()


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**", "a.py", True),
        ("**", "deep/er/a.py", True),
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/y/a.py", True),
        ("**/*.py", "x/y/a.txt", False),
        ("src/**/test_*.py", "src/test_a.py", True),
        ("src/**/test_*.py", "src/x/y/test_b.py", True),
        ("src/**/test_*.py", "lib/src/test_a.py", False),
        ("src/**", "src/a.py", True),
        ("src/**", "srcs/a.py", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/sub/a.py", False),
        ("*.md", "docs/guide.md", True),  # no slash: any depth, as in .gitignore
        ("/*.md", "docs/guide.md", False),
        ("/*.md", "README.md", True),
        ("src/", "src/a/b.py", True),  # a directory pattern covers everything below it
        ("src/", "src", False),  # ... but not a file of that name
        ("src/", "lib/src/a.py", True),  # no leading slash: a directory of that name at any depth
        ("/src/", "lib/src/a.py", False),
        ("/src/", "src/a.py", True),
        ("config/cache.toml", "config/cache.toml", True),
        ("config/cache.toml", "x/config/cache.toml", False),
    ],
)
def test_gitignore_style_globs(pattern: str, path: str, matches: bool) -> None:
    assert check([path], [pattern]).ok is matches
    allowed = check([path], ["**"], [pattern])
    assert allowed.ok is not matches
    if matches:
        assert allowed.violations == (f"{path}: protected",)


def test_paths_are_normalised_and_escapes_refused() -> None:
    assert check(["./src/a.py", "src//b.py"], ["src/**"]).ok
    verdict = check(["src/../README.md", "../other/x.py", "/etc/passwd", "src/../../x"], ["**"])
    assert verdict.violations == (
        "../other/x.py: outside the repository",
        "../x: outside the repository",
        "/etc/passwd: outside the repository",
    )
    assert check(["src/../README.md"], ["src/**"]).violations == ("README.md: outside mutable",)
    assert check(["src/x.py"], ["**"], [], ("./src/x.py",)).evaluator == ("src/x.py",)


def files(root: Path, *names: str) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    return root


def test_evaluator_paths_from_words_and_option_values(tmp_path: Path) -> None:
    root = files(tmp_path / "repo", "bench.py", "conf/b.json", "conf/unused.json", "tests/test_a.py")
    found = evaluator_paths(["python bench.py --cfg=conf/b.json", "pytest -q tests"], root)
    assert found == {"bench.py", "conf/b.json"}


def test_evaluator_paths_quoting_env_assignments_and_absolute_paths(tmp_path: Path) -> None:
    root = files(tmp_path / "repo", "my bench.py", "conf/c.yaml", "tools/run.sh", "data.csv")
    commands = [
        'python "my bench.py" ./data.csv',
        "CFG=conf/c.yaml sh -c true",
        f"bash {root / 'tools' / 'run.sh'}",
        "python missing.py --out=nowhere.json",
    ]
    assert evaluator_paths(commands, root) == {"my bench.py", "conf/c.yaml", "tools/run.sh", "data.csv"}


def test_evaluator_paths_ignore_files_outside_the_root(tmp_path: Path) -> None:
    root = files(tmp_path / "repo", "bench.py")
    files(tmp_path, "outside.py")
    commands = ["python ../outside.py", f"python {tmp_path / 'outside.py'}", "python bench.py"]
    assert evaluator_paths(commands, root) == {"bench.py"}


def test_evaluator_paths_name_a_symlink_and_its_target(tmp_path: Path) -> None:
    root = files(tmp_path / "repo", "real/bench.py")
    (root / "bench.py").symlink_to(root / "real" / "bench.py")
    assert evaluator_paths(["python bench.py"], root) == {"bench.py", "real/bench.py"}


def test_evaluator_paths_survive_unbalanced_quotes(tmp_path: Path) -> None:
    root = files(tmp_path / "repo", "bench.py")
    assert evaluator_paths(['python bench.py "oops'], root) == {"bench.py"}


def test_evaluator_paths_feed_the_check(tmp_path: Path) -> None:
    root = files(tmp_path / "repo", "src/bench.py", "src/a.py")
    evaluator = evaluator_paths(["python src/bench.py"], root)
    verdict = check_paths(
        ["src/a.py", "src/bench.py"], mutable=["src/"], protected=[], evaluator_paths=evaluator
    )
    assert verdict.violations == ("src/bench.py: evaluator file",)


def test_specs_compiled_once_per_list_still_answer_for_their_own_list() -> None:
    """ADR-0053: a list's compiled spec is kept and reused, by the list's content (not its length or
    identity): each of these answers only if its own list was matched."""
    assert check(["src/a.py"], ["src/**"]).ok
    assert not check(["src/a.py"], ["doc/**"]).ok  # as long, other patterns
    assert check(["doc/a.md"], ["doc/**"]).ok
    patterns = ["src/**"]
    assert check(["src/a.py"], patterns).ok
    patterns[0] = "lib/**"  # a list changed in place is its new content next time
    assert check(["src/a.py"], patterns).violations == ("src/a.py: outside mutable",)
    assert check(["src/a.py"], ["src/**"], ["src/a.py"]).violations == ("src/a.py: protected",)
    assert check(["src/a.py"], ["src/**"], ["src/b.py"]).ok

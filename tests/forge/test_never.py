"""Never-rules (docs/github.md), enforced on the forge layer's source: no merge, close, approve, review or
comment call exists, and the adapter offers nothing beyond the ``Forge`` protocol."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import controller.forge
from controller.forge.base import FeedbackReader, Forge
from controller.forge.github import GithubForge
from controller.forge.polling import GithubReader

FORGE_SOURCES = sorted(Path(controller.forge.__file__).parent.glob("*.py"))
FORBIDDEN_TEXT = (
    ".merge(",
    ".create_review(",
    ".create_issue_comment(",
    ".create_comment(",
    ".create_review_comment(",
    ".create_review_comment_reply(",
    ".edit(state=",
    ".delete_branch(",
)
FORBIDDEN_CALLS = {
    "merge",
    "create_review",
    "create_issue_comment",
    "create_comment",
    "create_review_comment",
}


def test_the_forge_layer_has_sources_to_check() -> None:
    assert {p.name for p in FORGE_SOURCES} >= {"base.py", "github.py", "auth.py"}


def test_no_forbidden_call_appears_in_the_source() -> None:
    found = [(p.name, text) for p in FORGE_SOURCES for text in FORBIDDEN_TEXT if text in p.read_text()]
    assert found == []


def test_no_call_merges_comments_reviews_or_changes_state() -> None:
    offending = []
    for path in FORGE_SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name = node.func.attr
            keywords = {k.arg for k in node.keywords}
            if name in FORBIDDEN_CALLS or (name == "edit" and (keywords - {"title", "body"})):
                offending.append(f"{path.name}:{node.lineno} .{name}({', '.join(map(str, keywords))})")
    assert offending == []


def public(cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}


def test_the_adapter_offers_exactly_the_protocol() -> None:
    protocol = public(Forge)
    # ``usage`` reports what the client spent for /metrics; it sends no request, so it is the one
    # method the adapter may offer beyond the protocol (the composition root reads it, not the runs).
    assert public(GithubForge) - {"usage"} == protocol
    assert "usage" in public(GithubForge)
    words = ("merge", "close", "approve", "comment", "review")
    assert not {name for name in protocol if any(word in name for word in words)}


def test_the_feedback_reader_only_reads() -> None:
    """The poll reader offers the reads of its protocol (and ``close`` for its connection pool), and
    its source sends nothing but GETs."""
    assert public(GithubReader) == public(FeedbackReader) | {"close"}
    assert all(n.startswith("list_") or n == "rate_status" for n in public(FeedbackReader))
    source = Path(inspect.getfile(GithubReader)).read_text()
    tree = ast.parse(source)
    verbs = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"get", "post", "put", "patch", "delete", "request", "send", "stream"}
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "_client"
    }
    assert verbs == {"get"}


def test_the_types_come_without_pygithub_and_the_adapter_on_demand() -> None:
    code = (
        "import sys, controller.forge as f; assert 'github' not in sys.modules, 'eager PyGithub import'; "
        "from controller.forge.github import GithubForge; assert f.GithubForge is GithubForge"
    )
    root = Path(controller.forge.__file__).parents[2]
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert proc.returncode == 0, proc.stderr

"""Rebuilds the third-party test data in this folder from the npm packages it comes from.

The tests read GitHub's own webhook examples and REST API description, never ones we wrote. The
packages are large (the API description alone is 13 MB; the webhook examples cover 58 events), so only
what the tests use is kept: the examples of the events crucible handles, and the operations crucible or
the local forge touch with every component they reference. This script is the trimming: running it
reproduces the committed files byte for byte from the pinned tarballs (their sha256 is checked).

    python tests/testdata/regenerate.py [--check]

``--check`` rebuilds into a temporary directory and exits 1 when anything differs from the committed
files. Needs the network (registry.npmjs.org); the tests themselves never do.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import io
import json
import re
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REGISTRY = "https://registry.npmjs.org"

WEBHOOKS_PACKAGE = ("@octokit/webhooks-examples", "7.6.1")
WEBHOOKS_SHA256 = "89e6cb1c6345d32e3dd775617fa54effbdc26c859e514898d7728e95e9738280"
# The events crucible reads (feedback, PR state) plus ping and push, which it must accept and ignore.
WEBHOOK_EVENTS = (
    "issue_comment",
    "ping",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_review_thread",
    "push",
    "status",
    "check_run",
)

OPENAPI_PACKAGE = ("@octokit/openapi", "23.0.2")
OPENAPI_SHA256 = "71a18407dd5e8464f4e0525daf03deabbe65abd9287d6adc7b5d98f516cd0d0c"
# Every operation crucible's forge adapters or the local forge serve, as (path template, methods).
OPERATIONS: dict[str, tuple[str, ...]] = {
    "/": ("get",),
    "/meta": ("get",),
    "/orgs/{org}": ("get",),
    "/orgs/{org}/repos": ("post",),
    "/rate_limit": ("get",),
    "/repos/{owner}/{repo}": ("get",),
    "/repos/{owner}/{repo}/assignees": ("get",),
    "/repos/{owner}/{repo}/assignees/{assignee}": ("get",),
    "/repos/{owner}/{repo}/branches": ("get",),
    "/repos/{owner}/{repo}/branches/{branch}": ("get",),
    "/repos/{owner}/{repo}/check-runs": ("post",),
    "/repos/{owner}/{repo}/check-runs/{check_run_id}": ("get", "patch"),
    "/repos/{owner}/{repo}/collaborators": ("get",),
    "/repos/{owner}/{repo}/collaborators/{username}": ("get", "put"),
    "/repos/{owner}/{repo}/collaborators/{username}/permission": ("get",),
    "/repos/{owner}/{repo}/commits": ("get",),
    "/repos/{owner}/{repo}/commits/{ref}": ("get",),
    "/repos/{owner}/{repo}/commits/{ref}/check-runs": ("get",),
    "/repos/{owner}/{repo}/commits/{ref}/status": ("get",),
    "/repos/{owner}/{repo}/commits/{ref}/statuses": ("get",),
    "/repos/{owner}/{repo}/compare/{basehead}": ("get",),
    "/repos/{owner}/{repo}/contents/{path}": ("get", "put"),
    "/repos/{owner}/{repo}/forks": ("post",),
    "/repos/{owner}/{repo}/git/matching-refs/{ref}": ("get",),
    "/repos/{owner}/{repo}/git/ref/{ref}": ("get",),
    "/repos/{owner}/{repo}/git/refs": ("post",),
    "/repos/{owner}/{repo}/git/refs/{ref}": ("delete", "patch"),
    "/repos/{owner}/{repo}/hooks": ("get", "post"),
    "/repos/{owner}/{repo}/hooks/{hook_id}": ("delete", "get", "patch"),
    "/repos/{owner}/{repo}/hooks/{hook_id}/config": ("get", "patch"),
    "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries": ("get",),
    "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries/{delivery_id}": ("get",),
    "/repos/{owner}/{repo}/hooks/{hook_id}/pings": ("post",),
    "/repos/{owner}/{repo}/issues": ("get",),
    "/repos/{owner}/{repo}/issues/comments": ("get",),
    "/repos/{owner}/{repo}/issues/comments/{comment_id}": ("delete", "get", "patch"),
    "/repos/{owner}/{repo}/issues/{issue_number}": ("get", "patch"),
    "/repos/{owner}/{repo}/issues/{issue_number}/assignees": ("delete", "post"),
    "/repos/{owner}/{repo}/issues/{issue_number}/assignees/{assignee}": ("get",),
    "/repos/{owner}/{repo}/issues/{issue_number}/comments": ("get", "post"),
    "/repos/{owner}/{repo}/issues/{issue_number}/labels": ("delete", "get", "post", "put"),
    "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}": ("delete",),
    "/repos/{owner}/{repo}/labels": ("get", "post"),
    "/repos/{owner}/{repo}/labels/{name}": ("delete", "get", "patch"),
    "/repos/{owner}/{repo}/pulls": ("get", "post"),
    "/repos/{owner}/{repo}/pulls/comments": ("get",),
    "/repos/{owner}/{repo}/pulls/comments/{comment_id}": ("delete", "get", "patch"),
    "/repos/{owner}/{repo}/pulls/{pull_number}": ("get", "patch"),
    "/repos/{owner}/{repo}/pulls/{pull_number}/comments": ("get", "post"),
    "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies": ("post",),
    "/repos/{owner}/{repo}/pulls/{pull_number}/commits": ("get",),
    "/repos/{owner}/{repo}/pulls/{pull_number}/files": ("get",),
    "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers": ("delete", "get", "post"),
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews": ("get", "post"),
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}": ("delete", "get", "put"),
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments": ("get",),
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/dismissals": ("put",),
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/events": ("post",),
    "/repos/{owner}/{repo}/statuses/{sha}": ("post",),
    "/user": ("get",),
    "/user/repos": ("get", "post"),
    "/users/{username}": ("get",),
}


def tarball(name: str, version: str, sha256: str) -> tarfile.TarFile:
    url = f"{REGISTRY}/{name}/-/{name.split('/')[-1]}-{version}.tgz"
    with urllib.request.urlopen(url, timeout=120) as response:
        data: bytes = response.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise SystemExit(f"{url}: sha256 {digest}, expected {sha256}")
    return tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")


def member_json(archive: tarfile.TarFile, member: str) -> Any:
    file = archive.extractfile(member)
    assert file is not None, member
    return json.load(file)


def webhooks(target: Path) -> None:
    """One file per example, ``event.action.N.json`` (N counts the event's examples; ``event`` stands
    for the action of events that have none), indented as published."""
    target.mkdir(parents=True, exist_ok=True)
    events = member_json(tarball(*WEBHOOKS_PACKAGE, WEBHOOKS_SHA256), "package/api.github.com/index.json")
    for event in events:
        if event["name"] not in WEBHOOK_EVENTS:
            continue
        for n, example in enumerate(event["examples"]):
            name = f"{event['name']}.{example.get('action', 'event')}.{n}.json"
            (target / name).write_text(json.dumps(example, indent=2, ensure_ascii=False))


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def openapi(target: Path) -> None:
    """The description reduced to ``OPERATIONS`` and the transitive closure of their ``$ref``s."""
    target.mkdir(parents=True, exist_ok=True)
    archive = tarball(*OPENAPI_PACKAGE, OPENAPI_SHA256)
    full = member_json(archive, "package/generated/api.github.com.json")
    paths = {
        path: {method: full["paths"][path][method] for method in methods}
        for path, methods in OPERATIONS.items()
    }
    components: dict[str, dict[str, Any]] = {}
    pending = list(refs(paths))
    while pending:
        ref = pending.pop()
        match = re.fullmatch(r"#/components/([^/]+)/([^/]+)", ref)
        if match is None:
            raise SystemExit(f"unexpected $ref {ref}")
        kind, name = match.groups()
        if name in components.setdefault(kind, {}):
            continue
        components[kind][name] = full["components"][kind][name]
        pending += refs(full["components"][kind][name])
    subset = {
        "components": components,
        "info": full["info"],
        "openapi": full["openapi"],
        "paths": paths,
        "servers": full["servers"],
    }
    text = json.dumps(subset, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    (target / "api.github.com.subset.json").write_text(text)
    license_file = archive.extractfile("package/LICENSE")
    assert license_file is not None
    (target / "LICENSE").write_bytes(license_file.read())


def differences(built: Path) -> list[str]:
    """What differs between a rebuild in ``built`` and the committed files."""
    out = []
    for folder, by_hand in (("github-webhooks", {"LICENSE"}), ("github-openapi", set())):
        new = {p.name for p in (built / folder).iterdir()}
        old = {p.name for p in (HERE / folder).iterdir()} - by_hand
        out += [f"{folder}/{name}: missing from the repository" for name in sorted(new - old)]
        out += [f"{folder}/{name}: no longer in the package" for name in sorted(old - new)]
        for name in sorted(new & old):
            if not filecmp.cmp(built / folder / name, HERE / folder / name, shallow=False):
                out.append(f"{folder}/{name}: differs")
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare a rebuild with the committed files")
    args = parser.parse_args(argv)
    if not args.check:
        webhooks(HERE / "github-webhooks")
        openapi(HERE / "github-openapi")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        webhooks(Path(tmp) / "github-webhooks")
        openapi(Path(tmp) / "github-openapi")
        problems = differences(Path(tmp))
    print("\n".join(problems) or "the committed test data equals a rebuild from the packages")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What GitHub compatibility costs the local forge (ADR-0008), as ratios against floors measured in the
same run.

Scene: one forge served over real HTTP in this process (uvicorn in a thread), alice's pull request
with ``--comments`` conversation comments of about 600 bytes of Markdown each (a heading, a list,
emphasis, code, a table). Arms alternate for ``--rounds`` rounds so a noisy machine slows both alike:

- bodies: ``GET /issues/1/comments?per_page=100`` with ``Accept: application/vnd.github.v3.full+json``
  (every body rendered to HTML and text) against the same list with the default media type (floor);
  "bodies" as clients re-read a list (renderings remembered), "bodies, cold" with the cache emptied
  before every request (every body rendered).
- GraphQL: ``markPullRequestReadyForReview`` / ``convertPullRequestToDraft`` through graphql-core
  (parse, validate against the schema slice, execute) against ``PATCH /pulls/1`` changing the title
  (floor): both change one PR and fire one webhook-less event.

    python bench/forge_compat.py [--comments 100] [--requests 40] [--rounds 3]

Printed: median milliseconds per request of each arm and ``arm/floor``. Targets: bodies <= 3.0,
bodies cold <= 30 (a few milliseconds a body), GraphQL <= 2.0.
Exit status 1 when a request fails (or a target is missed with --strict).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.localforge import media
from controller.localforge.server import running_forge
from controller.localforge.users import add_user

BODY = """### Timing

The loop is **slower** than before on `fixtures/big.json`:

- parse: 12 ms -> 19 ms
- ~~cache~~ hit rate down

| step | before | after |
|---|---|---|
| parse | 12 | 19 |
| write | 3 | 3 |

See <https://example.com/runs/42> and _please_ check `git log -p`.
"""
MUTATION = "mutation($id: ID!) { %s(input: {pullRequestId: $id}) { pullRequest { isDraft } } }"
READY, DRAFT = MUTATION % "markPullRequestReadyForReview", MUTATION % "convertPullRequestToDraft"
TARGETS = {"bodies": 3.0, "bodies, cold": 30.0, "graphql": 2.0}


def _setup(client: httpx.Client, root: Path, url: str, comments: int) -> str:
    work = root / "work"
    work.mkdir()
    client.post("/user/repos", json={"name": "demo", "auto_init": True}).raise_for_status()
    token = client.headers["Authorization"].split()[1]
    env_git = ["git", "-C", str(work)]
    subprocess.run(["git", "clone", "-q", f"{url}/alice/demo.git", str(work)], check=True)
    subprocess.run([*env_git, "checkout", "-q", "-b", "feature"], check=True)
    (work / "app.py").write_text("print('hi')\n")
    subprocess.run([*env_git, "add", "-A"], check=True)
    subprocess.run(
        [*env_git, "-c", "user.name=B", "-c", "user.email=b@example.com", "commit", "-q", "-m", "x"],
        check=True,
    )
    header = f"http.extraHeader=Authorization: Bearer {token}"
    subprocess.run([*env_git, "-c", header, "push", "-q", "origin", "feature"], check=True)
    pull = client.post("/repos/alice/demo/pulls", json={"title": "t", "head": "feature", "base": "main"})
    pull.raise_for_status()
    for n in range(comments):
        client.post("/repos/alice/demo/issues/1/comments", json={"body": f"{BODY}\n#{n}"}).raise_for_status()
    node: str = pull.json()["node_id"]
    return node


def _cold(client: httpx.Client, url: str, headers: dict[str, str]) -> httpx.Response:
    media.clear_cache()
    return client.get(url, headers=headers)


def _time(call: Callable[[int], httpx.Response], requests: int) -> float:
    """Median seconds per request over ``requests`` calls."""
    spent = []
    for n in range(requests):
        started = time.perf_counter()
        answer = call(n)
        spent.append(time.perf_counter() - started)
        if answer.status_code != 200 or "errors" in answer.text[:20]:
            raise SystemExit(f"request failed: {answer.status_code} {answer.text[:200]}")
    return statistics.median(spent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comments", type=int, default=100)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        token = add_user(root / "forge", "alice")
        with running_forge(root / "forge") as forge:
            headers = {"Authorization": f"token {token}"}
            with httpx.Client(base_url=forge.api_url, headers=headers, timeout=60) as client:
                node = _setup(client, root, forge.url, args.comments)
                listing = "/repos/alice/demo/issues/1/comments?per_page=100"
                full = {"Accept": "application/vnd.github.v3.full+json"}
                arms: dict[str, dict[str, Callable[[int], httpx.Response]]] = {
                    "bodies": {
                        "floor": lambda n: client.get(listing),
                        "arm": lambda n: client.get(listing, headers=full),
                    },
                    "bodies, cold": {
                        "floor": lambda n: client.get(listing),
                        "arm": lambda n: _cold(client, listing, full),
                    },
                    "graphql": {
                        "floor": lambda n: client.patch("/repos/alice/demo/pulls/1", json={"title": f"t{n}"}),
                        "arm": lambda n: client.post(
                            f"{forge.url}/api/graphql",
                            json={"query": READY if n % 2 else DRAFT, "variables": {"id": node}},
                        ),
                    },
                }
                missed = False
                for name, arm in arms.items():
                    floors, costs = [], []
                    for _ in range(args.rounds):
                        floors.append(_time(arm["floor"], args.requests))
                        costs.append(_time(arm["arm"], args.requests))
                    floor, cost = statistics.median(floors), statistics.median(costs)
                    ratio = cost / floor
                    verdict = "met" if ratio <= TARGETS[name] else "MISSED"
                    missed |= ratio > TARGETS[name]
                    print(
                        f"{name}: floor {floor * 1000:.1f} ms, arm {cost * 1000:.1f} ms, "
                        f"arm/floor = {ratio:.2f} (target <= {TARGETS[name]}: {verdict})"
                    )
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())

"""``crucible demo``: the whole loop end to end, offline, on embedded defaults.

It copies the bundled toy router (``controller/examples/demo``) into a fresh git repository in a temp
dir, points CRUCIBLE_HOME there too (SQLite, shared clones), starts the local forge in a child process
(crucible talks to it only over HTTP and git, as to GitHub) with the router pushed as ``demo/router``,
runs the built-in knobs proposer against the noisy benchmark with a guard, publishes each kept
candidate as a draft PR, and prints the PR, its score table and the final patch.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from controller.config.options import RunOptions
from controller.config.settings import ForgeSettings, Settings
from controller.config.spec import Spec, load_spec
from controller.domain.enums import RunStatus
from controller.forge.base import Forge
from controller.services.control.reader import RunReader
from controller.services.control.service import BeforeWatch, RunService
from controller.services.execution.context import Observer, RunContext
from controller.services.execution.loop import LoopResult
from controller.services.views.schemas import dump
from controller.store.ports import PullRecords

# The crucible command, run by the interpreter running the demo (its console script may not be on PATH).
CRUCIBLE = (sys.executable, "-m", "controller.cli")

DEMO_FILES = ("config.toml", "router.py", "bench.py", "test_router.py", "agent.py", "crucible.toml")


def make_demo_repo(target: Path, environ: Mapping[str, str]) -> Path:
    """A committed git repository holding the bundled example at ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    source = resources.files("controller") / "examples" / "demo"
    for name in DEMO_FILES:
        (target / name).write_text(source.joinpath(name).read_text())
    (target / ".gitignore").write_text("__pycache__/\n")
    env = {**environ, "GIT_AUTHOR_NAME": "Demo", "GIT_AUTHOR_EMAIL": "demo@example.com"}
    env.update(GIT_COMMITTER_NAME="Demo", GIT_COMMITTER_EMAIL="demo@example.com")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "toy router"]):
        subprocess.run(["git", *args], cwd=target, env=env, check=True, capture_output=True)
    return target


def _crucible(*args: str) -> str:
    """Run a ``crucible`` subcommand in a child process (the local forge is its own application)."""
    argv = [*CRUCIBLE, *args]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DemoForge:
    """The local forge in a child process, with one admin user; talked to over HTTP and git only."""

    def __init__(self, root: Path, environ: Mapping[str, str]) -> None:
        self.root = root
        self.environ = environ
        self.token = "demo-" + secrets.token_hex(16)
        self.reviewer_token = "reviewer-" + secrets.token_hex(16)
        _crucible("forge", "user", "add", "demo", "--root", str(root), "--admin", "--token", self.token)
        _crucible("forge", "user", "add", "reviewer", "--root", str(root), "--token", self.reviewer_token)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = list(CRUCIBLE)
        argv += ["forge", "serve", "--root", str(root), "--port", str(self.port)]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v3"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("the local forge exited during start-up")
            try:
                with urllib.request.urlopen(f"{self.api_url}/rate_limit", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the local forge did not answer within 30 s")

    def create_repo(self, name: str, source: Path) -> str:
        """Create ``demo/<name>`` and push ``source``'s main to it; return ``demo/<name>``."""
        clone_url = str(self._api(self.token, "POST", "/user/repos", {"name": name})["clone_url"])
        env = {**self.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader"}
        env["GIT_CONFIG_VALUE_0"] = f"Authorization: Bearer {self.token}"
        subprocess.run(
            ["git", "push", "-q", clone_url, "main:refs/heads/main"], cwd=source, env=env, check=True
        )
        return f"demo/{name}"

    def add_reviewer(self, repo: str) -> None:
        """Give the simulated reviewer write access to ``repo`` (so its feedback may steer)."""
        self._api(self.token, "PUT", f"/repos/{repo}/collaborators/reviewer", {"permission": "push"})

    def review(self, repo: str, number: int, body: str, comment: str) -> None:
        """Submit a review with one inline comment (``PATH:LINE:TEXT``) as the reviewer."""
        path, line, text = comment.split(":", 2)
        inline = [{"path": path, "line": int(line), "side": "RIGHT", "body": text}]
        payload = {"event": "COMMENT", "body": body, "comments": inline}
        self._api(self.reviewer_token, "POST", f"/repos/{repo}/pulls/{number}/reviews", payload)

    def _api(self, token: str, method: str, path: str, body: Mapping[str, object]) -> dict[str, object]:
        """One call of the forge's REST API, as GitHub's (what ``crucible forge create-repo``, ``review``
        and ``add-collaborator`` send), made here: each of those commands started a Python of its own,
        about a second apiece that the user of the demo waited for."""
        request = urllib.request.Request(
            f"{self.api_url}{path}",
            data=json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            raw = answer.read()
        found = json.loads(raw) if raw else {}
        return found if isinstance(found, dict) else {}

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


KUBERNETES_TABLE = """
[broker]
kind = "kubernetes"
image = "crucible:demo"
resources = { requests = { cpu = "100m", memory = "256Mi" }, limits = { memory = "2Gi" } }
deadline = "30m"
ttl = "10m"
"""


def _demo_spec(repo: Path, upstream: str, api_url: str, *, kubernetes: bool = False) -> str:
    """The bundled spec, pointed at the local forge (the copy lives outside the repository); with
    ``kubernetes``, its search round runs as a Job (``crucible demo --kubernetes``)."""
    text = (repo / "crucible.toml").read_text()
    text = text.replace('repo = "."', f'repo = "{repo.name}"\nupstream = "{upstream}"')
    return text + f'\n[publish]\nforge = "{api_url}"\n' + (KUBERNETES_TABLE if kubernetes else "")


@dataclass(frozen=True)
class DemoParts:
    """What the composition root builds for the demo: the driver, the read facade, and the client of
    the local forge (the one the service publishes through; the demo reads a PR's body with it)."""

    service: RunService
    reader: RunReader
    forge: Forge


DemoServices = Callable[[Settings, str, str], DemoParts]
"""Builds the demo's parts for its settings, publishing to the forge API URL with the token given
(the composition root does it; the demo only says which home, which forge and which token)."""


def run_demo(
    *,
    turns: int,
    as_json: bool,
    workdir: Path | None,
    observer: Observer,
    environ: Mapping[str, str],
    services: DemoServices,
    kubernetes: bool = False,
) -> int:
    """Run the demo; return the process exit code. ``kubernetes``: round 0 runs as a Job."""
    root = workdir or Path(tempfile.mkdtemp(prefix="crucible-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    repo = make_demo_repo(root / "router", environ)
    home = root / "crucible-home"
    home.mkdir(exist_ok=True)
    say = print if not as_json else (lambda *a, **k: None)
    say(f"demo: toy router in {repo}; crucible state in {home}")
    forge = DemoForge(root / "forge", environ)
    try:
        upstream = forge.create_repo("router", repo)
        forge.add_reviewer(upstream)
        say(f"demo: local forge at {forge.url}; upstream repository {upstream}")
        spec_path = root / "crucible.toml"
        spec_path.write_text(_demo_spec(repo, upstream, forge.api_url, kubernetes=kubernetes))
        settings = Settings(
            home=home,
            database_url=f"sqlite:///{home / 'crucible.db'}",
            forge=ForgeSettings(own_logins=("demo",), forge_write_interval=0),
        )
        parts = services(settings, forge.api_url, forge.token)
        return _run(parts, spec_path, forge, turns=turns, as_json=as_json, observer=observer)
    finally:
        forge.stop()


REVIEW_BODY = "Nice speed-up. One request before this leaves draft."
REVIEW_COMMENT = "Could we use batch.size = 4 here? Bigger batches amortise the backend round trip."


def _reviewer(forge: DemoForge, say: Callable[..., None], pulls_of: PullRecords) -> BeforeWatch:
    """After round 0 and before crucible watches for feedback: the simulated reviewer reviews the PR
    (the one ``pulls_of``, the run service's store, says round 0 opened)."""

    def review(ctx: RunContext, searched: LoopResult) -> None:
        pulls = pulls_of.list_pulls(ctx.run_id)
        if not pulls:
            return
        pull = pulls[0]
        line = _line_of(ctx, pull.component, "size = ", after="[batch]")
        forge.review(pull.repo, pull.number, REVIEW_BODY, f"config.toml:{line}:{REVIEW_COMMENT}")
        say(f"demo: @reviewer reviewed PR #{pull.number}: config.toml line {line}: {REVIEW_COMMENT!r}")

    return review


def _line_of(ctx: RunContext, component: str, prefix: str, *, after: str) -> int:
    """The 1-based line of the first line starting with ``prefix`` after the line ``after``."""
    text = (ctx.checkout("champion", component).path / "config.toml").read_text().splitlines()
    start = next((i for i, line in enumerate(text) if line.strip() == after), 0)
    return next((i + 1 for i in range(start, len(text)) if text[i].startswith(prefix)), 1)


def _run(
    parts: DemoParts,
    spec_path: Path,
    forge: DemoForge,
    *,
    turns: int,
    as_json: bool,
    observer: Observer,
) -> int:
    service, reader, client = parts.service, parts.reader, parts.forge
    spec = load_spec(spec_path)
    say = print if not as_json else (lambda *a, **k: None)
    say(f"demo: objective: {spec.objective}")
    options = RunOptions(turns=turns, publish_prs=True, watch_feedback=spec.feedback is not None)
    run_id = service.create(spec, spec_path.read_text(), spec_path, options)
    result = service.drive(run_id, observer=observer, before_watch=_reviewer(forge, say, service.store))
    view = dump(reader.view(run_id))
    if as_json:
        print(json.dumps(view, default=str))
    else:
        print(result.message)
        base = view["baseline"]["value"]
        best = view["best"]
        if best:
            print(f"baseline p50_ms {base:.3f} -> best {best['value']:.3f} (turn {best['turn']})")
        for pull in view["pull_requests"]:
            draft = "draft " if pull["draft"] else ""
            print(f"{draft}pull request #{pull['number']} ({pull['component']}): {pull['url']}")
            body = client.get_pull(upstream_of(spec, pull["component"]), pull["number"]).body
            print(score_table(body))
        for done in view["rounds"]:
            outcome = (
                f"pushed {str(done['head'])[:12]} onto the same branch" if done["kept"] else "pushed nothing"
            )
            print(f"refinement round {done['round']}: {outcome} ({done['detail']})")
        for reply in view["replies"]:
            print(f"drafted reply (not posted) to @{reply['author']}: {reply['reply']}")
        patch = reader.patch(run_id)
        print("final patch (crucible patch):" if patch else "no change was kept")
        print(patch, end="")
        home = service.settings.home
        print(f"run {run_id}; inspect it with CRUCIBLE_HOME={home} crucible runs show {run_id}")
    return 0 if result.status == RunStatus.COMPLETED else 1


def score_table(body: str) -> str:
    """The first markdown table of crucible's block: baseline vs candidate with their samples."""
    lines = body.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def upstream_of(spec: Spec, component: str) -> str:
    upstream = spec.component(component).upstream
    assert upstream is not None
    return upstream

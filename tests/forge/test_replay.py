"""The ``github`` adapter on real GitHub answers: PyGithub's recorded exchanges (its sdist's
``tests/ReplayData``), served from a local HTTP server.

They are LGPL-3.0, so they are downloaded at test time (``pip download PyGithub==<installed>
--no-binary :all:``) into the machine's cache, ``~/.cache/crucible`` (``$XDG_CACHE_HOME``), as the test
environment's other downloads are, never stored in this repository; without network the tests skip and
say why. Recorded answers show what the local forge cannot: PRs whose
head fork was deleted (``head.label: null``), PRs from before drafts existed, GitHub's own abuse
rate limit answer.
"""

from __future__ import annotations

import ast
import base64
import fcntl
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from controller.forge.auth import ForgeCredentials
from controller.forge.base import ForgeRateLimited, PullInfo
from controller.forge.github import GithubForge
from tests.conftest import MACHINE_HOME
from tests.forge.conftest import Sleeps
from tests.forge.scripted import Answer, ScriptedServer, scripted_server

VERSION = importlib.metadata.version("PyGithub")
# Read at import, before the autouse fixture points HOME into the test's temporary directory.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or MACHINE_HOME / ".cache") / "crucible"
FILES = (
    "PullRequest.setUp.txt",
    "Repository.testCreatePull.txt",
    "Repository.testGetPullsWithArguments.txt",
    "Repository.testCollaboratorPermission.txt",
    "SpecificExceptions.testAuthenticatedRateLimitExceeded.txt",
    "GithubIntegration.testGetRepoInstallation.txt",
    "Authentication.testAppInstallationAuthAuthentication.txt",
)


@dataclass(frozen=True)
class Recorded:
    """One exchange: 10 lines (protocol, verb, host, port, path, request headers, request body,
    status, response headers, response body)."""

    method: str
    path: str
    request_body: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: str

    @property
    def answer(self) -> Answer:
        return Answer(self.status, self.body, self.headers)

    @property
    def data(self) -> Any:
        return json.loads(self.body)


@pytest.fixture(scope="session")
def replay_dir() -> Path:
    """The few recordings used here, extracted once per machine and PyGithub version into its cache and
    shared by every session and xdist worker: a download in each session's temporary directory cost
    each run of the suite a `pip` start and a fetch from PyPI (5.4 s of setup in the 601c5ad run)."""
    target = CACHE / f"pygithub-{VERSION}-replay"
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"pygithub-{VERSION}-replay.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "complete").exists() or not all((target / name).is_file() for name in FILES):
            _download(target)
    return target


def _download(target: Path) -> None:
    download = target / "sdist"
    command = [sys.executable, "-m", "pip", "download", f"PyGithub=={VERSION}", "--no-binary", ":all:"]
    command += ["--no-deps", "--disable-pip-version-check", "-q", "-d", str(download)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip(
            f"PyGithub's recorded exchanges: `pip download PyGithub=={VERSION}` timed out (no network?)"
        )
    archives = list(download.glob("*.tar.gz"))
    if proc.returncode != 0 or not archives:
        reason = proc.stderr.strip().splitlines()[-1:] or ["no sdist"]
        pytest.skip(f"PyGithub's recorded exchanges: `pip download PyGithub=={VERSION}` failed: {reason[0]}")
    with tarfile.open(archives[0]) as archive:
        for member in archive.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if "/tests/ReplayData/" in member.name and name in FILES:
                extracted = archive.extractfile(member)
                assert extracted is not None
                (target / name).write_bytes(extracted.read())
    missing = [name for name in FILES if not (target / name).exists()]
    assert not missing, f"PyGithub {VERSION} no longer ships {missing}"
    shutil.rmtree(download)  # the recordings are kept, not the whole sdist
    (target / "complete").touch()


def recorded(replay_dir: Path, name: str) -> list[Recorded]:
    lines = (replay_dir / name).read_text().split("\n")
    exchanges = []
    for start in range(0, len(lines) - 9, 11):
        chunk = lines[start : start + 10]
        headers = tuple((str(k), str(v)) for k, v in ast.literal_eval(chunk[8]))
        exchanges.append(Recorded(chunk[1], chunk[4], chunk[6], int(chunk[7]), headers, chunk[9]))
    return exchanges


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with scripted_server() as running:
        yield running


def forge_at(server: ScriptedServer, sleeps: Sleeps | None = None, **options: Any) -> GithubForge:
    sleeps = sleeps or Sleeps()
    creds = ForgeCredentials.for_token("ghp_replay")
    return GithubForge(server.url, creds, write_interval=0, sleep=sleeps.sleep, clock=sleeps.clock, **options)


def expected(data: dict[str, Any]) -> PullInfo:
    """GitHub's pull request JSON as crucible reads it, straight from the recording."""
    label = data["head"]["label"]
    return PullInfo(
        number=data["number"],
        url=data["html_url"],
        head_ref=data["head"]["ref"],
        head_sha=data["head"]["sha"],
        head_owner=label.split(":")[0] if label else "",
        base_ref=data["base"]["ref"],
        state=data["state"],
        merged=data["merged_at"] is not None,
        draft=bool(data.get("draft")),
        body=data["body"] or "",
        title=data["title"] or "",
    )


def test_recorded_pull_requests_convert(replay_dir: Path, server: ScriptedServer) -> None:
    pulls = [e for e in recorded(replay_dir, "PullRequest.setUp.txt") if "/pulls/" in e.path]
    assert len(pulls) >= 4
    for exchange in pulls:
        server.answer("GET", exchange.path, exchange.answer)
    forge = forge_at(server)
    infos = []
    for exchange in pulls:
        _, owner, name, _, number = exchange.path.strip("/").split("/")
        info = forge.get_pull(f"{owner}/{name}", int(number))
        assert info == expected(exchange.data)
        assert info.merged == exchange.data["merged"]
        infos.append(info)
    assert any(i.head_owner == "" for i in infos)  # the head fork was deleted: GitHub sends label null
    assert {i.merged for i in infos} == {True, False}


def test_find_pull_on_a_recorded_list(replay_dir: Path, server: ScriptedServer) -> None:
    (listing,) = recorded(replay_dir, "Repository.testGetPullsWithArguments.txt")
    # The recording (2012) is older than draft PRs: today's GitHub sends "draft" in every list item,
    # and PyGithub would fetch each item again to learn it. Add the field as GitHub now sends it.
    items = [{**item, "draft": item.get("draft", False)} for item in listing.data]
    assert any("draft" not in item for item in listing.data)
    server.answer("GET", "/repos/PyGithub/PyGithub/pulls", Answer(200, json.dumps(items), listing.headers))
    found = forge_at(server).find_pull("PyGithub/PyGithub", "BeaverSoftware:master")
    newest = max(items, key=lambda p: p["number"])
    assert found == expected(newest)
    query = server.seen("GET", "/repos/PyGithub/PyGithub/pulls")[0].query
    assert "head=BeaverSoftware%3Amaster" in query and "state=all" in query
    assert forge_at(server).find_pull("PyGithub/PyGithub", "someone:else") is None


def test_create_pull_on_a_recorded_answer(replay_dir: Path, server: ScriptedServer) -> None:
    (created,) = recorded(replay_dir, "Repository.testCreatePull.txt")
    server.answer("POST", created.path, created.answer)
    sent = json.loads(created.request_body)
    info = forge_at(server).create_pull(
        "PyGithub/PyGithub", head=sent["head"], base=sent["base"], title=sent["title"], body=sent["body"]
    )
    assert info == expected(created.data)
    (request,) = server.seen("POST", created.path)
    assert request.json() == {k: sent[k] for k in ("head", "base", "title", "body")} | {"draft": True}


def test_permission_on_a_recorded_answer(replay_dir: Path, server: ScriptedServer) -> None:
    (answer,) = recorded(replay_dir, "Repository.testCollaboratorPermission.txt")
    server.answer("GET", answer.path, answer.answer)
    login = answer.path.split("/")[-2]
    assert forge_at(server).permission("PyGithub/PyGithub", login) == answer.data["permission"]


def test_githubs_recorded_abuse_limit_is_waited_out_or_raised(
    replay_dir: Path, server: ScriptedServer
) -> None:
    limited = recorded(replay_dir, "SpecificExceptions.testAuthenticatedRateLimitExceeded.txt")[-1]
    assert limited.status == 403
    repo = recorded(replay_dir, "PullRequest.setUp.txt")[0]
    server.answer("GET", repo.path, limited.answer, repo.answer)
    sleeps = Sleeps()
    assert forge_at(server, sleeps).repo("PyGithub/PyGithub").full_name == "PyGithub/PyGithub"
    assert sleeps.calls == [60.0]  # the recorded Retry-After

    server.answer("GET", repo.path, limited.answer)
    impatient = Sleeps()
    with pytest.raises(ForgeRateLimited) as caught:
        forge_at(server, impatient, max_wait=30).repo("PyGithub/PyGithub")
    assert caught.value.retry_after == 60.0 and impatient.calls == []


def test_an_app_on_recorded_installation_answers(replay_dir: Path, server: ScriptedServer) -> None:
    (installation,) = recorded(replay_dir, "GithubIntegration.testGetRepoInstallation.txt")
    token = recorded(replay_dir, "Authentication.testAppInstallationAuthAuthentication.txt")[0]
    server.answer("GET", installation.path, installation.answer)
    minted = f"/app/installations/{installation.data['id']}/access_tokens"
    server.answer("POST", minted, token.answer)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    forge = GithubForge(server.url, ForgeCredentials.for_app("42", key.decode()))
    full_name = installation.path.split("/repos/")[1].removesuffix("/installation")
    env = forge.git_auth_env(full_name)
    assert token.data["token"] in _decoded(env["GIT_CONFIG_VALUE_0"])
    assert server.seen("POST", minted)[0].headers["authorization"].startswith("Bearer ")


def _decoded(header: str) -> str:
    return base64.b64decode(header.split()[-1]).decode()

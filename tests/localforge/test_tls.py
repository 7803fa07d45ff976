"""``crucible forge serve --tls``: https with a self-signed certificate kept under the root, trusted
by clients only when told to, and the command that prints how to trust it."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from github import Auth, Github

from controller.localforge.server import running_forge
from controller.localforge.tls import ensure_certificate
from controller.localforge.users import add_user
from tests.conftest import git, make_repo
from tests.support import wait_until


def test_the_forge_serves_https_that_clients_trust_once_told(tmp_path: Path) -> None:
    token = add_user(tmp_path / "forge", "alice")
    with running_forge(tmp_path / "forge", tls=True) as forge:
        assert forge.url.startswith("https://127.0.0.1:") and forge.ca_file is not None
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{forge.api_url}/rate_limit")
        gh = Github(
            base_url=forge.api_url,
            auth=Auth.Token(token),
            verify=str(forge.ca_file),
            seconds_between_requests=0,
            seconds_between_writes=0,
        )
        repo = gh.get_user().create_repo("demo")
        assert repo.clone_url.startswith("https://127.0.0.1:")  # URLs follow the scheme clients used
        checkout = make_repo(tmp_path / "work", {"README.md": "# demo\n"})
        git(checkout, "remote", "add", "origin", repo.clone_url)
        trust = f"http.sslCAInfo={forge.ca_file}"
        git(
            checkout,
            "-c",
            trust,
            "-c",
            f"http.extraHeader=Authorization: Bearer {token}",
            "push",
            "-q",
            "origin",
            "main",
        )
        assert repo.get_branch("main").commit.sha == git(checkout, "rev-parse", "HEAD")
        # Its kept-alive TLS connection would hold the server's stop (uvicorn waits for it) until the
        # thread's join gave up, 15 s on.
        gh.close()


def test_the_certificate_is_kept_and_renewed_for_a_new_host(tmp_path: Path) -> None:
    first = ensure_certificate(tmp_path)
    pem = first.cert.read_bytes()
    assert ensure_certificate(tmp_path).cert.read_bytes() == pem  # kept: a trusted file stays valid
    assert first.key.stat().st_mode & 0o077 == 0
    other = ensure_certificate(tmp_path, "forge.internal")
    assert other.cert.read_bytes() != pem
    context = ssl.create_default_context(cafile=str(other.cert))  # a valid trust store on its own
    assert context.cert_store_stats()["x509_ca"] == 1


@pytest.mark.slow
def test_serve_tls_prints_how_to_trust_it(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = "from controller.localforge.cli import forge_cli; forge_cli()"
    argv = [sys.executable, "-c", code, "serve", "--root", str(tmp_path / "f"), "--port", str(port), "--tls"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    cert = tmp_path / "f" / "tls" / "cert.pem"
    try:

        def rate_limit() -> httpx.Response | None:
            try:  # the certificate is written before the server listens: both may still be missing
                trusted = ssl.create_default_context(cafile=str(cert))
                return httpx.get(f"https://127.0.0.1:{port}/api/v3/rate_limit", verify=trusted, timeout=1)
            except (httpx.HTTPError, OSError, ssl.SSLError):
                return None

        answer = wait_until(rate_limit, "the TLS forge to answer /rate_limit", proc=proc)
        assert answer.json()["rate"]["limit"] == 60
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.stderr is not None
    printed = proc.stderr.read()
    proc.stderr.close()
    assert f"serving https at https://127.0.0.1:{port}" in printed
    assert f"SSL_CERT_FILE={cert}" in printed and f"NODE_EXTRA_CA_CERTS={cert}" in printed
    assert f"GH_HOST=127.0.0.1:{port}" in printed and f"http.sslCAInfo={cert}" in printed

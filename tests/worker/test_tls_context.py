"""The worker's HTTP clients share one TLS context per process (issue 23).

A warm hypothesis pod makes two clients per hypothesis (the job's and the ledger's); httpx builds a
TLS context for each by loading the whole CA bundle, measured at 0.23 s a client on a loaded machine.
The context is now built once per process and per ``SSL_CERT_FILE``/``SSL_CERT_DIR``, as httpx would
build it, so a controller behind a private CA named by ``SSL_CERT_FILE`` is still verified with it.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import certifi
import pytest

from controller.store import http_ledger
from controller.store.http_ledger import HttpLedger, WorkerApi, tls_context


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str | None]]:
    """Each TLS context built (by httpx or by us: both go through ``ssl.create_default_context``),
    by the CA file it loaded."""
    made: list[str | None] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(kwargs.get("cafile"))
        return real(*args, **kwargs)

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setattr(ssl, "create_default_context", counting)
    http_ledger._tls_context.cache_clear()
    yield made
    http_ledger._tls_context.cache_clear()


def test_the_clients_of_many_hypotheses_build_one_tls_context(built: list[str | None]) -> None:
    for turn in range(3):
        with HttpLedger("https://controller.example", f"token-{turn}"):
            WorkerApi("https://controller.example", f"token-{turn}", "r1").close()
    assert built == [certifi.where()], "one context for six clients"
    assert tls_context() is tls_context()


def test_a_ca_bundle_named_by_ssl_cert_file_gets_its_own_context(
    built: list[str | None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    default = tls_context()
    bundle = tmp_path / "private-ca.pem"
    bundle.write_bytes(Path(certifi.where()).read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    private = tls_context()
    assert private is not default and built == [certifi.where(), str(bundle)]
    assert tls_context() is private

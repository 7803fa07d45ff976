"""A self-signed certificate for ``crucible forge serve --tls``.

Some clients speak only https: the ``gh`` CLI always does, so against a plain-http forge it stops
at "server gave HTTP response to HTTPS client". The forge therefore serves TLS with a certificate
it generates once under ``<root>/tls/`` (kept across restarts, so a client told to trust it keeps
trusting it) and says how to trust it. The certificate is its own CA (``CA:TRUE``): a file holding
it is a trust store for Go (``SSL_CERT_FILE``), Python (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``),
Node (``NODE_EXTRA_CA_CERTS``) and git (``http.sslCAInfo``). It is regenerated when it no longer
covers the host asked for or is about to expire.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALIDITY = timedelta(days=365)
RENEW_BEFORE = timedelta(days=7)


@dataclass(frozen=True)
class TlsFiles:
    """The PEM certificate (also the file to trust) and its private key."""

    cert: Path
    key: Path


def _names(host: str) -> list[str]:
    names = ["localhost", "127.0.0.1", "::1"]
    if host and host not in {"0.0.0.0", "::"} and host not in names:
        names.append(host)
    return names


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _covers(cert_path: Path, names: list[str], now: datetime) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        have = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    wanted = {_san(n) for n in names}
    return wanted <= set(have) and cert.not_valid_after_utc - RENEW_BEFORE > now


def ensure_certificate(root: Path, host: str = "127.0.0.1") -> TlsFiles:
    """The forge's certificate under ``root/tls``, generated when missing, stale or not for ``host``."""
    folder = root / "tls"
    files = TlsFiles(folder / "cert.pem", folder / "key.pem")
    names = _names(host)
    now = datetime.now(UTC)
    if files.key.exists() and _covers(files.cert, names, now):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "crucible local forge")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    files.key.touch(mode=0o600)
    files.key.write_bytes(key_pem)
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files


def trust_hint(files: TlsFiles, url: str) -> str:
    """What the operator prints: the URL and how each kind of client trusts the certificate."""
    host = url.split("://", 1)[-1].rstrip("/")
    cert = files.cert
    return "\n".join(
        [
            f"serving https at {url} with a self-signed certificate: {cert}",
            "trust it per client:",
            f"  gh:     GH_HOST={host} GH_ENTERPRISE_TOKEN=<token> SSL_CERT_FILE={cert} gh …",
            f"  Python: SSL_CERT_FILE={cert} (httpx, urllib) or REQUESTS_CA_BUNDLE={cert} (PyGithub)",
            f"  Node:   NODE_EXTRA_CA_CERTS={cert}",
            f"  git:    git -c http.sslCAInfo={cert} …",
        ]
    )

"""The scrubbed environment commands get, and redaction of what was removed."""

from __future__ import annotations

import pytest

from controller.workspace.envscrub import PROTOCOL_VARS, redact, scrub_env

ENVIRON = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/dev",
    "LANG": "C.UTF-8",
    "PWD": "/work",
    "OLDPWD": "/tmp",
    "CRUCIBLE_HOME": "/home/dev/.crucible",
    "CRUCIBLE_API_TOKEN": "crucible-api-token-value",
    "CRUCIBLE_RUN_ID": "stale-run",
    "GITHUB_TOKEN": "ghp_abcdefghijklmnop",
    "github_token": "ghp_lowercase_name",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
    "OPENAI_API_KEY": "sk-openai-value",
    "DB_PASSWORD": "db-password-value",
    "FTP_PASSWD": "ftp-passwd-value",
    "MYSQL_PWD": "mysql-pwd-value",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/dev/creds.json",
    "SSH_AUTH_SOCK": "/run/user/1000/ssh-agent.sock",
    "NPM_CONFIG__AUTH": "npm-auth-value",
    "GIT_DIR": "/elsewhere/.git",
    "GIT_CONFIG_VALUE_0": "Authorization: Bearer xyz",
    "DATABASE_URL": "postgresql://app:s3cr3t-pass@db:5432/app",
    "PIP_INDEX_URL": "https://ghs_tokenasuser@pypi.example.com/simple",
    "DOCS_URL": "https://example.com/docs",
    "SHORT_TOKEN": "abc",
}


def test_removes_secret_looking_and_crucible_and_git_variables() -> None:
    scrubbed = scrub_env(ENVIRON)
    assert scrubbed.env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/dev",
        "LANG": "C.UTF-8",
        "PWD": "/work",
        "OLDPWD": "/tmp",
        "DOCS_URL": "https://example.com/docs",
    }
    assert not PROTOCOL_VARS & set(scrubbed.env)


def test_secrets_are_the_removed_secret_values_longest_first() -> None:
    secrets = scrub_env(ENVIRON).secrets
    for value in (
        "crucible-api-token-value",
        "ghp_abcdefghijklmnop",
        "aws-secret-value",
        "db-password-value",
        "mysql-pwd-value",
        "postgresql://app:s3cr3t-pass@db:5432/app",
        "s3cr3t-pass",
        "ghs_tokenasuser",
        "Authorization: Bearer xyz",
    ):
        assert value in secrets
    # Not secrets: crucible's paths, git's own config, short values.
    assert "/home/dev/.crucible" not in secrets
    assert "/elsewhere/.git" not in secrets
    assert "abc" not in secrets
    assert [len(s) for s in secrets] == sorted((len(s) for s in secrets), reverse=True)


def test_allow_keeps_exact_names_only() -> None:
    scrubbed = scrub_env(ENVIRON, allow=["OPENAI_API_KEY", "DATABASE_URL", "openai_api_key"])
    assert scrubbed.env["OPENAI_API_KEY"] == "sk-openai-value"
    assert scrubbed.env["DATABASE_URL"] == ENVIRON["DATABASE_URL"]
    assert "sk-openai-value" not in scrubbed.secrets
    assert "GITHUB_TOKEN" not in scrubbed.env


def test_allow_never_passes_crucibles_own_variables() -> None:
    """A spec stored before the spec refused ``CRUCIBLE_*`` in ``env_allow`` still cannot pass them."""
    environ = {"CRUCIBLE_API_TOKEN": "api-token-0123456789", "CRUCIBLE_GITHUB_TOKEN": "ghp_abcdefghij0123"}
    scrubbed = scrub_env(
        environ, allow=["CRUCIBLE_API_TOKEN", "crucible_github_token", "CRUCIBLE_GITHUB_TOKEN"]
    )
    assert scrubbed.env == {}
    assert set(scrubbed.secrets) >= {"api-token-0123456789", "ghp_abcdefghij0123"}


def test_redact_replaces_every_occurrence_longest_first() -> None:
    text = "token ghp_abc123456 and again ghp_abc123456; url https://u:ghp_abc123456-long@h"
    out = redact(text, ["ghp_abc123456", "ghp_abc123456-long", ""])
    assert out == "token [REDACTED] and again [REDACTED]; url https://u:[REDACTED]@h"
    assert redact("nothing here", []) == "nothing here"


def test_scrubbed_secrets_redact_command_output() -> None:
    scrubbed = scrub_env(ENVIRON)
    leaked = "connecting to postgresql://app:s3cr3t-pass@db:5432/app with s3cr3t-pass"
    assert "s3cr3t" not in redact(leaked, scrubbed.secrets)


@pytest.mark.parametrize(
    "name",
    [
        "GH_PAT",
        "DB_PASS",
        "PASS",
        "DATABASE_DSN",
        "GPG_PRIVATE_KEY_FILE",
        "MY_AUTH",
        "SITE_COOKIE",
        "SESSION_ID",
    ],
)
def test_more_secret_names_are_scrubbed(name: str) -> None:
    # issue 11 §4: GH_PAT, DB_PASS and DATABASE_DSN reached commands.
    scrubbed = scrub_env({name: "value-1234", "PATH": "/usr/bin", "COMPASS": "north", "PWD": "/w"})
    assert name not in scrubbed.env
    assert scrubbed.env == {"PATH": "/usr/bin", "COMPASS": "north", "PWD": "/w"}
    assert "value-1234" in scrubbed.secrets


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("host=db user=app password=s3cr3tpw dbname=x", "s3cr3tpw"),
        ("postgres://app:hunter22@db/x", "hunter22"),
        ("ghp_" + "A" * 36, "ghp_" + "A" * 36),
        ("github_pat_" + "B" * 40, "github_pat_" + "B" * 40),
        ("glpat-" + "c" * 20, "glpat-" + "c" * 20),
        ("xoxb-1234567890-abcdef", "xoxb-1234567890-abcdef"),
        ("AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----", "b3Bl"),
    ],
)
def test_credential_looking_values_are_scrubbed_and_redacted(value: str, secret: str) -> None:
    scrubbed = scrub_env({"INNOCENT_NAME": value, "PATH": "/usr/bin"})
    assert scrubbed.env == {"PATH": "/usr/bin"}
    assert secret not in redact(f"the agent printed {value} here", scrubbed.secrets)
    # Redaction recognises such values even when no variable held them (a token read from a file).
    assert secret not in redact(f"found {value} in a file", [])

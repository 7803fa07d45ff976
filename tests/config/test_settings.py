"""The settings tree: read once from a mapping, grouped, documented, secrets hidden, errors named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.config.settings import ForgeSettings, Settings, describe
from controller.domain.errors import SpecError

ROOT = Path(__file__).resolve().parents[2] / "controller"


def test_settings_come_from_the_mapping_given_not_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRUCIBLE_GITHUB_TOKEN", "from-the-process")
    settings = Settings.from_env(
        {
            "HOME": "/home/u",
            "CRUCIBLE_DATABASE_URL": "postgresql+psycopg://db/crucible",
            "CRUCIBLE_OWN_LOGINS": "crucible-bot, other-bot,",
            "CRUCIBLE_FORGE_WRITE_INTERVAL": "0.5",
            "CRUCIBLE_MAX_CONCURRENT_RUNS": "8",
            "CRUCIBLE_WEBHOOK_SECRET": "s3cret",
        }
    )
    assert settings.home == Path("/home/u/.local/share/crucible")
    assert settings.database_url == "postgresql+psycopg://db/crucible" and not settings.database_is_sqlite
    assert settings.forge.github_token is None, "only the mapping handed in counts"
    assert settings.forge.own_logins == ("crucible-bot", "other-bot")
    assert settings.forge.forge_write_interval == 0.5
    assert settings.scheduler.max_concurrent_runs == 8
    assert settings.webhooks.webhook_secret is not None
    assert settings.webhooks.webhook_secret.get_secret_value() == "s3cret"


def test_home_defaults_and_the_sqlite_database_lives_in_it(tmp_path: Path) -> None:
    settings = Settings.from_env({"CRUCIBLE_HOME": str(tmp_path / "h")})
    assert settings.home == tmp_path / "h"
    assert settings.database_url == f"sqlite:///{tmp_path / 'h' / 'crucible.db'}"
    assert settings.run_dir("r1") == tmp_path / "h" / "runs" / "r1"
    xdg = Settings.from_env({"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert xdg.home == tmp_path / "xdg" / "crucible"


def test_building_a_group_directly_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRUCIBLE_FORGE_WRITE_INTERVAL", "7")
    assert ForgeSettings().forge_write_interval == 1.0
    assert Settings(home=Path("/x"), database_url="sqlite://").forge.forge_write_interval == 1.0


def test_secrets_never_show_in_repr() -> None:
    settings = Settings.from_env(
        {"CRUCIBLE_GITHUB_TOKEN": "ghp_topsecret", "CRUCIBLE_API_TOKEN": "api-secret"}
    )
    text = repr(settings) + str(settings)
    assert "ghp_topsecret" not in text and "api-secret" not in text


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CRUCIBLE_FORGE_WRITE_INTERVAL", "soon"),
        ("CRUCIBLE_FORGE_WRITE_INTERVAL", "-1"),
        ("CRUCIBLE_MAX_CONCURRENT_RUNS", "0"),
        ("CRUCIBLE_MAX_CONCURRENT_RUNS", "many"),
        ("CRUCIBLE_PARK_WATCHING", "maybe"),
        ("CRUCIBLE_LEASE_TTL", "0s"),
        ("CRUCIBLE_LEASE_TTL", "soon"),
    ],
)
def test_a_bad_value_names_the_variable(name: str, value: str) -> None:
    with pytest.raises(SpecError) as err:
        Settings.from_env({name: value})
    assert err.value.key == name


def test_watching_runs_are_parked_unless_told_otherwise() -> None:
    assert Settings.from_env({}).scheduler.park_watching is True
    assert Settings.from_env({"CRUCIBLE_PARK_WATCHING": "false"}).scheduler.park_watching is False


def test_lower_case_names_are_not_the_documented_variables() -> None:
    assert Settings.from_env({"crucible_max_concurrent_runs": "9"}).scheduler.max_concurrent_runs == 4


def test_every_setting_is_documented_with_its_variable() -> None:
    rows = describe()
    names = [name for name, _default, _doc in rows]
    assert len(names) == len(set(names))
    for name, _default, doc in rows[3:]:
        assert doc.startswith(name), f"{name}: its docstring names the variable first"


def test_nothing_else_in_controller_reads_the_environment() -> None:
    """CONTRIBUTING.md, rule 7: the composition root reads it once; everything else is handed a mapping.

    Allowed: ``wiring.py`` (the one read), ``localforge`` (its own application with its own edge),
    the bundled example agent (a user program), and ``workspace/git.py``: crucible's own git
    commands run in crucible's own environment less the inherited ``GIT_*`` variables, exactly what a
    child process inherits, and threading a mapping through every git call would hand each of them
    the same thing (ADR-0013). The environment of the run's commands (``services/execution/runs.py``,
    ``services/control/dryrun.py``) and their ``PATH`` (``workspace/sandbox*.py``) are parameters."""
    allowed = {
        "wiring.py",
        "workspace/git.py",  # crucible's own git commands, without inherited GIT_* variables
        "services/execution/runs.py",  # sandbox.readonly expands ~ against the controller HOME by default
        "workspace/selfguard.py",  # finds the worker token's bytes in the C environment to wipe them
        # httpx's default TLS context reads SSL_CERT_FILE/SSL_CERT_DIR itself; the one-per-process cache
        # of it is keyed by the same two variables, so it sees exactly what httpx sees (issue 23)
        "store/http_ledger.py",
    }
    offenders = []
    pattern = re.compile(r"os\.environ|os\.getenv|getenv\(")
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("localforge/", "examples/")) or rel in allowed:
            continue
        code = [
            line for line in path.read_text().splitlines() if not line.lstrip().startswith(("#", '"""', "``"))
        ]
        if any(pattern.search(line) for line in code):
            offenders.append(rel)
    assert offenders == []

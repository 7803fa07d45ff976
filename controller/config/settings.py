"""Process-wide settings: one typed tree, read from the environment once at the edge and passed in.

CONTRIBUTING.md, rule 7 and ADR-0003: the composition root (``controller.wiring``) calls ``Settings.from_env``
with the process environment exactly once; every other module receives the settings (or the one
group it needs). Nothing else in ``controller`` reads the environment. The groups follow kopf's
settings: one small frozen model per concern, each field documented with its unit and its reason.
The variables keep their flat ``CRUCIBLE_*`` names (``CRUCIBLE_GITHUB_TOKEN``, not
``CRUCIBLE_FORGE__TOKEN``) because users and CI already set them.

Building a group from its constructor never reads the environment (so tests state what they use);
only ``from_env(mapping)`` does, and a bad value is a ``SpecError`` naming the variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo

from controller.config.paths import database_url, home_dir
from controller.config.units import parse_duration
from controller.domain.errors import SpecError

PREFIX = "CRUCIBLE_"


class SettingsGroup(BaseModel):
    """Base of every group: frozen, unknown fields refused, and no implicit environment reads.

    A plain pydantic model, not pydantic-settings' ``BaseSettings``: every field is a scalar (or a
    comma-separated list split by its own validator), so reading the environment is one lookup per
    field, and the 0.1-1 s that pydantic-settings takes to import is not paid by ``crucible worker``,
    whose pods start once per parallel round slot (ADR-0035)."""

    # Without ``use_attribute_docstrings``: it reads and parses this module's source at import, in every
    # process; ``describe`` reads the field docstrings only when asked.
    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self:
        """The group as ``environ`` sets it; SpecError naming the variable for a bad value.

        Only the documented upper-case names count (``crucible_home`` is not ``CRUCIBLE_HOME``); the
        value goes to the field as the text it is, which pydantic converts (numbers, booleans, paths)."""
        values = {
            name: environ[PREFIX + name.upper()]
            for name in cls.model_fields
            if PREFIX + name.upper() in environ
        }
        try:
            return cls(**values)
        except ValidationError as exc:
            raise _spec_error(cls, exc) from None


def _spec_error(cls: type[BaseModel], exc: ValidationError) -> SpecError:
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else ""
    var = PREFIX + name.upper() if name in cls.model_fields else name
    return SpecError(var, error["msg"])


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class ForgeSettings(SettingsGroup):
    """How crucible talks to GitHub (or GitHub Enterprise, or the local forge).

    Credentials come only from here, never from the run spec, so they never sit in a committed or
    stored file (``forge.auth.ForgeCredentials`` checks that exactly one kind is configured)."""

    github_token: SecretStr | None = None
    """CRUCIBLE_GITHUB_TOKEN: a token the forge accepts (personal access token, installation token)."""
    github_app_id: str | None = None
    """CRUCIBLE_GITHUB_APP_ID: authenticate as this GitHub App instead of with a token."""
    github_app_private_key: SecretStr | None = None
    """CRUCIBLE_GITHUB_APP_PRIVATE_KEY: the App's private key as PEM text."""
    github_app_private_key_file: Path | None = None
    """CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE: or the path of that PEM file."""
    forge_write_interval: float = Field(default=1.0, ge=0)
    """CRUCIBLE_FORGE_WRITE_INTERVAL, seconds between two write calls to the forge; GitHub asks
    integrations for at least one second to stay clear of its secondary rate limits."""
    own_logins: tuple[str, ...] = ()
    """CRUCIBLE_OWN_LOGINS, comma-separated: crucible's own accounts, whose activity never triggers a
    round (needed when the token's login is not the only one crucible writes as)."""
    forge_hosts: tuple[str, ...] = ()
    """CRUCIBLE_FORGE_HOSTS, comma-separated forge API URLs (``https://ghe.acme.dev/api/v3``) or hosts
    (``ghe.acme.dev``, meaning https on its default port): the only forges ``crucible serve`` sends
    its credentials to. Unset, ``https://api.github.com`` alone; a submitted spec naming any other
    ``publish.forge`` is refused before a request is made, because the spec's author is not the
    operator and must not be able to point the controller's token at a listener of their own."""
    dashboard_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    """CRUCIBLE_DASHBOARD_URL: the dashboard as reviewers reach it (``https://crucible.acme.dev``);
    the result crucible reports on a PR links to the run's page there. Unset: no link."""

    @field_validator("own_logins", "forge_hosts", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return _split_commas(value)


class WebhookSettings(SettingsGroup):
    """The webhook endpoint (``crucible loop --listen`` and ``crucible serve``)."""

    webhook_secret: SecretStr | None = None
    """CRUCIBLE_WEBHOOK_SECRET: the HMAC secret GitHub signs deliveries with; without it the
    endpoint refuses every delivery (503), so an unsigned request can never steer a run."""


class ApiSettings(SettingsGroup):
    """The operator REST API of ``crucible serve`` and the client side of ``--server``."""

    api_token: SecretStr | None = None
    """CRUCIBLE_API_TOKEN: bearer token for every route (and what ``--server`` sends)."""
    api_readonly_token: SecretStr | None = None
    """CRUCIBLE_API_READONLY_TOKEN: bearer token for GET routes only (dashboards, monitoring)."""
    max_event_streams: int = Field(default=64, ge=1)
    """CRUCIBLE_MAX_EVENT_STREAMS, streams: live event streams (API and dashboard) one server keeps open
    at once; each polls the database every half second, so past this a new one gets 429."""
    max_event_streams_per_token: int = Field(default=8, ge=1)
    """CRUCIBLE_MAX_EVENT_STREAMS_PER_TOKEN, streams: of those, how many one bearer token or one
    dashboard session may hold (a few browser tabs), so one reader cannot take them all."""
    allow_unsandboxed: bool = False
    """CRUCIBLE_ALLOW_UNSANDBOXED: let ``crucible serve`` take submitted specs whose commands would run
    on the controller without bubblewrap (``sandbox.mode = "none"``, or ``"auto"`` where bubblewrap
    is unusable). Such a command runs as the controller's user and can read everything it can (its
    environment through ``/proc``, its tokens, its database), so a write token becomes the
    controller's credentials; set it only where every write-token holder is trusted that far."""


class SchedulerSettings(SettingsGroup):
    """How many runs one controller drives at once."""

    max_concurrent_runs: int = Field(default=4, ge=1)
    """CRUCIBLE_MAX_CONCURRENT_RUNS, runs: each local run's turns run commands that compete for the
    machine's cores and disk; more replicas, not a higher number, scale a shared database. A run
    parked while it waits for review feedback does not count (``park_watching``)."""

    park_watching: bool = True
    """CRUCIBLE_PARK_WATCHING: a watching run with nothing to do holds no thread and no context and is
    woken by its feedback, a steer, a cancel or a timer (ADR-0020); false keeps a thread per watching
    run (the earlier path, for comparison)."""


class KubernetesSettings(SettingsGroup):
    """Where runs with ``[broker] kind = "kubernetes"`` create their Jobs (ADR-0015)."""

    kubeconfig: Path | None = None
    """CRUCIBLE_KUBECONFIG: the kubeconfig file of the cluster; unset, the controller must run in the
    cluster and uses its pod's service account (deploy/'s Role)."""
    kube_namespace: str | None = None
    """CRUCIBLE_KUBE_NAMESPACE: the controller's namespace, where Jobs go when a spec names none;
    default: the kubeconfig context's, or the service account's."""


class WorkerSettings(SettingsGroup):
    """What the controller tells the workers of remote rounds (``crucible worker``, ADR-0014)."""

    worker_controller_url: str | None = None
    """CRUCIBLE_WORKER_CONTROLLER_URL: the controller's API as loop pods reach it (a Service URL such
    as ``http://crucible.crucible.svc:8080``); default: the host and port ``crucible serve`` listens on."""
    worker_token_ttl: float = Field(default=6 * 3600.0, gt=0)
    """CRUCIBLE_WORKER_TOKEN_TTL, seconds: the longest a round's worker token is good (it is revoked
    as soon as the round ends); bounds what a leaked token could do, so keep it near a round's length."""
    confirm_keeps: bool = True
    """CRUCIBLE_CONFIRM_KEEPS: a remote round's keep counts only once a confirmation, a pod of its own
    where no agent runs, measured the claimed commit again (ADR-0043): one more measurement per keep.
    ``false`` records keeps on their samples alone (the worker's word for the samples)."""


class Settings(BaseModel):
    """The whole tree. ``home`` and ``database_url`` are top-level because every command needs them.

    home: CRUCIBLE_HOME; worktrees, logs, artifacts and the default SQLite database live here, never
        in the user's checkout. Default ``$XDG_DATA_HOME/crucible`` or ``~/.local/share/crucible``.
    database_url: CRUCIBLE_DATABASE_URL; default SQLite at ``<home>/crucible.db``. PostgreSQL
        (``postgresql+psycopg://…``) for a server with replicas.
    lease_ttl_s: CRUCIBLE_LEASE_TTL (a duration, ``30s``): how long a run's lease outlives its
        holder's last heartbeat (renewed every third of it), so how soon a dead holder's run is
        taken over; top-level because every process that drives a run holds a lease.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    home: Path
    database_url: str
    lease_ttl_s: float = Field(default=30.0, gt=0)
    forge: ForgeSettings = Field(default_factory=ForgeSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)
    workers: WorkerSettings = Field(default_factory=WorkerSettings)

    GROUPS: ClassVar[dict[str, type[SettingsGroup]]] = {
        "forge": ForgeSettings,
        "webhooks": WebhookSettings,
        "api": ApiSettings,
        "scheduler": SchedulerSettings,
        "kubernetes": KubernetesSettings,
        "workers": WorkerSettings,
    }

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Every group from ``environ`` (the edge passes ``os.environ`` once); SpecError if bad."""
        home = home_dir(environ)
        url = database_url(environ, home)
        ttl = parse_duration(environ.get("CRUCIBLE_LEASE_TTL") or "30s", "CRUCIBLE_LEASE_TTL")
        if ttl <= 0:
            raise SpecError("CRUCIBLE_LEASE_TTL", "must be a positive duration")
        groups = {name: group.from_env(environ) for name, group in cls.GROUPS.items()}
        return cls(home=home, database_url=url, lease_ttl_s=ttl, **groups)

    def run_dir(self, run_id: str) -> Path:
        """Everything one run owns: workspaces, logs, CANDIDATE.md."""
        return self.home / "runs" / run_id

    @property
    def database_is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def describe() -> list[tuple[str, str, str]]:
    """(variable, default, documentation) for every setting: for docs and ``--help`` texts."""
    rows = [
        ("CRUCIBLE_HOME", "~/.local/share/crucible", "state directory (runs, clones, SQLite)"),
        ("CRUCIBLE_DATABASE_URL", "sqlite:///<home>/crucible.db", "the database"),
        ("CRUCIBLE_LEASE_TTL", "30s", "how long a run's lease outlives its holder's last heartbeat"),
    ]
    for group in Settings.GROUPS.values():
        docs = _attribute_docstrings(group)
        for name, info in group.model_fields.items():
            rows.append((PREFIX + name.upper(), _default(info), docs.get(name, "").strip()))
    return rows


def _attribute_docstrings(cls: type) -> dict[str, str]:
    """The string literal under each annotated field of ``cls``'s body, by field name."""
    import ast
    import inspect
    import textwrap

    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for field, after in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _default(info: FieldInfo) -> str:
    return "-" if info.default is None or info.is_required() else repr(info.default)

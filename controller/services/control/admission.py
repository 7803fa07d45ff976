"""What ``crucible serve`` admits from a spec submitted over its API (issue 21, ADR-0025).

Whoever holds the API's write token writes the spec, and a spec is code the controller runs: without
these rules a write token was the controller's own secrets (an unsandboxed agent read its
``/proc/<pid>/environ``; ``agent.env_allow`` handed it ``CRUCIBLE_GITHUB_TOKEN``; a ``publish.forge`` of
the submitter's choosing received ``Authorization: token …`` while the spec was merely validated).
The spec's author is not the operator, so before anything is stored or sent:

1. commands that would run on the controller run under bubblewrap, unless the operator set
   ``CRUCIBLE_ALLOW_UNSANDBOXED``;
2. ``agent.env_allow`` names no variable the controller holds a secret in;
3. ``publish.forge`` is one of the forges the operator configured (``CRUCIBLE_FORGE_HOSTS``).

Each refusal is a ``SpecError`` naming the field (422). ``crucible loop`` on one's own machine is not
held to these: there the spec's author is the operator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from controller.config.settings import Settings
from controller.config.spec import Spec
from controller.domain.errors import SpecError
from controller.workspace.sandbox import resolve_sandbox

DEFAULT_FORGE = "https://api.github.com"
ALLOW_UNSANDBOXED_VAR = "CRUCIBLE_ALLOW_UNSANDBOXED"
FORGE_HOSTS_VAR = "CRUCIBLE_FORGE_HOSTS"
# Crucible's own configuration, and git's (``GIT_CONFIG_VALUE_n`` carries the push credential).
GUARDED_PREFIXES = ("CRUCIBLE_", "GIT_")
# What the controller's own clients read credentials from: its ssh agent, libpq's password and files,
# the cluster's kubeconfig.
GUARDED_NAMES = frozenset({"SSH_AUTH_SOCK", "PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE", "KUBECONFIG"})
MIN_SECRET_LEN = 8  # shorter values would match unrelated variables by chance
DEFAULT_PORTS = {"http": 80, "https": 443}


def forge_origin(url: str) -> str:
    """``scheme://host:port`` of a forge API URL, or of a bare host (https); lower-cased, the port
    explicit, so ``https://API.github.com/`` and ``api.github.com`` are one forge."""
    text = url.strip()
    parts = urlsplit(text if "://" in text else f"https://{text}")
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not a forge API URL or host: {url!r}")
    port = parts.port or DEFAULT_PORTS[scheme]
    return f"{scheme}://{parts.hostname.lower()}:{port}"


def forge_origins(hosts: Iterable[str]) -> frozenset[str]:
    """The origins of ``CRUCIBLE_FORGE_HOSTS``; unset, GitHub's API alone. SpecError for a bad entry."""
    entries = list(hosts) or [DEFAULT_FORGE]
    try:
        return frozenset(forge_origin(entry) for entry in entries)
    except ValueError as exc:
        raise SpecError(FORGE_HOSTS_VAR, str(exc)) from None


def controller_secrets(settings: Settings) -> list[str]:
    """The secret values the controller holds: its tokens, the webhook secret, the forge credential
    and the database password."""
    held = [
        settings.forge.github_token,
        settings.forge.github_app_private_key,
        settings.webhooks.webhook_secret,
        settings.api.api_token,
        settings.api.api_readonly_token,
    ]
    values = [s.get_secret_value() for s in held if s is not None]
    password = urlsplit(settings.database_url).password
    if password:
        values.append(password)
    return [v for v in values if len(v) >= MIN_SECRET_LEN]


def secret_holders(settings: Settings, environ: Mapping[str, str]) -> frozenset[str]:
    """The variables of the controller's environment that hold one of its secrets under another name
    (``GITHUB_TOKEN`` set to the value of ``CRUCIBLE_GITHUB_TOKEN``)."""
    secrets = controller_secrets(settings)
    return frozenset(name for name, value in environ.items() if any(s in value for s in secrets))


def guarded(name: str) -> bool:
    """Whether ``name`` is a variable ``env_allow`` may never pass, whatever its value."""
    upper = name.upper()
    return upper.startswith(GUARDED_PREFIXES) or upper in GUARDED_NAMES


def runs_on_controller(spec: Spec) -> bool:
    """Whether the spec's commands run in the controller's process tree: every local run, and a
    Kubernetes run with parallel hypotheses, whose round 0 (the baseline among it) the controller
    drives itself (ADR-0018). Other Kubernetes rounds run in loop pods, their own boundary."""
    return spec.broker.kind == "local" or spec.broker.parallel > 1


@dataclass(frozen=True)
class Admission:
    """The rules a submitted spec must pass; ``Admission()`` is the strictest (nothing unsandboxed,
    GitHub's API only, only the guarded names)."""

    allow_unsandboxed: bool = False
    forges: frozenset[str] = field(default_factory=lambda: forge_origins(()))
    secret_names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, settings: Settings, environ: Mapping[str, str]) -> Admission:
        """The rules the operator configured in ``settings``, over the controller's ``environ``."""
        return cls(
            allow_unsandboxed=settings.api.allow_unsandboxed,
            forges=forge_origins(settings.forge.forge_hosts),
            secret_names=secret_holders(settings, environ),
        )

    def check(self, spec: Spec) -> None:
        """SpecError naming the first field this controller does not admit."""
        self._check_sandbox(spec)
        for index, name in enumerate(spec.agent.env_allow):
            if guarded(name) or name in self.secret_names:
                raise SpecError(
                    f"agent.env_allow[{index}]",
                    f"{name} holds a secret of the controller, which never reaches the agent",
                )
        if spec.publish is not None:
            self.check_forge(spec.publish.forge, "publish.forge")

    def check_forge(self, url: str, key: str) -> None:
        """SpecError on ``key`` unless ``url`` is one of the operator's forges."""
        try:
            origin = forge_origin(url)
        except ValueError:
            origin = ""
        if origin not in self.forges:
            listed = ", ".join(sorted(self.forges))
            raise SpecError(
                key,
                f"{url} is not a forge this controller sends its credentials to ({listed}; the "
                f"operator configures them with {FORGE_HOSTS_VAR})",
            )

    def _check_sandbox(self, spec: Spec) -> None:
        if self.allow_unsandboxed or not runs_on_controller(spec):
            return
        if spec.sandbox.mode == "none":
            why = 'sandbox.mode = "none"'
        elif spec.sandbox.mode == "auto" and not resolve_sandbox("auto"):
            why = 'sandbox.mode = "auto" without a working bubblewrap on the controller'
        else:
            return
        raise SpecError(
            "sandbox.mode",
            f"{why} would run the agent, validation and metric commands as the controller's user, "
            f"able to read its secrets; this controller refuses unsandboxed specs (its operator may "
            f"allow them with {ALLOW_UNSANDBOXED_VAR}=1)",
        )

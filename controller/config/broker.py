"""The spec's ``[broker]`` table: where a run's rounds execute (docs/spec.md, docs/kubernetes.md).

``kind = "local"`` (the default) runs rounds on the controller's machine; ``"kubernetes"`` runs each
round in a Job whose pod runs ``crucible worker``, and the rest of the table describes that pod: image,
namespace, resources, scheduling, the Secret holding the agent's credentials, the round's deadline and
how long a finished Job is kept. ``parallel`` (hypotheses tried at once per turn) applies to both kinds.

Values Kubernetes would refuse (a quantity like ``"2 GB"``, a request above its limit, a namespace with
capitals) are refused here, naming the key, so a run never starts only to fail at its first Job.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, JsonValue, model_validator

from controller.config.model import _KeyedError, _Model
from controller.config.units import duration_value

DAY = 86400.0
MAX_PARALLEL = 64  # pods per turn; more is a typo, not a plan
MAX_DEADLINE_S = 366 * DAY
MAX_RELAUNCHES = 20  # relaunches of one round after lost pods; more hides a broken cluster

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"(?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"(?=.{0,63}$)(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
# Kubernetes' resource.Quantity: a decimal number with a binary (Ki..Ei) or decimal (m, k..E) suffix or
# an exponent. No sign, no spaces.
_QUANTITY = re.compile(
    r"(?P<number>\d+(\.\d*)?|\.\d+)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][-+]?\d+)?"
)
_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate("kMGTPE")},
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])},
}
DEFAULT_REQUESTS = {"cpu": "1", "memory": "2Gi"}
DEFAULT_LIMITS = {"cpu": "2", "memory": "4Gi"}


def quantity_value(text: str) -> Decimal:
    """The amount a Kubernetes quantity stands for (``"500m"`` -> 0.5, ``"4Gi"`` -> 4294967296);
    ValueError for anything the API server would refuse."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f'must be a Kubernetes quantity like "500m", "2" or "4Gi", got "{text}"')
    suffix = match["suffix"] or ""
    try:
        number = Decimal(match["number"])
        if suffix[:1] in ("e", "E"):
            return number * Decimal(10) ** int(suffix[1:])
    except (InvalidOperation, ValueError):
        raise ValueError(f'must be a Kubernetes quantity, got "{text}"') from None
    return number * _SUFFIX[suffix]


def _quantity(text: str) -> str:
    quantity_value(text)
    return text


def _matches(pattern: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f'must be {what}, got "{value}"')
        return value

    return AfterValidator(check)


def _label_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if (slash and not _DNS_SUBDOMAIN.fullmatch(prefix)) or not _LABEL_NAME.fullmatch(name):
        raise ValueError(f'"{key}" is not a label key (an optional DNS prefix and "/", then a name)')
    return key


def whole_seconds_value(value: object) -> object:
    """A duration rounded up to whole seconds (Kubernetes counts deadlines and TTLs in seconds)."""
    seconds = duration_value(value)
    return int(seconds) if float(seconds).is_integer() else int(seconds) + 1


Quantity = Annotated[str, AfterValidator(_quantity)]
ResourceName = Annotated[str, AfterValidator(_label_key)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[
    str, _matches(_LABEL_VALUE, "a label value (at most 63 letters, digits, '-', '_', '.')")
]
Seconds = Annotated[int, BeforeValidator(whole_seconds_value)]


class ResourcesSpec(_Model):
    """Requests and limits of the loop pod's container. ``{ cpu = "2", memory = "4Gi" }`` (no
    ``requests``/``limits`` keys) sets both to the same values."""

    requests: dict[ResourceName, Quantity] = Field(default_factory=lambda: dict(DEFAULT_REQUESTS))
    limits: dict[ResourceName, Quantity] = Field(default_factory=lambda: dict(DEFAULT_LIMITS))

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and data and not {"requests", "limits"} & set(data):
            return {"requests": dict(data), "limits": dict(data)}
        return data

    @model_validator(mode="after")
    def _requests_within_limits(self) -> ResourcesSpec:
        for name, request in self.requests.items():
            limit = self.limits.get(name)
            if limit is not None and quantity_value(request) > quantity_value(limit):
                raise _KeyedError(("requests", name), f'"{request}" is more than the limit "{limit}"')
        return self


class TolerationSpec(_Model):
    """One toleration of the loop pod, as Kubernetes spells it (``toleration_seconds`` in snake case)."""

    key: LabelKey | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> TolerationSpec:
        if self.operator == "Exists" and self.value is not None:
            raise _KeyedError(("value",), 'must not be set with operator = "Exists"')
        if self.key is None and self.operator != "Exists":
            raise _KeyedError(
                ("key",), 'is required unless operator = "Exists" (which tolerates every taint)'
            )
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise _KeyedError(("toleration_seconds",), 'applies only with effect = "NoExecute"')
        return self

    def manifest(self) -> dict[str, JsonValue]:
        """The toleration as the pod spec's JSON spells it."""
        out: dict[str, JsonValue] = {"operator": self.operator}
        for name, value in (("key", self.key), ("value", self.value), ("effect", self.effect)):
            if value is not None:
                out[name] = value
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


class BrokerSpec(_Model):
    """Where rounds run (module docstring). Everything but ``kind`` and ``parallel`` describes the
    Kubernetes Job and is ignored by the local broker."""

    kind: Literal["local", "kubernetes"] = "local"
    image: Annotated[str, _matches(re.compile(r"\S+"), "an image reference without spaces")] | None = None
    namespace: (
        Annotated[str, _matches(_DNS_LABEL, "a namespace name (lower-case letters, digits, '-')")] | None
    ) = None
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    tolerations: list[TolerationSpec] = Field(default_factory=list)
    agent_secret: (
        Annotated[str, _matches(_DNS_SUBDOMAIN, "a Secret name (lower-case letters, digits, '-', '.')")]
        | None
    ) = None
    parallel: int = Field(default=1, ge=1, le=MAX_PARALLEL)
    deadline: Annotated[Seconds, Field(gt=0, le=MAX_DEADLINE_S)] = 86400
    ttl: Annotated[Seconds, Field(ge=0, le=MAX_DEADLINE_S)] = 3600
    max_relaunches: int = Field(default=2, ge=0, le=MAX_RELAUNCHES)

    @model_validator(mode="after")
    def _kubernetes_needs_an_image(self) -> BrokerSpec:
        if self.kind == "kubernetes" and self.image is None:
            raise _KeyedError(("image",), 'is required with kind = "kubernetes" (the loop pod\'s image)')
        return self

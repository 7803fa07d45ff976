"""The spec's ``[broker]`` table: defaults, the forms it accepts, and errors that name the key."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from controller.config.broker import quantity_value
from controller.config.spec import Spec, parse_spec
from controller.domain.errors import SpecError


def doc(**broker: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "objective": "go faster",
        "agent": {"command": "agent"},
        "metric": {"command": "python bench.py", "name": "ms"},
        "component": [{"name": "app", "repo": "."}],
    }
    if broker:
        out["broker"] = broker
    return out


def parse(tmp_path: Path, **broker: Any) -> Spec:
    return parse_spec(tomlkit.dumps(doc(**broker)), tmp_path)


def error(tmp_path: Path, **broker: Any) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse(tmp_path, **broker)
    return caught.value


def test_without_the_table_rounds_run_locally_one_hypothesis_at_a_time(tmp_path: Path) -> None:
    broker = parse(tmp_path).broker
    assert (broker.kind, broker.parallel, broker.image, broker.agent_secret) == ("local", 1, None, None)
    assert (broker.namespace, broker.deadline, broker.ttl) == (None, 86400, 3600)
    assert broker.max_relaunches == 2
    assert broker.resources.requests == {"cpu": "1", "memory": "2Gi"}
    assert broker.resources.limits == {"cpu": "2", "memory": "4Gi"}
    assert (broker.node_selector, broker.tolerations) == ({}, [])


def test_a_kubernetes_broker_with_every_key(tmp_path: Path) -> None:
    broker = parse(
        tmp_path,
        kind="kubernetes",
        image="ghcr.io/acme/loop:1",
        namespace="loops",
        resources={"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        node_selector={"kubernetes.io/arch": "amd64", "pool": "bench"},
        tolerations=[
            {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "spot", "value": "yes", "effect": "NoExecute", "toleration_seconds": 60},
        ],
        agent_secret="loop-agent",
        parallel=4,
        deadline="90m",
        ttl="1.5s",
        max_relaunches=0,
    ).broker
    assert broker.max_relaunches == 0
    assert (broker.kind, broker.namespace, broker.parallel) == ("kubernetes", "loops", 4)
    assert (broker.deadline, broker.ttl) == (5400, 2), "durations become whole seconds, rounded up"
    assert broker.resources.limits == {"memory": "2Gi"}
    assert [t.manifest() for t in broker.tolerations] == [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "spot", "value": "yes", "effect": "NoExecute", "operator": "Equal", "tolerationSeconds": 60},
    ]


def test_a_flat_resources_table_sets_requests_and_limits_alike(tmp_path: Path) -> None:
    resources = parse(tmp_path, resources={"cpu": "2", "memory": "4Gi"}).broker.resources
    assert resources.requests == resources.limits == {"cpu": "2", "memory": "4Gi"}


@pytest.mark.parametrize(
    ("broker", "key", "message"),
    [
        ({"kind": "kubernetes"}, "broker.image", "is required with kind"),
        ({"kind": "docker"}, "broker.kind", 'must be "local" or "kubernetes"'),
        ({"parallel": 0}, "broker.parallel", "must be >= 1"),
        ({"parallel": 65}, "broker.parallel", "must be <= 64"),
        ({"parallel": "2"}, "broker.parallel", "expected an integer"),
        ({"namespace": "Loops"}, "broker.namespace", "a namespace name"),
        ({"agent_secret": "a secret"}, "broker.agent_secret", "a Secret name"),
        ({"image": "my image"}, "broker.image", "without spaces"),
        ({"deadline": 0}, "broker.deadline", "must be > 0"),
        ({"deadline": "soon"}, "broker.deadline", ""),
        ({"ttl": -1}, "broker.ttl", ""),
        ({"max_relaunches": -1}, "broker.max_relaunches", "must be >= 0"),
        ({"max_relaunches": 21}, "broker.max_relaunches", "must be <= 20"),
        ({"max_relaunches": "2"}, "broker.max_relaunches", "expected an integer"),
        ({"resources": {"cpu": "2 GB"}}, "broker.resources.requests.cpu", "a Kubernetes quantity"),
        ({"resources": {"requests": {"memory": "8Gi"}}}, "broker.resources.requests.memory", "more than"),
        ({"resources": {"requests": {"cpu": "1"}, "cpu": "1"}}, "broker.resources.cpu", "unknown key"),
        ({"node_selector": {"a b": "x"}}, "broker.node_selector.a b", "not a label key"),
        ({"node_selector": {"pool": "a b"}}, "broker.node_selector.pool", "a label value"),
        ({"tolerations": [{"operator": "Exists", "value": "x"}]}, "broker.tolerations[0].value", "Exists"),
        ({"tolerations": [{"value": "x"}]}, "broker.tolerations[0].key", "is required"),
        (
            {"tolerations": [{"key": "a", "effect": "NoSchedule", "toleration_seconds": 5}]},
            "broker.tolerations[0].toleration_seconds",
            "NoExecute",
        ),
        ({"paralel": 2}, "broker.paralel", "did you mean 'parallel'"),
    ],
)
def test_bad_values_are_refused_naming_the_key(
    tmp_path: Path, broker: dict[str, Any], key: str, message: str
) -> None:
    caught = error(tmp_path, **broker)
    assert caught.key == key
    assert message in caught.message


@pytest.mark.parametrize(
    ("text", "value"),
    [("2", 2), ("500m", Decimal("0.5")), ("4Gi", 4 * 1024**3), ("1.5k", 1500), ("1e3", 1000), (".5", 0.5)],
)
def test_quantities_are_read_as_kubernetes_reads_them(text: str, value: object) -> None:
    assert quantity_value(text) == Decimal(str(value))


@pytest.mark.parametrize("text", ["", "-1", "2 GB", "4gi", "1.2.3", "Gi"])
def test_quantities_kubernetes_refuses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        quantity_value(text)


def _with_metric(tmp_path: Path, parallel: int, **metric: Any) -> Spec:
    spec = doc(parallel=parallel)
    spec["metric"].update(metric)
    return parse_spec(tomlkit.dumps(spec), tmp_path)


def test_parallel_refuses_sample_counts_that_can_never_pass_holm(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        _with_metric(tmp_path, 2, samples=3)
    assert caught.value.key == "broker.parallel"
    assert "raise metric.samples to at least 4" in str(caught.value)
    with pytest.raises(SpecError, match="at least 6"):
        _with_metric(tmp_path, 13, samples=5)
    # Enough samples, no test at all, or one hypothesis: accepted.
    assert _with_metric(tmp_path, 12, samples=5).broker.parallel == 12
    assert _with_metric(tmp_path, 4, samples=3, confidence=0.0).broker.parallel == 4
    assert _with_metric(tmp_path, 4, samples=2).broker.parallel == 4
    assert _with_metric(tmp_path, 1, samples=3).broker.parallel == 1


def test_parallel_changes_the_fingerprint_but_one_keeps_the_old_one(tmp_path: Path) -> None:
    one, unset, four = parse(tmp_path, parallel=1), parse(tmp_path), parse(tmp_path, parallel=4)
    assert one.fingerprint() == unset.fingerprint(), "runs started before [broker] still resume"
    assert four.fingerprint() != one.fingerprint(), "a different N is a different keep rule"

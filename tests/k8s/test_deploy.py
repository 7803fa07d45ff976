"""deploy/: the kustomize overlays render, pass strict schema validation, are accepted by the real API
server (server-side dry-run, Pod Security "restricted" enforced), and the controller's Role allows exactly
what the Kubernetes broker does (checked by impersonating its ServiceAccount)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes import client

from tests.k8s.conftest import ControlPlane

REPO = Path(__file__).resolve().parents[2]
OVERLAYS = ["dev", "production"]
K8S_SCHEMA = "1.37.0"
SA = "crucible-controller"


def render(kubectl: str, overlay: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [kubectl, "kustomize", str(REPO / "deploy/overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_passes_strict_schema_validation(kubectl: str, overlay: str) -> None:
    docs = render(kubectl, overlay)
    assert len(docs) >= 10
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_SCHEMA, strict=True)


def test_strict_validation_refuses_a_misspelt_field(kubectl: str) -> None:
    deployment = find(render(kubectl, "dev"), "Deployment")
    deployment["spec"]["replica"] = deployment["spec"].pop("replicas")
    with pytest.raises(kubernetes_validate.ValidationError, match="'replica' was unexpected"):
        kubernetes_validate.validate(deployment, K8S_SCHEMA, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_controller_deployment_is_highly_available_probed_and_bounded(kubectl: str, overlay: str) -> None:
    docs = render(kubectl, overlay)
    deployment = find(docs, "Deployment", "crucible-controller")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    assert {"cpu", "memory"} <= container["resources"]["limits"].keys()
    assert pod["serviceAccountName"] == SA
    pdb = find(docs, "PodDisruptionBudget")
    assert (
        pdb["spec"]["selector"]["matchLabels"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    job = find(docs, "Job", "crucible-db-upgrade")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secrets_come_from_secret_references_only(kubectl: str, overlay: str) -> None:
    docs = render(kubectl, overlay)
    (container,) = find(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert set(refs) == {
        "CRUCIBLE_DATABASE_URL",
        "CRUCIBLE_WEBHOOK_SECRET",
        "CRUCIBLE_API_TOKEN",
        "CRUCIBLE_API_READONLY_TOKEN",
    }
    plain = {e["name"]: e for e in container["env"] if e["name"] not in refs}
    assert set(plain) == {"POD_IP", "CRUCIBLE_WORKER_CONTROLLER_URL"}, "no secret in a plain value"
    config_map = find(docs, "ConfigMap")
    assert not [k for k in config_map["data"] if any(w in k for w in ("TOKEN", "SECRET", "PASSWORD"))]
    volumes = {v["name"]: v for v in find(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["github-app"]["secret"]["secretName"].startswith("crucible-github-app")
    names = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    if overlay == "production":
        assert names == set(), "production Secrets are created out of band, never committed"
    else:
        assert all(any(n.startswith(r["name"]) for n in names) for r in refs.values())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_loop_pods_report_to_the_replica_that_launched_them(kubectl: str, overlay: str) -> None:
    # With two replicas a Service URL would send a pod's bundle to either; the run's clones with its
    # commits live on the replica that drives it, so each replica gives its pods its own address.
    (container,) = find(render(kubectl, overlay), "Deployment")["spec"]["template"]["spec"]["containers"]
    env = [e["name"] for e in container["env"]]
    by_name = {e["name"]: e for e in container["env"]}
    assert by_name["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    port = next(p["containerPort"] for p in container["ports"] if p["name"] == "http")
    assert by_name["CRUCIBLE_WORKER_CONTROLLER_URL"]["value"] == f"http://$(POD_IP):{port}"
    assert env.index("POD_IP") < env.index("CRUCIBLE_WORKER_CONTROLLER_URL"), "$(POD_IP) expands only then"
    assert container["args"][-2:] == ["--port", str(port)]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_github_app_settings_come_together_and_point_at_the_mounted_key(kubectl: str, overlay: str) -> None:
    docs = render(kubectl, overlay)
    data = find(docs, "ConfigMap")["data"]
    # controller.forge.auth refuses a key file without an App id (and an App id needs a key)
    assert ("CRUCIBLE_GITHUB_APP_ID" in data) == ("CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE" in data)
    if "CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE" in data:
        pod = find(docs, "Deployment")["spec"]["template"]["spec"]
        mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "github-app")
        key = Path(data["CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE"])
        assert str(key.parent) == mount["mountPath"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "github-app"]
        assert [i["path"] for i in volume["secret"]["items"]] == [key.name]


def test_loop_pods_may_reach_only_the_controller(kubectl: str) -> None:
    docs = render(kubectl, "production")
    policy = find(docs, "NetworkPolicy")
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/component": "loop"}}
    assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    assert policy["spec"]["ingress"] == []
    to_controller, dns = policy["spec"]["egress"]
    controller_labels = find(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert to_controller["to"][0]["podSelector"]["matchLabels"].items() <= controller_labels.items()
    assert to_controller["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert {p["port"] for p in dns["ports"]} == {53}


# -- against the real API server -----------------------------------------------------------------------------


def in_namespace(docs: list[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    """The rendered overlay moved to namespace ``ns`` (tests run in parallel; each gets its own)."""
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "Namespace":
            meta["name"] = ns
        elif "namespace" in meta:
            meta["namespace"] = ns
        for subject in doc.get("subjects", []):
            subject["namespace"] = ns
    return docs


@pytest.fixture
def apply_overlay(control_plane: ControlPlane) -> Iterator[Callable[[str], tuple[str, str]]]:
    """``apply_overlay(name)`` creates the overlay's Namespace (under a fresh name) and its RBAC for real,
    everything else as a server-side dry-run, and returns (namespace, kubectl's output of the dry-run).

    Only the Namespace and the RBAC objects are stored, so no Deployment or Job runs on the process node.
    """
    core = client.CoreV1Api(control_plane.api)
    made: list[str] = []

    def apply(overlay: str) -> tuple[str, str]:
        ns = f"{overlay}-{uuid.uuid4().hex[:8]}"
        docs = in_namespace(render(control_plane.kubectl, overlay), ns)
        made.append(ns)
        real = [d for d in docs if d["kind"] in ("Namespace", "ServiceAccount", "Role", "RoleBinding")]
        rest = [d for d in docs if d not in real]
        control_plane.run_kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(real))
        dry = control_plane.run_kubectl(
            "apply", "--server-side", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(rest)
        )
        return ns, dry.stderr + dry.stdout

    yield apply
    for ns in made:
        core.delete_namespace(ns, propagation_policy="Background")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_is_accepted_by_the_api_server_under_restricted_pod_security(
    control_plane: ControlPlane, apply_overlay: Callable[[str], tuple[str, str]], overlay: str
) -> None:
    ns, output = apply_overlay(overlay)
    assert "would violate PodSecurity" not in output, output
    assert "serverside-applied (server dry run)" in output
    labels = client.CoreV1Api(control_plane.api).read_namespace(ns).metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


# What the broker does with its ServiceAccount, and a sample of what it must not be able to do.
ALLOWED = [
    *[(verb, "jobs.batch") for verb in ("create", "get", "list", "watch", "delete")],
    *[(verb, "pods") for verb in ("get", "list", "watch", "delete")],
    ("get", "pods/log"),
    ("create", "secrets"),  # the round's worker token, owned by its Job; never read back
]
DENIED = [
    ("update", "jobs.batch"),
    ("patch", "jobs.batch"),
    ("deletecollection", "jobs.batch"),
    ("create", "pods"),
    ("patch", "pods"),
    ("create", "pods/exec"),
    ("create", "pods/eviction"),
    ("get", "secrets"),
    ("list", "secrets"),
    ("watch", "secrets"),
    ("delete", "secrets"),
    ("get", "configmaps"),
    ("create", "deployments.apps"),
    ("create", "cronjobs.batch"),
    ("create", "roles.rbac.authorization.k8s.io"),
    ("create", "rolebindings.rbac.authorization.k8s.io"),
    ("get", "serviceaccounts"),
    ("create", "serviceaccounts/token"),
]


def test_controller_role_allows_what_the_broker_does_and_nothing_more(
    control_plane: ControlPlane, apply_overlay: Callable[[str], tuple[str, str]]
) -> None:
    ns, _ = apply_overlay("dev")
    who = f"system:serviceaccount:{ns}:{SA}"

    def can(verb: str, resource: str, namespace: str = ns) -> bool:
        proc = control_plane.run_kubectl(
            "auth", "can-i", verb, resource, "-n", namespace, "--as", who, check=False
        )
        assert proc.stdout.strip() in ("yes", "no"), proc.stderr
        return proc.stdout.strip() == "yes"

    assert [a for a in ALLOWED if not can(*a)] == []
    assert [d for d in DENIED if can(*d)] == []
    # nothing outside its own namespace, nothing cluster-wide
    assert not can("create", "jobs.batch", "default")
    assert not can("list", "pods", "kube-system")
    assert not can("list", "namespaces")
    # the full list the API server computes for the account holds nothing beyond the broker's needs
    listed = control_plane.run_kubectl("auth", "can-i", "--list", "-n", ns, "--as", who).stdout
    verbs = {line.split()[0]: line[line.rindex("[") :] for line in listed.splitlines()[1:] if line.strip()}
    kinds = ("jobs.batch", "pods", "pods/log", "secrets")
    ours = {resource: v for resource, v in verbs.items() if resource in kinds}
    assert ours == {
        "jobs.batch": "[create get list watch delete]",
        "pods": "[get list watch delete]",
        "pods/log": "[get]",
        "secrets": "[create]",
    }

"""The API client of the Kubernetes broker, from the settings: a kubeconfig file, or the pod's own
service account when the controller runs in the cluster (``deploy/``).

Nothing here reads the process environment (the composition root does, once): without
``CRUCIBLE_KUBECONFIG`` and outside a pod there is no client, and the error says which variable to set,
rather than the client library guessing from ``KUBECONFIG`` or ``~/.kube/config``.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config

from controller.domain.errors import SpecError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def connect(
    kubeconfig: Path | None, namespace: str | None, *, service_account: Path = SERVICE_ACCOUNT
) -> tuple[client.ApiClient, str]:
    """``(client, the controller's namespace)``: ``namespace`` if set, else the kubeconfig context's
    or the service account's, else ``default``."""
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            raise SpecError("CRUCIBLE_KUBECONFIG", f"no such file: {kubeconfig}")
        api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        _, active = config.list_kube_config_contexts(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        own = (active or {}).get("context", {}).get("namespace")
        return api, namespace or own or "default"
    if (service_account / "token").is_file():
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        own = (service_account / "namespace").read_text(encoding="utf-8").strip()
        return client.ApiClient(configuration), namespace or own or "default"
    raise SpecError(
        "CRUCIBLE_KUBECONFIG",
        'a run with [broker] kind = "kubernetes" needs a cluster: set CRUCIBLE_KUBECONFIG to a kubeconfig '
        "file, or run the controller in the cluster (deploy/)",
    )


def unreachable(kubeconfig: Path | None, namespace: str | None, *, timeout_s: float = 5.0) -> str | None:
    """Why no control plane answers with these settings, or None when one does."""
    try:
        api, _ = connect(kubeconfig, namespace)
    except SpecError as exc:
        return str(exc)
    try:
        client.VersionApi(api).get_code(_request_timeout=timeout_s)
    except Exception as exc:  # any failure to answer means the same thing here
        return f"the API server of {kubeconfig or 'this pod'} does not answer ({type(exc).__name__})"
    finally:
        api.close()  # type: ignore[no-untyped-call]
    return None

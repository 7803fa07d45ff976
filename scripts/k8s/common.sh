# Shared settings of the scripts in scripts/k8s (sourced, not run): the pinned versions, where the built
# binaries are cached (outside the repository, by version), where a running control plane keeps its state,
# and the loopback ports it listens on. Every value can be overridden from the environment.

# One Kubernetes release for everything: k8s.io/kubernetes vX.Y.Z with every staging module (k8s.io/api,
# apimachinery, client-go, ...) replaced by its matching v0.Y.Z release.
K8S_VERSION=${CRUCIBLE_K8S_VERSION:-v1.37.2}
K8S_STAGING_VERSION=v0.${K8S_VERSION#v1.}
# etcd 3.6 is what Kubernetes >= 1.34 is documented against (Debian 12's etcd-server is 3.4).
ETCD_VERSION=${CRUCIBLE_ETCD_VERSION:-v3.6.16}

K8S_CACHE=${CRUCIBLE_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crucible-k8s}
K8S_BIN=$K8S_CACHE/k8s-$K8S_VERSION/bin
ETCD_BIN=$K8S_CACHE/etcd-$ETCD_VERSION/bin
# A running control plane: PKI, kubeconfigs, logs, pid files, etcd data. `env` prints KUBECONFIG from here.
K8S_STATE=${CRUCIBLE_K8S_STATE:-$K8S_CACHE/state}
K8S_ETCD_PORT=${CRUCIBLE_K8S_ETCD_PORT:-23790}
K8S_API_PORT=${CRUCIBLE_K8S_API_PORT:-16443}
K8S_NODE_NAME=${CRUCIBLE_K8S_NODE:-crucible-process-node}
# The process node serves pod logs to the API server here, as a kubelet does on 10250.
K8S_KUBELET_PORT=${CRUCIBLE_K8S_KUBELET_PORT:-16450}

# The binaries this project builds from the k8s.io/kubernetes module (kubectl too: Debian's kubernetes-client
# is 1.20, far older than the API server, and its kustomize with it).
K8S_COMMANDS="kube-apiserver kube-controller-manager kubectl"

GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

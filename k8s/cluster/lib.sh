# Shared settings and helpers for the k8s/cluster scripts. Sourced, not executed.
# shellcheck shell=bash

# Versions: the cache is keyed by these, so a warm cache rebuilds nothing.
K8S_VERSION=v1.34.4              # k8s.io/kubernetes
K8S_STAGING_VERSION=v0.34.4      # k8s.io/<staging module> matching K8S_VERSION
K8S_MINOR=34
CONTOUR_VERSION=v1.32.1          # v1.33.0 does not install from the module proxy
COREDNS_VERSION=v1.11.4
PROMETHEUS_MODULE_VERSION=v0.55.1  # github.com/prometheus/prometheus module = Prometheus 2.55.1
PROMETHEUS_VERSION=2.55.1
HELM_VERSION=v3.19.5
KUBECONFORM_VERSION=v0.7.0

CACHE=${GATEWAY_SIZER_CACHE:-$HOME/.cache/gateway-sizer}
BIN_DIR=$CACHE/bin
SRC_DIR=$CACHE/src
BUILD_TIMES_LOG=$CACHE/build-times.log

KUBE_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
TOOL_COMPONENTS=(helm kubeconform crd2jsonschema)
ALL_COMPONENTS=("${KUBE_COMPONENTS[@]}" contour coredns prometheus "${TOOL_COMPONENTS[@]}")

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Go environment: every download and build artefact lives in the cache, never in the repo.
go_env() {
    command -v go >/dev/null || die "go not found in PATH; install Go >= 1.24 (https://go.dev/dl)"
    export GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build GOPATH=$CACHE/go
    export GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local}
}

# Path of a component's binary, whether built yet or not.
component_path() {
    case $1 in
        kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl)
            echo "$BIN_DIR/kubernetes-$K8S_VERSION/$1" ;;
        contour) echo "$BIN_DIR/contour-$CONTOUR_VERSION/contour" ;;
        coredns) echo "$BIN_DIR/coredns-$COREDNS_VERSION/coredns" ;;
        prometheus) echo "$BIN_DIR/prometheus-v$PROMETHEUS_VERSION/prometheus" ;;
        helm) echo "$BIN_DIR/helm-$HELM_VERSION/helm" ;;
        kubeconform) echo "$BIN_DIR/kubeconform-$KUBECONFORM_VERSION/kubeconform" ;;
        crd2jsonschema) echo "$BIN_DIR/crd2jsonschema-$(crd2jsonschema_key)/crd2jsonschema" ;;
        *) die "unknown component '$1' (known: ${ALL_COMPONENTS[*]} contour-module kubernetes-module)" ;;
    esac
}

# The converter is built from k8s/tools/crd2jsonschema; key its binary by the source's hash.
crd2jsonschema_key() {
    cat "$K8S_DIR/tools/crd2jsonschema/"{go.mod,go.sum,main.go} | sha256sum | cut -c1-12
}

K8S_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

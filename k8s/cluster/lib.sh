# Shared settings and helpers for the k8s/cluster scripts. Sourced, not executed.
# shellcheck shell=bash

shopt -s inherit_errexit  # set -e also inside $(...)

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
KIND_VERSION=v0.30.0             # only for kind-up (needs Docker); not part of "all"
GO_MIN_VERSION=1.24              # a go on PATH at least this new builds everything
GO_VERSION=1.26.11               # otherwise this toolchain (golang.org/toolchain, the module GOTOOLCHAIN fetches)

CACHE=${GATEWAY_SIZER_CACHE:-$HOME/.cache/gateway-sizer}
PYTHON=${PYTHON:-python3}          # any Python >= 3.9; the helpers use only the standard library
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
    export GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build GOPATH=$CACHE/go
    export GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0
    local go
    go=$(go_command)
    export PATH=${go%/go}:$PATH GOTOOLCHAIN=${GOTOOLCHAIN:-local}
}

# The go of the builds: a go >= GO_MIN_VERSION on PATH, else Go GO_VERSION from the module proxy, downloaded
# once into GOMODCACHE by any older go (Debian 12's golang-go is 1.19, too old for GOTOOLCHAIN, but its
# `go mod download` fetches and checks the same golang.org/toolchain module). As root with apt-get,
# installs golang-go for that when there is no go at all; otherwise stops with one line, exit 2.
go_command() {
    local go dir arch
    if go=$(command -v go) && [ "$(printf '%s\n' "$GO_MIN_VERSION" "$(GOTOOLCHAIN=local "$go" env GOVERSION | sed 's/^go//')" \
            | sort -V | head -1)" = "$GO_MIN_VERSION" ]; then
        echo "$go"; return
    fi
    case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
    dir=$GOMODCACHE/golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$arch
    if [ ! -x "$dir/bin/go" ]; then
        if [ -z "$go" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            log "installing Debian's golang-go (to download Go $GO_VERSION)"
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -q --no-install-recommends golang-go >/dev/null \
                || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends golang-go >/dev/null; } \
                || die "apt-get install golang-go failed"
            go=$(command -v go) || go=/usr/lib/go/bin/go
        fi
        [ -n "$go" ] || { printf 'missing: go (Go >= %s); install golang-go (apt-get install golang-go) or Go >= %s (https://go.dev/dl), or run make as root\n' \
            "$GO_MIN_VERSION" "$GO_MIN_VERSION" >&2; exit 2; }
        log "downloading Go $GO_VERSION from the module proxy with $("$go" version | cut -d' ' -f3) (once, into $GOMODCACHE)"
        GOTOOLCHAIN=local "$go" mod download golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$arch >&2 \
            || die "downloading Go $GO_VERSION (golang.org/toolchain) from the module proxy failed"
        chmod -R a+x "$dir/pkg/tool" "$dir/bin/gofmt" && chmod a+x "$dir/bin/go"  # zips keep no modes; go last, as go does
    fi
    echo "$dir/bin/go"
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
        kind) echo "$BIN_DIR/kind-$KIND_VERSION/kind" ;;
        crd2jsonschema) echo "$BIN_DIR/crd2jsonschema-$(crd2jsonschema_key)/crd2jsonschema" ;;
        *) die "unknown component '$1' (known: ${ALL_COMPONENTS[*]} kind contour-module kubernetes-module go)" ;;
    esac
}

# The converter is built from k8s/tools/crd2jsonschema; key its binary by the source's hash.
crd2jsonschema_key() {
    cat "$K8S_DIR/tools/crd2jsonschema/"{go.mod,go.sum,main.go} | sha256sum | cut -c1-12
}

K8S_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# ---- the one-machine cluster (up.sh / down.sh) ----
CLUSTER_DIR=$CACHE/cluster          # everything of one cluster's life: pki, etcd data, kubelet root, state
STATE_DIR=$CLUSTER_DIR/state        # what up.sh changed on the host, for down.sh
PKI_DIR=$CLUSTER_DIR/pki
LOG_DIR=$CACHE/logs/cluster         # kept after down.sh for post-mortems, replaced by the next up.sh
RUN_DIR=/run/gateway-sizer          # sockets (short paths)
CONTAINERD_ROOT=$CACHE/containerd   # image store: survives down.sh so a warm up imports nothing
CONTAINERD_SOCK=$RUN_DIR/containerd/containerd.sock
ADMIN_KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig

NODE_NAME=gsz-node
NODE_IP=10.250.0.1                  # on one end of a veth pair: this kernel has no dummy netdev
NODE_VETH=gsz-node0
NODE_VETH_PEER=gsz-node1
CNI_BRIDGE=gsz-cni0
CLUSTER_CIDR=10.244.0.0/16
NODE_POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1
DNS_SERVICE_IP=10.96.0.10
CONTOUR_SERVICE_IP=10.96.0.20      # k8s/cluster/overlays/contour/local.yaml pins the same address
PROMETHEUS_SERVICE_IP=10.96.0.90   # k8s/cluster/overlays/prometheus pins the same address
APISERVER_PORT=6443
ETCD_CLIENT_PORT=23790              # not 2379: leaves the default free for tests' own etcd
ETCD_PEER_PORT=23800

# Daemons in the order up.sh starts them; down.sh stops them in reverse.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)
# Top-level cgroup folders the kubelet and containerd create (cgroupfs driver).
CGROUP_NAMES=(kubepods kubepods.slice k8s.io)
# Host paths the components create on their own when missing; down.sh removes the ones up.sh saw appear.
HOST_PATHS=(/run/containerd /var/lib/cni /var/run/netns /var/log/pods /var/log/containers /var/lib/kubelet
            /var/run/kubernetes /opt/containerd /etc/cni)

require_root() { [ "$(id -u)" = 0 ] || die "$1 must run as root (it starts a kubelet and changes iptables)"; }

# One up.sh or down.sh at a time.
take_lock() {
    mkdir -p "$CACHE"
    exec 9>"$CACHE/cluster.lock"
    flock -w 120 9 || die "another cluster-up/cluster-down is still running (lock $CACHE/cluster.lock: $(fuser "$CACHE/cluster.lock" 2>/dev/null))"
}

kubectl_() { "$(component_path kubectl)" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# A process is alive when it exists and is not a zombie (nothing may reap orphans here).
alive() {
    local stat
    stat=$(cat "/proc/${1:-0}/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

# Start time (clock ticks since boot) of a PID: recorded with it, so a reused PID is never signalled.
start_time() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    # fields after the command: state is field 3, starttime field 22 -> 20th here
    awk '{print $20}' <<<"$stat"
}

# A recorded daemon: state/pids/<name> holds "PID STARTTIME"; prints the PID if that process still runs.
recorded_pid() {
    local f=$STATE_DIR/pids/$1 pid st
    [ -f "$f" ] || return 1
    read -r pid st <"$f" || return 1
    alive "$pid" && [ "$(start_time "$pid")" = "$st" ] && echo "$pid"
}

# SIGTERM, wait up to $2 seconds, then SIGKILL; by PID only.
stop_pid() {
    local pid=$1 grace=${2:-10} i
    alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do alive "$pid" || return 0; sleep 0.1; done
    log "pid $pid ignored SIGTERM for ${grace}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do alive "$pid" || return 0; sleep 0.1; done
    log "warning: pid $pid still present after SIGKILL"
}

# Cgroup folders this cluster made: the kubepods/k8s.io folders that were not there before up.sh
# (a machine that is also a real node keeps its own).
our_cgroups() {
    local h n
    [ -f "$STATE_DIR/cgroups.before" ] || return 0
    for h in /sys/fs/cgroup/*/; do
        for n in "${CGROUP_NAMES[@]}"; do
            [ -d "$h$n" ] && ! grep -qx "$h$n" "$STATE_DIR/cgroups.before" && echo "$h$n"
        done
    done
    return 0
}

gateway_api_crds() {  # the Gateway API CRDs Contour's examples install (experimental channel)
    echo "$("$K8S_DIR/cluster/build.sh" --print-path contour-module)/examples/gateway/00-crds.yaml"
}

render_gateway_provisioner() {  # DIR -> YAML on stdout (the Gateway API CRDs are gateway_api_crds)
    local dir=$1 module
    module=$("$K8S_DIR/cluster/build.sh" --print-path contour-module)
    mkdir -p "$dir"
    cp "$K8S_DIR/cluster/overlays/gateway-provisioner/"*.yaml "$module/examples/gateway-provisioner/"*.yaml "$dir/"
    "$(component_path kubectl)" kustomize "$dir"
}

# The one-machine cluster's Contour: the contour module's examples/render/contour.yaml with the patches of
# overlays/contour, rendered by kustomize (the render file is copied next to the kustomization in DIR).
render_contour() {  # DIR -> YAML on stdout
    local dir=$1 module
    module=$("$K8S_DIR/cluster/build.sh" --print-path contour-module)
    mkdir -p "$dir"
    cp "$K8S_DIR/cluster/overlays/contour/"*.yaml "$module/examples/render/contour.yaml" "$dir/"
    "$(component_path kubectl)" kustomize "$dir"
}

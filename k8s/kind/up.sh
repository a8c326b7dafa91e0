#!/usr/bin/env bash
# kind cluster with the gateway-sizer test bed, for machines WITH Docker:
#   Contour v1.32.1 + Envoy DaemonSet (the contour module's examples/render/contour.yaml: the same
#   manifest as https://projectcontour.io/quickstart/v1.32.1/contour.yaml, upstream images),
#   the nginx backend + HTTPProxy external.nginx (charts/gateway-loadtest), Prometheus
#   (k8s/manifests/prometheus) and the runner's RBAC (k8s/manifests/rbac).
# stdout: export KUBECONFIG=... ; progress on stderr. Without Docker use k8s/cluster/up.sh instead.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/../cluster/lib.sh"
REPO=$(cd "$K8S_DIR/.." && pwd)
KIND_NAME=gateway-sizer
KUBECONFIG_FILE=$CACHE/kind.kubeconfig

command -v docker >/dev/null && docker info >/dev/null 2>&1 \
    || die "kind-up needs a running Docker engine; on Linux without Docker use 'make cluster-up'"
mapfile -t tools < <("$K8S_DIR/cluster/build.sh" --print-path kind kubectl helm)
[ ${#tools[@]} = 3 ] || die "k8s/cluster/build.sh could not provide kind, kubectl, helm"
KIND=${tools[0]} KUBECTL=${tools[1]} HELM=${tools[2]}
CONTOUR_MODULE=$("$K8S_DIR/cluster/build.sh" --print-path contour-module)
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

if ! "$KIND" get clusters 2>/dev/null | grep -qx "$KIND_NAME"; then
    log "kind create cluster $KIND_NAME"
    "$KIND" create cluster --config "$HERE/cluster.yaml" --kubeconfig "$KUBECONFIG_FILE" --wait 120s >&2
else
    "$KIND" export kubeconfig --name "$KIND_NAME" --kubeconfig "$KUBECONFIG_FILE" >&2
fi
log "Contour $CONTOUR_VERSION"
k apply --server-side -f "$CONTOUR_MODULE/examples/render/contour.yaml" >&2
k wait --for=condition=Established --timeout=60s crd/httpproxies.projectcontour.io >&2
log "Prometheus, test bed chart, runner RBAC"
# kind's kubelets serve self-signed certificates: Prometheus cannot check them against the cluster's CA
k kustomize "$K8S_DIR/manifests/prometheus" | sed 's/insecure_skip_verify: false/insecure_skip_verify: true/' \
    | k apply -f - >&2
"$HELM" upgrade --install gateway-loadtest "$REPO/charts/gateway-loadtest" --kubeconfig "$KUBECONFIG_FILE" \
    --namespace gateway-loadtest --create-namespace >&2
k apply -k "$K8S_DIR/manifests/rbac" >&2
for r in projectcontour/deployment/contour projectcontour/daemonset/envoy monitoring/deployment/prometheus \
         gateway-loadtest/deployment/nginx; do
    k -n "${r%%/*}" rollout status "${r#*/}" --timeout=300s >&2
done
cat >&2 <<EOT

  Envoy:      curl -H 'Host: external.nginx' http://127.0.0.1:9080/
  Prometheus: kubectl -n monitoring port-forward svc/prometheus 9090
  tear down:  make kind-down
EOT
echo "export KUBECONFIG=$KUBECONFIG_FILE"

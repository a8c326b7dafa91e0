#!/usr/bin/env bash
# Validate the chart and the manifests offline:
#   helm lint (default values, and the one-machine values with Locust on);
#   helm template | kubeconform -strict, for the same two value sets;
#   kubeconform -strict on k8s/manifests/* and on the one-machine overlays (rendered by kubectl kustomize).
# Schemas: schemas.sh's (Kubernetes' swagger.json, Contour's and the Gateway API's CRDs, converted by
# k8s/tools/crd2jsonschema into $CACHE/schemas/); nothing is fetched from the network but Go modules.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib.sh"
REPO=$(cd "$K8S_DIR/.." && pwd)
CHART=$REPO/charts/gateway-loadtest

mapfile -t tools < <("$HERE/build.sh" --print-path helm kubeconform crd2jsonschema kubectl)
[ ${#tools[@]} = 4 ] || die "k8s/cluster/build.sh could not provide helm, kubeconform, crd2jsonschema, kubectl"
HELM=${tools[0]} KUBECONFORM=${tools[1]} KUBECTL=${tools[3]}
SCHEMAS=$("$HERE/schemas.sh")

failed=0
# check NAME COMMAND...: the command prints YAML; kubeconform validates it strictly against the schemas.
check() {
    local name=$1 out; shift
    if ! out=$("$@" | "$KUBECONFORM" -strict -summary -output text \
            -schema-location "$SCHEMAS/{{ .ResourceKind }}{{ .KindSuffix }}.json" - 2>&1); then
        printf 'FAIL %s\n%s\n' "$name" "$out" >&2; failed=1
    else
        printf 'ok   %s: %s\n' "$name" "$(tail -n 1 <<<"$out")" >&2
    fi
}
lint() {
    local name=$1 out; shift
    if ! out=$("$HELM" lint --strict "$CHART" "$@" 2>&1); then
        printf 'FAIL helm lint %s\n%s\n' "$name" "$out" >&2; failed=1
    else
        printf 'ok   helm lint %s\n' "$name" >&2
    fi
}
template() { "$HELM" template gateway-loadtest "$CHART" --namespace gateway-loadtest "$@"; }
local_values=(-f "$HERE/values-local.yaml" --set locust.enabled=true)

lint "default values"
lint "one-machine values, locust on" "${local_values[@]}"
check "chart, default values" template
check "chart, one-machine values, locust on" template "${local_values[@]}"
check "chart, the runner as a Job alone" template --set nginx.enabled=false --set httpProxy.enabled=false \
    --set runner.enabled=true
for d in "$K8S_DIR"/manifests/*/; do
    check "k8s/manifests/$(basename "$d")" "$KUBECTL" kustomize "$d"
done
check "k8s/cluster/overlays/prometheus" "$KUBECTL" kustomize "$HERE/overlays/prometheus"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check "k8s/cluster/overlays/contour (contour $CONTOUR_VERSION render + local patches)" render_contour "$tmp"
check "k8s/cluster/overlays/gateway-provisioner (contour $CONTOUR_VERSION's + the test bed's Gateway)" \
    render_gateway_provisioner "$tmp/gateway-provisioner"
check "k8s/cluster/manifests/coredns.yaml" sed -e 's|@IMAGE_COREDNS@|localhost/coredns:1.11.4|' \
    -e 's|@DNS_SERVICE_IP@|10.96.0.10|' "$HERE/manifests/coredns.yaml"

[ "$failed" = 0 ] || die "chart-lint: some checks failed (see above)"
log "chart-lint: all checks passed"

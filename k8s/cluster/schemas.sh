#!/usr/bin/env bash
# Print the folder of kubeconform's schemas, making it first when it is missing (offline but for Go modules):
# Kubernetes' own api/openapi-spec/swagger.json (k8s.io/kubernetes module), Contour's CRDs
# (examples/contour/01-crds.yaml of the contour module) and the Gateway API CRDs (its
# examples/gateway/00-crds.yaml), converted by k8s/tools/crd2jsonschema into $CACHE/schemas/.
# kubeconform reads them with -schema-location "<folder>/{{ .ResourceKind }}{{ .KindSuffix }}.json".
# Used by lint.sh and by the tests that validate generated manifests (tests/kubernetes/test_recommend_manifests.py).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib.sh"

SCHEMAS=$CACHE/schemas/kubernetes-$K8S_VERSION-contour-$CONTOUR_VERSION-gateway-api-$(crd2jsonschema_key)
if [ ! -f "$SCHEMAS/.complete" ]; then
    CRD2JSONSCHEMA=$("$HERE/build.sh" --print-path crd2jsonschema)
    K8S_MODULE=$("$HERE/build.sh" --print-path kubernetes-module)
    CONTOUR_MODULE=$("$HERE/build.sh" --print-path contour-module)
    rm -rf "$SCHEMAS"
    "$CRD2JSONSCHEMA" -out "$SCHEMAS" -swagger "$K8S_MODULE/api/openapi-spec/swagger.json" \
        "$CONTOUR_MODULE/examples/contour/01-crds.yaml" "$CONTOUR_MODULE/examples/gateway/00-crds.yaml"
    touch "$SCHEMAS/.complete"
fi
echo "$SCHEMAS"

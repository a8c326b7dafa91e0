#!/usr/bin/env bash
# Delete the kind cluster that k8s/kind/up.sh created (idempotent).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/../cluster/lib.sh"
KIND=$(component_path kind)
if [ -x "$KIND" ] && command -v docker >/dev/null && "$KIND" get clusters 2>/dev/null | grep -qx gateway-sizer; then
    "$KIND" delete cluster --name gateway-sizer --kubeconfig "$CACHE/kind.kubeconfig" >&2
fi
rm -f "$CACHE/kind.kubeconfig"
log "kind cluster gateway-sizer: gone"

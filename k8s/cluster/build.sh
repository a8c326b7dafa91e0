#!/usr/bin/env bash
# Build, or reuse from the cache, the binaries of the one-machine cluster.
#
#   k8s/cluster/build.sh [--print-path] [--rebuild] [component|group ...]
#
# components: kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
#             contour coredns prometheus helm kubeconform crd2jsonschema kind
# groups:     kubernetes (the six above), tools (helm kubeconform crd2jsonschema), all (default)
# modules:    contour-module, kubernetes-module (downloaded, not built; their source folder is the "path")
# go:         the go command the builds use (a go >= 1.24 on PATH, else the pinned toolchain; see lib.sh)
#
# Everything goes to ${GATEWAY_SIZER_CACHE:-$HOME/.cache/gateway-sizer}; see k8s/README.md for the layout.
# With --print-path, stdout carries only the path of each requested item, one per line; logs go to stderr.
# Cold build times are appended to $CACHE/build-times.log.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

print_path=0
rebuild=0
requested=()
for arg in "$@"; do
    case $arg in
        --print-path) print_path=1 ;;
        --rebuild) rebuild=1 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        all) requested+=("${ALL_COMPONENTS[@]}") ;;
        kubernetes) requested+=("${KUBE_COMPONENTS[@]}") ;;
        tools) requested+=("${TOOL_COMPONENTS[@]}") ;;
        -*) die "unknown option '$arg' (use --print-path, --rebuild)" ;;
        *) requested+=("$arg") ;;
    esac
done
[ ${#requested[@]} -gt 0 ] || requested=("${ALL_COMPONENTS[@]}")

for c in "${requested[@]}"; do  # unknown names fail here, before any build starts
    case $c in contour-module|kubernetes-module|go) ;; *) component_path "$c" >/dev/null ;; esac
done
go_env

# Download a module (once) and print its source folder.
module_dir() {
    go mod download -json "$1@$2" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' \
        || die "go mod download $1@$2 failed"
}

record_time() {  # component version seconds
    mkdir -p "$CACHE"
    printf '%s\t%s\t%s\t%ss\t%s cores\n' "$(date -u +%FT%TZ)" "$1" "$2" "$3" "$(nproc)" >>"$BUILD_TIMES_LOG"
    log "built $1 $2 in ${3}s"
}

# A work module that requires $1@$2 and copies its go.mod's replace lines; staging modules (k8s.io/* at
# v0.0.0 replaced by ./staging/...) are mapped to $3 instead. Prints the folder.
work_module() {
    local path=$1 version=$2 staging_version=${3:-} dir gomod
    dir=$SRC_DIR/$(basename "$path")-$version
    if [ ! -f "$dir/go.mod" ] || [ "$rebuild" = 1 ]; then
        gomod=$(go mod download -json "$path@$version" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])') \
            || die "go mod download $path@$version failed"
        mkdir -p "$dir"
        go mod edit -json "$gomod" | "$PYTHON" "$K8S_DIR/cluster/workmod.py" "$path" "$version" $staging_version \
            >"$dir/go.mod.tmp" || die "cannot write the work module for $path@$version"
        mv "$dir/go.mod.tmp" "$dir/go.mod"
        : >"$dir/go.sum"
    fi
    echo "$dir"
}

build_kube() {  # component
    local out=$1 dir date
    dir=$(work_module k8s.io/kubernetes "$K8S_VERSION" "$K8S_STAGING_VERSION")
    date=$(date -u +%FT%TZ)
    local ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR"
        ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
    done
    (cd "$dir" && go build -mod=mod -trimpath -ldflags "$ldflags" -o "$2" "k8s.io/kubernetes/cmd/$out")
}

build_prometheus() {
    local dir
    dir=$(work_module github.com/prometheus/prometheus "$PROMETHEUS_MODULE_VERSION")
    local v=github.com/prometheus/common/version
    (cd "$dir" && go build -mod=mod -trimpath -tags netgo \
        -ldflags "-s -w -X $v.Version=$PROMETHEUS_VERSION -X $v.Branch=HEAD -X $v.BuildUser=gateway-sizer -X $v.BuildDate=$(date -u +%Y%m%d-%T)" \
        -o "$1" github.com/prometheus/prometheus/cmd/prometheus)
}

go_install() {  # target pkg@version ldflags
    local gobin
    gobin=$(mktemp -d "$CACHE/tmp.XXXXXX")
    GOBIN=$gobin go install -trimpath -ldflags "-s -w $3" "$2" || { rm -rf "$gobin"; return 1; }
    mv "$gobin/$(basename "${2%@*}")" "$1"
    rmdir "$gobin"
}

build_one() {  # component -> path
    local c=$1 target tmp start
    target=$(component_path "$c")
    if [ -x "$target" ] && [ "$rebuild" = 0 ]; then
        echo "$target"; return
    fi
    mkdir -p "$(dirname "$target")"
    tmp=$target.tmp.$$
    log "building $c (cold; this can take minutes on 2 cores)"
    start=$(date +%s)
    case $c in
        kube-*|kubelet|kubectl) build_kube "$c" "$tmp" ;;
        contour)
            go_install "$tmp" "github.com/projectcontour/contour/cmd/contour@$CONTOUR_VERSION" \
                "-X github.com/projectcontour/contour/internal/build.Version=$CONTOUR_VERSION" ;;
        coredns)
            go_install "$tmp" "github.com/coredns/coredns@$COREDNS_VERSION" "" ;;
        prometheus) build_prometheus "$tmp" ;;
        helm)
            go_install "$tmp" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
                "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$K8S_MINOR -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$K8S_MINOR" ;;
        kubeconform)
            go_install "$tmp" "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" "" ;;
        kind)
            go_install "$tmp" "sigs.k8s.io/kind@$KIND_VERSION" "" ;;
        crd2jsonschema)
            (cd "$K8S_DIR/tools/crd2jsonschema" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp" .) ;;
    esac || { rm -f "$tmp"; die "building $c failed (see the go output above)"; }
    mv "$tmp" "$target"
    record_time "$c" "$(basename "$(dirname "$target")")" "$(( $(date +%s) - start ))"
    echo "$target"
}

# Sequential on purpose: one Go build already uses every core.
for c in "${requested[@]}"; do
    case $c in
        contour-module) p=$(module_dir github.com/projectcontour/contour "$CONTOUR_VERSION") ;;
        kubernetes-module) p=$(module_dir k8s.io/kubernetes "$K8S_VERSION") ;;
        go) p=$(command -v go) ;;
        *) p=$(build_one "$c") ;;
    esac
    if [ "$print_path" = 1 ]; then echo "$p"; else log "$c: $p"; fi
done

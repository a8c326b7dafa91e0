# Make targets for the Kubernetes side of gateway-sizer. Included by the main Makefile
# (`include k8s/cluster.mk`) or used alone: `make -f k8s/cluster.mk cluster-up`.
#
#   cluster-up    real single-node cluster on this Linux machine, no Docker (root; see k8s/README.md)
#   cluster-down  remove everything cluster-up made
#   k8s-tools     helm + kubeconform (go install, cached)
#   go-toolchain  the Go >= 1.24 of the builds: go on PATH, else a pinned Go from the module proxy (cached)
#   chart-lint    helm lint + helm template | kubeconform -strict (+ the plain manifests and overlays)
#   kind-up       kind cluster with the same test bed (needs Docker)
#   kind-down     delete that kind cluster

PYTHON ?= python3
CACHE ?= $(or $(GATEWAY_SIZER_CACHE),$(HOME)/.cache/gateway-sizer)
K8S_DIR ?= $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

export GATEWAY_SIZER_CACHE := $(CACHE)
export PYTHON

.PHONY: cluster-up cluster-down k8s-tools go-toolchain chart-lint kind-up kind-down

cluster-up: ## real single-node cluster here, no Docker (root; prints export KUBECONFIG=...)
	$(K8S_DIR)/cluster/up.sh

cluster-down: ## remove everything cluster-up made
	$(K8S_DIR)/cluster/down.sh

k8s-tools: ## helm + kubeconform (go install, cached)
	$(K8S_DIR)/cluster/build.sh tools

go-toolchain: ## Go >= 1.24 for the builds: go on PATH, else Go from the module proxy via Debian's golang-go (cached)
	@go=$$($(K8S_DIR)/cluster/build.sh --print-path go) && echo "go: $$go ($$("$$go" env GOVERSION))"

chart-lint: k8s-tools ## helm lint + helm template | kubeconform -strict, manifests and overlays
	$(K8S_DIR)/cluster/lint.sh

kind-up: ## kind cluster with the same test bed (needs Docker)
	$(K8S_DIR)/kind/up.sh

kind-down: ## delete that kind cluster
	$(K8S_DIR)/kind/down.sh

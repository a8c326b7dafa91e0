# gateway-sizer: `make sweep` and `make test` do all the set-up they need.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
CACHE ?= $(if $(GATEWAY_SIZER_CACHE),$(GATEWAY_SIZER_CACHE),$(HOME)/.cache/gateway-sizer)
export GATEWAY_SIZER_CACHE := $(CACHE)
BIN := $(VENV)/bin
SIZER := $(BIN)/gateway-sizer
# Debian packages as command:package pairs: the local platform's, and what the tests and benches add (every program
# they start: tests/unit/test_installs.py checks the sources against these lists). A command already on PATH installs
# nothing (util-linux, iproute2 and procps come with most Debian systems, not with every one).
SWEEP_PACKAGES := prometheus:prometheus setpriv:util-linux prlimit:util-linux
TEST_PACKAGES := wrk:wrk chromium:chromium etcd:etcd-server gcc:gcc gcc:libc6-dev openssl:openssl tcpdump:tcpdump \
	ss:iproute2 pkill:procps taskset:util-linux git:git
# `$(PYTHON) -m venv` needs ensurepip, which Debian ships in python3-venv.
VENV_CHECK = $(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv";
PYTEST_ARGS ?=

# Sweep options as VARIABLE:--flag, in the order of the option table in runner/scenario/options.py (which
# tests/unit/test_options.py checks this list against). Empty = the scenario's value.
SWEEP_OPTIONS := SCENARIO:--scenario PLATFORM:--platform ENVOY_CPUS:--envoy-cpus ENVOY_MEMORY:--envoy-memory \
	ENVOY_REPLICAS:--envoy-replicas ENVOY_THREADS:--envoy-threads NGINX_REPLICAS:--nginx-replicas WORKERS:--workers USERS:--users STEP_SECONDS:--step-seconds ROUNDS:--rounds MAX_ROUNDS:--max-rounds \
	LATENCY_SLO_MS:--latency-slo-ms CLIENT:--client \
	ARRIVALS:--arrivals PROFILES:--profiles CONNECTIONS:--connections ROUTES:--routes
# They and the report's (RUN: a run directory or id; empty = results/latest) reach the CLI only through the
# environment, never through the recipe's text: `override X := $(value X)` keeps a value unexpanded (make would
# run a `$(shell ...)` in it), and the recipes say "$$X", so no quote or `$(...)` in a value can reach the shell
# or make as code.
SIZER_VARS := $(foreach option,$(SWEEP_OPTIONS),$(firstword $(subst :, ,$(option)))) \
	RUN TARGET_RPS HEADROOM CORES_PER_REPLICA SLO_P99_MS WORKLOAD_KIND NODES OUTPUT PROFILE A B THRESHOLD_PCT
$(foreach var,$(SIZER_VARS),$(eval override $(var) := $$(value $(var))))
$(foreach var,$(SIZER_VARS),$(if $($(var)),$(eval export $(var))))
# $(call sweep_arg,VARIABLE --flag): --flag="$VARIABLE" when the variable is set
sweep_arg = $(if $($(firstword $(1))),$(lastword $(1))="$$$(firstword $(1))")
SWEEP_ARGS = $(strip $(foreach option,$(SWEEP_OPTIONS),$(call sweep_arg,$(subst :, ,$(option)))))

.PHONY: help setup system-packages test-packages test-tools go-toolchain sweep plan test test-all test-fast fuzz lint \
	testbed-up testbed-down clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "gateway-sizer needs Python 3.11 or newer (PYTHON=$(PYTHON))" >&2; exit 2; }
	$(call apt_install,,$(VENV_CHECK))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

# $(call apt_install,command:package ...[,check]): apt-get install the packages whose command is missing (root
# only); the optional shell check adds to $$missing a package that no command reveals (a Python module).
define apt_install
	@missing=""; for pair in $(1); do command -v $${pair%%:*} >/dev/null || missing="$$missing $${pair#*:}"; done; \
	$(2) \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing Debian packages:$$missing"; \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null \
			|| { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null && \
			     DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; }; \
		else echo "missing:$$missing; install them (apt-get install$$missing) or run make as root" >&2; exit 2; fi; \
	fi
endef

system-packages: ## Debian packages of the local platform (apt-get, as root)
	$(call apt_install,$(SWEEP_PACKAGES))

test-packages: ## Debian packages the tests and benches use (wrk, chromium, etcd, gcc, openssl, tcpdump, ...)
	$(call apt_install,$(TEST_PACKAGES))

test-tools: go-toolchain ## kube-apiserver, Contour's CRDs, helm and kubeconform for the tests (built once, cached)
	k8s/cluster/build.sh kube-apiserver contour-module tools >/dev/null

setup: $(VENV)/.installed system-packages ## virtualenv with the pip packages, and the Debian packages

sweep: setup ## run a sweep on the local platform (ENVOY_CPUS=0.15,0.3 PLATFORM=... SCENARIO=...)
	$(SIZER) sweep $(SWEEP_ARGS)

plan: $(VENV)/.installed ## print the configurations a sweep would run (needs no Debian package)
	$(SIZER) plan $(SWEEP_ARGS)

testbed-up: setup ## start the local test bed by hand (Locust web UI on 127.0.0.1:8089)
	$(SIZER) testbed up $(SWEEP_ARGS)

testbed-down: setup ## stop the local test bed
	$(SIZER) testbed down

# Report, sizing and comparison: Python only, no Debian package.
.PHONY: report recommend compare

report: $(VENV)/.installed ## write report.md and report.html into a run (RUN=results/<id>, default the latest)
	$(SIZER) report $(if $(RUN),-- "$$RUN")

recommend: $(VENV)/.installed ## Envoy CPU, memory, nodes or replicas, HPA, threads, overload settings (TARGET_RPS=5000 [SLO_P99_MS=50] CONNECTIONS=10000 ROUTES=500)
	$(SIZER) recommend $(if $(or $(TARGET_RPS),$(if $(CONNECTIONS)$(ROUTES),,x)),--target-rps="$$TARGET_RPS") \
		$(if $(CONNECTIONS),--connections="$$CONNECTIONS") $(if $(ROUTES),--routes="$$ROUTES") \
		$(if $(HEADROOM),--headroom="$$HEADROOM") \
		$(if $(CORES_PER_REPLICA),--cores-per-replica="$$CORES_PER_REPLICA") \
		$(if $(SLO_P99_MS),--slo-p99-ms="$$SLO_P99_MS") $(if $(WORKLOAD_KIND),--workload-kind="$$WORKLOAD_KIND") \
		$(if $(NODES),--nodes="$$NODES") \
		$(if $(OUTPUT),--output="$$OUTPUT") $(if $(PROFILE),--profile="$$PROFILE") $(if $(RUN),--run="$$RUN")

compare: $(VENV)/.installed ## two runs' knees side by side, fails on a regression (A=... B=... [THRESHOLD_PCT=5])
	$(SIZER) compare $(if $(THRESHOLD_PCT),--threshold-pct="$$THRESHOLD_PCT") -- "$$A" "$$B"

lint: $(VENV)/.installed ## ruff (lint and format) and mypy (types) on the code and the tests
	$(BIN)/ruff check runner locustfiles tests bench
	$(BIN)/ruff format --check runner locustfiles tests bench
	$(BIN)/mypy

# The inner loop: pure logic and the engine on a simulated platform; starts no process, installs no package. Every
# selection of the suite (this one, the fuzz's, the gate's, test-all's) lives in tests/tiers.py.
test-fast: $(VENV)/.installed ## unit and engine tests, no real components (under a minute)
	$(BIN)/python tests/tiers.py --fast -- $(PYTEST_ARGS)

# The property tests (hypothesis) of the fast tiers on fresh random examples, FUZZ times as many as the gate's fixed
# set: a bench that looks for new bugs, not a gate (bench/README.md). Keep what it finds as an @example().
FUZZ ?= 25
override FUZZ := $(value FUZZ)
export FUZZ
fuzz: $(VENV)/.installed ## property tests on FUZZ (25) times the gate's examples, drawn afresh (a bench, 4-5 min)
	@case "$$FUZZ" in ''|0|*[!0-9]*) echo "FUZZ must be a whole number from 1, e.g. make fuzz FUZZ=25" >&2; exit 2;; esac
	GATEWAY_SIZER_FUZZ="$$FUZZ" $(BIN)/python tests/tiers.py --fuzz -- $(PYTEST_ARGS)

test: test-packages go-toolchain setup test-tools ## the gate: the suite less its nightly tests, in tiers (tests/tiers.py), then a time table
	$(BIN)/python tests/tiers.py -- --durations=20 $(PYTEST_ARGS)

test-all: test-packages go-toolchain setup test-tools ## everything: the gate, the nightly measurements, the benches' smoke runs
	$(BIN)/python tests/tiers.py --all -- --durations=20 $(PYTEST_ARGS)

clean: ## stop test beds, remove the virtualenv and caches in the repo (results/ stays)
	-[ -x $(SIZER) ] && $(SIZER) testbed down --all
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

include k8s/cluster.mk

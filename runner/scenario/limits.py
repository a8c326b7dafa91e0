"""Defaults and bounds of a scenario.

Every count, size and duration has an upper bound (listed in docs/scenarios.md): a value beyond one is a typo or hostile
input, never a sweep, and is refused before anything starts.
"""

from __future__ import annotations

DEFAULT_THRESHOLD = 0.90

# Bounds. A sweep is the product of its lists, so the plan is bounded too; durations bound the time a step holds load.
MAX_CONFIGURATIONS = 1000  # Envoy CPUs x memories x Contour resources x nginx replicas x arrivals x profiles
MIN_CPU_CORES = 0.001  # 1m, Kubernetes' resolution; CPU values are whole millicores
MIN_LOCAL_CPU_CORES = 0.01  # 10m: a 1 ms CFS quota per 100 ms period, the smallest the local platform sets
MAX_CPU_CORES = 512.0  # any CPU limit or request: Envoy, Contour, nginx, Locust workers
MAX_CONCURRENCY = 512  # Envoy worker threads
MIN_MEMORY_BYTES = 2**20  # 1Mi
MAX_MEMORY_BYTES = 2**42  # 4Ti
MAX_REPLICAS = 256  # nginx replicas
MAX_NGINX_WORKER_PROCESSES = 64
MAX_WORKERS = 256  # Locust workers (local processes or pods)
MAX_USERS = 100_000  # Locust users in one step (also start_users and baseline.users)
MAX_RPS = 10_000_000.0  # any target rate: load.rps, start_rps, start_rps_per_core, max_rps_per_user
MIN_RPS_PER_USER = 0.1  # max_rps_per_user below this asks for more users than MAX_USERS at modest rates
MIN_SPAWN_RATE = 1.0  # users started per second
MAX_SPAWN_RATE = float(MAX_USERS)
MAX_STEPS = 100  # measuring windows per configuration, and entries of a users or rps schedule
MAX_ROUND_COUNT = 50  # load.rounds and load.max_rounds (the MAX_ROUNDS= option)
MAX_WINDOWS_PER_ROUND = 10
MAX_SEED = 2**31 - 1
MAX_STEP_SECONDS = 3600.0  # one measuring window
MAX_WAIT_SECONDS = 3600.0  # warmup_seconds, settle_seconds, rollout_timeout_seconds
MAX_SECONDS_PER_CONFIG = 86_400.0
MAX_SCRAPE_INTERVAL_SECONDS = 300.0
MAX_LATENCY_SLO_MS = 60_000.0
MAX_NAME_LENGTH = 64  # the scenario's name (it goes into the run id)
MAX_TEXT_LENGTH = 2000  # description, file paths, URLs, load.path
MAX_SCENARIO_BYTES = 2**20  # a scenario file (1 MiB): SCENARIO=/proc/self/pagemap is not read for minutes
# The memory model (section `memory`) and Envoy's overload manager (`envoy.overload`).
MAX_HELD_CONNECTIONS = 25_000  # one source address to one gateway address has 28,232 ephemeral ports here
MAX_EXTRA_ROUTES = 10_000  # extra virtual hosts in Envoy's route configuration
MAX_MEMORY_POINTS = 20  # entries of memory.connections and of memory.routes
MAX_OPEN_RATE = 10_000.0  # connections opened per second
MAX_ROUTE_PROBES = 200  # routes per point created one at a time and timed (kubernetes)
MIN_REFRESH_SECONDS = 5.0
MAX_REFRESH_SECONDS = 50.0  # a held connection's request period: inside Contour's 60 s idle timeout
MIN_HOLD_SECONDS = 5.0  # Envoy refreshes its server.memory_* gauges every 5 s (stats flush)
MAX_OVERLOAD_CONNECTIONS = 10_000_000  # envoy.overload.max_connections

"""The Locust master's worker port (5557) closed to all but the run's own workers, two ways.

Locust's master takes a worker's `client_ready` from any sender that reaches its port, hands it users mid-run, and
merges its `stats` into the run's counters: a stranger pod could take users from the run's workers and write its
own requests and latencies into a window. So:

- a NetworkPolicy per run (made with the run's Locust objects, recorded and deleted like them) lets only the run's
  worker pods reach 5557 on its master; the web API's port stays open (it takes commands with the run's token
  only, and the runner reaches it through the API server's proxy). It takes effect only where the cluster's
  network plugin enforces NetworkPolicies (Calico, Cilium, ...); a plain bridge CNI, as on the one-machine
  cluster, accepts the object and enforces nothing;
- the second line, which holds everywhere: the run's worker pods get a host name made at random for the run
  (`spec.hostname`), which the master is told (GATEWAY_SIZER_WORKER_HOST); its guard extension
  (locustfiles/gateway_sizer_guard.py) drops every message from a worker of another host name. A pod that can
  read the run's Deployments in its namespace can learn the name: that is the namespace's own trust, not a
  stranger's. And a window whose workers are not the run's is discarded (runner.measure.check_workers).
"""

from __future__ import annotations

import secrets
from typing import Any

WORKER_HOST_ENV = "GATEWAY_SIZER_WORKER_HOST"  # read by locustfiles/gateway_sizer_guard.py on the master
WORKER_HOST_PREFIX = "locust-worker-"


def worker_host() -> str:
    """A host name for one run's worker pods, made at random (a DNS label)."""
    return f"{WORKER_HOST_PREFIX}{secrets.token_hex(8)}"


def network_policy(
    name: str, namespace: str, master: dict[str, str], workers: dict[str, str], web_port: int, worker_port: int
) -> dict[str, Any]:
    """The master's ingress: `worker_port` from the pods labelled `workers` only; `web_port` from anywhere."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": master},
        "spec": {
            "podSelector": {"matchLabels": master},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": workers}}],
                    "ports": [{"protocol": "TCP", "port": worker_port}],
                },
                {"ports": [{"protocol": "TCP", "port": web_port}]},
            ],
        },
    }

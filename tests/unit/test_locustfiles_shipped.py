"""The master-side extension and everything it imports go into the Kubernetes locustfiles ConfigMap, so the
connection holder and the route probe run in an in-cluster master as they do locally."""

from __future__ import annotations

import ast

from runner.locust import LocustOptions
from runner.paths import LOCUSTFILE_DIR
from runner.platforms.kubernetes.loadgen import LocustDeployment

CONFIGMAP_LIMIT_BYTES = 2**20  # Kubernetes' limit on a ConfigMap


def _local_imports(source: str, shipped: set[str]) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source)):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        modules |= {f"{name}.py" for name in names if f"{name}.py" in shipped}
    return modules


def test_the_configmap_carries_the_stats_extension_and_every_module_it_imports():
    spec = LocustDeployment(
        namespace="gateway-loadtest", image="locustio/locust:2.47.0", pull_policy="IfNotPresent",
        user_class="LeanGatewayUser", locustfile=LOCUSTFILE_DIR / "gateway.py",
        options=LocustOptions("external.nginx", "/"), gateway_url="http://envoy.projectcontour.svc.cluster.local",
        workers=1, worker_resources={}, run_id="run", gateway="projectcontour-envoy",
        targets=("http://envoy.projectcontour.svc.cluster.local",), token="t",
    )  # fmt: skip
    files = spec.configmap()["data"]
    assert {"gateway_sizer_stats.py", "gateway_sizer_guard.py", "connection_holder.py", "route_probe.py",
            "plain_http.py"} <= set(files)  # fmt: skip
    needed, todo = set(), ["gateway.py", "gateway_sizer_stats.py", "gateway_sizer_guard.py"]
    while todo:  # the modules reached from the two files the master loads
        name = todo.pop()
        needed.add(name)
        todo += [m for m in _local_imports(files[name], set(files)) if m not in needed]
    shipped = {"connection_holder.py", "route_probe.py", "plain_http.py", "lean_http_wire.py", "fine_timer.py"}
    assert shipped <= needed <= set(files)
    assert sum(len(text.encode()) for text in files.values()) < CONFIGMAP_LIMIT_BYTES

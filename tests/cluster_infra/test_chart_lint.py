"""The chart and the manifests validate strictly, and the validation itself rejects a bad HTTPProxy."""

from __future__ import annotations

import base64
import subprocess

import pytest
import yaml

from runner.paths import PROJECT_ROOT
from runner.platforms.kubernetes.sizing_copy import COMPONENT as SIZING_COMPONENT
from support.cluster import run
from support.project import CACHE, K8S

pytestmark = pytest.mark.kubernetes

BAD_HTTPPROXY = """\
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata:
  name: nginx
  namespace: gateway-loadtest
spec:
  virtualhost:
    fqdn: external.nginx
  routes:
    - services:
        - name: nginx
          port: 80
          weigth: 10
"""


@pytest.mark.timeout(3600)
def test_chart_lint_passes(built_tools):
    proc = run([str(K8S / "cluster/lint.sh")], timeout=1200)
    assert "chart-lint: all checks passed" in proc.stderr
    assert proc.stderr.count("ok   ") >= 9


@pytest.mark.timeout(1200)
def test_kubeconform_rejects_a_misspelt_httpproxy_field(built_tools):
    run([str(K8S / "cluster/lint.sh")], timeout=1200)  # makes the schemas
    schemas = sorted(CACHE.glob("schemas/kubernetes-*/httpproxy-projectcontour-v1.json"))
    assert schemas, "lint.sh should have written the HTTPProxy schema"
    proc = subprocess.run(
        [
            str(built_tools["kubeconform"]),
            "-strict",
            "-schema-location",
            str(schemas[-1].parent) + "/{{ .ResourceKind }}{{ .KindSuffix }}.json",
            "-",
        ],
        input=BAD_HTTPPROXY,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "weigth" in proc.stdout + proc.stderr


def _essentials(doc: dict) -> tuple[tuple[str, str], dict]:
    """An object without what differs by tooling alone: labels, namespace, the chart's checksum annotation,
    the line breaks kustomize puts into base64 (binaryData compared as bytes)."""
    meta = doc["metadata"]
    meta.pop("labels", None)
    meta.pop("namespace", None)
    doc.get("spec", {}).get("template", {}).get("metadata", {}).pop("annotations", None)
    if "binaryData" in doc:
        doc["binaryData"] = {key: base64.b64decode(value) for key, value in doc["binaryData"].items()}
    return (doc["kind"], meta["name"]), doc


def test_plain_backend_manifests_are_the_chart_with_default_values(built_tools):
    rendered = run(
        [str(built_tools["helm"]), "template", "gateway-loadtest", str(PROJECT_ROOT / "charts/gateway-loadtest")],
        timeout=120,
    ).stdout
    from_chart = dict(_essentials(d) for d in yaml.safe_load_all(rendered) if d)
    plain = run([str(built_tools["kubectl"]), "kustomize", str(K8S / "manifests/backend")], timeout=120).stdout
    from_plain = dict(_essentials(d) for d in yaml.safe_load_all(plain) if d and d["kind"] != "Namespace")
    assert from_plain == from_chart
    bodies = from_plain[("ConfigMap", "nginx-bodies")]["binaryData"]
    assert {key: len(body) for key, body in bodies.items()} == {"body-1024": 1024, "body-16384": 16384,
                                                               "body-262144": 262144}  # fmt: skip


def test_the_charts_locust_serves_its_web_ui_inside_its_pod_only_and_loads_its_host_only(built_tools):
    # issue 23: a master with --web-host=0.0.0.0 behind a Service took POST /swarm with any host from any pod
    guard = PROJECT_ROOT / "locustfiles/gateway_sizer_guard.py"
    values = ["--set", "locust.enabled=true", "--set", "locust.host=http://envoy.example:8080",
              "--set-file", f"locust.extraFiles.gateway_sizer_guard\\.py={guard}"]  # fmt: skip
    chart = str(PROJECT_ROOT / "charts/gateway-loadtest")
    rendered = run([str(built_tools["helm"]), "template", "t", chart, *values], timeout=120).stdout
    objects = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered) if d}
    service = objects[("Service", "locust-master")]
    assert [p["port"] for p in service["spec"]["ports"]] == [5557]  # the workers' port; no web UI to the cluster
    for name in ("locust-master", "locust-worker"):
        [container] = objects[("Deployment", name)]["spec"]["template"]["spec"]["containers"]
        assert container["args"][0] == "--locustfile=/locust/locustfile.py,/locust/gateway_sizer_guard.py"
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["GATEWAY_SIZER_TARGETS"] == "http://envoy.example:8080"
    [master] = objects[("Deployment", "locust-master")]["spec"]["template"]["spec"]["containers"]
    assert "--web-host=127.0.0.1" in master["args"] and "web" not in {p["name"] for p in master["ports"]}
    assert objects[("ConfigMap", "locustfile")]["data"]["gateway_sizer_guard.py"] == guard.read_text()


def test_the_charts_podmonitor_is_selected_by_kube_prometheus_stack_and_scrapes_only_what_the_sizer_reads(
    built_tools,
):
    # issue 31: the PodMonitor lacked kube-prometheus-stack's `release` label and scraped Envoy's full stats page
    # every 5 s, inside the CPU limit under test
    chart = str(PROJECT_ROOT / "charts/gateway-loadtest")
    values = ["--set", "podMonitor.enabled=true", "--set", "podMonitor.labels.release=kps"]
    rendered = run([str(built_tools["helm"]), "template", "t", chart, *values], timeout=120).stdout
    monitors = {d["metadata"]["name"]: d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "PodMonitor"}
    # production's Envoy and the sizing fleet the run clones beside it (its own label, none of production's)
    assert {name: m["spec"]["selector"]["matchLabels"] for name, m in monitors.items()} == {
        "envoy": {"app": "envoy"},
        "gateway-sizer-envoy": {"app.kubernetes.io/name": SIZING_COMPONENT},
    }
    monitor = monitors["gateway-sizer-envoy"]
    assert monitor["metadata"]["labels"]["release"] == "kps"  # kps's podMonitorSelector
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert monitors["envoy"]["spec"]["podMetricsEndpoints"] == [endpoint]
    assert endpoint["interval"] == "30s"  # kps's own: the scenario's scrape_interval_seconds
    prometheus = yaml.safe_load_all((K8S / "manifests/prometheus/prometheus.yaml").read_text())
    (config,) = [d for d in prometheus if d and d["kind"] == "ConfigMap"]
    (envoy_job,) = [j for j in yaml.safe_load(config["data"]["prometheus.yml"])["scrape_configs"]
                    if j["job_name"] == "envoy"]  # fmt: skip
    assert endpoint["params"] == envoy_job["params"]  # the project's own Prometheus' filter, to the character
    assert endpoint["params"]["filter"] and endpoint["params"]["usedonly"] == [""]

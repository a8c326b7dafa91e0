"""A Prometheus configured the way kube-prometheus-stack (kps) configures its own, for the one-machine cluster, which
has no prometheus-operator (no image registry here, and the operator's build was not attempted in the time at hand).

What is emulated, and how (the operator's work, done by this module instead):
- the operator's selection: a PodMonitor is scraped only when its labels match the Prometheus's
  `podMonitorSelector`, which kps sets to `release: <release>` (`select_pod_monitors`);
- the scrape configuration the operator generates from a PodMonitor (`pod_monitor_job`): a `role: pod` discovery
  in the PodMonitor's namespaces, targets kept by its selector's labels and its endpoint's port name, the endpoint's
  path, interval and params, the target labels `namespace`, `pod`, `container`, `endpoint` and `job`
  (`<namespace>/<name>`);
- kps's kubelet ServiceMonitor for cAdvisor (`kubelet_cadvisor_job`): `honorLabels: true`, https with the
  ServiceAccount's token, `/metrics/cadvisor`, no interval of its own (Prometheus' global 30 s), and a drop of
  series gateway-sizer does not read, as kps drops some (kps reaches the kubelets through a Service's endpoints,
  this through node discovery: the same targets);
- the Prometheus itself: the cluster's own Prometheus image and ServiceAccount, a Service named as kps names it
  (`<release>-kube-prometheus-prometheus`, port 9090).
"""

from __future__ import annotations

from typing import Any

import yaml

KPS_INTERVAL = "30s"  # Prometheus' default, which kps keeps for the kubelet and every monitor without one


def select_pod_monitors(objects: list[dict[str, Any]], release: str) -> list[dict[str, Any]]:
    """The PodMonitors kps's Prometheus of `release` selects (podMonitorSelector: {matchLabels: {release: ...}})."""
    return [o for o in objects if o["kind"] == "PodMonitor" and (o["metadata"].get("labels") or {}).get(
        "release") == release]  # fmt: skip


def _label(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def pod_monitor_job(monitor: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """The scrape configurations the operator makes of `monitor` (one per endpoint), created in `namespace`."""
    spec, name = monitor["spec"], monitor["metadata"]["name"]
    selector, namespaces = spec["selector"]["matchLabels"], spec["namespaceSelector"]["matchNames"]
    keep_pods = [{"action": "keep", "source_labels": [f"__meta_kubernetes_pod_label_{_label(k)}",
                                                      f"__meta_kubernetes_pod_labelpresent_{_label(k)}"],
                  "regex": f"({v});true"} for k, v in selector.items()]  # fmt: skip
    jobs = []
    for index, endpoint in enumerate(spec["podMetricsEndpoints"]):
        job: dict[str, Any] = {
            "job_name": f"podMonitor/{namespace}/{name}/{index}",
            "honor_labels": False,
            "scrape_interval": endpoint.get("interval") or KPS_INTERVAL,
            "metrics_path": endpoint.get("path", "/metrics"),
            "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": namespaces}}],
            "relabel_configs": [
                *keep_pods,
                {
                    "action": "keep",
                    "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                    "regex": endpoint["port"],
                },
                {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                {"target_label": "job", "replacement": f"{namespace}/{name}"},
                {"target_label": "endpoint", "replacement": endpoint["port"]},
            ],
        }
        if endpoint.get("params"):
            job["params"] = endpoint["params"]
        jobs.append(job)
    return jobs


def kubelet_cadvisor_job() -> dict[str, Any]:
    """kps's kubelet ServiceMonitor's cAdvisor endpoint, as the operator writes it."""
    secrets = "/var/run/secrets/kubernetes.io/serviceaccount"
    return {
        "job_name": "serviceMonitor/monitoring/kps-kubelet/1",
        "honor_labels": True,
        "scheme": "https",
        "metrics_path": "/metrics/cadvisor",
        "tls_config": {"ca_file": f"{secrets}/ca.crt", "insecure_skip_verify": True},
        "authorization": {"credentials_file": f"{secrets}/token"},
        "kubernetes_sd_configs": [{"role": "node"}],
        "relabel_configs": [
            {"source_labels": ["__meta_kubernetes_node_name"], "target_label": "node"},
            {"target_label": "job", "replacement": "kubelet"},
        ],
        "metric_relabel_configs": [
            {
                "source_labels": ["__name__"],
                "action": "drop",
                "regex": "container_(network_tcp_usage_total|network_udp_usage_total|tasks_state|cpu_load_average_10s)",
            },
        ],
    }


def prometheus_config(monitors: list[dict[str, Any]], namespace: str) -> str:
    """prometheus.yml: the global 30 s, the kubelet's cAdvisor and every selected PodMonitor's jobs."""
    jobs = [kubelet_cadvisor_job()] + [job for m in monitors for job in pod_monitor_job(m, namespace)]
    return yaml.safe_dump({"global": {"scrape_interval": KPS_INTERVAL, "scrape_timeout": "10s"},
                           "scrape_configs": jobs})  # fmt: skip


def objects(release: str, config: str, image: str) -> list[dict[str, Any]]:
    """The ConfigMap, Deployment and Service of the emulated kps Prometheus in `monitoring`."""
    name = f"{release}-kube-prometheus-prometheus"
    labels = {"app": name}
    container = {
        "name": "prometheus", "image": image, "imagePullPolicy": "Never",
        "args": ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus",
                 "--web.listen-address=:9090"],
        "ports": [{"name": "web", "containerPort": 9090}],
        "readinessProbe": {"httpGet": {"path": "/-/ready", "port": "web"}, "periodSeconds": 2},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus"},
                         {"name": "data", "mountPath": "/prometheus"}],
    }  # fmt: skip
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "monitoring"},
         "data": {"prometheus.yml": config}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": name, "namespace": "monitoring", "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {"serviceAccountName": "prometheus", "containers": [container],
                      "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "fsGroup": 65534},
                      "volumes": [{"name": "config", "configMap": {"name": name}}, {"name": "data", "emptyDir": {}}]},
         }}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "monitoring"},
         "spec": {"selector": labels, "ports": [{"name": "web", "port": 9090, "targetPort": "web"}]}},
    ]  # fmt: skip

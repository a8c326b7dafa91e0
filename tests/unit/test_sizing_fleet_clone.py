"""The sizing fleet as data: the pod template cloned from production's, its Service's ports, the ContourDeployment
copied from the user's, Envoy's args per thread count, where the Locust workers go; the scenario's target and
thread axis. (tests/kubernetes/test_sizing_fleet.py creates them on a real API server; tests/cluster sweeps them.)"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from runner.errors import ScenarioError, UsageError
from runner.model import FleetFacts, RunSummary
from runner.paths import PROJECT_ROOT
from runner.plan import plan_sweep
from runner.platforms.kubernetes.fleet_objects import first_configuration
from runner.platforms.kubernetes.loadgen import worker_placement
from runner.platforms.kubernetes.objects import run_hash
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.platform import KubernetesPlatform
from runner.platforms.kubernetes.sizing_copy import ClassicSizing, clone_template, service_of, service_ports
from runner.platforms.kubernetes.sizing_gateway import copied_parameters, http_port
from runner.platforms.kubernetes.template_sizing import args_for
from runner.platforms.kubernetes.workloads import Workload
from runner.report.model import _environment as report_environment
from runner.report.model import build_report
from runner.report.series import require_series
from runner.report.threads import threads_for
from runner.results import load_summary
from runner.scenario import Overrides, load_scenario, parse_scenario
from runner.scenario.threads import ENVOY_DEFAULT_CONCURRENCY, PRODUCTION_CONCURRENCY

ARGS = ["-c", "/config/envoy.json", "--service-cluster $(CONTOUR_NAMESPACE)", "--log-level info"]
# Contour's quickstart Envoy pod template (examples/contour/03-envoy.yaml), as the API serves it, with what a
# production install adds: a priority class, a spread rule over its own pods, a node selector.
PRODUCTION = {
    "metadata": {
        "labels": {"app": "envoy"},
        "annotations": {"prometheus.io/scrape": "true", "kubectl.kubernetes.io/restartedAt": "yesterday"},
    },
    "spec": {
        "priorityClassName": "system-node-critical",
        "nodeSelector": {"role": "edge"},
        "tolerations": [{"key": "edge", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "envoy"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            },
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
                }
            },
        },
        "terminationGracePeriodSeconds": 300,
        "initContainers": [
            {
                "name": "envoy-initconfig",
                "args": ["bootstrap", "/config/envoy.json"],
                "volumeMounts": [{"name": "envoycert", "mountPath": "/certs"}],
            }
        ],
        "containers": [
            {"name": "shutdown-manager", "args": ["envoy", "shutdown-manager"]},
            {
                "name": "envoy",
                "args": ARGS,
                "ports": [
                    {"containerPort": 8080, "hostPort": 80, "name": "http"},
                    {"containerPort": 8443, "hostPort": 443, "name": "https"},
                    {"containerPort": 8002, "name": "metrics"},
                ],
            },
        ],
        "volumes": [{"name": "envoycert", "secret": {"secretName": "envoycert"}}],
    },
}
LABELS = {"app.kubernetes.io/name": "gateway-sizer-envoy", "gateway-sizer/run": "r"}
SIZED = {"envoy": {"limits": {"cpu": "500m"}, "requests": {"cpu": "500m"}}}


def test_the_clone_keeps_the_same_envoy_and_changes_only_labels_sizes_placement_and_what_would_clash():
    template, notes = clone_template(PRODUCTION, LABELS, SIZED, ("envoy", ARGS), None, "node-a")
    spec = template["spec"]
    assert template["metadata"] == {"labels": LABELS, "annotations": {"prometheus.io/scrape": "true"}}
    # the same Envoy: bootstrap, args, the Secret it mounts, tolerations, node selector, the zone rule
    assert spec["initContainers"] == PRODUCTION["spec"]["initContainers"]
    assert spec["containers"][1]["args"] == ARGS and spec["containers"][1]["resources"] == SIZED["envoy"]
    assert spec["volumes"] == PRODUCTION["spec"]["volumes"] and spec["tolerations"] == PRODUCTION["spec"]["tolerations"]
    assert spec["nodeSelector"] == {"role": "edge"}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}],
        }
    ]
    # no clash with production's pods on that node, no preemption, no rule about production's own pods
    assert all("hostPort" not in p for p in spec["containers"][1]["ports"])
    assert "podAntiAffinity" not in spec["affinity"] and "priorityClassName" not in spec
    assert spec["terminationGracePeriodSeconds"] == 10
    assert notes == [
        "no priority class (it never preempts a pod)",
        "no hostPorts (production's pods publish 8080, 8443 on their nodes)",
    ]
    assert PRODUCTION["spec"]["containers"][1]["ports"][0]["hostPort"] == 80  # production's copy untouched


def test_the_scenario_s_node_selector_replaces_the_node_and_host_network_becomes_the_pod_network():
    production = copy.deepcopy(PRODUCTION)
    production["spec"].update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    template, notes = clone_template(production, LABELS, SIZED, ("envoy", None), {"pool": "sizing"}, "node-a")
    spec = template["spec"]
    assert spec["nodeSelector"] == {"pool": "sizing"} and "matchFields" not in str(spec["affinity"])
    assert (spec["hostNetwork"], spec["dnsPolicy"]) == (False, "ClusterFirst") and "args" not in spec["containers"][1]
    assert "the pod network, not the host's (production's Envoy holds the node's ports)" in notes


def test_the_clone_s_readiness_is_probed_every_second_from_its_start_and_production_s_probe_stays():
    """Contour's Envoy is first probed 3 s after it starts, then every 4 s: the run, which waits for the fleet to be
    ready before it measures, would wait up to 7 s for an Envoy that serves after 1."""
    production = copy.deepcopy(PRODUCTION)
    contour_probe = {"httpGet": {"path": "/ready", "port": 8002}, "initialDelaySeconds": 3, "periodSeconds": 4}
    production["spec"]["containers"][1]["readinessProbe"] = contour_probe
    template, notes = clone_template(production, LABELS, SIZED, ("envoy", ARGS), None, "node-a")
    envoy, shutdown_manager = template["spec"]["containers"][1], template["spec"]["containers"][0]
    assert envoy["readinessProbe"] == {**contour_probe, "initialDelaySeconds": 0, "periodSeconds": 1}
    assert "readinessProbe" not in shutdown_manager  # a container with no probe gets none
    assert "envoy's readiness probed every 1 s from its start" in notes
    assert production["spec"]["containers"][1]["readinessProbe"]["periodSeconds"] == 4  # production's untouched
    # a probe already as quick is left as it is, and no note says it differs
    production["spec"]["containers"][1]["readinessProbe"] = {"tcpSocket": {"port": 8002}, "periodSeconds": 1}
    template, notes = clone_template(production, LABELS, SIZED, ("envoy", ARGS), None, "node-a")
    assert template["spec"]["containers"][1]["readinessProbe"] == {"tcpSocket": {"port": 8002}, "periodSeconds": 1}
    assert not any("readiness" in note for note in notes)


def test_the_fleet_service_has_production_s_ports_and_the_fleet_url_keeps_the_gateway_s_port():
    production = {
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080, "protocol": "TCP"}]}
    }
    assert service_ports(production, []) == [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]
    assert service_ports(None, [{"containerPort": 8080, "name": "http"}]) == [
        {"name": "http", "port": 8080, "targetPort": 8080}
    ]
    assert service_of("http://envoy.projectcontour.svc.cluster.local") == ("projectcontour", "envoy")
    assert service_of("http://envoy.projectcontour:8080") == ("projectcontour", "envoy")
    assert service_of("http://10.96.0.30") is None and service_of("http://gateway.example.com") is None
    scenario = load_scenario("local", Overrides(platform="kubernetes"))
    scenario = scenario.model_copy(
        update={
            "kubernetes": scenario.kubernetes.model_copy(
                update={"gateway_url": "http://envoy.projectcontour.svc.cluster.local:8080"}
            )
        }
    )
    fleet = KubernetesPlatform(scenario, Path("/tmp/r1")).fleet
    assert fleet.gateway_url == f"http://gateway-sizer-envoy-{run_hash('r1')}.projectcontour.svc.cluster.local:8080"


@pytest.mark.parametrize(
    ("concurrency", "args"),
    [
        (PRODUCTION_CONCURRENCY, ARGS),
        (ENVOY_DEFAULT_CONCURRENCY, ARGS),
        (4, [*ARGS, "--concurrency", "4"]),
    ],
    ids=["production", "default", "four"],
)
def test_envoy_s_args_per_thread_count_start_from_production_s(concurrency, args):
    assert args_for(ARGS, concurrency) == args
    assert args_for([*ARGS, "--concurrency 16"], concurrency) == (
        [*ARGS, "--concurrency 16"] if concurrency == PRODUCTION_CONCURRENCY else args
    )
    assert args_for(None, ENVOY_DEFAULT_CONCURRENCY) is None and args_for(None, PRODUCTION_CONCURRENCY) is None


def test_the_copied_contour_deployment_is_the_user_s_but_a_cheap_deployment_of_the_run_s_own():
    user = {
        "spec": {
            "envoy": {
                "workloadType": "DaemonSet",
                "daemonSet": {"updateStrategy": {"type": "RollingUpdate"}},
                "logLevel": "warn",
                "networkPublishing": {"type": "LoadBalancerService"},
                "nodePlacement": {"nodeSelector": {"a": "b"}, "tolerations": [{"key": "edge"}]},
            },
            "contour": {"replicas": 2},
            "runtimeSettings": {"ingress": {"classNames": []}, "envoy": {"listener": {}}},
            "resourceLabels": {"team": "x"},
        }
    }
    spec = copied_parameters(user, "gateway-sizer-abc", SIZED["envoy"], 2, {"kubernetes.io/hostname": "n"}, "run-1")
    envoy = spec["envoy"]
    assert envoy["workloadType"] == "Deployment" and envoy["deployment"] == {"replicas": 2}
    assert "daemonSet" not in envoy and envoy["logLevel"] == "warn" and envoy["resources"] == SIZED["envoy"]
    assert envoy["networkPublishing"] == {"type": "ClusterIPService"}
    assert envoy["nodePlacement"] == {"nodeSelector": {"kubernetes.io/hostname": "n"}, "tolerations": [{"key": "edge"}]}
    assert spec["contour"] == {"deployment": {"replicas": 1}}
    assert spec["runtimeSettings"] == {"ingress": {"classNames": ["gateway-sizer-abc"]}, "envoy": {"listener": {}}}
    assert spec["resourceLabels"] == {"team": "x", "gateway-sizer/run": "run-1"}
    assert user["spec"]["envoy"]["workloadType"] == "DaemonSet"  # the user's untouched
    assert (
        http_port({"spec": {"listeners": [{"protocol": "HTTPS", "port": 443}, {"protocol": "HTTP", "port": 8080}]}})
        == 8080
    )


def test_workers_keep_off_the_fleet_s_nodes_unless_the_scenario_names_theirs():
    assert worker_placement({"pool": "load"}, ("projectcontour", LABELS)) == {"nodeSelector": {"pool": "load"}}
    placed = worker_placement(None, ("projectcontour", LABELS))
    (term,) = placed["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"] == {
        "labelSelector": {"matchLabels": LABELS},
        "namespaces": ["projectcontour"],
        "topologyKey": "kubernetes.io/hostname",
    }
    assert worker_placement(None, None) == {}


def _kubernetes(**kubernetes: object) -> dict:
    return {"name": "t", "platform": "kubernetes", "envoy": {"cpu": [0.25, 0.5]}, "kubernetes": kubernetes}


def test_threads_default_to_production_s_on_kubernetes_and_are_an_axis_with_keys_of_their_own():
    scenario = parse_scenario(_kubernetes())
    assert scenario.envoy.concurrency == ("production",) and scenario.kubernetes.target == "sizing"
    keys = [c.key for c in plan_sweep(scenario).configurations]
    assert all(",threads=-1," in key for key in keys)
    axis = parse_scenario({**_kubernetes(), "envoy": {"cpu": [0.5], "concurrency": ["production", 2]}})
    configs = plan_sweep(axis).configurations
    assert [c.envoy_concurrency for c in configs] == [PRODUCTION_CONCURRENCY, 2] and len({c.key for c in configs}) == 2
    assert configs[1].label.endswith("2 threads, nginx x1, poisson arrivals")
    local = load_scenario("local")  # one per started core: keys and labels as before threads were an axis
    assert all("threads" not in c.key for c in plan_sweep(local).configurations)
    assert load_scenario("local", Overrides(envoy_threads="1,2,4")).envoy.concurrency == (1, 2, 4)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"name": "t", "envoy": {"cpu": [0.25], "concurrency": "production"}},
            "envoy.concurrency: production is the production gateway's thread count",
        ),
        (
            {**_kubernetes(), "contour": {"resources": [{"cpu": 1}]}},
            "contour.resources: the sizing fleet shares production's Contour",
        ),
        (_kubernetes(target="production"), "kubernetes.target"),
        (_kubernetes(sizing={"node_selector": {"bad key!": "x"}}), "is not a label key"),
    ],
)
def test_what_a_target_cannot_do_is_one_line_before_anything_starts(data, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(data)


def test_live_needs_the_command_line_too_a_scenario_file_alone_never_sizes_production(tmp_path):
    scenario = parse_scenario(_kubernetes(target="live"))
    with pytest.raises(UsageError) as refused:
        KubernetesPlatform(scenario, tmp_path / "run")
    assert refused.value.one_line() == (
        "kubernetes.target: live changes the production gateway itself (Envoy projectcontour/envoy), and the command "
        "line did not say --live: size a sizing fleet beside it (kubernetes.target: sizing, the default), or add "
        "--live to the command line"
    )
    assert KubernetesPlatform(scenario, tmp_path / "run", live=True).fleet.shape == "the production Envoy (live)"


def _summary_with(concurrency: int, threads: int | None, production: int | None) -> RunSummary:
    """The recorded local run's summary, its configurations run with these threads, and a fleet's facts."""
    summary = load_summary(PROJECT_ROOT / "tests" / "report" / "data" / "local-150m-300m")
    configs = [
        c.model_copy(update={"envoy": c.envoy.model_copy(update={"concurrency": concurrency, "threads": threads})})
        for c in summary.configs
    ]
    facts = FleetFacts(target="a sizing fleet", workload="w", production_concurrency=production)
    environment = summary.environment.model_copy(update={"fleet": facts})
    return summary.model_copy(update={"configs": configs, "environment": environment})


def test_the_sizing_says_which_threads_its_figures_hold_for_and_what_to_set_in_production():
    summary = _summary_with(PRODUCTION_CONCURRENCY, 16, None)
    basis = require_series(summary).largest
    production = threads_for(basis, 0.6, summary, None)  # the rule follows the record: production's own
    assert (production.rule, production.production) == ("production", 16)
    assert production.lines() == [
        "Threads: the figures hold for Envoy with 16 worker threads at 300m, as the production gateway runs them (no "
        "--concurrency: the count its Envoy reports).",
        "  nothing to set: production runs them already; where its args set none, Envoy picks its own count (the "
        "node's CPUs, or from Envoy 1.37 its CPU limit's cores): set --concurrency 16 to hold it",
    ]
    pinned = _summary_with(PRODUCTION_CONCURRENCY, 4, 4)
    assert threads_for(require_series(pinned).largest, 0.6, pinned, None).lines()[1] == (
        "  nothing to set: production runs them already"
    )
    default = _summary_with(ENVOY_DEFAULT_CONCURRENCY, 2, None)  # Envoy's own default, as Envoy reported it
    threads = threads_for(require_series(default).largest, 0.3, default, None)
    assert (threads.rule, threads.production, threads.flag) == ("default", 2, "--concurrency 2")
    assert "Envoy's default worker threads, its own count (2 as Envoy reported), at 300m" in threads.lines()[0]


def test_the_report_names_what_the_run_measured_and_the_threads_its_sizing_holds_for():
    summary = load_summary(PROJECT_ROOT / "tests" / "report" / "data" / "local-150m-300m")
    facts = FleetFacts(
        target="a sizing fleet (a Deployment cloned from production's Envoy)",
        workload="Deployment projectcontour/gateway-sizer-envoy-1a2b3c4d",
        copied_from="DaemonSet projectcontour/envoy",
        differences=("no hostPorts",),
        production_concurrency=None,
    )
    environment = summary.environment.model_copy(update={"fleet": facts})
    summary = summary.model_copy(update={"environment": environment})
    measured = [row.description for row in report_environment(summary, None) if row.name == "Measured"]
    assert measured == [
        "a sizing fleet (a Deployment cloned from production's Envoy): Deployment projectcontour/gateway-sizer-envoy-"
        "1a2b3c4d, copied from DaemonSet projectcontour/envoy; differs in: no hostPorts"
    ]
    threads = build_report(summary).threads  # the recorded run's: one thread per started core of 300m
    assert threads[0] == (
        "Threads: the figures hold for Envoy with --concurrency 1 at 300m (one per started core of the limit: "
        "envoy.concurrency auto)."
    )


class FakeThreadsPrometheusForSpeed:
    """Stands in for runner.metrics.Metrics' instant query only: Envoy's `server.concurrency` per production pod."""

    def __init__(self, counts: list[int]) -> None:
        self.counts, self.queries = counts, []

    def instant(self, query: str) -> list[dict]:
        self.queries.append(query)
        return [{"metric": {"pod": f"envoy-{i}"}, "value": [0, str(n)]} for i, n in enumerate(self.counts)]


def _classic_fleet(args: list[str]) -> ClassicSizing:
    scenario = parse_scenario({"name": "t", "platform": "kubernetes", "envoy": {"cpu": [0.15]}})
    fleet = ClassicSizing(scenario, "20261127-000000-t", ClusterChanges(Path("/dev/null")))
    template = copy.deepcopy(PRODUCTION)
    template["spec"]["containers"][1]["args"] = args
    fleet.template, fleet.production_pods = template, ["envoy-abcde"]
    fleet.production = Workload("DaemonSet", "projectcontour", "envoy", "envoy")
    return fleet


def test_the_classic_fleet_holds_the_threads_production_s_envoy_reports_where_its_args_set_none():
    # Envoy 1.37+ takes its default count from its CPU limit: a clone at 150m without the flag would run 1 thread
    # where production, unlimited on a 2-CPU node, runs 2 (as the one-machine cluster showed)
    fleet = _classic_fleet(ARGS)
    prometheus = FakeThreadsPrometheusForSpeed([2])
    line = fleet.read_production(prometheus)
    assert line is not None and "production's 2 worker threads" in line, line
    assert "envoy-abcde" in prometheus.queries[0]
    first = first_configuration(fleet.scenario)
    assert first.envoy_concurrency == PRODUCTION_CONCURRENCY
    assert fleet._sized(first).args(first) == [*ARGS, "--concurrency", "2"]
    # production's own flag is kept as it is, and nothing is read
    pinned = _classic_fleet([*ARGS, "--concurrency", "4"])
    assert pinned.read_production(FakeThreadsPrometheusForSpeed([9])) is None
    assert pinned._sized(first).args(first) == [*ARGS, "--concurrency", "4"]
    # pods that disagree (or no count): Envoy's own default under the fleet's limit, said in the line
    unsure = _classic_fleet(ARGS)
    assert "reports no worker-thread count" in (unsure.read_production(FakeThreadsPrometheusForSpeed([])) or "")
    assert unsure._sized(first).args(first) == ARGS

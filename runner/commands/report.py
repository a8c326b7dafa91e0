"""`report`, `recommend` and `compare`: commands that read finished runs; the report written after a sweep."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from runner.commands.values import Number
from runner.errors import UsageError
from runner.quantities import short_repr
from runner.scenario.limits import MAX_LATENCY_SLO_MS

if TYPE_CHECKING:
    from runner.results import RunSummary

EXIT_REGRESSION = 1
MAX_TARGET_RPS = 1e9  # recommend --target-rps
MAX_HEADROOM = 10.0  # recommend --headroom: the knee at most 11x the target
MIN_CORES_PER_REPLICA = 0.01  # recommend --cores-per-replica: 10m, a Kubernetes CPU request's usual floor
MAX_CORES_PER_REPLICA = 64.0  # and 64 cores, as testbed up --envoy-cpu
OUTPUTS = ("text", "yaml")
MAX_THRESHOLD_PCT = 100.0  # compare --threshold-pct: a knee cannot fall by more than 100%
MAX_NODES = 5000.0  # recommend --nodes: Kubernetes' largest supported cluster

TARGET_RPS = Number("--target-rps", "5000", high=MAX_TARGET_RPS)
HEADROOM = Number("--headroom", "0.3", high=MAX_HEADROOM)
CORES_PER_REPLICA = Number(
    "--cores-per-replica", "1", high=MAX_CORES_PER_REPLICA, low=MIN_CORES_PER_REPLICA, low_text="0.01 (10m)"
)
THRESHOLD_PCT = Number("--threshold-pct", "5", high=MAX_THRESHOLD_PCT)
SLO_P99_MS = Number("--slo-p99-ms", "50", high=MAX_LATENCY_SLO_MS)
NODES = Number("--nodes", "3", high=MAX_NODES, low=1)


def _write_report(run_dir: Path, summary: RunSummary) -> None:
    """report.md, report.html and plots/*.png into the run directory, each replaced atomically."""
    from runner.files import write_atomic
    from runner.report import read_scenario, render_files

    for name, content in render_files(summary, read_scenario(run_dir)).items():
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, content)


def report_after_sweep(run_dir: Path, summary: RunSummary) -> None:
    """The report at the end of a sweep, also one that ended early; a failing report never hides the sweep's end."""
    measured_memory = summary.memory is not None and any(p.measured for p in summary.memory.points)
    if not any(config.finished for config in summary.configs) and not measured_memory:
        return
    try:
        _write_report(run_dir, summary)
    except Exception as error:
        print(
            f"gateway-sizer: report not written ({type(error).__name__}: {error}): "
            f"run `gateway-sizer report {run_dir}`",
            file=sys.stderr,
        )
        return
    print(f"Report: {run_dir / 'report.html'}")


def cmd_report(args: argparse.Namespace) -> int:
    from runner.results import load_summary, resolve_run

    run_dir = resolve_run(args.run)
    summary = load_summary(run_dir)
    measured_memory = summary.memory is not None and any(p.measured for p in summary.memory.points)
    if not any(config.steps for config in summary.configs) and not measured_memory:
        raise UsageError(f"run {summary.run_id} has no measured step yet", "report on a run that measured something")
    _write_report(run_dir, summary)
    print(f"wrote {run_dir / 'report.md'}")
    print(f"wrote {run_dir / 'report.html'}")
    return 0


def _counts(args: argparse.Namespace) -> tuple[int | None, int | None]:
    """--connections and --routes: whole numbers from 0 (None when not given)."""
    from runner.report import memory_sizing as memory

    connections = Number("--connections", "10000", high=memory.MAX_RECOMMEND_CONNECTIONS).optional(args.connections)
    routes = Number("--routes", "10000", high=memory.MAX_RECOMMEND_ROUTES).optional(args.routes)
    memory.check_memory_request(connections or 0, routes or 0)
    return (None if connections is None else int(connections)), (None if routes is None else int(routes))


def _slo(text: str | None) -> float | None:
    """--slo-p99-ms: a positive number of milliseconds (None: not given)."""
    value = SLO_P99_MS.optional(text)
    if value is not None and value <= 0:
        raise UsageError(
            f"--slo-p99-ms must be a positive number of milliseconds, got {value:g}", "e.g. --slo-p99-ms 50"
        )
    return value


def _nodes(text: str | None) -> int | None:
    """--nodes: a whole number from 1 (None: not given)."""
    value = NODES.optional(text)
    if value is not None and value != int(value):
        raise UsageError(f"--nodes must be a whole number of nodes, got {short_repr(text)}", "e.g. --nodes 3")
    return None if value is None else int(value)


def cmd_recommend(args: argparse.Namespace) -> int:
    from runner.report import memory_sizing as memory
    from runner.report import read_run
    from runner.report.answer import Request, answer
    from runner.report.manifests import memory_manifest
    from runner.report.shape import gateway_of_run, parse_kind
    from runner.report.sizing import check_request
    from runner.results import resolve_run

    connections, routes = _counts(args)
    target = TARGET_RPS.optional(args.target_rps)
    if target is None and connections is None and routes is None:
        raise UsageError(
            "recommend needs --target-rps N (CPU), --connections N and --routes R (memory), or both",
            "e.g. recommend --target-rps 5000 --connections 10000 --routes 500",
        )
    headroom = HEADROOM(args.headroom)
    check_request(1.0 if target is None else target, headroom)
    cores = CORES_PER_REPLICA.optional(args.cores_per_replica)
    slo_ms, nodes, kind = _slo(args.slo_p99_ms), _nodes(args.nodes), parse_kind(args.workload_kind)
    output = args.output or "text"
    if output not in OUTPUTS:
        raise UsageError(f"--output must be text or yaml, got {short_repr(output)}", "e.g. --output yaml")
    run_dir = resolve_run(args.run)
    summary = read_run(run_dir)
    sized = None
    if connections is not None or routes is not None:
        fits = memory.require_memory_fits(summary, routes=bool(routes))
        sized = memory.recommend_memory(fits, connections or 0, routes or 0, headroom)
    if target is None:
        assert sized is not None
        if output == "yaml":
            print(memory_manifest(sized, gateway_of_run(run_dir, summary, kind), summary.run_id), end="")
        else:
            print("\n".join(memory.format_memory_recommendation(sized, summary.run_id)))
        return 0
    request = Request(target, headroom, cores, nodes, kind, slo_ms, args.profile or None, yaml=output == "yaml")
    print(answer(run_dir, summary, request, sized), end="")
    if sized is not None and output != "yaml":
        print("\n".join(memory.format_memory_recommendation(sized, summary.run_id)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from runner.report.compare import compare_runs, format_comparison
    from runner.results import load_summary, resolve_run

    threshold = THRESHOLD_PCT(args.threshold_pct)
    if not (args.run_a and args.run_b):
        raise UsageError("compare needs two runs", "gateway-sizer compare RUN_A RUN_B (make compare A=... B=...)")
    run_a, run_b = (load_summary(resolve_run(name)) for name in (args.run_a, args.run_b))
    comparison = compare_runs(run_a, run_b, threshold_pct=threshold)
    print(format_comparison(comparison))
    return EXIT_REGRESSION if comparison.regressions else 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser("report", help="write report.md and report.html (with plots) into a run directory")
    report.add_argument("run", nargs="?", metavar="RUN", help="run directory or id (default: results/latest)")
    report.set_defaults(func=cmd_report)

    recommend = commands.add_parser(
        "recommend", help="Envoy CPU for a target RPS; memory and overload settings for connections and routes"
    )
    recommend.add_argument("--target-rps", metavar="N", help="requests per second to serve")
    recommend.add_argument(
        "--connections",
        metavar="N",
        help="idle keep-alive connections one Envoy pod holds: memory from the memory model",
    )
    recommend.add_argument("--routes", metavar="R", help="routes (virtual hosts) in Envoy's configuration (default 0)")
    recommend.add_argument("--headroom", default="0.3", help="the knee this far above the target (default 0.3)")
    recommend.add_argument("--run", metavar="RUN", help="run whose knees to fit (default: results/latest)")
    recommend.add_argument(
        "--cores-per-replica",
        metavar="CORES",
        help="Envoy CPU per pod (a replica, or a DaemonSet's pod on N+1 nodes), 0.01-64 (default: the measured "
        "limit that runs the fewest cores at N+1)",
    )
    recommend.add_argument(
        "--profile", metavar="NAME", help="the traffic profile to size for (default: the run's first, e.g. plain)"
    )
    recommend.add_argument(
        "--slo-p99-ms",
        metavar="MS",
        help="a p99 latency target: sized from the capacity at it where it binds before the CPU threshold "
        "(default: the run's load.latency_slo_ms, as measured)",
    )
    recommend.add_argument(
        "--workload-kind",
        metavar="KIND",
        help="DaemonSet (nodes, cores per pod) or Deployment (replicas, HPA, PDB); default auto: the kind the run "
        "found, else Contour's quickstart DaemonSet",
    )
    recommend.add_argument(
        "--nodes",
        metavar="N",
        help="a DaemonSet's nodes: cores per pod so that N - 1 of them carry the target (default: the pods a "
        "Kubernetes run found)",
    )
    recommend.add_argument(
        "--output",
        default="text",
        metavar="FORMAT",
        help="text, or yaml: the envoy container's resources, with an HPA and a PDB for a Deployment, for "
        "kubectl apply (default text)",
    )
    recommend.set_defaults(func=cmd_recommend)

    compare = commands.add_parser("compare", help="two runs' knees side by side; exit 1 on a regression")
    compare.add_argument("run_a", metavar="RUN_A", help="the reference run (directory or id)")
    compare.add_argument("run_b", metavar="RUN_B", help="the run to check against it")
    compare.add_argument(
        "--threshold-pct",
        default="5",
        metavar="PCT",
        help="a knee lower by more than this percentage is a regression (default 5)",
    )
    compare.set_defaults(func=cmd_compare)

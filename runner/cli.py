"""The `gateway-sizer` command. The only place that prints errors and chooses exit codes."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import SizerError, UsageError

if TYPE_CHECKING:
    from runner.results import RunSummary

EXIT_INTERRUPTED = 130


def _scenario_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", default=None, help="scenario name in scenarios/ or a path (default: local)")
    parser.add_argument("--envoy-cpus", help="Envoy CPU limits: 0.25,0.5 | 1..6 | 0.1..0.5:0.1 (ENVOY_CPUS)")
    parser.add_argument("--envoy-memory", help="Envoy memory limit(s), e.g. 1Gi (ENVOY_MEMORY)")
    parser.add_argument("--nginx-replicas", help="nginx replica counts, e.g. 3 or 1,3 (NGINX_REPLICAS)")
    parser.add_argument("--workers", help="Locust workers (WORKERS)")
    parser.add_argument("--users", help="closed-loop users per step, e.g. 4,8,12 (USERS)")
    parser.add_argument("--step-seconds", help="measuring window per step (STEP_SECONDS)")
    parser.add_argument("--platform", help="local | kubernetes (PLATFORM)")
    parser.add_argument("--client", help="Locust client: lean | fasthttp (CLIENT)")


def _overrides(args: argparse.Namespace):
    from runner.scenario import Overrides

    def value(name: str) -> str | None:
        text = getattr(args, name, None)
        return text if text not in (None, "") else None

    return Overrides(
        envoy_cpus=value("envoy_cpus"),
        envoy_memory=value("envoy_memory"),
        nginx_replicas=value("nginx_replicas"),
        workers=value("workers"),
        users=value("users"),
        step_seconds=value("step_seconds"),
        platform=value("platform"),
        client=value("client"),
    )


def _load(args: argparse.Namespace):
    from runner.scenario import DEFAULT_SCENARIO, load_scenario

    return load_scenario(args.scenario or DEFAULT_SCENARIO, _overrides(args))


def cmd_sweep(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from runner.calibrate import provisioning_warning
    from runner.console import ConsoleObserver
    from runner.plan import plan_sweep
    from runner.platforms import create_platform
    from runner.results import RESULTS_ROOT, RunStore, resolve_run
    from runner.sweep import Sweep

    if args.resume:
        run_dir = resolve_run(args.resume)
        args.scenario = args.scenario or str(run_dir / "scenario.yaml")
        scenario = _load(args)
        store = RunStore.open(run_dir)
        store.summary.status = "running"
    else:
        scenario = _load(args)
        store = RunStore.create(scenario, Path(args.results) if args.results else RESULTS_ROOT)
    plan = plan_sweep(scenario)
    warning = provisioning_warning(scenario, plan)
    if warning:
        print(f"gateway-sizer: warning: {warning}", file=sys.stderr)
    observer = ConsoleObserver()
    overrides = {k: v for k, v in asdict(_overrides(args)).items() if v is not None}
    platform = create_platform(scenario, store.run_dir, free_ports=args.free_ports)
    sweep = Sweep(scenario, plan, platform, store, observer, overrides)
    try:
        sweep.run()
    finally:
        observer.summary(store.summary, str(store.run_dir))
        _report_after_sweep(store.run_dir, store.summary)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from runner import calibrate
    from runner.console import ConsoleObserver
    from runner.paths import cache_dir
    from runner.plan import plan_sweep
    from runner.platforms import create_platform
    from runner.results import RunStore
    from runner.sweep import Sweep

    scenario = _load(args)
    plan = plan_sweep(scenario)
    store = RunStore.create(scenario, cache_dir() / "calibration")
    platform = create_platform(scenario, store.run_dir, free_ports=args.free_ports)
    result = Sweep(scenario, plan, platform, store, ConsoleObserver()).calibrate()
    path = calibrate.save(result)
    top = calibrate.largest(plan).envoy_cpu_cores
    print(
        f"generator: {result.generator_rps:,.0f} RPS from {result.workers} {result.client} worker(s) at "
        f"{result.generator_cpu:.0%} CPU (busiest): {result.rps_per_worker_core:,.0f} RPS per worker core"
    )
    print(
        f"gateway:   {result.envoy_rps:,.0f} RPS through Envoy at {result.envoy_cpu:g} CPU: "
        f"about {result.envoy_rps_per_core:,.0f} RPS per Envoy core when saturated"
    )
    print(f"the planned sweep (Envoy up to {top:g} CPU) needs WORKERS={result.workers_needed(top)}")
    print(f"saved to {path}; sweeps on {scenario.platform} with the {scenario.load.client} client check against it")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from runner.plan import plan_sweep

    scenario = _load(args)
    plan = plan_sweep(scenario)
    load = scenario.load
    print(f"scenario {scenario.name} on {scenario.platform}: {len(plan)} configuration(s)")
    for config in plan.configurations:
        print(f"  {config.label} (Envoy concurrency {config.envoy_concurrency})")
    print(
        f"load: {load.client} client ({load.locust_user_class}), {load.workers} worker(s), {load.mode} mode, "
        f"{load.search} search, {load.step_s:g} s windows, threshold {scenario.threshold:.0%}"
    )
    return 0


def cmd_testbed_up(args: argparse.Namespace) -> int:
    from runner.locust import LocustOptions
    from runner.paths import cache_dir
    from runner.platforms.local.testbed import LocalTestbed, LocustSetup, state_file

    if state_file("testbed").exists():
        raise UsageError("a test bed is already up", "stop it first with `gateway-sizer testbed down`")
    scenario = _load(args)
    cpu = float(args.envoy_cpu) if args.envoy_cpu else scenario.envoy.cpu_cores[0]
    replicas = scenario.backend.replicas[0]
    testbed = LocalTestbed(
        workdir=cache_dir() / "testbed",
        host_header=scenario.load.host_header,
        scrape_interval_s=scenario.prometheus.scrape_interval_s,
    )
    try:
        testbed.check_ports(replicas)
        testbed.record_state(owner_pid=0)
        testbed.start_monitoring()
        testbed.scale_backend(
            replicas, cpu_cores=scenario.backend.cpu_cores, memory_bytes=scenario.backend.memory_bytes
        )
        testbed.start_envoy(cpu, scenario.envoy.memory_bytes[0], scenario.envoy.concurrency_for(cpu))
        options = LocustOptions.from_load(scenario.load)
        testbed.start_locust(
            LocustSetup(scenario.load.locustfile, scenario.load.locust_user_class, options, scenario.load.workers)
        )
        testbed.record_state(owner_pid=0)
    except BaseException:
        testbed.stop()
        raise
    print(f"test bed up (Envoy {cpu:g} CPU, {replicas} nginx replica(s), {scenario.load.workers} Locust worker(s))")
    print(f"  gateway:     {testbed.gateway_url}  (Host: {scenario.load.host_header})")
    print(f"  Locust UI:   {testbed.locust_url}")
    print(f"  Prometheus:  {testbed.prometheus_url}")
    print(f"  logs:        {testbed.supervisor.log_dir}")
    print("stop it with: gateway-sizer testbed down")
    return 0


def cmd_testbed_down(args: argparse.Namespace) -> int:
    from runner.platforms.local.testbed import stop_recorded_testbeds

    removed = stop_recorded_testbeds(everything=args.all)
    print(f"stopped: {', '.join(removed)}" if removed else "nothing to stop")
    return 0


EXIT_REGRESSION = 1


def _number(text: str, flag: str, example: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{flag} must be a number, got {text!r}", f"e.g. {flag} {example}") from None


def _write_report(run_dir: Path, summary: RunSummary) -> None:
    """report.md, report.html and plots/*.png into the run directory, each replaced atomically."""
    from runner.report import read_scenario, render_files

    for name, content in render_files(summary, read_scenario(run_dir)).items():
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(content)
        os.replace(tmp, path)


def _report_after_sweep(run_dir: Path, summary: RunSummary) -> None:
    """The report at the end of a sweep, also one that ended early; a failing report never hides the sweep's end."""
    if not any(config.finished for config in summary.configs):
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
    if not any(config.steps for config in summary.configs):
        raise UsageError(f"run {summary.run_id} has no measured step yet", "report on a run that measured something")
    _write_report(run_dir, summary)
    print(f"wrote {run_dir / 'report.md'}")
    print(f"wrote {run_dir / 'report.html'}")
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    from runner.report.sizing import check_request, format_recommendation, recommend, require_fit
    from runner.results import load_summary, resolve_run

    target = _number(args.target_rps, "--target-rps", "5000")
    headroom = _number(args.headroom, "--headroom", "0.3")
    check_request(target, headroom)
    summary = load_summary(resolve_run(args.run))
    print(format_recommendation(recommend(require_fit(summary), target, headroom), summary.run_id))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from runner.report.compare import compare_runs, format_comparison
    from runner.results import load_summary, resolve_run

    threshold = _number(args.threshold_pct, "--threshold-pct", "5")
    if not (args.run_a and args.run_b):
        raise UsageError("compare needs two runs", "gateway-sizer compare RUN_A RUN_B (make compare A=... B=...)")
    runs = [load_summary(resolve_run(name)) for name in (args.run_a, args.run_b)]
    comparison = compare_runs(*runs, threshold_pct=threshold)
    print(format_comparison(comparison))
    return EXIT_REGRESSION if comparison.regressions else 0


def _report_commands(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser("report", help="write report.md and report.html (with plots) into a run directory")
    report.add_argument("run", nargs="?", metavar="RUN", help="run directory or id (default: results/latest)")
    report.set_defaults(func=cmd_report)

    recommend = commands.add_parser("recommend", help="Envoy CPU and memory to request for a target RPS")
    recommend.add_argument("--target-rps", required=True, metavar="N", help="requests per second to serve")
    recommend.add_argument("--headroom", default="0.3", help="the knee this far above the target (default 0.3)")
    recommend.add_argument("--run", metavar="RUN", help="run whose knees to fit (default: results/latest)")
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


def cmd_restore(args: argparse.Namespace) -> int:
    from runner.platforms.kubernetes.connection import connect
    from runner.platforms.kubernetes.originals import ClusterChanges, undo
    from runner.results import resolve_run
    from runner.scenario import load_scenario

    run_dir = resolve_run(args.run)
    changes = ClusterChanges.load(run_dir)
    if not changes.pending:
        print(f"nothing to restore: {run_dir.name} left no changes behind")
        return 0
    k8s = load_scenario(str(run_dir / "scenario.yaml")).kubernetes
    cluster = connect(k8s.kubeconfig, k8s.context)
    for line in undo(cluster, changes, k8s.rollout_timeout_s, wait=not args.no_wait):
        print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway-sizer", description="Find how many Envoy cores a gateway needs.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sweep = commands.add_parser("sweep", help="run a sweep and write results/<run-id>/")
    _scenario_args(sweep)
    sweep.add_argument("--results", help="results folder (default: results/)")
    sweep.add_argument("--resume", metavar="RUN", help="continue an interrupted run (its unfinished configurations)")
    sweep.add_argument(
        "--free-ports", action="store_true", help="local platform: pick free ports instead of 8089, 9090, 10080..."
    )
    sweep.set_defaults(func=cmd_sweep)

    calibrate = commands.add_parser("calibrate", help="measure RPS per Locust worker; say how many a sweep needs")
    _scenario_args(calibrate)
    calibrate.add_argument("--free-ports", action="store_true", help="local platform: pick free ports")
    calibrate.set_defaults(func=cmd_calibrate)

    plan = commands.add_parser("plan", help="print the configurations a sweep would run")
    _scenario_args(plan)
    plan.set_defaults(func=cmd_plan)

    testbed = commands.add_parser("testbed", help="start or stop the local test bed by hand")
    actions = testbed.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start Envoy, nginx, Locust and Prometheus on loopback")
    _scenario_args(up)
    up.add_argument("--envoy-cpu", help="Envoy's CPU limit in cores (default: the scenario's first)")
    up.set_defaults(func=cmd_testbed_up)
    down = actions.add_parser("down", help="stop the test bed and remove what crashed runs left behind")
    down.add_argument("--all", action="store_true", help="also stop test beds of runs still going")
    down.set_defaults(func=cmd_testbed_down)

    restore = commands.add_parser("restore", help="undo what a kubernetes run changed in its cluster")
    restore.add_argument("run", help="the run directory (or run id) whose changes to undo")
    restore.add_argument("--no-wait", action="store_true", help="do not wait for the rollouts")
    restore.set_defaults(func=cmd_restore)
    _report_commands(commands)
    return parser


def _sigterm_as_interrupt() -> None:
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    _sigterm_as_interrupt()
    try:
        return func(args)
    except SizerError as error:
        print(f"gateway-sizer: {error.one_line()}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("gateway-sizer: interrupted; everything started was stopped, measured steps are saved", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    os._exit(main())

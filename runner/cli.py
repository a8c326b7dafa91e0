"""The `gateway-sizer` command. The only place that prints errors and chooses exit codes."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from runner.errors import SizerError, UsageError, one_line
from runner.paths import RESULTS_ROOT

if TYPE_CHECKING:
    from runner.results import RunSummary
    from runner.scenario import Scenario

EXIT_INCOMPLETE = 1  # a sweep whose configurations did not all finish
EXIT_REGRESSION = 1
EXIT_INTERRUPTED = 130
MAX_TESTBED_CPU = 64.0  # testbed up --envoy-cpu (the local platform: this machine's cores, not a cluster's)
MAX_TARGET_RPS = 1e9  # recommend --target-rps
MAX_HEADROOM = 10.0  # recommend --headroom: the knee at most 11x the target
MIN_CORES_PER_REPLICA = 0.01  # recommend --cores-per-replica: 10m, a Kubernetes CPU request's usual floor
MAX_CORES_PER_REPLICA = 64.0  # and 64 cores, as testbed up --envoy-cpu
OUTPUTS = ("text", "yaml")
MAX_THRESHOLD_PCT = 100.0  # compare --threshold-pct: a knee cannot fall by more than 100%


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block) naming the argument, exit code 2 as for any bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {one_line(message)} (see {self.prog} --help)\n")


def _scenario_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", default=None, help="scenario name in scenarios/ or a path (default: local)")
    parser.add_argument("--envoy-cpus", help="Envoy CPU limits: 0.25,0.5 | 1..6 | 0.1..0.5:0.1 (ENVOY_CPUS)")
    parser.add_argument("--envoy-memory", help="Envoy memory limit(s), e.g. 1Gi (ENVOY_MEMORY)")
    parser.add_argument("--nginx-replicas", help="nginx replica counts, e.g. 3 or 1,3 (NGINX_REPLICAS)")
    parser.add_argument("--workers", help="Locust workers, or auto: sized from the calibration (WORKERS)")
    parser.add_argument("--users", help="closed-loop users per step, e.g. 4,8,12 (USERS)")
    parser.add_argument("--step-seconds", help="measuring window per step (STEP_SECONDS)")
    parser.add_argument("--platform", help="local | kubernetes (PLATFORM)")
    parser.add_argument("--client", help="Locust client: lean | fasthttp (CLIENT)")
    parser.add_argument("--arrivals", help="arrival models: poisson, uniform, synchronized, or a list (ARRIVALS)")
    parser.add_argument(
        "--profiles", help="traffic profiles: plain, tls, tls-new-connection, body-16k, ... or a list (PROFILES)"
    )
    parser.add_argument(
        "--connections", help="memory model: held connections per point, e.g. 0,5000,10000 (CONNECTIONS)"
    )
    parser.add_argument("--routes", help="memory model: extra routes per point, e.g. 0,500,1000 (ROUTES)")


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
        arrivals=value("arrivals"),
        profiles=value("profiles"),
        connections=value("connections"),
        routes=value("routes"),
    )


def _load(args: argparse.Namespace):
    from runner.generator_sizing import load_sized
    from runner.scenario import DEFAULT_SCENARIO

    scenario, note = load_sized(args.scenario or DEFAULT_SCENARIO, _overrides(args))
    if note:
        print(f"gateway-sizer: {note}", file=sys.stderr)
    return scenario


def cmd_sweep(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from runner.calibrate import provisioning_warning
    from runner.console import ConsoleObserver
    from runner.plan import plan_sweep
    from runner.platforms import create_platform
    from runner.results import RunStore, resolve_run
    from runner.sweep import Sweep

    if args.resume:
        run_dir = resolve_run(args.resume)
        store = RunStore.open(run_dir)
        scenario = _resumable(args, run_dir)
        store.summary.status = "running"
    else:
        scenario = _load(args)
        store = RunStore.create(scenario, Path(args.results) if args.results else RESULTS_ROOT)
    plan = plan_sweep(scenario)
    warning = provisioning_warning(scenario, plan)
    if warning:
        print(f"gateway-sizer: warning: {warning}", file=sys.stderr)
    if args.free_ports and scenario.platform == "local":
        _warn_if_sharing()
    observer = ConsoleObserver()
    overrides = {k: v for k, v in asdict(_overrides(args)).items() if v is not None}
    platform = create_platform(scenario, store.run_dir, free_ports=args.free_ports)
    sweep = Sweep(scenario=scenario, plan=plan, platform=platform, store=store, observer=observer, overrides=overrides)
    try:
        status = sweep.run()
    finally:
        observer.summary(store.summary, str(store.run_dir))
        _report_after_sweep(store.run_dir, store.summary)
    if status != "complete":
        print(f"gateway-sizer: run {status}: {store.summary.reason}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def _warn_if_sharing() -> None:
    """Without --free-ports a second local sweep is refused (its ports are taken); with it, say that the
    two share the machine's CPUs."""
    from runner.platforms.local.state import live_testbeds

    others = live_testbeds()
    if others:
        print(
            f"gateway-sizer: warning: another local test bed is running ({', '.join(others)}): the two share "
            "this machine's CPUs, so neither's figures are clean",
            file=sys.stderr,
        )


def _resumable(args: argparse.Namespace, run_dir: Path) -> Scenario:
    """The run's own scenario; UsageError naming the first field that a --scenario or an override given
    with --resume would change (a resumed run must measure what the run measured)."""
    from runner.scenario import first_difference, load_scenario

    recorded = load_scenario(str(run_dir / "scenario.yaml"))
    from runner.generator_sizing import load_sized

    asked = _load(args) if args.scenario else load_sized(str(run_dir / "scenario.yaml"), _overrides(args))[0]
    field = first_difference(recorded.dump(), asked.dump())
    if field is not None:
        raise UsageError(
            f"--resume: {field} differs from what run {run_dir.name} measured",
            "resume without --scenario or overrides, or start a new run",
        )
    return recorded


def cmd_calibrate(args: argparse.Namespace) -> int:
    from runner import calibrate
    from runner.console import ConsoleObserver
    from runner.paths import cache_dir
    from runner.plan import plan_sweep
    from runner.platforms import create_platform
    from runner.results import RunStore
    from runner.sweep import Sweep

    scenario = _load(args).model_copy(update={"memory": None})  # the knee configurations only
    plan = plan_sweep(scenario)
    store = RunStore.create(scenario, cache_dir() / "calibration")
    platform = create_platform(scenario, store.run_dir, free_ports=args.free_ports)
    sweep = Sweep(scenario=scenario, plan=plan, platform=platform, store=store, observer=ConsoleObserver())
    result = calibrate.run(sweep)
    path = calibrate.save(result)
    top = calibrate.largest(plan).envoy_cpu_cores
    print(
        f"generator: {result.generator_rps:,.0f} RPS from {result.workers} {result.client} worker(s) at "
        f"{result.generator_cpu_share:.0%} CPU (busiest): {result.rps_per_worker_core:,.0f} RPS per worker core"
    )
    print(
        f"gateway:   {result.envoy_rps:,.0f} RPS through Envoy at {result.envoy_cpu_cores:g} CPU: "
        f"about {result.envoy_rps_per_core:,.0f} RPS per Envoy core when saturated"
    )
    print(f"the planned sweep (Envoy up to {top:g} CPU) needs WORKERS={result.workers_needed(top)}")
    print(f"saved to {path}; sweeps on {scenario.platform} with the {scenario.load.client} client check against it")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from runner.locust import user_class
    from runner.memory_sweep import memory_configuration, plan_memory
    from runner.plan import plan_sweep

    scenario = _load(args)
    plan = plan_sweep(scenario)
    load = scenario.load
    print(f"scenario {scenario.name} on {scenario.platform}: {len(plan)} configuration(s)")
    for config in plan.configurations:
        print(f"  {config.label} (Envoy concurrency {config.envoy_concurrency})")
    if scenario.memory is not None:
        points, spec = plan_memory(scenario.memory), scenario.memory
        print(
            f"memory model: {len(points)} point(s) at {memory_configuration(scenario).label}, {spec.rps:g} RPS of "
            f"light load, {spec.hold_s:g} s windows, a request per held connection every {spec.refresh_s:g} s"
        )
        for point in points:
            print(f"  {point.label}")
    if not plan.configurations:
        return 0
    print(
        f"load: {load.client} client ({user_class(load)}), {load.workers} worker(s), {load.mode} mode, "
        f"{load.search} search, {load.step_s:g} s windows, threshold {scenario.threshold:.0%}"
    )
    return 0


def cmd_testbed_up(args: argparse.Namespace) -> int:
    from runner.memory_sweep import memory_configuration
    from runner.plan import plan_sweep
    from runner.platforms.local.platform import HAND_TESTBED_ID, LocalPlatform
    from runner.platforms.local.state import state_file

    scenario = _load(args)
    configurations = plan_sweep(scenario).configurations
    config = configurations[0] if configurations else memory_configuration(scenario)
    if args.envoy_cpu:
        cpu = _testbed_cpu(args.envoy_cpu)
        config = replace(config, envoy_cpu_cores=cpu, envoy_concurrency=scenario.envoy.concurrency_for(cpu))
    if state_file(HAND_TESTBED_ID).exists():
        raise UsageError("a test bed is already up", "stop it first with `gateway-sizer testbed down`")
    platform = LocalPlatform.for_hand_testbed(scenario)
    try:
        platform.start()
        platform.apply(config)
    except BaseException:
        platform.stop()
        raise
    testbed, load = platform.testbed, scenario.load
    print(f"test bed up ({config.label}, {load.workers} Locust worker(s))")
    print(f"  gateway:     {testbed.gateway_url}  (Host: {load.host_header})")
    print(f"  Locust UI:   {testbed.locust_url}")
    print(f"  Prometheus:  {testbed.prometheus_url}")
    print(f"  logs:        {testbed.supervisor.log_dir}")
    print("stop it with: gateway-sizer testbed down")
    return 0


def cmd_testbed_down(args: argparse.Namespace) -> int:
    from runner.platforms.local.state import stop_recorded_testbeds

    removed = stop_recorded_testbeds(everything=args.all)
    print(f"stopped: {', '.join(removed)}" if removed else "nothing to stop")
    return 0


def _testbed_cpu(text: str) -> float:
    """testbed up --envoy-cpu: cores or millicores within the local platform's limits."""
    from runner.quantities import format_cpu, parse_cpu, short_repr
    from runner.scenario import MIN_LOCAL_CPU_CORES

    hint = "e.g. --envoy-cpu 0.25 or --envoy-cpu 250m"
    try:
        cpu = parse_cpu(text)
    except ValueError:
        raise UsageError(f"--envoy-cpu must be a CPU quantity, got {short_repr(text)}", hint) from None
    if not MIN_LOCAL_CPU_CORES <= cpu <= MAX_TESTBED_CPU:
        raise UsageError(
            f"--envoy-cpu must be from {format_cpu(MIN_LOCAL_CPU_CORES)} to {MAX_TESTBED_CPU:g} cores, "
            f"got {short_repr(text)}",
            hint,
        )
    if abs(cpu * 1000 - round(cpu * 1000)) > 1e-6:
        raise UsageError(f"--envoy-cpu {short_repr(text)} is finer than 1m", f"use whole millicores, {hint}")
    return cpu


def _number(text: str, flag: str, example: str, *, high: float) -> float:
    """A finite number option up to `high` (the command checks the low end); UsageError names the flag."""
    import math

    from runner.quantities import short_repr

    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag} must be a number, got {short_repr(text)}", f"e.g. {flag} {example}") from None
    if not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {short_repr(text)}", f"e.g. {flag} {example}")
    if value > high:
        raise UsageError(f"{flag} must be at most {high:g}, got {short_repr(text)}", f"e.g. {flag} {example}")
    return value


def _write_report(run_dir: Path, summary: RunSummary) -> None:
    """report.md, report.html and plots/*.png into the run directory, each replaced atomically."""
    from runner.files import write_atomic
    from runner.report import read_scenario, render_files

    for name, content in render_files(summary, read_scenario(run_dir)).items():
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, content)


def _report_after_sweep(run_dir: Path, summary: RunSummary) -> None:
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


def _count(text: str | None, flag: str, high: int) -> int | None:
    """A whole-number option such as --connections (None when not given)."""
    if text in (None, ""):
        return None
    from runner.report.memory_sizing import check_memory_request

    value = _number(text, flag, "10000", high=high)
    check_memory_request(*((value, 0) if flag == "--connections" else (0, value)))
    return int(value)


def cmd_recommend(args: argparse.Namespace) -> int:
    from runner.report import memory_sizing as memory
    from runner.report import scenario_encoding
    from runner.report.manifests import envoy_manifests, gateway_of_run, memory_manifest
    from runner.report.replicas import format_replicas, plan_replicas
    from runner.report.sizing import check_request, format_recommendation, recommend, require_fit
    from runner.results import load_summary, resolve_run

    connections = _count(args.connections, "--connections", memory.MAX_RECOMMEND_CONNECTIONS)
    routes = _count(args.routes, "--routes", memory.MAX_RECOMMEND_ROUTES)
    if args.target_rps in (None, "") and connections is None and routes is None:
        raise UsageError(
            "recommend needs --target-rps N (CPU), --connections N and --routes R (memory), or both",
            "e.g. recommend --target-rps 5000 --connections 10000 --routes 500",
        )
    target = None
    headroom = _number(args.headroom, "--headroom", "0.3", high=MAX_HEADROOM)
    if args.target_rps not in (None, ""):
        target = _number(args.target_rps, "--target-rps", "5000", high=MAX_TARGET_RPS)
        check_request(target, headroom)
    else:
        check_request(1.0, headroom)
    cores = None
    if args.cores_per_replica not in (None, ""):
        cores = _number(args.cores_per_replica, "--cores-per-replica", "1", high=MAX_CORES_PER_REPLICA)
        if cores < MIN_CORES_PER_REPLICA:
            raise UsageError(
                f"--cores-per-replica must be at least {MIN_CORES_PER_REPLICA:g} (10m), got {cores:g}",
                "e.g. --cores-per-replica 1",
            )
    output = args.output or "text"
    if output not in OUTPUTS:
        from runner.quantities import short_repr

        raise UsageError(f"--output must be text or yaml, got {short_repr(output)}", "e.g. --output yaml")
    run_dir = resolve_run(args.run)
    summary = load_summary(run_dir)
    sized = None
    if connections is not None or routes is not None:
        fits = memory.require_memory_fits(summary, routes=bool(routes))
        sized = memory.recommend_memory(fits, connections or 0, routes or 0, headroom)
    if target is None:
        assert sized is not None
        if output == "yaml":
            print(memory_manifest(sized, gateway_of_run(run_dir, summary), summary.run_id), end="")
        else:
            print("\n".join(memory.format_memory_recommendation(sized, summary.run_id)))
        return 0
    series = require_fit(summary, args.profile or None, scenario_encoding(run_dir))
    rec = recommend(series, target, headroom, memory_bytes=sized.memory_bytes if sized else None)
    plan = plan_replicas(rec, summary.threshold, cores, summary)
    if output == "yaml":
        print(envoy_manifests(plan, gateway_of_run(run_dir, summary), summary.run_id, sized), end="")
    else:
        print(format_recommendation(rec, summary.run_id))
        print("\n".join(format_replicas(plan)))
        if sized is not None:
            print("\n".join(memory.format_memory_recommendation(sized, summary.run_id)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from runner.report.compare import compare_runs, format_comparison
    from runner.results import load_summary, resolve_run

    threshold = _number(args.threshold_pct, "--threshold-pct", "5", high=MAX_THRESHOLD_PCT)
    if not (args.run_a and args.run_b):
        raise UsageError("compare needs two runs", "gateway-sizer compare RUN_A RUN_B (make compare A=... B=...)")
    run_a, run_b = (load_summary(resolve_run(name)) for name in (args.run_a, args.run_b))
    comparison = compare_runs(run_a, run_b, threshold_pct=threshold)
    print(format_comparison(comparison))
    return EXIT_REGRESSION if comparison.regressions else 0


def _report_commands(commands: argparse._SubParsersAction) -> None:
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
        help="Envoy CPU per replica, 0.01-64 (default: the measured limit that runs the fewest cores at N+1)",
    )
    recommend.add_argument(
        "--profile", metavar="NAME", help="the traffic profile to size for (default: the run's first, e.g. plain)"
    )
    recommend.add_argument(
        "--output",
        default="text",
        metavar="FORMAT",
        help="text, or yaml: the envoy container's resources, an HPA and a PDB for kubectl apply (default text)",
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


def cmd_restore(args: argparse.Namespace) -> int:
    from runner.platforms import restore
    from runner.results import load_summary, resolve_run

    run_dir = resolve_run(args.run)
    for line in restore(load_summary(run_dir).platform, run_dir, wait=not args.no_wait):
        print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gateway-sizer", description="Find how many Envoy cores a gateway needs.")
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


class Stopped(KeyboardInterrupt):
    """A stop signal other than Ctrl-C, handled as Ctrl-C is; `signum` gives the exit code (128 + it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop_signals_as_interrupt() -> None:
    """SIGTERM and SIGHUP (a closed terminal) stop a run as Ctrl-C does: cleanly, with what was measured saved."""

    def handler(signum: int, frame: object) -> None:
        raise Stopped(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)
    # A runner started in the background of a script inherits SIGINT ignored (and Python then keeps it
    # so): `kill -INT` would do nothing. A sweep holds load, so it always honours SIGINT as Ctrl-C.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    _stop_signals_as_interrupt()
    try:
        return func(args)
    except SizerError as error:
        print(f"gateway-sizer: {error.one_line()}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt as stop:
        name = str(stop) if isinstance(stop, Stopped) else "SIGINT"
        print(
            f"gateway-sizer: interrupted by {name}; everything started was stopped, measured steps are saved",
            file=sys.stderr,
        )
        return 128 + stop.signum if isinstance(stop, Stopped) else EXIT_INTERRUPTED
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())

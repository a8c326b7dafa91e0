"""`sweep`, `calibrate` and `plan`: a scenario with the sweep options (runner.scenario.options) applied once."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from runner.commands.report import report_after_sweep
from runner.errors import UsageError
from runner.paths import RESULTS_ROOT
from runner.report.formatting import concurrency as fmt_concurrency
from runner.scenario.options import OVERRIDES, SWEEP_OPTIONS, Overrides

if TYPE_CHECKING:
    from runner.plan import Plan
    from runner.platforms.base import Platform
    from runner.platforms.kubernetes.publishing import Publisher
    from runner.scenario import Scenario

EXIT_INCOMPLETE = 1  # a sweep whose configurations did not all finish


def add_sweep_options(parser: argparse.ArgumentParser) -> None:
    """One flag per row of the option table: --envoy-cpus ENVOY_CPUS, ..."""
    for option in SWEEP_OPTIONS:
        parser.add_argument(option.flag, metavar=option.variable, help=option.cli_help())


def overrides_from(args: argparse.Namespace) -> Overrides:
    return Overrides(**{name: getattr(args, name, None) for name in OVERRIDES})


def load(args: argparse.Namespace, overrides: Overrides) -> Scenario:
    """The scenario of --scenario (default: local) with the overrides, WORKERS=auto sized; says how on stderr."""
    from runner.generator_sizing import load_sized
    from runner.scenario import DEFAULT_SCENARIO

    scenario, note = load_sized(args.scenario or DEFAULT_SCENARIO, overrides)
    if note:
        print(f"gateway-sizer: {note}", file=sys.stderr)
    return scenario


def cmd_sweep(args: argparse.Namespace) -> int:
    from runner.calibrate import provisioning_warning
    from runner.console import ConsoleObserver
    from runner.locust import loop_env
    from runner.plan import plan_sweep
    from runner.platforms import create_platform
    from runner.results import RunStore, resolve_run
    from runner.sweep import Sweep

    loop_env()  # a send timer the workers do not know fails here, before anything starts
    overrides = overrides_from(args)
    run_dir = resolve_run(args.resume) if args.resume else None
    scenario = _resumable(args, run_dir, overrides) if run_dir else load(args, overrides)
    _check_publish(args, scenario)
    if args.live and scenario.platform != "kubernetes":
        raise UsageError("--live applies to the kubernetes platform only", "leave it out on the local platform")
    plan = plan_sweep(scenario)
    if args.dry_run or scenario.platform == "kubernetes":  # before anything changes, in every mode
        _preflight(scenario, plan, live=args.live, dry_run=args.dry_run, run_id=run_dir.name if run_dir else None)
    if args.dry_run:
        _print_plan(scenario, plan)
        return 0
    if run_dir is not None:
        store = RunStore.open(run_dir)
        store.summary.status = "running"
    else:
        store = RunStore.create(scenario, Path(args.results) if args.results else RESULTS_ROOT)
    warning = provisioning_warning(scenario, plan)
    if warning:
        print(f"gateway-sizer: warning: {warning}", file=sys.stderr)
    if args.free_ports and scenario.platform == "local":
        _warn_if_sharing()
    observer = ConsoleObserver()
    live = {"live": True} if args.live else {}  # the kubernetes platform's own option
    platform = create_platform(scenario, store.run_dir, free_ports=args.free_ports, **live)
    publisher = _publishing(platform, scenario, store.run_dir) if args.publish else None
    sweep = Sweep(
        scenario=scenario, plan=plan, platform=platform, store=store, observer=observer, overrides=dict(overrides.texts)
    )
    try:
        status = sweep.run()
    finally:
        observer.summary(store.summary, str(store.run_dir))
        report_after_sweep(store.run_dir, store.summary)
        if publisher is not None:
            _publish(publisher)
    if status != "complete":
        print(f"gateway-sizer: run {status}: {store.summary.reason}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def _preflight(scenario: Scenario, plan: Plan, *, live: bool, dry_run: bool, run_id: str | None) -> None:
    """Print what the run will measure and change, checked against the cluster before anything changes
    (runner/platforms/kubernetes/preflight.py); its first problem is raised (one line, exit 2)."""
    if scenario.platform != "kubernetes":
        print("preflight: the local platform: its test bed starts with the sweep; nothing to check beforehand")
        return
    from runner.platforms.kubernetes.preflight import run_preflight

    found = run_preflight(scenario, plan, live=live, run_id=run_id)
    for line in found.lines:
        print(f"preflight: {line}")
    if found.problem is not None:
        raise found.problem
    if dry_run:
        print("preflight: nothing was changed (--dry-run)")


def _check_publish(args: argparse.Namespace, scenario: Scenario) -> None:
    if args.publish and scenario.platform != "kubernetes":
        raise UsageError("--publish applies to the kubernetes platform only", "leave it out on the local platform")


def _publishing(platform: Platform, scenario: Scenario, run_dir: Path) -> Publisher:
    """The run's records published now, before anything changes, and after every change (a Job's run directory is
    lost with its pod); UsageError when they cannot be."""
    from runner.platforms.kubernetes.publishing import publish_as_it_goes

    publisher = publish_as_it_goes(platform, scenario, run_dir)
    print(f"Records published as the run goes: {publisher.where} (`gateway-sizer restore --from-cluster "
          f"{run_dir.name}` puts the gateway back after a kill)")  # fmt: skip
    return publisher


def _publish(publisher: Publisher) -> None:
    """Keep the run's final records in the cluster for `gateway-sizer fetch` (a runner run as a Job); a failure is
    one line on stderr, and never hides how the sweep ended."""
    from runner.errors import SizerError

    try:
        publisher.publish()
    except (SizerError, OSError) as error:
        print(f"gateway-sizer: results not published: {error}", file=sys.stderr)
        return
    run = publisher.run_dir.name
    print(f"Results published: {publisher.where}; `gateway-sizer fetch {run}` brings them home")


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


def _resumable(args: argparse.Namespace, run_dir: Path, overrides: Overrides) -> Scenario:
    """The run's own scenario, read once; UsageError naming the first field that a --scenario or an override
    given with --resume would change (a resumed run must measure what the run measured)."""
    from runner.generator_sizing import load_sized
    from runner.scenario import first_difference, parse_scenario, read_scenario

    file = read_scenario(str(run_dir / "scenario.yaml"))
    recorded = parse_scenario(file.raw, source=file.source)
    if not args.scenario and not overrides.texts:
        return recorded
    asked, _ = load_sized(args.scenario or file, overrides)
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

    scenario = load(args, overrides_from(args)).model_copy(update={"memory": None})  # the knee configurations only
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
    from runner.plan import plan_sweep

    scenario = load(args, overrides_from(args))
    return _print_plan(scenario, plan_sweep(scenario))


def _print_plan(scenario: Scenario, plan: Plan) -> int:
    """What `plan` prints: the configurations, the memory points, how the load is driven."""
    from runner.locust import user_class
    from runner.memory_sweep import memory_configuration, plan_memory

    load_spec = scenario.load
    print(f"scenario {scenario.name} on {scenario.platform}: {len(plan)} configuration(s)")
    for config in plan.configurations:
        print(f"  {config.label} (Envoy concurrency {fmt_concurrency(config.envoy_concurrency)})")
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
        f"load: {load_spec.client} client ({user_class(load_spec)}), {load_spec.workers} worker(s), "
        f"{load_spec.mode} mode, {load_spec.search} search, {load_spec.step_s:g} s windows, "
        f"threshold {scenario.threshold:.0%}"
    )
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    sweep = commands.add_parser("sweep", help="run a sweep and write results/<run-id>/")
    add_sweep_options(sweep)
    sweep.add_argument("--results", help="results folder (default: results/)")
    sweep.add_argument("--resume", metavar="RUN", help="continue an interrupted run (its unfinished configurations)")
    sweep.add_argument(
        "--free-ports", action="store_true", help="local platform: pick free ports instead of 8089, 9090, 10080..."
    )
    sweep.add_argument(
        "--publish", action="store_true", help="kubernetes: keep the run's records in a ConfigMap for `fetch` (a Job)"
    )
    sweep.add_argument(
        "--dry-run",
        action="store_true",
        help="print the checked preflight (what the run would measure, create, change) and the plan, change nothing",
    )
    sweep.add_argument(
        "--live",
        action="store_true",
        help="kubernetes.target: live: size the production gateway itself (a scenario file alone cannot)",
    )
    sweep.set_defaults(func=cmd_sweep)

    calibrate = commands.add_parser("calibrate", help="measure RPS per Locust worker; say how many a sweep needs")
    add_sweep_options(calibrate)
    calibrate.add_argument("--free-ports", action="store_true", help="local platform: pick free ports")
    calibrate.set_defaults(func=cmd_calibrate)

    plan = commands.add_parser("plan", help="print the configurations a sweep would run")
    add_sweep_options(plan)
    plan.set_defaults(func=cmd_plan)

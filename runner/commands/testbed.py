"""`testbed up` and `testbed down` (the local test bed by hand), and `restore` (undo a kubernetes run's changes)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from runner.commands.sweep import add_sweep_options, load, overrides_from
from runner.commands.values import Cpu
from runner.errors import UsageError
from runner.scenario.limits import MIN_LOCAL_CPU_CORES

MAX_TESTBED_CPU = 64.0  # testbed up --envoy-cpu (the local platform: this machine's cores, not a cluster's)
ENVOY_CPU = Cpu("--envoy-cpu", low=MIN_LOCAL_CPU_CORES, high=MAX_TESTBED_CPU)


def cmd_testbed_up(args: argparse.Namespace) -> int:
    from runner.memory_sweep import memory_configuration
    from runner.plan import plan_sweep
    from runner.platforms.local.platform import HAND_TESTBED_ID, LocalPlatform
    from runner.platforms.local.state import state_file

    cpu = ENVOY_CPU(args.envoy_cpu) if args.envoy_cpu else None
    scenario = load(args, overrides_from(args))
    configurations = plan_sweep(scenario).configurations
    config = configurations[0] if configurations else memory_configuration(scenario)
    if cpu is not None:
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
    testbed, load_spec = platform.testbed, scenario.load
    print(f"test bed up ({config.label}, {load_spec.workers} Locust worker(s))")
    print(f"  gateway:     {testbed.gateway_url}  (Host: {load_spec.host_header})")
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


def cmd_restore(args: argparse.Namespace) -> int:
    from runner.platforms import restore
    from runner.results import load_summary, resolve_run

    if args.from_cluster:  # a Job's run: its records as the Job last published them
        from runner.paths import RESULTS_ROOT
        from runner.platforms.kubernetes.publishing import fetch_for_restore, publish_restored

        results = Path(args.results) if args.results else RESULTS_ROOT
        run_dir = fetch_for_restore(args.namespace, args.run, results, args.kubeconfig)
        print(f"fetched run {run_dir.name}'s records as its Job last published them into {run_dir}")
    else:
        run_dir = resolve_run(args.run)
    for line in restore(load_summary(run_dir).platform, run_dir, wait=not args.no_wait):
        print(line)
    if args.from_cluster:
        print(publish_restored(args.namespace, run_dir))
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    testbed = commands.add_parser("testbed", help="start or stop the local test bed by hand")
    actions = testbed.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start Envoy, nginx, Locust and Prometheus on loopback")
    add_sweep_options(up)
    up.add_argument("--envoy-cpu", help="Envoy's CPU limit in cores (default: the scenario's first)")
    up.set_defaults(func=cmd_testbed_up)
    down = actions.add_parser("down", help="stop the test bed and remove what crashed runs left behind")
    down.add_argument("--all", action="store_true", help="also stop test beds of runs still going")
    down.set_defaults(func=cmd_testbed_down)

    restore = commands.add_parser("restore", help="undo what a kubernetes run changed in its cluster")
    restore.add_argument("run", help="the run directory (or run id) whose changes to undo")
    restore.add_argument("--no-wait", action="store_true", help="do not wait for the rollouts")
    restore.add_argument(
        "--from-cluster", action="store_true", help="a run a Job ran: restore from the records it published"
    )
    restore.add_argument("--namespace", default="gateway-loadtest", help="--from-cluster: where the Job ran")
    restore.add_argument("--results", help="--from-cluster: where to write the run's records (default: results/)")
    restore.add_argument("--kubeconfig", help="--from-cluster: default $KUBECONFIG or ~/.kube/config")
    restore.set_defaults(func=cmd_restore)

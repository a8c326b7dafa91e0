"""`fetch`: bring home a run that a Job ran in the cluster (its records published in a ConfigMap), and render its
report there."""

from __future__ import annotations

import argparse
from pathlib import Path

from runner.paths import RESULTS_ROOT


def cmd_fetch(args: argparse.Namespace) -> int:
    from runner.commands.report import report_after_sweep
    from runner.platforms.kubernetes.connection import connect
    from runner.platforms.kubernetes.published import fetch
    from runner.results import load_summary

    cluster = connect(args.kubeconfig, args.context)
    run_dir = fetch(cluster, args.namespace, Path(args.results) if args.results else RESULTS_ROOT, args.run)
    summary = load_summary(run_dir)
    print(f"fetched run {summary.run_id} ({summary.status}) into {run_dir}")
    report_after_sweep(run_dir, summary)
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    fetch = commands.add_parser("fetch", help="copy a run a Job ran in the cluster into results/ and render its report")
    fetch.add_argument("run", nargs="?", help="the run id (default: the newest published)")
    fetch.add_argument("--namespace", default="gateway-loadtest", help="where the Job ran (default gateway-loadtest)")
    fetch.add_argument("--results", help="results folder (default: results/)")
    fetch.add_argument("--kubeconfig", help="default: $KUBECONFIG or ~/.kube/config")
    fetch.add_argument("--context")
    fetch.set_defaults(func=cmd_fetch)

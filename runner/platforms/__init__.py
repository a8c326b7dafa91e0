"""Platforms by name, imported lazily: a local run never imports the kubernetes client."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import ToolMissingError, UsageError

if TYPE_CHECKING:
    from runner.platforms.base import Platform
    from runner.scenario import Scenario

PLATFORMS: dict[str, str] = {
    "local": "runner.platforms.local.platform:LocalPlatform",
    "kubernetes": "runner.platforms.kubernetes.platform:KubernetesPlatform",
}


def create_platform(scenario: Scenario, run_dir: Path, **options: object) -> Platform:
    """The platform the scenario names, built for one run; `options` are the platform's own."""
    target = PLATFORMS.get(scenario.platform)
    if target is None:
        raise UsageError(f"unknown platform {scenario.platform!r}", f"use one of: {', '.join(PLATFORMS)}")
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ToolMissingError(
            f"platform {scenario.platform!r} needs the Python package {error.name!r}", "run `make setup`"
        ) from None
    platform: Platform = getattr(module, class_name)(scenario, run_dir, **options)
    return platform

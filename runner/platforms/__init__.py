"""Platforms by name, imported lazily: a local run never imports the kubernetes client."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from runner.errors import ToolMissingError, UsageError

if TYPE_CHECKING:
    from runner.platforms.base import Platform
    from runner.scenario import Scenario

__all__ = ["PLATFORMS", "create_platform", "restore"]

PLATFORMS: dict[str, str] = {
    "local": "runner.platforms.local.platform:LocalPlatform",
    "kubernetes": "runner.platforms.kubernetes.platform:KubernetesPlatform",
}


def _load(name: str) -> tuple[ModuleType, str]:
    target = PLATFORMS.get(name)
    if target is None:
        raise UsageError(f"unknown platform {name!r}", f"use one of: {', '.join(PLATFORMS)}")
    module_name, _, class_name = target.partition(":")
    try:
        return importlib.import_module(module_name), class_name
    except ModuleNotFoundError as error:
        raise ToolMissingError(
            f"platform {name!r} needs the Python package {error.name!r}", "run `make setup`"
        ) from None


def create_platform(scenario: Scenario, run_dir: Path, **options: object) -> Platform:
    """The platform the scenario names, built for one run; `options` are the platform's own."""
    module, class_name = _load(scenario.platform)
    platform: Platform = getattr(module, class_name)(scenario, run_dir, **options)
    return platform


def restore(platform: str, run_dir: Path, *, wait: bool = True) -> list[str]:
    """Undo what a run left behind on its platform, for platforms that change something outside the run
    (a cluster); one line per thing done."""
    module, _ = _load(platform)
    undo = getattr(module, "restore", None)
    if undo is None:
        return [f"nothing to restore: {platform} runs change nothing outside their run directory"]
    lines: list[str] = undo(run_dir, wait=wait)
    return lines

"""Envoy's worker threads as a scenario sets them (`envoy.concurrency`, one axis of the sweep): the values a
configuration carries and the platform's default.

`auto` is one thread per started core of the limit; `default` (ENVOY_DEFAULT_CONCURRENCY) leaves Envoy's own, one
per CPU of the node; `production` (PRODUCTION_CONCURRENCY, kubernetes only) what the production gateway runs, its
`--concurrency` or else Envoy's default, resolved by the platform, which reads production's args; a number is that
many threads.
"""

from __future__ import annotations

import math
from typing import Any

ENVOY_DEFAULT_CONCURRENCY = 0  # a configuration's concurrency when Envoy runs with its own default
PRODUCTION_CONCURRENCY = -1  # a configuration's concurrency when Envoy runs with the production gateway's own


def threads_for(value: int | str, cpu_cores: float) -> int:
    """A configuration's concurrency for one value of the axis at a CPU limit."""
    if value == "default":
        return ENVOY_DEFAULT_CONCURRENCY
    if value == "production":
        return PRODUCTION_CONCURRENCY
    return value if isinstance(value, int) else max(1, math.ceil(cpu_cores))


def default_threads(data: Any) -> Any:
    """Raw scenario data with Envoy's worker threads defaulted by platform: on kubernetes the production gateway's
    own (`production`), on the local platform `auto` (the field's default). A provisioned gateway's are set before
    (runner/scenario/gateway.py: `default`, the provisioner's)."""
    if not isinstance(data, dict) or data.get("platform") != "kubernetes":
        return data
    envoy = data.get("envoy")
    if not isinstance(envoy, dict) or envoy.get("concurrency") is not None:
        return data
    return {**data, "envoy": {**envoy, "concurrency": "production"}}

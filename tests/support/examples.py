"""How many examples a property test (hypothesis) draws: a fixed set in the gate, more under `make fuzz`."""

from __future__ import annotations

import os

FUZZ_SCALE = max(1, int(os.environ.get("GATEWAY_SIZER_FUZZ") or 1))  # `make fuzz`: examples x this, drawn afresh


def examples(count: int) -> int:
    """A property test's number of examples: `count` in the gate (a fixed set, see tests/conftest.py), times
    GATEWAY_SIZER_FUZZ under `make fuzz`."""
    return count * FUZZ_SCALE

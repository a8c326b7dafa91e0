"""What a session runs, for a fixture shared by a gate test and a nightly one (make test-all): the gate's test of a
run needs only the shorter run; the nightly test, which measures, needs the full one."""

from __future__ import annotations

import pytest


def nightly_selected(request: pytest.FixtureRequest) -> bool:
    """Whether this session also runs a test marked nightly that uses the fixture asking (`make test-all`, or a
    pytest run that selects it): then the fixture makes the run that test measures, else the gate's shorter one."""
    return any(
        item.get_closest_marker("nightly") is not None and request.fixturename in getattr(item, "fixturenames", ())
        for item in request.session.items
    )

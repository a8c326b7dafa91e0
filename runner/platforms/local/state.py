"""Records of running test beds, and `testbed down`: removing what crashed runs left behind.

Each test bed writes a record (its id, owner pid, Prometheus data folder) to the state folder while it
runs. `testbed down` reads them and removes the test beds whose owner is gone, then any cgroup tree under
`gateway-sizer/` that no live owner claims. A record is checked before anything is killed or removed:
an id that is not one the project makes, or a data folder outside the temporary folder, is refused.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from runner.files import write_atomic
from runner.paths import state_dir
from runner.platforms.local.cgroups import detect_driver

HAND_TESTBED_ID = "testbed"  # the one test bed `gateway-sizer testbed up` starts and `down` stops
# Test bed ids: `testbed` (by hand), `<kind>-<owner pid>` for sweeps and tools, `test-<pid>-<n>` in tests.
TESTBED_ID = re.compile(r"^(testbed|[a-z]+-[0-9]+(-[0-9]+)?)$")
TSDB_PREFIX = "gateway-sizer-tsdb-"
CERTIFICATE_DIR = "tls"  # in a test bed's workdir: the TLS profiles' certificates and keys, removed when it stops


class TestbedRecord(BaseModel):
    """What `testbed down` needs to stop a test bed from another process."""

    model_config = ConfigDict(extra="ignore")
    __test__ = False  # not a pytest test class

    testbed_id: str
    owner_pid: int = 0
    workdir: str | None = None
    tsdb: str | None = None
    urls: dict[str, str] = {}

    @field_validator("testbed_id")
    @classmethod
    def _known_id(cls, value: str) -> str:
        if not TESTBED_ID.match(value):
            raise ValueError(f"{value!r} is not a gateway-sizer test bed id")
        return value

    @field_validator("tsdb")
    @classmethod
    def _temporary_tsdb(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = Path(value).resolve()
        if path.parent != Path(tempfile.gettempdir()).resolve() or not path.name.startswith(TSDB_PREFIX):
            raise ValueError(f"{value!r} is not a test bed's Prometheus data folder")
        return str(path)

    def save(self) -> None:
        write_atomic(state_file(self.testbed_id), self.model_dump_json(indent=1))


def state_file(testbed_id: str) -> Path:
    return state_dir() / f"{testbed_id}.json"


def stop_recorded_testbeds(*, everything: bool = False) -> list[str]:
    """Remove test beds recorded in the state folder whose owner is gone (or all with `everything`).

    Also removes cgroup trees under `gateway-sizer/` that no live owner records: the leftovers of a
    run that was killed hard, and such a run's TLS certificates and keys. Returns the ids removed; a record that
    fails validation is deleted unread.
    """
    from runner.certificates import remove_certificates  # imports cryptography: only stopping needs it

    driver = detect_driver()
    removed: list[str] = []
    live: set[str] = set()
    for path, record in _records(remove_invalid=True):
        if not everything and record.testbed_id != HAND_TESTBED_ID and _alive(record.owner_pid):
            live.add(record.testbed_id)
            continue
        driver.remove_tree(record.testbed_id)
        if record.tsdb:
            shutil.rmtree(record.tsdb, ignore_errors=True)
        if record.workdir:
            remove_certificates(Path(record.workdir) / CERTIFICATE_DIR)
        path.unlink(missing_ok=True)
        removed.append(record.testbed_id)
    for orphan in driver.children():
        if not TESTBED_ID.match(orphan):
            continue  # not a folder the project makes: leave it
        if orphan not in live and (everything or not _owned_by_live_process(orphan)):
            driver.remove_tree(orphan)
            removed.append(orphan)
    return removed


def live_testbeds() -> list[str]:
    """Ids of the recorded test beds whose owner still runs (another sweep, or a test bed started by hand)."""
    return [
        record.testbed_id
        for _, record in _records()
        if record.testbed_id == HAND_TESTBED_ID or (record.owner_pid != os.getpid() and _alive(record.owner_pid))
    ]


def _records(*, remove_invalid: bool = False) -> Iterator[tuple[Path, TestbedRecord]]:
    """The state folder's records that validate; with `remove_invalid`, the others are deleted unread."""
    for path in sorted(state_dir().glob("*.json")):
        try:
            yield path, TestbedRecord.model_validate_json(path.read_text())
        except (OSError, ValidationError):
            if remove_invalid:
                path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owned_by_live_process(testbed_id: str) -> bool:
    """Sweep and test test beds are named `<kind>-<owner pid>[-n]`; keep those whose owner still runs."""
    match = re.match(r"^[a-z]+-([0-9]+)", testbed_id)
    return match is not None and _alive(int(match.group(1)))

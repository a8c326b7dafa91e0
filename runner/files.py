"""Durable files: every state and result file is replaced atomically (a unique temporary file beside it,
flushed to disk, then renamed over it), so a crash or a full disk leaves the previous version intact."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from runner.errors import SizerError


class SaveError(SizerError):
    """A file could not be written (full disk, no permission); the previous version is kept."""


def is_file(path: Path) -> bool:
    """Path.is_file() that answers False for a path the system refuses (too long, NUL, a file as a folder)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace `path` with `data`; SaveError (one line) when it cannot be written, and the old file stays."""
    payload = data.encode() if isinstance(data, str) else data
    try:
        handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise _save_error(path, error) from None
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _save_error(path, error) from None
    except BaseException:  # Ctrl-C between the temporary file and the rename: leave no temporary file behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_directory(path.parent)


def _save_error(path: Path, error: OSError) -> SaveError:
    hint = "free some disk space and resume the run" if error.errno == errno.ENOSPC else None
    return SaveError(f"cannot save {path}: {error.strerror or error}", hint)


def _sync_directory(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every file system lets a folder be fsynced)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

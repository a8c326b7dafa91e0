"""write_atomic: the old file stays whole whatever happens between the temporary file and the rename."""

from __future__ import annotations

import os

import pytest

from runner.files import SaveError, write_atomic


def test_a_replacement_is_whole_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "summary.json"
    write_atomic(path, "old")
    write_atomic(path, b"new")
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["summary.json"]


def test_ctrl_c_before_the_rename_keeps_the_old_file_and_removes_the_temporary_one(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    write_atomic(path, "old")

    def interrupted(_fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, "new")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["summary.json"]


def test_a_folder_that_cannot_be_written_is_one_line(tmp_path):
    folder = tmp_path / "gone"
    with pytest.raises(SaveError) as raised:
        write_atomic(folder / "summary.json", "x")
    assert str(raised.value).startswith(f"cannot save {folder / 'summary.json'}")

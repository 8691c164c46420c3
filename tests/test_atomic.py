"""Atomic writes and the file lock (xlrepro/atomic.py), also across processes."""
import time

import pytest

from xlrepro import atomic


def test_atomic_open_writes_text_and_bytes_and_leaves_no_temp_file(tmp_path):
    with atomic.atomic_open(tmp_path / "a" / "t.txt") as f:
        f.write("ü\n")
    atomic.write_bytes(tmp_path / "a" / "b.bin", b"\x00\x01")
    atomic.write_json(tmp_path / "a" / "c.json", {"x": "é"})
    assert (tmp_path / "a" / "t.txt").read_bytes() == "ü\n".encode()
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "a" / "c.json").read_text(encoding="utf-8") == '{\n "x": "é"\n}'
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b.bin", "c.json", "t.txt"]


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic.atomic_path(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.txt"]


def test_temp_names_are_unique_and_keep_the_suffix(tmp_path):
    with atomic.atomic_path(tmp_path / "n.ipynb", suffix=".ipynb") as a, \
            atomic.atomic_path(tmp_path / "n.ipynb", suffix=".ipynb") as b:
        assert a != b and a.name.endswith(".ipynb") and b.name.endswith(".ipynb")
        a.write_text("a")
        b.write_text("b")
    assert (tmp_path / "n.ipynb").read_text() == "a"  # the outer block finishes last


def test_bad_mode_names_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="valid modes: w, wb"):
        with atomic.atomic_open(tmp_path / "x", "a"):
            pass


def _add_one(path, n):
    for _ in range(n):
        with atomic.locked(path):
            value = int(path.read_text()) if path.exists() else 0
            time.sleep(0.002)  # widen the read-modify-write window
            atomic.write_bytes(path, str(value + 1).encode())


def test_locked_read_modify_write_loses_no_update_across_processes(tmp_path, in_processes):
    path = tmp_path / "counter"
    assert in_processes(_add_one, [(path, 25)] * 4) == [0, 0, 0, 0]
    assert path.read_text() == "100"


def test_new_files_are_world_readable_and_old_modes_are_kept(tmp_path):
    atomic.write_bytes(tmp_path / "new", b"x")
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o644
    (tmp_path / "old").write_bytes(b"x")
    (tmp_path / "old").chmod(0o640)
    atomic.write_bytes(tmp_path / "old", b"y")
    assert (tmp_path / "old").stat().st_mode & 0o777 == 0o640

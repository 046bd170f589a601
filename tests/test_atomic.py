"""Atomic writes: whole content or none, no leftovers, and the modes a user expects."""

import os
import stat

import pytest

from sandbox.atomic import atomic_write_bytes, atomic_write_text

posix = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.fixture
def umask():
    """``umask(mask)`` sets the process umask for one test; restored afterwards."""
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@posix
@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600),
                                            (0o000, 0o666)])
def test_a_new_file_gets_0666_less_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    p = tmp_path / "snapshot.npz"
    atomic_write_bytes(p, b"data")
    assert _mode(p) == expected
    assert p.read_bytes() == b"data"


@posix
def test_an_existing_file_keeps_its_mode(tmp_path, umask):
    umask(0o022)
    p = tmp_path / "level.toml"
    p.write_text("old")
    os.chmod(p, 0o640)
    atomic_write_text(p, "new")
    assert p.read_text() == "new" and _mode(p) == 0o640
    os.chmod(p, 0o604)
    atomic_write_text(p, "newer")
    assert _mode(p) == 0o604


def test_it_replaces_the_whole_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "out.txt"
    atomic_write_text(p, "x" * 10_000)
    atomic_write_text(p, "short é")
    assert p.read_text(encoding="utf-8") == "short é"
    assert [f.name for f in tmp_path.iterdir()] == ["out.txt"]


def test_a_failed_write_keeps_the_old_file_and_cleans_up(tmp_path):
    p = tmp_path / "out.bin"
    atomic_write_bytes(p, b"old")
    with pytest.raises(TypeError):
        atomic_write_bytes(p, "not bytes")            # fails inside the write
    assert p.read_bytes() == b"old"
    assert [f.name for f in tmp_path.iterdir()] == ["out.bin"]


def test_a_missing_folder_raises_and_creates_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write_bytes(tmp_path / "nope" / "f.bin", b"x")
    assert list(tmp_path.iterdir()) == []


def test_a_relative_path_in_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    atomic_write_text("plain.txt", "ok")
    assert (tmp_path / "plain.txt").read_text() == "ok"

"""Reading only regular files, bounded (a FIFO never blocks: each read runs under a time
limit in a subprocess), and writing without ever replacing what was not ours to replace."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sandbox.atomic import (
    FileTooLarge,
    NotRegularFile,
    atomic_write_bytes,
    atomic_writer,
    read_bounded,
)

ROOT = Path(__file__).resolve().parent.parent

READ = textwrap.dedent("""
    import sys
    from sandbox.atomic import read_bounded
    for path in sys.argv[1:]:
        try:
            print(len(read_bounded(path, 1 << 20)))
        except OSError as e:
            print(type(e).__name__, e.strerror)
""")


def test_only_regular_files_are_read_and_nothing_blocks(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "big").write_bytes(b"x" * ((1 << 20) + 1))
    (tmp_path / "ok").write_bytes(b"x" * (1 << 20))
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    paths = [tmp_path / "fifo", tmp_path / "link", tmp_path, "/dev/zero", "/dev/urandom",
             tmp_path / "big", tmp_path / "ok", tmp_path / "gone"]
    r = subprocess.run([sys.executable, "-c", READ, *map(str, paths)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "NotRegularFile not a regular file (a FIFO)",
        "NotRegularFile not a regular file (a FIFO)",
        "NotRegularFile not a regular file (a folder)",
        "NotRegularFile not a regular file (a character device)",
        "NotRegularFile not a regular file (a character device)",
        "FileTooLarge larger than 1,048,576 bytes",
        "1048576",
        "FileNotFoundError No such file or directory",
    ]


def test_a_proc_file_whose_size_lies_is_still_bounded():
    data = read_bounded("/proc/self/status", 1 << 20)          # st_size is 0
    assert b"Name:" in data
    with pytest.raises(FileTooLarge):
        read_bounded("/proc/self/status", 10)
    with pytest.raises(NotRegularFile):
        read_bounded("/dev/null", 10)


def test_no_replace_keeps_a_file_that_appears_while_writing(tmp_path):
    target = tmp_path / "out.npz"
    with pytest.raises(FileExistsError):
        with atomic_writer(target, replace=False) as f:
            f.write(b"ours")
            target.write_bytes(b"theirs")           # another process took the name
    assert target.read_bytes() == b"theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]    # no temporary left
    with pytest.raises(FileExistsError):
        atomic_write_bytes(target, b"ours", replace=False)
    assert target.read_bytes() == b"theirs"
    atomic_write_bytes(tmp_path / "new", b"ours", replace=False)
    assert (tmp_path / "new").read_bytes() == b"ours"


def test_an_interrupted_write_leaves_nothing(tmp_path):
    target = tmp_path / "out.npz"
    target.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_writer(target) as f:
            f.write(b"half")
            raise KeyboardInterrupt
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]


def test_f12_on_a_full_disk_leaves_no_screenshot_and_says_so(tmp_path, monkeypatch):
    """pygame.image.save does not raise on a full disk: F12 left a truncated (once 0
    byte) screenshot at its final name and said it was saved. The PNG is now encoded in
    memory and written byte by byte; a write that fails leaves nothing and says why."""
    import errno
    import os

    import events as ev
    import pygame

    app = ev.window_app("pendulums", tmp_path, (800, 600))
    app.frame(1 / 60)
    real = os.write

    def full(fd, data):
        if len(data) > 100:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", full)
    ev.press(pygame.K_F12)
    app.frame(1 / 60)
    monkeypatch.setattr(os, "write", real)
    folder = tmp_path / "screenshots"
    assert not folder.exists() or not any(folder.iterdir())       # no file, no temporary
    errors = [m[0] for m in app.messages if m[2]]
    assert errors and "No space left on device" in errors[-1]
    assert not any(m[0].startswith("screenshot:") for m in app.messages)


def test_experiment_and_bench_on_a_full_disk_say_one_line_and_exit_1(tmp_path, monkeypatch,
                                                                     capsys):
    """A full disk or a read-only folder under experiment --out or bench --json ended in
    a raw OSError traceback."""
    import argparse
    import errno

    from sandbox import bench
    from sandbox.lab import experiments

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.csv"))

    monkeypatch.setattr(experiments, "run", full)
    args = argparse.Namespace(name="convergence", seed=0, jobs=1, quick=True,
                              scheduler=None, seeds=None)
    assert experiments.command(args, tmp_path) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "x.csv" in err

    monkeypatch.setattr(bench, "run_table", lambda opts: {"rows": [], "machine": {}})
    monkeypatch.setattr(bench, "print_report", lambda report: None)
    monkeypatch.setattr(bench, "write_json", full)
    args = argparse.Namespace(list=False, profile=None, quick=True, only="rope1000",
                              rounds=None, frames=None, no_pymunk=True, load=0,
                              threads="1", no_cref=True, startup=False,
                              json=str(tmp_path / "b.json"), csv=None, no_save=True,
                              results_dir=str(tmp_path))
    assert bench.run_bench(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err

"""Faults injected for real, as a user's machine meets them (issue 36): a Dask scheduler
killed mid-sweep, an output folder removed mid-sweep, a full disk (a 64 KiB tmpfs where
the test may mount one, else the write call failing with ENOSPC) under clips and the
files the lab writes. Each says what happened in one line, never a traceback, and keeps
what was finished. Real commands in subprocesses, with time limits: a hang fails."""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_sweep import _Loopback, _signal_group

from sandbox.lab import stability_map as sm
from sandbox.lab import sweep as sweep_module
from sandbox.lab.sweep import LOST_AFTER, ClusterLost, Runner, Store, case_key, run_sweep

ROOT = Path(__file__).resolve().parent.parent


def _wait_for(cond, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the command ended before {what}: "
                        + proc.stderr.read()[-2000:])
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:.0f} s")
        time.sleep(0.05)


def _parts(folder: Path) -> list[Path]:
    return list(folder.glob(".sweeps/*/part-*.pkl")) + list(folder.glob("*/part-*.pkl"))


@pytest.fixture
def cluster(tmp_path):
    """A scheduler and two workers started as a user starts them (``dask scheduler``,
    ``dask worker``), each in its own process group."""
    home = tmp_path / "cluster"
    home.mkdir()
    c = _Loopback(home)
    try:
        c.start_scheduler()
        c.add_workers(2)
        yield c
    finally:
        c.stop()


def _kill_scheduler(c: _Loopback) -> None:
    _signal_group(c.procs[0], signal.SIGKILL)        # the first process started


def _experiment(out: Path, *args) -> subprocess.Popen:
    """``experiment stability-map`` (the full map: minutes of work, so it is still
    running when the fault comes)."""
    return subprocess.Popen([sys.executable, "main.py", "experiment", "stability-map",
                             "--out", str(out), *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture
def full_disk(tmp_path):
    """A folder on a 64 KiB tmpfs (as root, where mounting is allowed), else None: the
    test then makes the write call fail with ENOSPC itself."""
    where = tmp_path / "small"
    where.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        yield None
        return
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        yield None
        return
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


# --- a lost Dask scheduler ---------------------------------------------------------------

def test_a_killed_scheduler_is_one_line_exit_1_and_the_parts_are_kept(cluster, tmp_path):
    """Before: the sweep waited for ever (still running after 180 s), and Ctrl+C then
    ended in a ClosedClientError traceback."""
    out = tmp_path / "out"
    p = _experiment(out, "--scheduler", cluster.address)
    try:
        _wait_for(lambda: _parts(out), 180, "finished sweep part", p)
        _kill_scheduler(cluster)
        t0 = time.monotonic()
        _, err = p.communicate(timeout=LOST_AFTER + 50)
        took = time.monotonic() - t0
    finally:
        p.kill()
    assert p.returncode == 1, err[-3000:]
    assert took < LOST_AFTER + 30, took
    assert "Traceback" not in err and "ERROR" not in err, err[-3000:]
    last = err.splitlines()[-1]
    assert last.startswith(f"error: stability-map: lost the Dask scheduler at "
                           f"{cluster.address} (no answer for "), last
    assert "cases are kept in" in last and "run the same command to resume" in last
    # What finished is kept where the rerun looks: results of this very sweep's cases.
    (store,) = (out / ".sweeps").iterdir()
    assert store.name.startswith("stability-map-")
    have = dict(pair for q in store.glob("part-*.pkl") for pair in pickle.loads(q.read_bytes()))
    keys = {case_key(c) for c in sm.cases()}
    assert have and set(have) <= keys
    assert f"results of {len(have)} of {len(keys)} cases are kept in {store}" in last


def test_ctrl_c_while_the_scheduler_is_gone_exits_130_quietly(cluster, tmp_path):
    out = tmp_path / "out"
    p = _experiment(out, "--scheduler", cluster.address)
    try:
        _wait_for(lambda: _parts(out), 180, "finished sweep part", p)
        _kill_scheduler(cluster)
        time.sleep(2)                                 # the client is trying to reconnect
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "ERROR" not in err, err[-3000:]
    assert err.splitlines()[-1] == "interrupted"
    assert "run the same command again to resume" in err and _parts(out)


def test_the_parts_kept_from_a_lost_scheduler_resume_the_sweep(cluster, tmp_path,
                                                               monkeypatch):
    """The kept results are the rerun's: it computes only what is missing, and the
    results are those of a plain run."""
    # The store is named after the code's fingerprint: taken once, so that someone
    # editing the checkout meanwhile does not make the rerun start afresh.
    fingerprint = sweep_module.code_fingerprint()
    monkeypatch.setattr(sweep_module, "code_fingerprint", lambda *a: fingerprint)
    cases = sm.cases(res=40, n=2000, rows=1)         # 360 cases, ~6 s of work
    store = tmp_path / "store"
    outcome: dict = {}

    def sweep():
        try:
            with Runner(scheduler=cluster.address, log=lambda s: None) as runner:
                outcome["result"] = run_sweep(sm.map_rows, cases, runner, name="lost",
                                              store=store)
        except BaseException as e:                     # noqa: BLE001 -- judged below
            outcome["error"] = e

    t = threading.Thread(target=sweep, daemon=True)
    t.start()
    _wait_for(lambda: list(store.glob("*/part-*.pkl")), 120, "finished sweep part")
    _kill_scheduler(cluster)
    t.join(LOST_AFTER + 40)
    assert not t.is_alive(), "the sweep still waits for the killed scheduler"
    err = outcome.get("error")
    assert isinstance(err, ClusterLost), outcome
    kept = Store(store, "lost", sm.map_rows).load()
    assert 0 < len(kept) < len(cases)
    assert f"the results of {len(kept)} of {len(cases)} cases are kept in" in str(err)
    res = run_sweep(sm.map_rows, cases, name="lost", store=store)    # the rerun, serial
    assert res.stats.computed == len(cases) - len(kept)
    for i in (0, len(cases) // 2, len(cases) - 1):
        assert pickle.dumps(res.results[i]) == pickle.dumps(sm.map_rows(**cases[i]))
    assert not store.exists() or not any(store.iterdir())            # done: cleared


# --- the output folder removed mid-run ---------------------------------------------------

def _wrote(stdout: str) -> list[Path]:
    return [Path(line[len("wrote "):]) for line in stdout.splitlines()
            if line.startswith("wrote ")]


def test_an_output_folder_removed_mid_sweep_is_made_again_and_said_once(tmp_path):
    """``rm -rf out`` while the sweep runs: the sweep's next part makes the folder again
    (one note), the run finishes and writes every file."""
    out = tmp_path / "out"
    p = _experiment(out, "--quick", "--jobs", "1")
    try:
        _wait_for(lambda: _parts(out), 120, "finished sweep part", p)
        shutil.rmtree(out)
        stdout, err = p.communicate(timeout=300)
    finally:
        p.kill()
    assert p.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert notes == [f"note: {out} was removed while the run went on; made it again "
                     "(what it held is gone)"], err
    files = _wrote(stdout)
    assert len(files) > 3 and all(f.is_file() for f in files)
    assert not (out / ".sweeps").exists()


def test_files_written_before_the_folder_was_removed_are_named_and_exit_1(tmp_path):
    """Removed after the first file was written: the rest are written into the folder
    made again, and the files lost with it are named, exit 1. Before: the next write
    failed with 'cannot write out/.escape_map.png.1a2b3c.tmp' (a temporary name) and
    claimed 'finished sweep parts are kept' after the sweep was done and cleared."""
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "main.py", "experiment", "escape-map", "--quick",
                          "--jobs", "1", "--out", str(out)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (out / "escape_map.csv").exists(), 120, "first output file", p)
        shutil.rmtree(out)
        stdout, err = p.communicate(timeout=300)
    finally:
        p.kill()
    assert p.returncode == 1, err[-3000:]
    assert "Traceback" not in err and ".tmp" not in err, err
    lines = err.splitlines()
    assert f"note: {out} was removed while the run went on; made it again " \
           "(what it held is gone)" in lines
    last = lines[-1]
    assert last.startswith("error: ") and "files this run wrote are gone" in last, last
    assert f"{out / 'escape_map.csv'}" in last and "run the same command again" in last
    assert "escape_map.csv" not in stdout                   # not claimed as written
    assert all(f.is_file() for f in _wrote(stdout)) and (out / "escape_map.txt").is_file()


# --- a full disk under the lab's output --------------------------------------------------

def test_experiment_on_a_full_disk_names_the_file_not_a_temporary(full_disk, tmp_path):
    """Before: 'cannot write out/.escape_map.png.1a2b3c.tmp' (the atomic writer's
    temporary name) and 'finished sweep parts are kept' when none were."""
    if full_disk is None:
        pytest.skip("no tmpfs can be mounted here (not root, or no mount permission)")
    out = full_disk / "out"
    r = subprocess.run([sys.executable, "main.py", "experiment", "escape-map", "--quick",
                        "--jobs", "1", "--out", str(out)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 1, r.stderr[-3000:]
    last = r.stderr.splitlines()[-1]
    assert "Traceback" not in r.stderr and ".tmp" not in last, r.stderr[-3000:]
    assert last.startswith(f"error: cannot write {out}/escape_map") and \
        last.endswith(": No space left on device"), last
    assert not [q for q in out.rglob("*") if q.name.startswith(".")]      # no temporaries


# --- a clip on a full disk (the window) --------------------------------------------------

@pytest.mark.parametrize("fmt", ["mp4", "gif"])
def test_a_clip_on_a_full_disk_is_one_message_no_file_and_the_window_goes_on(
        full_disk, fmt, capfd):
    """Before: an MP4 was put in place truncated (the disk's 64 KiB) and reported
    'clip saved', with ffmpeg's error lines on the terminal; a GIF printed imageio's
    'Exception ignored ... Traceback' blocks."""
    if full_disk is None:
        pytest.skip("no tmpfs can be mounted here (not root, or no mount permission)")
    import pygame

    from sandbox.app.main import App
    pygame.display.init()
    pygame.display.set_mode((640, 400))
    app = App("pendulums", size=(640, 400), out_dir=full_disk, clip_fps=30, clip_width=320)
    app.do("record", fmt)
    path = app.recorder.path
    for _ in range(120):                      # 2 s: more than 64 KiB either way
        app.frame(1 / 60)
    app.do("record")
    app.recorder.wait(120)
    t = app.session.world.t
    for _ in range(3):
        app.frame(1 / 60)                     # the window goes on
    assert app.running and app.session.world.t > t
    # The clip's last word (other messages, e.g. the kernels' warm-up, may follow it).
    said = [m[0] for m in app.messages if "clip" in m[0]]
    assert f"clip not written: {path.name}: " in said[-1], said
    assert said[-1].endswith("No space left on device"), said[-1]
    assert not any("clip saved" in m for m in said)
    assert not list(path.parent.iterdir())    # no clip, no temporary
    assert capfd.readouterr().err == ""       # nothing from imageio or ffmpeg


# --- step traces -------------------------------------------------------------------------

def test_a_step_trace_on_a_full_disk_names_it_and_keeps_the_older_file(full_disk, tmp_path):
    """Before: the OSError named the atomic writer's temporary ('.run.trace.1a2b.tmp')."""
    from sandbox import steptrace
    from sandbox.sim.timestep import StepTrace
    if full_disk is None:
        pytest.skip("no tmpfs can be mounted here (not root, or no mount permission)")
    path = full_disk / "run.trace"
    steptrace.save(StepTrace([[1 / 60]] * 10), path)
    big = StepTrace([[1 / 240 + k * 1e-9] * 4 for k in range(5000)])     # ~400 KB
    with pytest.raises(OSError) as e:
        steptrace.save(big, path)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(path)
    assert steptrace.load(path).frames == [[1 / 60]] * 10           # the older file, whole
    assert [q.name for q in full_disk.iterdir()] == ["run.trace"]    # no temporary


def test_a_step_trace_that_would_not_load_is_not_written(tmp_path):
    """``load`` refuses more than 64 steps a frame; ``save`` wrote such a file anyway."""
    from sandbox import steptrace
    from sandbox.sim.timestep import StepTrace
    path = tmp_path / "run.trace"
    with pytest.raises(ValueError, match="frame 2 has 65 steps"):
        steptrace.save(StepTrace([[0.01], [0.001] * 65]), path)
    assert not path.exists() and not list(tmp_path.iterdir())
    steptrace.save(StepTrace([[0.01], [0.001] * 64, []]), path)
    assert steptrace.load(path).frames == [[0.01], [0.001] * 64, []]

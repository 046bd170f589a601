"""What the environment does to ``simulate`` and ``check``: Ctrl-C in the middle of a run
(the finished steps are saved, exit 130), and no writable numba cache anywhere (one
warning line, then the same commands). Real commands, subprocesses, time limits."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from archives import load_finite

from sandbox.sim.backend import COMPILING

ROOT = Path(__file__).resolve().parent.parent
STRICT = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "LC_ALL": "C.UTF-8"}


def test_ctrl_c_saves_the_finished_steps_and_exits_130(tmp_path):
    out = tmp_path / "run.npz"
    p = subprocess.Popen([sys.executable, "main.py", "simulate", "cloth", "--steps",
                          "100000", "--every", "50", "--dtype", "float32", "--out", str(out)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=STRICT)
    try:
        time.sleep(10)                       # imports, build, then steps
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        p.kill()
    lines = (stdout + stderr).decode("utf-8").splitlines()
    assert p.returncode == 130 and len(lines) == 1, lines
    assert lines[0].startswith("error: interrupted at t = ") and f"wrote {out}" in lines[0]
    data = load_finite(out)
    assert data["h"].size > 0 and data["step"][-1] == data["h"].size
    assert [q.name for q in tmp_path.iterdir()] == ["run.npz"]     # no temporary left


def _read_only_copy(tmp_path) -> tuple[Path, dict]:
    """The program where numba can write no cache: beside the code (``__pycache__`` is a
    file there) nor in the home folder (a file, so ``~/.cache`` cannot be made)."""
    import shutil
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "sandbox", copy / "sandbox",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "app", "lab"))
    shutil.copytree(ROOT / "levels", copy / "levels")
    shutil.copy(ROOT / "main.py", copy)
    (copy / "sandbox" / "sim" / "__pycache__").write_text("not a folder")
    home = tmp_path / "home"
    home.write_text("not a folder")
    env = {**STRICT, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)
    return copy, env


def test_no_writable_numba_cache_falls_back_with_one_warning(tmp_path):
    copy, env = _read_only_copy(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # check runs no kernel: it neither imports numba nor warns.
    r = subprocess.run([sys.executable, "main.py", "check", "rope"], cwd=copy,
                       capture_output=True, text=True, timeout=120,
                       env={**env, "TMPDIR": str(tmp)})
    assert r.returncode == 0 and r.stdout == "ok  levels/rope.toml\n" and not r.stderr, \
        r.stderr
    # simulate does: numba's cache goes to a private folder in the temporary directory.
    out = tmp_path / "rope0.npz"
    r = subprocess.run([sys.executable, "main.py", "simulate", "rope", "--steps", "3",
                        "--out", str(out)], cwd=copy, capture_output=True, text=True,
                       timeout=300, env={**env, "TMPDIR": str(tmp)})
    assert r.returncode == 0 and r.stdout.startswith(f"wrote {out}: 3 steps"), r.stderr
    # One warning, and (its cache being new) the one line saying the kernels compile.
    lines = r.stderr.splitlines()
    assert lines[0].startswith("warning: numba cannot write") and lines[1:] == [COMPILING], \
        r.stderr
    assert f"caching the compiled kernels in {tmp}/verlet-sandbox-numba-" in r.stderr
    assert any((tmp / f"verlet-sandbox-numba-{os.getuid()}").rglob("*.nbi"))
    # Nowhere to write at all: the numpy kernels, the same commands.
    run = ("import runpy, sys, tempfile; tempfile.tempdir = sys.argv[1]; "
           "sys.argv = ['main.py', *sys.argv[2:]]; runpy.run_path('main.py', "
           "run_name='__main__')")
    out = tmp_path / "rope.npz"
    r = subprocess.run([sys.executable, "-c", run, str(tmp_path / "home" / "x"), "simulate",
                        "rope", "--steps", "3", "--out", str(out)], cwd=copy,
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.startswith(f"wrote {out}: 3 steps"), r.stderr
    assert r.stderr.count("\n") == 1 and "using the numpy kernels" in r.stderr
    load_finite(out)
    ref = load_finite(tmp_path / "rope0.npz")
    got = load_finite(out)
    assert all(np.array_equal(ref[k], got[k]) for k in ref), "numpy and compiled differ"

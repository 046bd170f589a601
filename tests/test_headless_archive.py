"""simulate --every K --dtype float32: fewer, smaller states in the archive, the same run."""

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _simulate(tmp_path, name, *extra):
    out = tmp_path / f"{name}.npz"
    r = subprocess.run([sys.executable, "main.py", "simulate", "pendulums", "--steps", "25",
                        "--out", str(out), *extra], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    with np.load(out) as z:
        return {k: z[k] for k in z.files}, r.stdout


def test_every_and_dtype_keep_the_same_states_smaller(tmp_path):
    full, _ = _simulate(tmp_path, "full")
    thin, text = _simulate(tmp_path, "thin", "--every", "10", "--dtype", "float32")
    steps = full["h"].size
    assert steps >= 25 and thin["h"].size == steps            # every step's h is kept
    np.testing.assert_array_equal(full["step"], np.arange(steps + 1))
    want = sorted({*range(0, steps + 1, 10), steps})           # first, every 10th, last
    np.testing.assert_array_equal(thin["step"], want)
    assert thin["x"].dtype == np.float32 and thin["v"].dtype == np.float32
    np.testing.assert_array_equal(thin["x"], full["x"][want].astype(np.float32))
    np.testing.assert_array_equal(thin["t"], full["t"][want])
    for key in full["energy_keys"]:
        np.testing.assert_array_equal(thin[f"energy_{key}"], full[f"energy_{key}"][want])
    assert int(thin["every"]) == 10 and "states kept (every 10)" in text


def test_bad_every_is_a_clean_error(tmp_path):
    r = subprocess.run([sys.executable, "main.py", "simulate", "pendulums", "--steps", "2",
                        "--every", "0", "--out", str(tmp_path / "x.npz")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--every must be >= 1" in r.stderr
    assert "Traceback" not in r.stderr

"""The real ``simulate`` command against hostile command lines, each a subprocess under a
time limit: exactly one clean line, the promised exit status, nothing at an existing path
changed, and every number in an archive finite. Ctrl-C and an unwritable numba cache:
tests/test_hostile_environment.py."""

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from archives import load_finite

ROOT = Path(__file__).resolve().parent.parent
STRICT = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "LC_ALL": "C.UTF-8"}

DIVERGES = """
[world]
integrator = "euler"
timestep = "fixed"
[[bodies]]
type = "spring_pendulum"
pivot = [0, 0]
stretch = 0.1
stiffness = 1e9
mass = 1e-6
"""


def _run(*args, timeout=120, **kw):
    r = subprocess.run([sys.executable, "main.py", *map(os.fsdecode, args)], cwd=ROOT,
                       capture_output=True, timeout=timeout, env=kw.pop("env", STRICT), **kw)
    out, err = r.stdout.decode("utf-8"), r.stderr.decode("utf-8")   # strict: valid UTF-8
    lines = (out + err).splitlines()
    assert len(lines) == 1, lines                       # exactly one line, nothing else
    assert "\x1b" not in out + err and "Traceback" not in err
    return r.returncode, lines[0]


def _state(folder: Path) -> dict:
    return {p.name: (p.stat().st_mode, p.stat().st_mtime_ns, p.read_bytes())
            for p in folder.iterdir() if p.is_file()}


def test_refusals_change_nothing(tmp_path):
    level = tmp_path / "mine.toml"
    level.write_text((ROOT / "levels" / "orbit.toml").read_text())
    taken = tmp_path / "taken.npz"
    taken.write_bytes(b"precious")
    os.mkfifo(tmp_path / "trace.fifo")
    before = _state(tmp_path)
    cases = [
        (["--out", level], "is an input of this run"),
        (["--out", level, "--force"], "is an input of this run"),
        (["--out", taken], "exists; --force replaces it"),
        (["--dt", "1e308", "--out", tmp_path / "a.npz"], "cannot plan a frame this long"),
        (["--steps", "1000000000000", "--out", tmp_path / "b.npz"],
         "the budget is 1,024 MiB"),
        (["--timestep", "replay", "--out", tmp_path / "c.npz"], "give it with --trace FILE"),
        (["--timestep", "replay", "--trace", tmp_path / "trace.fifo", "--out",
          tmp_path / "d.npz"], "not a regular file (a FIFO)"),
        (["--trace", tmp_path / "trace.fifo", "--out", tmp_path / "e.npz"],
         "is the step trace of --timestep replay"),
    ]
    for extra, fragment in cases:
        args = ["simulate", level, "--steps", "3", *extra]
        if "--steps" in map(str, extra):
            args = ["simulate", level, *extra]
        t0 = time.monotonic()
        code, line = _run(*args, timeout=60)
        assert code == 2 and line.startswith("error: ") and fragment in line, (extra, line)
        assert time.monotonic() - t0 < 45
    assert _state(tmp_path) == before


def test_force_replaces_an_output_and_keeps_its_mode(tmp_path):
    out = tmp_path / "run.npz"
    out.write_bytes(b"old")
    os.chmod(out, 0o600)
    code, line = _run("simulate", "orbit", "--steps", "5", "--out", out, "--force")
    assert code == 0 and line.startswith(f"wrote {out}: 5 steps"), line
    assert load_finite(out)["x"].shape == (6, 3, 2)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_new_archive_gets_the_umask_mode(tmp_path):
    out = tmp_path / "run.npz"
    code, _ = _run("simulate", "orbit", "--steps", "2", "--out", out,
                   preexec_fn=lambda: os.umask(0o027))
    assert code == 0 and stat.S_IMODE(out.stat().st_mode) == 0o640


def test_a_diverged_run_saves_the_last_finite_state_and_exits_1(tmp_path):
    level = tmp_path / "diverges.toml"
    level.write_text(DIVERGES)
    out = tmp_path / "run.npz"
    code, line = _run("simulate", level, "--steps", "1000", "--every", "7", "--out", out)
    assert code == 1 and line.startswith("error: simulation diverged at t = "), line
    assert f"wrote {out}" in line
    data = load_finite(out)
    steps = data["h"].size
    assert 0 < steps < 1000 and data["step"][-1] == steps       # ends at its last state
    assert data["x"].shape[0] == data["t"].size == data["step"].size


def test_replay_mode_plays_a_trace(tmp_path):
    trace = tmp_path / "steps.trace"
    trace.write_text("# verlet-sandbox step trace v1\n"
                     f"{(1 / 60).hex()} {(1 / 60).hex()}\n{(1 / 30).hex()}\n")
    out = tmp_path / "run.npz"
    code, line = _run("simulate", "orbit", "--steps", "5", "--timestep", "replay",
                      "--trace", trace, "--out", out)
    assert code == 0 and "3 steps" in line, line
    assert np.allclose(load_finite(out)["h"], [1 / 60, 1 / 60, 1 / 30])


def test_names_that_are_not_utf8_are_printed_with_replacement_characters(tmp_path):
    folder = os.fsencode(tmp_path)
    level = os.path.join(folder, b"lev\xff.toml")
    with open(level, "wb") as f:
        f.write((ROOT / "levels" / "orbit.toml").read_bytes())
    out = os.path.join(folder, b"out\xfe\x1b[2J.npz")
    code, line = _run("check", level)
    assert code == 0 and line == f"ok  {tmp_path}/lev\ufffd.toml"
    code, line = _run("simulate", level, "--steps", "2", "--out", out)
    assert code == 0 and line.startswith(f"wrote {tmp_path}/out\ufffd\\x1b[2J.npz: 2 steps")
    assert os.path.exists(out)
    code, line = _run("simulate", level, "--steps", "2", "--out", out)
    assert code == 2 and "out\ufffd\\x1b[2J.npz exists" in line

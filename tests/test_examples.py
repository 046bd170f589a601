"""The examples/ scripts run as a user runs them (``python -m examples.NAME`` from the
checkout), headless (SDL's dummy video driver) for a few frames (``--frames N``), and
exit 0. The mouse is scripted by posting events through ``pygame.event.get``. No test
compiles kernels: the scripts run on the numpy kernels (the same numbers), and the one
that runs the real warm-up does so with numba's JIT switched off."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
WINDOWED = ["rope", "cloth_tear", "custom_force"]

#: Runs ``examples.NAME`` with the scripted mouse of ``SCRIPT`` (a frame -> events table
#: written as ``(frame, kind, x, y, button)`` rows), on the numpy kernels.
DRIVER = """
import runpy, sys
import pygame
from sandbox.sim import backend
backend.INSTALLED = False        # the numpy kernels: nothing compiles, no warm-up child
name, frames, rows = sys.argv[1], sys.argv[2], eval(sys.argv[3])
KINDS = {"down": pygame.MOUSEBUTTONDOWN, "up": pygame.MOUSEBUTTONUP,
         "move": pygame.MOUSEMOTION, "key": pygame.KEYDOWN}
script = {}
for frame, kind, x, y, button in rows:
    event = (pygame.event.Event(KINDS[kind], key=button, mod=0) if kind == "key" else
             pygame.event.Event(KINDS[kind], pos=(x, y), button=button, rel=(0, 0),
                                buttons=(1, 0, 0)))
    script.setdefault(frame, []).append(event)
seen = [0]
real_get = pygame.event.get
def get(*args, **kwargs):
    events = real_get(*args, **kwargs) + script.get(seen[0], [])
    seen[0] += 1
    return events
pygame.event.get = get
sys.argv = [name, "--frames", frames]
runpy.run_module("examples." + name, run_name="__main__")
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SDL_VIDEODRIVER="dummy", SDL_AUDIODRIVER="dummy",
               PYGAME_HIDE_SUPPORT_PROMPT="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               **extra)
    return env


def _drive(tmp_path, name: str, frames: int, rows=()) -> str:
    r = subprocess.run([sys.executable, "-c", DRIVER, name, str(frames), repr(list(rows))],
                       cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr
    return r.stdout


def _drag(start: int, a, b, button: int = 1, steps: int = 10):
    """Press at ``a``, move to ``b`` over ``steps`` frames, let go: event rows."""
    rows = [(start, "down", *a, button)]
    for k in range(1, steps + 1):
        rows.append((start + k, "move", a[0] + (b[0] - a[0]) * k // steps,
                     a[1] + (b[1] - a[1]) * k // steps, button))
    return rows + [(start + steps + 1, "up", *b, button)]


def test_every_example_is_tested_here():
    assert sorted(p.stem for p in EXAMPLES.glob("*.py") if p.stem != "__init__") == sorted(
        [*WINDOWED, "orbit_compare"])


def test_the_rope_in_your_own_loop_is_under_40_lines():
    lines = (EXAMPLES / "rope.py").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 40, len(lines)


@pytest.mark.parametrize("name", WINDOWED)
def test_each_window_example_warms_up_before_its_loop_and_closes_the_warm_up(name):
    """A library user's first run is never a silent wait for the compiler: every example
    starts the public warm-up before it steps a world and stops it when it quits."""
    text = (EXAMPLES / f"{name}.py").read_text(encoding="utf-8")
    assert text.index("sandbox.start_background()") < text.index(".step(")
    assert "warm.status()" in text and "warm.close()" in text


def test_rope_grabbed_with_the_mouse(tmp_path):
    # The rope hangs from (-2, 2) m, 100 px a metre from the middle of 800 x 600: its
    # free end starts at (600, 100) px. Grab it there and swing it.
    _drive(tmp_path, "rope", 40, _drag(2, (600, 100), (450, 450), steps=20))


def test_cloth_torn_by_pulling_and_by_slicing(tmp_path):
    # The cloth's top row at y = 2 m is pinned (100 px); pull its middle down fast, then
    # slice across it with the right button.
    rows = [*_drag(5, (450, 300), (450, 680), steps=12),
            *_drag(30, (200, 420), (700, 420), button=3, steps=10)]
    out = _drive(tmp_path, "cloth_tear", 50, rows)
    m = re.search(r"cloth_tear: (\d+) links torn by pulling, (\d+) sliced", out)
    assert m, out
    assert int(m[1]) > 0 and int(m[2]) > 0, out


def test_cloth_reset_with_space(tmp_path):
    import pygame
    rows = [*_drag(2, (200, 420), (700, 420), button=3, steps=5),
            (10, "key", 0, 0, pygame.K_SPACE)]
    out = _drive(tmp_path, "cloth_tear", 15, rows)
    assert "links torn" in out


def test_custom_force_blows_the_curtain_downwind(tmp_path):
    out = _drive(tmp_path, "custom_force", 90)
    m = re.search(r"after ([\d.]+) s the curtain's mean sway is ([-+][\d.]+) m", out)
    assert m, out
    assert float(m[1]) == pytest.approx(1.5) and float(m[2]) > 0.1, out


def test_orbit_compare_prints_each_integrators_drift(tmp_path):
    r = subprocess.run([sys.executable, "-m", "examples.orbit_compare", "--orbits", "5"],
                       cwd=ROOT, env=_env(tmp_path, NUMBA_DISABLE_JIT="1"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()[2:]}
    assert set(rows) == {"euler", "velocity_verlet"}, r.stdout
    drift = {k: abs(float(v[0].rstrip("%"))) for k, v in rows.items()}
    assert drift["euler"] > 10 * drift["velocity_verlet"], r.stdout     # Euler gains
    r = subprocess.run([sys.executable, "-m", "examples.orbit_compare", "rk4"], cwd=ROOT,
                       env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "name two integrators" in r.stderr


def test_the_real_warm_up_starts_and_stops_with_an_example(tmp_path):
    """``python -m examples.rope --frames 5`` as a user runs it, with an empty kernel
    cache: the warm-up's child process starts (numba's JIT off, so it compiles nothing)
    and is gone when the example has quit; nothing said about compiling on stderr."""
    psutil = pytest.importorskip("psutil")
    cache = tmp_path / "numba"
    r = subprocess.run([sys.executable, "-m", "examples.rope", "--frames", "5"], cwd=ROOT,
                       env=_env(tmp_path, NUMBA_DISABLE_JIT="1"), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "compiling" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    left = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if "sandbox.warmup" in " ".join(p.info["cmdline"] or ()) and (
                    p.environ().get("NUMBA_CACHE_DIR") == str(cache)):
                left.append(p.pid)
        except (psutil.Error, OSError):
            continue
    assert not left, f"the warm-up's child outlived the example: {left}"

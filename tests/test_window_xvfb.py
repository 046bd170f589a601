"""End to end on a real X11 window: Xvfb, the app as a user starts it, xdotool as the user.

The app runs as ``python main.py play cloth`` with the x11 video driver on a private
Xvfb display; xdotool finds its window, presses F12 (the app's own screenshot), drags
the cloth with the mouse, presses I (next integrator), takes a second screenshot and
quits with Q. The two screenshots must differ and the app must exit with status 0.

Skipped when ``Xvfb`` or ``xdotool`` is not installed (``apt-get install xvfb xdotool``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    shutil.which("Xvfb") is None or shutil.which("xdotool") is None,
    reason="needs Xvfb and xdotool on PATH (apt-get install xvfb xdotool)")


def _free_display() -> int:
    for n in range(99, 200):
        if not (Path(f"/tmp/.X{n}-lock").exists() or Path(f"/tmp/.X11-unix/X{n}").exists()):
            return n
    pytest.skip("no free X display number in :99..:199")


def _wait_for(predicate, timeout: float, what: str, poll: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def xvfb():
    n = _free_display()
    proc = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "1280x800x24", "-nolisten",
                             "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: Path(f"/tmp/.X11-unix/X{n}").exists() or proc.poll() is not None,
                  10, "Xvfb to start")
        if proc.poll() is not None:
            pytest.skip(f"Xvfb :{n} could not start")
        yield f":{n}"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_real_window_screenshot_drag_and_integrator_key(xvfb, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SDL_VIDEODRIVER"}   # x11, not dummy
    env.update(DISPLAY=xvfb, VERLET_SANDBOX_OUT=str(tmp_path), PYTHONUNBUFFERED="1")
    log = (tmp_path / "app.log").open("w")
    app = subprocess.Popen([sys.executable, "main.py", "play", "cloth", "--frames", "3000"],
                           cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def xdo(*args, timeout: float = 20) -> str:
        return subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True,
                              timeout=timeout, check=True).stdout.strip()

    shots = tmp_path / "screenshots"

    def screenshot(count: int, wait: float = 10) -> Path:
        xdo("key", "F12")
        files = _wait_for(lambda: len(list(shots.glob("screenshot-*.png"))) >= count and sorted(
            shots.glob("screenshot-*.png")), wait, f"screenshot {count}")
        return sorted(files, key=lambda p: p.stat().st_mtime_ns)[-1]

    try:
        # SDL sets WM_NAME with an encoding that xdotool's --name matching cannot read in
        # a C locale, so the window is found by its class and its title checked after.
        wid = xdo("search", "--sync", "--classname", "verlet-sandbox").split()[0]
        _wait_for(lambda: "Verlet Sandbox" in xdo("getwindowname", wid), 10, "the title")
        geometry = xdo("getwindowgeometry", "--shell", wid)
        size = dict(line.split("=") for line in geometry.splitlines())
        w, h = int(size["WIDTH"]), int(size["HEIGHT"])
        xdo("mousemove", "--window", wid, str(w // 2), str(h // 2))
        xdo("windowfocus", wid)
        time.sleep(1.0)                              # a few frames drawn
        # The first start of a fresh checkout compiles the kernels before the first frame
        # (the window says so); the key waits in the queue until then.
        first = screenshot(1, wait=120)

        # Drag from just below the middle of the window (inside the cloth level's cloth)
        # up and to the right, in small moves as a hand would.
        x0, y0 = w // 2, int(h * 0.55)
        xdo("mousemove", "--window", wid, str(x0), str(y0))
        xdo("mousedown", "1")
        for k in range(1, 13):
            xdo("mousemove", "--window", wid, str(x0 + 15 * k), str(y0 - 8 * k))
            time.sleep(0.03)
        time.sleep(0.3)
        xdo("mouseup", "1")
        xdo("key", "i")                              # next integrator
        time.sleep(0.5)
        second = screenshot(2)
        xdo("key", "q")
        assert app.wait(20) == 0, (tmp_path / "app.log").read_text()
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
        log.close()

    import pygame

    a, b = pygame.image.load(first), pygame.image.load(second)
    assert a.get_size() == b.get_size() == (w, h)
    assert pygame.image.tobytes(a, "RGB") != pygame.image.tobytes(b, "RGB")
    assert "Traceback" not in (tmp_path / "app.log").read_text()

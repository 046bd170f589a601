"""End to end on a real X11 window: Xvfb, the app as a user starts it, xdotool as the user.

The app runs as ``python main.py play playground`` with the x11 video driver on a
private Xvfb display, and xdotool drives every gesture of the help screen with real
modifier keys and real button presses: Shift+left drag cuts, right click pins, middle
drag pans, the wheel zooms, the window is resized, left drag holds the pendulum's bob
with the mouse spring and a quick flick throws it. The assertions are on the world:
F5 writes a snapshot after each gesture and the test reads it. Where a gesture needs a
screen position, the test asks the app's own camera (an ``App`` built headless for the
same window size) where a particle is drawn; after a pan, a zoom and a resize the
right click lands on the particle the new view predicts, which checks the view too.

Skipped when ``Xvfb`` or ``xdotool`` is not installed (``apt-get install xvfb xdotool``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sandbox.sim.world import WorldConfig

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    shutil.which("Xvfb") is None or shutil.which("xdotool") is None,
    reason="needs Xvfb and xdotool on PATH (apt-get install xvfb xdotool)")


def _free_display() -> int:
    for n in range(99, 200):
        if not (Path(f"/tmp/.X{n}-lock").exists() or Path(f"/tmp/.X11-unix/X{n}").exists()):
            return n
    pytest.skip("no free X display number in :99..:199")


def _wait_for(predicate, timeout: float, what: str, poll: float = 0.05):
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


def app_camera(size, after_input: bool = False):
    """The camera the app fits for a window of ``size`` on the playground level; with
    ``after_input``, as after a person's first key or click, when the level's caption
    no longer holds the scene above it (a resize then fits the whole free area)."""
    import pygame

    from sandbox.app.main import App, scene_from_level

    pygame.display.init()
    if pygame.display.get_surface() is None:     # the panel's images need a pixel format
        pygame.display.set_mode((1, 1))
    app = App(scene_from_level("playground"), size=size)
    if after_input:
        app._first_input()
        app.reset_view()
    return app.camera


class Snapshots:
    """F5 and read the newest snapshot: positions, velocities, pins and links."""

    def __init__(self, xdo, folder: Path):
        self.xdo, self.folder, self.count = xdo, folder, 0

    def take(self, wait: float = 20) -> dict:
        self.xdo("key", "F5")
        self.count += 1
        files = _wait_for(lambda: len(list(self.folder.glob("snapshot-*.npz"))) >= self.count
                          and list(self.folder.glob("snapshot-*.npz")), wait,
                          f"snapshot {self.count}")
        newest = max(files, key=lambda p: p.stat().st_mtime_ns)
        time.sleep(0.1)                                # the rename is atomic; be gentle
        with np.load(newest) as z:
            return {"x": z["p_x"], "v": z["p_v"], "w": z["p_inv_mass"], "i": z["c_i"]}


class RealApp:
    """``python main.py play LEVEL`` on the Xvfb ``display`` (x11, not the dummy driver),
    its output in ``tmp_path / "app.log"``, with xdotool at hand (:meth:`xdo`)."""

    def __init__(self, display: str, tmp_path: Path, level: str) -> None:
        self.env = {k: v for k, v in os.environ.items() if k != "SDL_VIDEODRIVER"}
        self.env.update(DISPLAY=display, VERLET_SANDBOX_OUT=str(tmp_path),
                        PYTHONUNBUFFERED="1")
        self.log_path = tmp_path / "app.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen([sys.executable, "main.py", "play", level, "--frames",
                                      "100000"], cwd=ROOT, env=self.env, stdout=self._log,
                                     stderr=subprocess.STDOUT)

    def xdo(self, *args, timeout: float = 20) -> str:
        return subprocess.run(["xdotool", *map(str, args)], env=self.env,
                              capture_output=True, text=True, timeout=timeout,
                              check=True).stdout.strip()

    def window(self) -> str:
        """The visible window's id once it has its title (SDL may create helper windows
        of the same class)."""
        wid = self.xdo("search", "--sync", "--onlyvisible", "--classname",
                       "verlet-sandbox").split()[-1]
        _wait_for(lambda: "Verlet Sandbox" in self.xdo("getwindowname", wid), 10,
                  "the title")
        return wid

    def quit(self) -> None:
        """Q, as a person closes it: the app exits 0."""
        self.xdo("key", "q")
        assert self.proc.wait(20) == 0, self.log_path.read_text()

    def close(self) -> str:
        """Stop the app if it still runs; its output, with no traceback in it."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        text = self.log_path.read_text()
        assert "Traceback" not in text, text
        return text


def test_every_mouse_gesture_at_a_real_window(xvfb, tmp_path):
    real = RealApp(xvfb, tmp_path, "playground")
    xdo = real.xdo

    def at(cam, world_point):
        s = cam.to_screen(np.asarray(world_point, float))
        return int(round(s[0])), int(round(s[1]))

    def move(p):
        xdo("mousemove", "--window", wid, p[0], p[1])

    def right_click(p):
        move(p)
        time.sleep(0.05)
        xdo("click", "3")
        time.sleep(0.25)

    def geometry():
        g = dict(line.split("=") for line in xdo("getwindowgeometry", "--shell",
                                                  wid).splitlines())
        return int(g["WIDTH"]), int(g["HEIGHT"])

    snaps = Snapshots(xdo, tmp_path / "snapshots")
    try:
        wid = real.window()
        size = geometry()
        cam = app_camera(size)
        move((size[0] // 2, size[1] // 2))
        xdo("windowfocus", wid)
        time.sleep(1.0)
        xdo("key", "space")                              # pause: positions hold still
        s0 = snaps.take(wait=120)                        # a first start may compile
        x = s0["x"]
        cloth = np.arange(300)                           # the playground's first body
        assert (s0["w"][cloth] == 0).sum() == 20         # pinned along its top row

        # Shift + left drag across the cloth between two rows: links are cut.
        rows = x[cloth].reshape(15, 20, 2)
        y_cut = float(rows[7:9, :, 1].mean())
        a = at(cam, [rows[:, :, 0].min() - 0.3, y_cut])
        b = at(cam, [rows[:, :, 0].max() + 0.3, y_cut])
        move(a)
        xdo("keydown", "shift")
        xdo("mousedown", "1")
        for k in range(1, 11):
            move((a[0] + (b[0] - a[0]) * k // 10, a[1]))
            time.sleep(0.02)
        xdo("mouseup", "1")
        xdo("keyup", "shift")
        time.sleep(0.3)
        s1 = snaps.take()
        cut = len(s0["i"]) - len(s1["i"])
        assert cut >= 20, f"Shift+drag cut {cut} links"   # 20 vertical links at least
        assert np.array_equal(s1["w"], s0["w"])           # and grabbed nothing

        # Right click pins the particle under the cursor.
        def pin_check(cam_now, k, what):
            before = snaps.take()
            assert before["w"][k] > 0
            right_click(at(cam_now, x[k]))
            after = snaps.take()
            assert after["w"][k] == 0, f"{what}: particle {k} not pinned"
            assert ((after["w"] == 0) != (before["w"] == 0)).sum() == 1

        pin_check(cam, int(rows.shape[1] * 14 + 10), "right click")

        # Middle drag pans: the same particle is now drawn (80, 40) px further.
        c = (size[0] // 2, size[1] // 2)
        move(c)
        xdo("mousedown", "2")
        for k in range(1, 5):
            move((c[0] + 20 * k, c[1] + 10 * k))
            time.sleep(0.02)
        xdo("mouseup", "2")
        time.sleep(0.2)
        cam.pan_pixels(80, 40)
        pin_check(cam, int(20 * 14 + 4), "after a middle-drag pan")

        # The wheel zooms about the cursor.
        z = at(cam, x[20 * 13 + 15])
        move(z)
        time.sleep(0.05)
        xdo("click", "4")
        time.sleep(0.2)
        cam.zoom_at(z, 1.15)
        pin_check(cam, int(20 * 12 + 8), "after a wheel zoom")

        # A resize fits the level's view again inside the area the HUD leaves free.
        xdo("windowsize", wid, 1000, 700)
        _wait_for(lambda: geometry() == (1000, 700), 10, "the resize")
        time.sleep(0.5)
        pin_check(app_camera((1000, 700), after_input=True), int(20 * 12 + 14),
                  "after a resize")
        cam = app_camera((1000, 700), after_input=True)

        # Left drag holds the pendulum's bob with the mouse spring; a flick throws it.
        s = snaps.take()
        bob = int(np.argmax(np.where(s["w"] > 0, s["x"][:, 0], -np.inf)))  # rightmost
        pivot = np.array([3.0, 2.5])
        move(at(cam, s["x"][bob]))
        time.sleep(0.05)
        xdo("mousedown", "1")
        xdo("key", "space")                              # run, holding it
        goal = pivot + 1.5 * np.array([np.sin(-0.6), -np.cos(-0.6)])
        start = np.array(at(cam, s["x"][bob]), float)
        end = np.array(at(cam, goal), float)
        for k in range(1, 16):
            move(tuple(int(v) for v in start + (end - start) * k / 15))
            time.sleep(0.03)
        time.sleep(1.5)                                  # settles on the spring
        held = snaps.take()
        assert np.linalg.norm(held["x"][bob] - goal) < 0.15, held["x"][bob]
        assert held["w"][bob] > 0                        # a spring, not a pin
        # A flick as a hand makes it: a steady sweep across the bottom, let go while
        # still moving (the frames in between, however slow, see the hand move).
        start = np.array(at(cam, goal), float)
        end = np.array(at(cam, pivot + 1.5 * np.array([np.sin(0.6), -np.cos(0.6)])), float)
        # One xdotool call for the whole sweep, so its pace is xdotool's sleeps (0.3 s,
        # about 5 m/s) and not the time it takes to start 15 processes on a busy machine.
        sweep = []
        for k in range(1, 16):
            px, py = (int(v) for v in start + (end - start) * k / 15)
            sweep += ["mousemove", "--window", wid, px, py, "sleep", "0.02"]
        xdo(*sweep, "mouseup", "1")
        thrown = snaps.take()
        # The throw is the spring's work: energy per kg (0.5 v^2 - g.x) gained over the
        # bob at rest in the hand. Compared as energy, not as a speed, so the moment F5
        # is handled (near a turning point or the bottom of the swing) does not matter;
        # a pendulum let go from rest gains nothing (the level's 0.05/s drag only loses).
        g = np.array(WorldConfig().gravity)

        def energy(snap):
            return 0.5 * float(snap["v"][bob] @ snap["v"][bob]) - float(g @ snap["x"][bob])
        gain = energy(thrown) - energy(held)
        assert gain > 2.0, f"the flick added {gain:.3f} J/kg (speed {thrown['v'][bob]})"

        real.quit()
    finally:
        text = real.close()
    assert "failed" not in text, text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/Wayland variables")
def test_no_display_says_so_and_exits_1(tmp_path):
    """With no usable display SDL falls back to an offscreen driver; the app must say so
    on one line and exit 1 instead of running with no window."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SDL_VIDEODRIVER", "DISPLAY", "WAYLAND_DISPLAY")}
    env["VERLET_SANDBOX_OUT"] = str(tmp_path)
    r = subprocess.run([sys.executable, "main.py", "play", "cloth", "--frames", "5"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "display" in lines[0] and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1                      # that line and nothing else
    # A display that cannot be opened: SDL falls back to "offscreen"; the same refusal.
    env["DISPLAY"] = ":1999"
    r = subprocess.run([sys.executable, "main.py", "play", "cloth", "--frames", "5"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "':1999' cannot be opened" in r.stderr
    # Asked for on purpose: runs without a window and exits 0.
    env["SDL_VIDEODRIVER"] = "dummy"
    r = subprocess.run([sys.executable, "main.py", "play", "cloth", "--frames", "5"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_exploring_keys_at_a_real_window_are_recorded_and_replay_bit_for_bit(xvfb, tmp_path):
    """Issue 37's controls pressed on a real X window, as a person does: gravity up (Y),
    the bounce (O), softer links (Z), all integrators side by side (A, then off), the
    graph's quantity (U) and its axis (J), then F6. The replay file holds each as a
    command (the ensemble is a comparison computed from the world, not an input: it is
    not in the file) and plays back headless to the state hash it recorded."""
    import json

    real = RealApp(xvfb, tmp_path, "bridge")
    try:
        wid = real.window()
        real.xdo("windowfocus", wid)
        time.sleep(1.0)
        for key in ("y", "y", "o", "z", "a", "u", "j", "a"):
            real.xdo("key", "--window", wid, key)
            time.sleep(0.4)
        time.sleep(1.0)
        real.xdo("key", "--window", wid, "F6")
        files = _wait_for(lambda: list((tmp_path / "replays").glob("*.replay.json")), 20,
                          "the replay file")
        real.quit()
    finally:
        real.close()
    replay = files[0]
    words = json.dumps(json.loads(replay.read_text())["events"])
    for command in ('"set", "gravity"', '"set", "restitution"', '"set", "link_softness"',
                    '"plot"'):
        assert command in words, f"{command} not recorded: {words[:400]}"
    run = subprocess.run([sys.executable, "main.py", "replay", "--headless", str(replay)],
                         cwd=ROOT, env=real.env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr

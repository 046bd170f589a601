"""``python main.py bench --levels``: every shipped level through the window's own frame.

Each level runs in the real app loop (:meth:`App.frame`: steps, energy sample, trails,
HUD, panel, drawing and the display flip) on SDL's dummy video driver, at 1280 x 800,
with the kernels loaded beforehand (start-up is timed by ``bench --startup``): first
``WARM`` frames untimed, then ``frames`` timed frames with the trails on; halfway a real
G key event starts the ghost. Each frame is handed the time the last one took, at least
1/60 s, as the window's loop (capped at 60 fps) does. Printed per level: the median and
the worst frame, and the worst frame from G on.

Targets (a 2-core machine, idle): median <= 16.7 ms (60 fps), no frame over 50 ms, and
G's worst frame under 50 ms.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from dataclasses import dataclass

#: Untimed frames after a level opens (its caches, the first draw, the phase portrait).
WARM = 30
#: Targets, ms.
MEDIAN_MS, WORST_MS, G_MS = 1000 / 60, 50.0, 50.0


@dataclass
class LevelTiming:
    level: str
    median_ms: float
    worst_ms: float
    worst_after_g_ms: float
    ghost: str

    @property
    def meets(self) -> bool:
        return (self.median_ms <= MEDIAN_MS and self.worst_ms <= WORST_MS
                and self.worst_after_g_ms <= G_MS)


def time_level(name: str, frames: int = 300, size=(1280, 800)) -> LevelTiming:
    """One level's frame times, as the module docstring says."""
    import pygame

    from .app.main import App
    from .app.session import scene_from_level

    pygame.display.init()
    pygame.font.init()
    screen = pygame.display.set_mode(size)
    pygame.event.clear()
    app = App(scene_from_level(name), screen=screen)
    try:
        app.show_trails = True
        dt = 1 / 60
        for _ in range(WARM):
            app.frame(dt)
        gc.collect()
        times: list[float] = []
        g_at = frames // 2
        for k in range(frames):
            if k == g_at:
                if app.ghost is not None:            # a level that opens with one
                    app.do("toggle_ghost")
                pygame.event.post(pygame.event.Event(
                    pygame.KEYDOWN, unicode="g", key=pygame.K_g, mod=0, scancode=10,
                    window=None))
                pygame.event.post(pygame.event.Event(
                    pygame.KEYUP, unicode="g", key=pygame.K_g, mod=0, scancode=10,
                    window=None))
            t0 = time.perf_counter()
            app.frame(dt)
            took = time.perf_counter() - t0
            times.append(took)
            dt = max(took, 1 / 60)
        ms = [t * 1e3 for t in times]
        ghost = app.ghost.integrator.name if app.ghost is not None else "none"
        return LevelTiming(name, statistics.median(ms), max(ms), max(ms[g_at:]), ghost)
    finally:
        app.close()


def run_levels(names=None, frames: int = 300, echo=print) -> list[LevelTiming]:
    """Every shipped level (or ``names``), the kernels compiled and loaded first."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    from . import levels, warmup
    from .app.main import KERNEL_EXTRAS

    warmup.warm_up(("float64", "float32"), ("float64",), extra=KERNEL_EXTRAS)
    out = []
    for name in names or levels.level_names():
        t = time_level(name, frames)
        echo(f"{t.level:<26} {t.median_ms:7.1f} {t.worst_ms:8.1f} {t.worst_after_g_ms:9.1f}"
             f"   {t.ghost:<16} {'ok' if t.meets else 'SLOW'}")
        out.append(t)
    return out


def command(args) -> int:
    """``bench --levels``; returns the exit code (0: every level ran)."""
    only = [s for s in (args.only or "").split(",") if s] or None
    frames = args.frames or (120 if args.quick else 300)
    print(f"every level in the window's frame, {frames} frames each (G at the middle), "
          "1280 x 800, dummy video driver; ms")
    print(f"{'level':<26} {'median':>7} {'worst':>8} {'after G':>9}   {'ghost':<16} "
          f"target: {MEDIAN_MS:.1f} / {WORST_MS:.0f} / {G_MS:.0f}")
    try:
        run_levels(only, frames)
    except ValueError as e:
        print(f"error: {e}")
        return 2
    return 0

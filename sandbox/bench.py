"""The benchmark: a table of named scenarios, timed frame by frame against pymunk in one process.

A *scenario* is a level file, ``levels/bench/<name>.toml`` (world settings, bodies,
shapes, view and title; ``python main.py play bench:<name>`` opens it in the window),
plus a row of bench-only settings in :func:`_table` (frames, quick, group, settling, the
twin). It is built by ``levels.build_world`` as every level is, so the benchmark can
never drift from a private copy, and the pymunk *twin* (``sandbox.reference``) is then
made from the built world's own arrays: the same particles, masses, pins, links, walls
and shapes, so both engines run one scene.

One *frame* is ``world.step(1/60)`` with the scene's substeps and iterations (physics),
then drawing the world offscreen on a real 1280 x 800 ``pygame.Surface`` (rendering), with
the app's renderer when it can be imported. pymunk's frame is one ``space.step(1/60)``
with ``space.iterations`` equal to our pass count ``substeps x iterations``. The timing
is Box2D's benchmark recipe: warm up (numba kernels compiled or loaded from their disk
cache, then two untimed frames of each engine), then ``rounds`` rounds, each ``frames``
of ours followed by ``frames`` of pymunk (round-robin, so a slow spell of a shared
machine hits both), with the garbage collector off while a round runs. A round gives one
ms-per-frame value; the table shows the median over rounds and the min..max spread.

The targets are printed beside the numbers as PASS or FAIL; nothing here asserts them
(the tests check correctness only).
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import gc
import io
import json
import math
import os
import platform
import pstats
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from . import levels, warmup
from .atomic import atomic_write_text
from .load import LoadMeter
from .reference import PymunkTwin
from .reference import versions as reference_versions
from .sim import backend, cores
from .sim.world import World

# Offscreen drawing: a plain Surface needs no display, but keep SDL from looking for one.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

H = 1.0 / 60.0                      # s: one frame
SCREEN = (1280, 800)                # px: the offscreen surface
ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
ROUNDS, QUICK_ROUNDS = 7, 3


# --------------------------------------------------------------------------- scenarios

@dataclass(frozen=True)
class Scenario:
    """One named benchmark scene: the level ``levels/bench/<name>.toml`` (its world,
    bodies, shapes, view and title; ``python main.py play bench:<name>`` opens it) and
    the settings only the benchmark has.

    ``needs`` names ``World`` attributes the scene cannot run without; ``settle`` frames
    are run untimed by both engines first, so a pile is timed as a pile, not a falling
    block; ``twin`` says whether pymunk runs it too, ``no_twin`` why not.
    """

    name: str
    group: str
    frames: int = 10                # frames per round
    quick: bool = True              # part of --quick
    twin: bool = True               # has a pymunk twin
    no_twin: str = ""               # why not, when it has none
    needs: tuple[str, ...] = ()
    settle: int = 0                 # untimed frames of both engines before the warm-up

    @property
    def path(self) -> Path:
        return levels.BENCH_DIR / f"{self.name}.toml"

    @cached_property
    def level(self) -> levels.Level:
        """The scene's level, read once (a ``LevelError`` naming the file if broken)."""
        return levels.load_level(self.path)

    @property
    def title(self) -> str:
        return self.level.name

    @property
    def view(self) -> tuple[tuple[float, float], float]:
        """Centre (m) and width (m) of the drawing: the level's ``[view]``."""
        return tuple(self.level.view.center), self.level.view.width

    @property
    def passes(self) -> int:
        """Constraint passes per frame: substeps x iterations (pymunk's iterations)."""
        w = self.level.world
        return w.substeps * max(w.iterations, 1)

    @property
    def shapes(self) -> list[dict]:
        """The static shapes as ``[[shapes]]`` tables, for the pymunk twin."""
        return [s.model_dump() for s in self.level.shapes]


_NO_SUBSTEPS = ("pymunk has no substeps: its twin is the cloth100_shear row "
                "(iterations = 20)")
_FLOAT64_ONLY = "pymunk computes in float64 only: compare with the float64 row"
_NO_NBODY = "pymunk has no n-body gravity (only a uniform field)"
_SAME_WORK = ("the C reference's work (one step, 20 passes): pymunk's twin is the "
              "cloth200_shear row (iterations = 20)")


def _table() -> tuple[Scenario, ...]:
    """The bench-only settings of every scene, in table order; the scenes themselves
    are the files in ``levels/bench/``."""
    frames = {50: 30, 100: 15, 200: 8}
    cloths = [Scenario(f"cloth{n}{s}", "cloth", frames[n]) for n in (50, 100, 200)
              for s in ("", "_shear")]
    f32 = [Scenario(f"cloth{n}{s}_f32", "float32", frames[n], quick=(n == 200 and s != ""),
                    twin=False, no_twin=_FLOAT64_ONLY) for n in (100, 200) for s in ("", "_shear")]
    trade = [Scenario(f"cloth100_shear_{sub}", "trade-off", 15, twin=False,
                      no_twin=_NO_SUBSTEPS) for sub in ("1x20", "5x4")]
    # The C reference's own work (one Verlet step and 20 passes), for its ratio.
    same = [Scenario(f"cloth200_shear_1x20{s}", "same work", 8, quick=(s != ""), twin=False,
                     no_twin=_SAME_WORK) for s in ("", "_f32")]
    nbody = [Scenario(f"nbody{n}_{i}", "n-body", f, twin=False, no_twin=_NO_NBODY)
             for n, i, f in ((100, "vv", 60), (100, "rk4", 30), (1000, "vv", 10),
                             (1000, "rk4", 5))]
    return (*cloths, *f32, *trade, *same, Scenario("rope1000", "rope", 30),
            Scenario("soft_blob", "soft body", 30), *nbody,
            Scenario("pile2000", "pile", 8, needs=("add_shape",), settle=60))


#: Every scenario by name, in table order.
SCENARIOS: dict[str, Scenario] = {s.name: s for s in _table()}


def skip_reason(sc: Scenario) -> str | None:
    """Why a scenario cannot run on this code base, or None."""
    if any(not hasattr(World, a) for a in sc.needs):
        return "skipped: colliders not available"
    return None


# --------------------------------------------------------------------------- drawing

class Drawer:
    """Draws a world offscreen on a real 32-bit ``pygame.Surface``, as the app would.

    Uses the app's ``WorldRenderer`` and ``Camera`` (background, shapes, strain colours,
    links, particles, pins: ``App.draw`` without the HUD) when ``sandbox.app`` can be
    imported; otherwise, or if the app's renderer raises, the minimal batched renderer
    below. ``kind`` says which one drew.
    """

    def __init__(self, size: tuple[int, int] = SCREEN, prefer_app: bool = True) -> None:
        import pygame

        self.surface = pygame.Surface(size, 0, 32)
        self.size = size
        self.note = ""
        self._app = None
        if prefer_app:
            try:
                from .app.camera import Camera
                from .app.render import WorldRenderer
            except ImportError as e:
                self.note = f"app renderer not importable ({e}); minimal renderer"
            else:
                self._app = (WorldRenderer(), Camera(size))
        self.kind = "app" if self._app else "minimal"
        self.center, self.width = np.zeros(2), 10.0

    def view(self, center, width: float) -> None:
        self.center, self.width = np.asarray(center, float), float(width)
        if self._app is not None:
            self._app[1].frame(center, width)

    def draw(self, world: World) -> None:
        if self._app is not None:
            try:
                r, cam = self._app
                surf = self.surface
                r.background(surf, cam, world.config.bounds)
                view = world.view()                  # what the window draws from
                r.shapes(surf, cam, view.shapes)
                r.world(surf, cam, view)
                return
            except Exception as e:       # the app is someone else's moving target
                self.note = f"app renderer failed ({type(e).__name__}: {e}); minimal renderer"
                self._app = None
                self.kind = "minimal"
        draw_minimal(self.surface, world, self.center, self.size[0] / self.width)


def draw_minimal(surface, world: World, center, scale: float) -> None:
    """Every link as a sampled line and every particle as a pixel, with a few numpy
    assignments into ``pygame.surfarray.pixels2d`` (never one draw call per link).

    A link ``p -> q`` of ``L`` px along its longer axis gets ``n`` samples, ``n`` the
    power of two at or above ``L + 1`` (at most 256): the links are grouped by ``n`` so
    each group is one ``(links, n)`` broadcast.
    """
    import pygame

    w, h = surface.get_size()
    surface.fill((18, 20, 27))
    s = (world.particles.x - np.asarray(center, float)) * (scale * np.array([1.0, -1.0]))
    s += np.array([w / 2, h / 2])
    link = surface.map_rgb((185, 190, 205))
    dot = surface.map_rgb((225, 228, 236))
    pix = pygame.surfarray.pixels2d(surface)            # (W, H) view, locks the surface
    try:
        c = world.constraints
        if len(c):
            p, q = s[c.i], s[c.j]
            d = q - p
            span = np.nan_to_num(np.abs(d).max(axis=1), nan=0.0, posinf=256, neginf=0)
            n = 2 ** np.ceil(np.log2(np.clip(span, 1.0, 255.0) + 1.0)).astype(int)
            for k in np.unique(n):
                sel = n == k
                t = np.linspace(0.0, 1.0, k)
                pts = p[sel, None, :] + t[None, :, None] * d[sel, None, :]
                _plot(pix, pts.reshape(-1, 2), link, w, h)
        _plot(pix, s, dot, w, h)
    finally:
        del pix


def _plot(pix: np.ndarray, pts: np.ndarray, colour: int, w: int, h: int) -> None:
    with np.errstate(invalid="ignore"):
        ok = (pts[:, 0] >= 0) & (pts[:, 0] < w) & (pts[:, 1] >= 0) & (pts[:, 1] < h)
    ij = pts[ok].astype(np.intp)
    pix[ij[:, 0], ij[:, 1]] = colour


# --------------------------------------------------------------------------- measuring

CSV_COLUMNS = [
    "name", "group", "title", "status", "particles", "constraints", "dtype", "integrator",
    "substeps", "iterations", "passes", "rounds", "frames",
    "physics_ms", "physics_ms_min", "physics_ms_max", "physics_ms_q1", "physics_ms_q3",
    "render_ms", "render_ms_min", "render_ms_max", "frame_ms", "steps_per_s",
    "substeps_per_s", "error_mean", "error_max",
    "pymunk_ms", "pymunk_ms_min", "pymunk_ms_max", "ratio", "pymunk_error_mean",
    "pymunk_error_max", "pymunk_settings", "build_ms", "pymunk_build_ms", "first_frame_ms",
    "renderer", "note", "cref_ms", "cref_ratio", "threads",
]


def _stats(values: list[float], key: str) -> dict[str, float]:
    a = np.asarray(values, float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {key: float(med), f"{key}_min": float(a.min()), f"{key}_max": float(a.max()),
            f"{key}_q1": float(q1), f"{key}_q3": float(q3)}


def _error_summary(errors: list[tuple[float, float]]) -> tuple[float, float]:
    """The constraint error reached: the median over round ends of the mean relative
    stretch, and the largest max stretch seen at a round end. A swinging cloth's stretch
    at one instant varies by several times; over seven instants it is comparable."""
    a = np.asarray(errors, float)
    return float(np.median(a[:, 0])), float(a[:, 1].max())


def _row(sc: Scenario) -> dict[str, Any]:
    cfg = sc.level.world
    row: dict[str, Any] = {k: None for k in CSV_COLUMNS}
    row.update(name=sc.name, group=sc.group, title=sc.title, dtype=cfg.dtype,
               integrator=cfg.integrator, substeps=cfg.substeps, iterations=cfg.iterations,
               passes=sc.passes, note="")
    if not sc.twin:
        row["pymunk_settings"] = f"none: {sc.no_twin}"
    return row


def run_scenario(sc: Scenario, rounds: int, frames: int, drawer: Drawer | None,
                 pymunk: bool = True, tick: Callable[[int], None] | None = None
                 ) -> dict[str, Any]:
    """Build, warm up and time one scenario; returns its row (``CSV_COLUMNS`` keys plus
    the per-round values). A failure of our engine is reported in ``status``."""
    row = _row(sc)
    tick = tick or (lambda n: None)
    use_twin = pymunk and sc.twin
    total = rounds * frames * (2 if use_twin else 1)
    reason = skip_reason(sc)
    if reason:
        row["status"] = reason
        tick(total)
        return row
    try:
        t0 = time.perf_counter()
        world = levels.build_world(sc.level)
        row["build_ms"] = 1e3 * (time.perf_counter() - t0)
        row["particles"], row["constraints"] = world.n, len(world.constraints)
        twin = None
        if use_twin:
            t0 = time.perf_counter()
            twin = PymunkTwin(world, sc.shapes)
            row["pymunk_build_ms"] = 1e3 * (time.perf_counter() - t0)
            row["pymunk_settings"] = twin.settings
        elif pymunk is False and sc.twin:
            row["pymunk_settings"] = "not run (--no-pymunk)"
        if drawer is not None:
            drawer.view(*sc.view)
        # Warm-up: the first frame compiles any new kernel specialisation (float32).
        t0 = time.perf_counter()
        world.step(H)
        row["first_frame_ms"] = 1e3 * (time.perf_counter() - t0)
        for _ in range(sc.settle):
            world.step(H)
            if twin is not None:
                twin.step()
        world.step(H)
        if drawer is not None:
            drawer.draw(world)
            drawer.draw(world)
        if twin is not None:
            twin.step()
            twin.step()
        phys, rend, frame, pm = [], [], [], []
        err, pm_err = [], []          # (mean, max) stretch at the end of every round
        links = len(world.constraints) > 0
        clock = time.perf_counter
        gc_was = gc.isenabled()
        try:
            for _ in range(rounds):
                gc.collect()
                gc.disable()
                tp = tr = 0.0
                for _ in range(frames):
                    a = clock()
                    world.step(H)
                    b = clock()
                    if drawer is not None:
                        drawer.draw(world)
                    tp += b - a
                    tr += clock() - b
                phys.append(1e3 * tp / frames)
                rend.append(1e3 * tr / frames)
                frame.append(1e3 * (tp + tr) / frames)
                tick(frames)
                if twin is not None:
                    # Timed as ours is: frame by frame with the same drawing between
                    # frames, so both engines start each step with the caches a frame
                    # of drawing leaves (back to back, pymunk's stayed warm).
                    tq = 0.0
                    for _ in range(frames):
                        a = clock()
                        twin.step()
                        tq += clock() - a
                        if drawer is not None:
                            drawer.draw(world)
                    pm.append(1e3 * tq / frames)
                    tick(frames)
                if gc_was:
                    gc.enable()
                if links:                 # measured between rounds, never timed
                    err.append(world.constraint_error())
                    if twin is not None:
                        pm_err.append(twin.constraint_error())
        finally:
            if gc_was:
                gc.enable()
    except Exception as e:          # a float32 kernel failure is a result, not a crash
        row["status"] = f"failed: {type(e).__name__}: {e}"
        return row
    row.update(_stats(phys, "physics_ms"))
    row.update({k: v for k, v in _stats(rend, "render_ms").items() if not k.endswith("q3")
                and not k.endswith("q1")})
    row["frame_ms"] = float(np.median(frame))
    row["rounds"], row["frames"] = rounds, frames
    row["steps_per_s"] = 1e3 / row["physics_ms"]
    row["substeps_per_s"] = row["steps_per_s"] * world.config.substeps
    if err:
        row["error_mean"], row["error_max"] = _error_summary(err)
        row["rounds_error"] = [list(e) for e in err]
    row["renderer"] = drawer.kind if drawer is not None else "none"
    row["rounds_physics_ms"], row["rounds_render_ms"] = phys, rend
    notes = [f"timed after {sc.settle} untimed settling frames"] if sc.settle else []
    if row["first_frame_ms"] > 5 * row["physics_ms"] + 50:
        notes.append(f"first frame {row['first_frame_ms']:.0f} ms (kernel specialisation "
                     "compiled or loaded; not timed)")
    if drawer is not None and drawer.note:
        notes.append(drawer.note)
    if twin is not None:
        st = _stats(pm, "pymunk_ms")
        row.update(pymunk_ms=st["pymunk_ms"], pymunk_ms_min=st["pymunk_ms_min"],
                   pymunk_ms_max=st["pymunk_ms_max"], rounds_pymunk_ms=pm,
                   ratio=st["pymunk_ms"] / row["physics_ms"])
        if pm_err:
            row["pymunk_error_mean"], row["pymunk_error_max"] = _error_summary(pm_err)
            row["rounds_pymunk_error"] = [list(e) for e in pm_err]
        if not twin.is_finite():
            notes.append("pymunk state became non-finite")
    elif not sc.twin:
        notes.append(f"no pymunk twin: {sc.no_twin}")
    row["note"] = "; ".join(notes)
    row["status"] = "ok"
    return row


# --------------------------------------------------------------------------- load

#: A busy process: pure CPU, and it stops by itself once the bench is gone (its parent).
_BUSY = ("import os\np = os.getppid()\nwhile os.getppid() == p:\n"
         "    for _ in range(200000):\n        pass\n")


class BusyLoad:
    """``n`` busy processes beside the timed runs (``bench --load N``): started on enter,
    stopped on exit, also on Ctrl+C or an error (and each stops by itself if the bench
    process dies)."""

    def __init__(self, n: int) -> None:
        self.n = max(int(n), 0)
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> BusyLoad:
        try:
            for _ in range(self.n):
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-c", _BUSY], stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        except BaseException:
            self.stop()
            raise
        if self.n:
            time.sleep(0.3)                 # let them reach full speed
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:      # pragma: no cover
                proc.kill()
                proc.wait()
        self.procs.clear()

    def running(self) -> int:
        return sum(p.poll() is None for p in self.procs)


# --------------------------------------------------------------------------- C reference

CREF_SOURCE = ROOT / "bench" / "cref" / "grid.c"
CREF_N, CREF_PASSES = 200, 20
_CREF_L0 = 3.5          # grid spacing of the C frame; its time does not depend on it


def _perm_index(r: int, n: int) -> int:
    """Position of row (or column) ``r`` in the even-then-odd order of ``n`` rows."""
    return r // 2 if r % 2 == 0 else (n + 1) // 2 + r // 2


def _axis_pair(n: int, parity: int, off: int, lo: int):
    """Sources ``s >= lo`` of ``parity`` with ``0 <= s + off < n`` as (source slice,
    target slice) in permuted coordinates, or None."""
    if off == 0:
        return slice(1 if lo else 0, n), slice(1 if lo else 0, n)
    src = [s for s in range(lo, n) if s % 2 == parity and 0 <= s + off < n]
    if not src:
        return None
    ps = [_perm_index(s, n) for s in src]
    pt = [_perm_index(s + off, n) for s in src]
    return slice(ps[0], ps[-1] + 1), slice(pt[0], pt[-1] + 1)


def cref_ops(n: int, shear: bool) -> list[tuple]:
    """The C frame's link batches: ``(rows a, cols a, rows b, cols b, rest, exact)``
    slices in permuted coordinates; row 0 is pinned (its links move only the other end)."""
    fams = [(0, 1, _CREF_L0), (1, 0, _CREF_L0)]
    if shear:
        fams += [(1, 1, _CREF_L0 * math.sqrt(2)), (1, -1, _CREF_L0 * math.sqrt(2))]
    ops = []
    for dr, dc, rest in fams:
        for rq in ([0, 1] if dr else [None]):
            for cq in ([0, 1] if dc else [None]):
                cp = _axis_pair(n, cq, dc, 0) if dc else (slice(0, n), slice(0, n))
                if cp is None:
                    continue
                if dr == 0:
                    ops.append((slice(1, n), cp[0], slice(1, n), cp[1], rest, False))
                else:
                    rp = _axis_pair(n, rq, dr, 1)
                    if rp is not None:
                        ops.append((rp[0], cp[0], rp[1], cp[1], rest, False))
                    if rq == 0:
                        one = _perm_index(1, n)
                        ops.append((slice(0, 1), cp[0], slice(one, one + 1), cp[1], rest,
                                    True))
    return ops


def _cref_library() -> tuple[Any, str]:
    """The compiled C reference (ctypes), built once per source into the user's cache;
    ``(None, why)`` without gcc or when it does not build."""
    import ctypes
    import hashlib
    import shutil
    if not CREF_SOURCE.exists():
        return None, f"{CREF_SOURCE.relative_to(ROOT)} is missing"
    gcc = shutil.which("gcc")
    if gcc is None:
        return None, "gcc not found"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "verlet-sandbox"
    key = hashlib.sha256(CREF_SOURCE.read_bytes()).hexdigest()[:12]
    lib = cache / f"cref-{key}-{platform.machine()}.so"
    if not lib.exists():
        try:
            cache.mkdir(parents=True, exist_ok=True)
            objs = []
            for real, sq, suffix in (("double", "sqrt", "_d"), ("float", "sqrtf", "_f")):
                obj = cache / f"cref{suffix}-{os.getpid()}.o"
                subprocess.run([gcc, "-O3", "-march=native", "-fno-math-errno", "-fPIC",
                                "-c", str(CREF_SOURCE), "-o", str(obj), f"-DREAL={real}",
                                f"-DSQRT={sq}", f"-DSUFFIX={suffix}"], check=True,
                               capture_output=True, timeout=120)
                objs.append(str(obj))
            tmp = cache / f"{lib.name}.{os.getpid()}.tmp"
            subprocess.run([gcc, "-shared", "-o", str(tmp), *objs, "-lm"], check=True,
                           capture_output=True, timeout=120)
            os.replace(tmp, lib)
            for o in objs:
                Path(o).unlink(missing_ok=True)
        except (OSError, subprocess.SubprocessError) as e:
            return None, f"gcc failed: {e}"
    try:
        return ctypes.CDLL(str(lib)), ""
    except OSError as e:
        return None, f"cannot load the C reference: {e}"


def time_cref(rounds: int = 5, frames: int = 30) -> dict[str, Any]:
    """ms per frame of the C reference on the 200x200 cloth, one thread, median over
    ``rounds``: keys ``f64_struct``, ``f64_shear``, ``f32_struct``, ``f32_shear``; or
    ``{"error": why}``."""
    import ctypes
    so, why = _cref_library()
    if so is None:
        return {"error": why}
    n = CREF_N
    perm = np.concatenate([np.arange(0, n, 2), np.arange(1, n, 2)])
    out: dict[str, Any] = {}
    for dtype, name, fn, real in ((np.float64, "f64", so.grid_frame_d, ctypes.c_double),
                                  (np.float32, "f32", so.grid_frame_f, ctypes.c_float)):
        for shear in (False, True):
            ops = cref_ops(n, shear)
            table = np.array([[o[0].start, o[1].start, o[2].start, o[3].start,
                               o[0].stop - o[0].start, o[1].stop - o[1].start, int(o[5])]
                              for o in ops], np.int32)
            rests = np.array([o[4] for o in ops], dtype)
            r, c = np.meshgrid(perm, perm, indexing="ij")
            X = np.ascontiguousarray((c * _CREF_L0).astype(dtype))
            Y = np.ascontiguousarray((r * _CREF_L0).astype(dtype))
            PX, PY = X.copy(), Y.copy()

            def ptr(a):
                return a.ctypes.data_as(ctypes.c_void_p)

            args = [ptr(X), ptr(Y), ptr(PX), ptr(PY), ctypes.c_int(n), ptr(table), ptr(rests),
                    ctypes.c_int(len(ops)), ctypes.c_int(CREF_PASSES), real(0.995),
                    real(1000.0 / 3600.0)]
            for _ in range(5):
                fn(*args)
            times = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                for _ in range(frames):
                    fn(*args)
                times.append((time.perf_counter() - t0) / frames * 1e3)
            if not np.isfinite(X).all():
                return {"error": "the C reference went non-finite"}
            out[f"{name}_{'shear' if shear else 'struct'}"] = float(np.median(times))
    return out


#: Our scenario -> the C reference's row: the same links and passes. The C kernel makes
#: one Verlet step and 20 passes a frame; the ``_1x20`` scenes do exactly that, the
#: others (the shipped cloths) spend their 20 passes as 20 substeps, each with its step.
CREF_ROWS = {"cloth200": "f64_struct", "cloth200_shear": "f64_shear",
             "cloth200_f32": "f32_struct", "cloth200_shear_f32": "f32_shear",
             "cloth200_shear_1x20": "f64_shear", "cloth200_shear_1x20_f32": "f32_shear"}


def cref_ratios(rows: dict[str, dict], cref: dict[str, Any]) -> dict[str, float]:
    """Our physics ms / the C reference's, per scenario that has one."""
    out = {}
    for name, key in CREF_ROWS.items():
        row, c = rows.get(name), cref.get(key)
        if row and row.get("physics_ms") and c:
            out[name] = row["physics_ms"] / c
    return out


# --------------------------------------------------------------------------- targets

#: The level the start-up is timed on (the one ``python main.py`` opens).
STARTUP_LEVEL = "playground"


def time_startup(level: str = STARTUP_LEVEL, runs: int = 3,
                 compile_all: bool = True) -> dict[str, Any]:
    """Seconds from launching ``python -m sandbox play LEVEL --frames 1`` (what
    ``main.py`` and ``verlet-sandbox`` run) to its exit, in a new
    process with SDL's dummy video driver: launch, imports, the level, the first frame
    drawn, then closing (an upper bound of launch to first frame). ``cold``: each run
    with its own empty kernel cache (``NUMBA_CACHE_DIR``), as on a fresh install;
    ``warm``: the project's cache once the app's warm-up child has filled and marked
    it (as after a first start left open long enough). Medians of ``runs``, and the runs;
    ``{"error": ...}`` when the app did not run. ``compile_all``: also the wall and CPU
    seconds of filling an empty cache with every kernel (``compile_wall_s``,
    ``compile_cpu_s``; minutes, not seconds)."""
    import tempfile

    base = {k: v for k, v in os.environ.items() if k != "SDL_VIDEODRIVER"}
    base["SDL_VIDEODRIVER"] = "dummy"
    cmd = [sys.executable, "-m", "sandbox", "play", level, "--frames", "1"]

    def once(env: dict[str, str]) -> float:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
        seconds = time.perf_counter() - t0
        if r.returncode != 0:
            tail = (r.stderr.strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"play exited {r.returncode}: {tail}")
        return seconds

    try:
        cold = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="verlet-cold-cache-") as d:
                cold.append(once({**base, "NUMBA_CACHE_DIR": d}))
        # Warm: as after a first start whose warm-up ran to the end (it marks the cache
        # full); a run closed after one frame stops its warm-up before that.
        from .app.main import KERNEL_EXTRAS, kernel_dtypes
        fill = [sys.executable, "-m", "sandbox.warmup", "--dtypes",
                ",".join(kernel_dtypes(levels.load_level(levels.find_level(level)).world
                                       .dtype)), "--contact-dtypes", "float64"]
        for spec in KERNEL_EXTRAS:
            fill += ["--extra", spec]
        # The whole cache from nothing, as a fresh install's first start fills it (the
        # app's warm-up child: every kernel of the level's float type, the contact
        # stages, the drawing's; the other float type's only if a world of it appears):
        # wall and CPU seconds.
        compiled = {}
        if compile_all:
            with tempfile.TemporaryDirectory(prefix="verlet-cold-cache-") as d:
                cpu0 = _children_cpu()
                t0 = time.perf_counter()
                subprocess.run(fill, cwd=ROOT, env={**base, "NUMBA_CACHE_DIR": d},
                               capture_output=True, timeout=1800, check=True)
                compiled = {"compile_wall_s": time.perf_counter() - t0,
                            "compile_cpu_s": _children_cpu() - cpu0}
        subprocess.run(fill, cwd=ROOT, env=base, capture_output=True, timeout=900,
                       check=True)
        # And Python's own bytecode cache, as on any second start (an environment that
        # forbids writing it, PYTHONDONTWRITEBYTECODE, recompiles every module: +0.3 s).
        again = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
        once(again)
        warm = [once(again) for _ in range(runs)]
    except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as e:
        return {"error": str(e)}
    return {"level": level, "cold_s": float(np.median(cold)),
            "warm_s": float(np.median(warm)), "cold_runs": cold, "warm_runs": warm,
            **compiled}


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@dataclass(frozen=True)
class Target:
    label: str
    scenario: str
    key: str
    op: str                         # "<=" or ">="
    limit: float
    unit: str

    def check(self, rows: dict[str, dict]) -> dict[str, Any]:
        row = rows.get(self.scenario)
        value = None if row is None else row.get(self.key)
        if row is None:
            result = "not run"
        elif value is None:
            result = "n/a" if row.get("status") == "ok" else str(row.get("status"))
        else:
            ok = value <= self.limit if self.op == "<=" else value >= self.limit
            result = "PASS" if ok else "FAIL"
        return {"target": self.label, "scenario": self.scenario, "metric": self.key,
                "measured": value, "op": self.op, "limit": self.limit, "unit": self.unit,
                "result": result}


def targets_for(load: int = 0) -> tuple[Target, ...]:
    """The speed issues' targets under ``load`` busy processes (the C ratio is against
    the C reference timed under the same load; the looser limits apply with two)."""
    c_limit = 2.0 if load <= 1 else 4.0
    out = [
        Target(f"physics / C reference, 200x200 shear cloth, float64, load {load}",
               "cloth200_shear", "cref_ratio", "<=", c_limit, "x"),
        Target(f"physics / C reference, the same in float32, load {load}",
               "cloth200_shear_f32", "cref_ratio", "<=", c_limit, "x"),
        Target(f"physics / C reference, its own work (1 step x 20 passes), float64, "
               f"load {load}", "cloth200_shear_1x20", "cref_ratio", "<=", c_limit, "x"),
        Target(f"physics / C reference, its own work (1 step x 20 passes), float32, "
               f"load {load}", "cloth200_shear_1x20_f32", "cref_ratio", "<=", c_limit, "x"),
        Target("physics, 200x200 structural+shear cloth, 20 passes", "cloth200_shear",
               "physics_ms", "<=", 6.0, "ms"),
        # The issue allows float32 for large cloth; both lines print, neither hides the other.
        Target("physics, the same cloth in float32 (allowed for large cloth)",
               "cloth200_shear_f32", "physics_ms", "<=", 6.0, "ms"),
        Target("pymunk ms / ours, 200x200 structural cloth, same passes", "cloth200",
               "ratio", ">=", 8.0, "x"),
        Target("pymunk ms / ours, pile of 2,000 balls, same passes", "pile2000",
               "ratio", ">=", 1.5, "x"),
        Target("pymunk ms / ours, soft blob, same passes", "soft_blob", "ratio", ">=", 1.5,
               "x"),
        Target("n-body 1,000 bodies, velocity Verlet, per step", "nbody1000_vv",
               "physics_ms", "<=", 5.0, "ms"),
        Target(f"launch to first frame, empty kernel cache ({STARTUP_LEVEL})", "startup",
               "cold_s", "<=", 3.0, "s"),
        Target(f"launch to first frame, warm kernel cache ({STARTUP_LEVEL})", "startup",
               "warm_s", "<=", 1.5, "s"),
        Target("every kernel a first start compiles, empty cache, CPU", "startup",
               "compile_cpu_s", "<=", 20.0, "s"),
    ]
    if load <= 1:
        limit = 16.7 if load == 0 else 25.0
        out += [Target(f"whole frame (physics + drawing), 200x200 structural cloth, "
                       f"load {load}", "cloth200", "frame_ms", "<=", limit, "ms"),
                Target(f"whole frame (physics + drawing), 200x200 structural+shear, "
                       f"load {load}", "cloth200_shear", "frame_ms", "<=", limit, "ms")]
    return tuple(out)


#: The targets on an idle machine.
TARGETS = targets_for(0)


# --------------------------------------------------------------------------- machine

def _slug(text: str) -> str:
    text = re.sub(r"\((r|tm)\)|\bcpu\b|@.*$", " ", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"


def describe_machine() -> dict[str, Any]:
    """CPU model and cores, OS, and the versions of everything that is timed."""
    cpu, physical = platform.processor() or "unknown", None
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        info = ""
    if m := re.search(r"^model name\s*:\s*(.+)$", info, re.M):
        cpu = m.group(1).strip()
    if m := re.search(r"^cpu cores\s*:\s*(\d+)$", info, re.M):
        physical = int(m.group(1))
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:                         # pragma: no cover - not Linux
        usable = os.cpu_count()
    out: dict[str, Any] = {
        "hostname": socket.gethostname(), "cpu": cpu, "cores_logical": os.cpu_count(),
        "cores_physical_per_socket": physical, "cores_usable": usable,
        "platform": platform.platform(), "python": platform.python_version(),
        "numpy": np.__version__}
    for mod, attr in (("numba", "__version__"), ("pygame", "__version__")):
        try:
            out[mod] = getattr(__import__(mod), attr)
        except ImportError:
            out[mod] = "not installed"
    out.update(reference_versions())
    try:
        out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:                               # pragma: no cover
        pass
    try:
        out["git_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
            text=True, timeout=10).stdout.strip() or None
        # Files of the timed code changed since that commit (a shared working tree).
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "sandbox", "main.py"],
                               cwd=ROOT, capture_output=True, text=True, timeout=10).stdout
        out["git_uncommitted"] = sorted(ln[3:] for ln in dirty.splitlines() if ln[:2] != "??")
    except (OSError, subprocess.SubprocessError):
        out["git_commit"] = None
    out["id"] = f"{_slug(out['hostname'])}-{_slug(cpu)}"
    return out


# --------------------------------------------------------------------------- output

def _f(v, fmt: str = "{:.2f}", none: str = "-") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return none
    return fmt.format(v)


def _ms(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.1f}"


def format_table(rows: list[dict]) -> str:
    """The results as a fixed-width text table, one line per scenario."""
    head = ["scenario", "particles", "links", "passes", "dtype", "physics ms [min..max]",
            "render ms", "frame ms", "steps/s", "err mean / max", "pymunk ms", "ratio",
            "pymunk err mean / max"]
    lines = []
    for r in rows:
        if r["status"] != "ok":
            lines.append([r["name"], _f(r["particles"], "{:,}"), _f(r["constraints"], "{:,}"),
                          f"{r['substeps']}x{r['iterations']}", r["dtype"], r["status"]])
            continue
        lines.append([
            r["name"], f"{r['particles']:,}", f"{r['constraints']:,}",
            f"{r['substeps']}x{r['iterations']}", r["dtype"],
            f"{_ms(r['physics_ms'])} [{_ms(r['physics_ms_min'])}..{_ms(r['physics_ms_max'])}]",
            _ms(r["render_ms"]), _ms(r["frame_ms"]), f"{r['steps_per_s']:,.0f}",
            (f"{r['error_mean']:.2e} / {r['error_max']:.2e}" if r["error_mean"] is not None
             else "-"),
            (f"{_ms(r['pymunk_ms'])} [{_ms(r['pymunk_ms_min'])}..{_ms(r['pymunk_ms_max'])}]"
             if r["pymunk_ms"] is not None else "none"),
            _f(r["ratio"], "{:.2f}x"),
            (f"{r['pymunk_error_mean']:.2e} / {r['pymunk_error_max']:.2e}"
             if r["pymunk_error_mean"] is not None else "-")])
    widths = [len(h) for h in head]
    for ln in lines:
        if len(ln) == len(head):
            widths = [max(w, len(c)) for w, c in zip(widths, ln, strict=True)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    for ln in lines:
        if len(ln) == len(head):
            out.append("  ".join(c.ljust(w) for c, w in zip(ln, widths, strict=True)))
        else:
            fixed = "  ".join(c.ljust(w) for c, w in zip(ln[:5], widths, strict=False))
            out.append(f"{fixed}  {ln[5]}")
    return "\n".join(out)


def format_tradeoff(rows: dict[str, dict]) -> str | None:
    """Passes spent as substeps or iterations on the 100x100 shear cloth: time and error."""
    names = ["cloth100_shear_1x20", "cloth100_shear_5x4", "cloth100_shear"]
    got = [rows[n] for n in names if n in rows and rows[n]["status"] == "ok"]
    if len(got) < 2:
        return None
    base = next((r for r in got if r["substeps"] == 1), got[0])
    out = ["substeps x iterations  physics ms  time vs 1x20  err mean  err max   "
           "stiffer than 1x20 (mean err ratio)"]
    for r in got:
        out.append(f"{r['substeps']:>8} x {r['iterations']:<11}  {_ms(r['physics_ms']):>10}  "
                   f"{r['physics_ms'] / base['physics_ms']:>11.2f}x  "
                   f"{r['error_mean']:.2e}  {r['error_max']:.2e}  "
                   f"{base['error_mean'] / max(r['error_mean'], 1e-300):>8.1f}x")
    return "\n".join(out)


def format_targets(targets: list[dict]) -> str:
    out = []
    for t in targets:
        v = t["measured"]
        shown = "-" if v is None else (f"{v:.2f} {t['unit']}" if t["unit"] == "ms"
                                       else f"{v:.2f}{t['unit']}")
        lim = (f"{t['op']} {t['limit']:g} {t['unit']}" if t["unit"] == "ms"
               else f"{t['op']} {t['limit']:g}{t['unit']}")
        out.append(f"{t['result']:<8} {t['target']:<60} {shown:>10}  ({lim}; {t['scenario']})")
    return "\n".join(out)


def write_csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore",
                       lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r[k]) for k in CSV_COLUMNS})
    atomic_write_text(path, buf.getvalue())


def write_json(path: Path, report: dict) -> None:
    atomic_write_text(path, json.dumps(report, indent=2, allow_nan=False) + "\n")


# --------------------------------------------------------------------------- commands

def select(only: str | None, quick: bool) -> list[Scenario]:
    """Scenarios to run: ``only`` (comma-separated names, table order kept) or all;
    ``quick`` drops the ones marked not quick unless named explicitly."""
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in names if n not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenario {', '.join(unknown)}; "
                             f"choose from: {', '.join(SCENARIOS)}")
        return [SCENARIOS[n] for n in names]
    return [s for s in SCENARIOS.values() if s.quick or not quick]


def frames_for(sc: Scenario, quick: bool, override: int | None) -> int:
    if override:
        return override
    return max(2, sc.frames // 3) if quick else sc.frames


@dataclass
class Options:
    quick: bool = False
    only: str | None = None
    rounds: int | None = None
    frames: int | None = None
    pymunk: bool = True
    draw: bool = True
    progress: bool | None = None    # None: only on a terminal
    load: int = 0                   # busy processes beside the timed runs
    threads: str = "auto"           # "auto", "1" (one thread) or "2" (big batches spread)
    cref: bool = True               # time the C reference in the same run (needs gcc)
    startup: bool | None = None     # time launch to first frame (None: unless --only)
    extra: dict = field(default_factory=dict)


def run_table(opts: Options, out=sys.stdout) -> dict[str, Any]:
    """Run the selected scenarios; returns the report (machine, run, rows, targets).

    With ``opts.load`` busy processes running beside everything that is timed (ours,
    pymunk's and the C reference's frames), stopped when the run ends however it ends.
    """
    scenarios = select(opts.only, opts.quick)
    rounds = opts.rounds or (QUICK_ROUNDS if opts.quick else ROUNDS)
    machine = describe_machine()
    t0 = time.perf_counter()
    warmup.warm_up()
    warm = time.perf_counter() - t0
    drawer = Drawer() if opts.draw else None
    plan = [(sc, frames_for(sc, opts.quick, opts.frames)) for sc in scenarios]
    total = sum(rounds * f * (2 if (opts.pymunk and sc.twin) else 1) for sc, f in plan)
    mode_before = cores.POLICY.mode
    meter_before = cores.set_meter(LoadMeter())    # "auto" reads the other processes' load
    cores.set_mode({"1": "serial", "2": "parallel"}.get(opts.threads, "auto"))
    wants_cref = opts.cref and any(sc.name in CREF_ROWS for sc in scenarios)
    wants_startup = opts.only is None if opts.startup is None else opts.startup
    startup: dict[str, Any] = {}
    rows = []
    cref: dict[str, Any] = {}
    started = datetime.now(UTC)
    t_run = time.perf_counter()
    try:
        with BusyLoad(opts.load) as load:
            bar = _progress(total, opts.progress)
            try:
                cref_runs = [time_cref()] if wants_cref else []
                for sc, frames in plan:
                    bar.set_description(sc.name)
                    row = run_scenario(sc, rounds, frames, drawer, opts.pymunk, bar.update)
                    row["threads"] = cores.POLICY.last if row.get("status") == "ok" else None
                    rows.append(row)
                if wants_cref:
                    cref_runs.append(time_cref())
                if wants_startup:
                    bar.set_description("start-up")
                    startup = time_startup()
            finally:
                bar.close()
            busy_at_end = load.running()
    finally:
        cores.set_mode(mode_before)
        cores.set_meter(meter_before)
    if cref_runs:
        errors = [c["error"] for c in cref_runs if "error" in c]
        if errors:
            cref = {"error": errors[0]}
        else:       # before and after the table: the median of both runs' medians
            cref = {k: float(np.median([c[k] for c in cref_runs])) for k in cref_runs[0]}
            cref["runs"] = cref_runs
    by_name = {r["name"]: r for r in rows}
    for name, ratio in cref_ratios(by_name, cref).items():
        by_name[name]["cref_ratio"] = ratio
        by_name[name]["cref_ms"] = cref[CREF_ROWS[name]]
    if startup:
        by_name["startup"] = {**startup, "status": "ok" if "error" not in startup
                              else f"failed: {startup['error']}"}
    report = {
        "machine": machine,
        "run": {"started_utc": started.isoformat(timespec="seconds"),
                "seconds": round(time.perf_counter() - t_run, 1),
                "quick": opts.quick, "only": opts.only, "rounds": rounds,
                "frame_h_s": H, "screen_px": list(SCREEN),
                "numba_available": backend.compiled("auto"), "warm_up_s": warm,
                "renderer": drawer.kind if drawer else "none",
                "load": opts.load, "load_running_at_end": busy_at_end,
                "threads": opts.threads, "cref": cref, "startup": startup,
                "timing": "median over rounds of the mean ms per frame in a round; "
                          "ours then pymunk each round; gc off during a round",
                "error": "relative stretch |L - rest| / rest of the links at each round "
                         "end (untimed): median of the means, largest of the maxima"},
        "rows": rows,
        "targets": [t.check(by_name) for t in targets_for(opts.load)],
    }
    return report


def _progress(total: int, enabled: bool | None):
    try:
        from tqdm import tqdm
    except ImportError:                            # pragma: no cover
        tqdm = None
    show = sys.stderr.isatty() if enabled is None else enabled
    if tqdm is None or not show:
        class _Null:
            def update(self, n=1):
                pass

            def set_description(self, s):
                pass

            def close(self):
                pass
        return _Null()
    return tqdm(total=total, unit="frame", file=sys.stderr, leave=False, dynamic_ncols=True)


def print_report(report: dict, out=sys.stdout) -> None:
    m, run = report["machine"], report["run"]
    p = lambda *a: print(*a, file=out)   # noqa: E731
    p(f"machine: {m['cpu']}, {m['cores_usable']} usable cores ({m['cores_logical']} logical), "
      f"{m['hostname']}, {m['platform']}")
    p(f"versions: python {m['python']}, numpy {m['numpy']}, numba {m['numba']}, "
      f"pymunk {m['pymunk']} (chipmunk {m.get('chipmunk', '?').split('-')[0]}), "
      f"pygame {m['pygame']}; load average at start {m.get('load_average')}")
    p(f"numba kernels warm_up(): {run['warm_up_s'] * 1e3:.0f} ms (compiled or loaded from "
      f"the disk cache; not counted). Frame = 1/60 s; {run['rounds']} rounds after 2 "
      f"warm-up frames; renderer: {run['renderer']} on a {SCREEN[0]}x{SCREEN[1]} Surface.")
    p(f"load: {run.get('load', 0)} busy process(es) beside every timed frame (ours, "
      f"pymunk's, the C reference's); threads: {run.get('threads', 'auto')}"
      + ("" if run.get("load_running_at_end", run.get("load", 0)) == run.get("load", 0)
         else f" (only {run.get('load_running_at_end')} still running at the end)"))
    p("ms: median [min..max] over rounds; ratio = pymunk ms / our physics ms; err: relative "
      "link stretch at each round end, median of the means / largest maximum.")
    p("")
    p("pymunk settings per scenario:")
    for r in report["rows"]:
        if r.get("pymunk_settings"):
            p(f"  {r['name']}: {r['pymunk_settings']}")
    p("")
    p(format_table(report["rows"]))
    notes = [(r["name"], r["note"]) for r in report["rows"] if r.get("note")]
    if notes:
        p("")
        for name, note in notes:
            p(f"  {name}: {note}")
    trade = format_tradeoff({r["name"]: r for r in report["rows"]})
    if trade:
        p("")
        p("trade-off on the 100x100 structural+shear cloth, 20 passes per frame:")
        p(trade)
    cref = run.get("cref") or {}
    if cref:
        p("")
        if "error" in cref:
            p(f"C reference: not timed ({cref['error']})")
        else:
            p("C reference (bench/cref/grid.c: the 200x200 cloth's frame written for that "
              "grid alone, one thread, same run and load), ms per frame and ours / C:")
            by_name = {r["name"]: r for r in report["rows"]}
            for name, key in CREF_ROWS.items():
                row = by_name.get(name)
                ours = (f"ours {_ms(row['physics_ms'])} ms = {row['cref_ratio']:.2f}x"
                        if row and row.get("cref_ratio") else "ours not run")
                p(f"  {key:<11} {_ms(cref[key]):>7} ms   {name:<20} {ours}")
    startup = run.get("startup") or {}
    if startup:
        p("")
        if "error" in startup:
            p(f"start-up: not timed ({startup['error']})")
        else:
            runs = lambda xs: ", ".join(f"{x:.2f}" for x in xs)   # noqa: E731
            p(f"start-up (python -m sandbox play {startup['level']} --frames 1, launch to exit "
              f"after the first frame, dummy video driver): empty kernel cache "
              f"{startup['cold_s']:.2f} s [{runs(startup['cold_runs'])}], warm "
              f"{startup['warm_s']:.2f} s [{runs(startup['warm_runs'])}]")
            if "compile_cpu_s" in startup:
                p(f"every kernel a first start compiles, from an empty cache (python -m "
                  f"sandbox.warmup, as its child): {startup['compile_wall_s']:.0f} s wall, "
                  f"{startup['compile_cpu_s']:.0f} s CPU")
    p("")
    p("targets (printed, never asserted):")
    p(format_targets(report["targets"]))
    p(f"\nran in {run['seconds']:.0f} s")


def results_stem(machine: dict, opts: Options) -> str:
    """Per-machine file name: the full table is ``<id>``; a quick or partial run gets a
    suffix so it never overwrites the full results."""
    stem = machine["id"]
    if opts.load:
        stem += f"-load{opts.load}"
    if opts.threads in ("1", "2"):
        stem += f"-threads{opts.threads}"
    if opts.only:
        stem += "-partial"
    elif opts.quick:
        stem += "-quick"
    return stem


def profile(name: str, frames: int = 10, top: int = 25, out=sys.stdout,
            draw: bool = True) -> int:
    """Run ``frames`` frames (physics + drawing) of one scenario under cProfile and print
    the functions that take the most time of their own, then the biggest cumulative."""
    sc = SCENARIOS.get(name)
    if sc is None:
        print(f"error: unknown scenario {name!r}; choose from: {', '.join(SCENARIOS)}",
              file=sys.stderr)
        return 2
    reason = skip_reason(sc)
    if reason:
        print(f"{name}: {reason}", file=out)
        return 1
    cores.set_meter(LoadMeter())      # as the app: spread the sweep only while cores are free
    warmup.warm_up()
    world = levels.build_world(sc.level)
    drawer = Drawer() if draw else None
    if drawer:
        drawer.view(*sc.view)
    for _ in range(sc.settle):                  # as the timed runs: profile the settled scene
        world.step(H)
    for _ in range(2):
        world.step(H)
        if drawer:
            drawer.draw(world)
    tp = tr = 0.0
    pr = cProfile.Profile()
    for _ in range(frames):
        a = time.perf_counter()
        pr.enable()
        world.step(H)
        b = time.perf_counter()
        if drawer:
            drawer.draw(world)
        pr.disable()
        tp += b - a
        tr += time.perf_counter() - b
    print(f"{sc.title}: {world.n:,} particles, {len(world.constraints):,} links; "
          f"{frames} frames under cProfile: physics {1e3 * tp / frames:.1f} ms, drawing "
          f"{1e3 * tr / frames:.1f} ms per frame (profiler overhead included; renderer: "
          f"{drawer.kind if drawer else 'none'})", file=out)
    for key, n in (("tottime", top), ("cumulative", top // 2)):
        buf = io.StringIO()
        st = pstats.Stats(pr, stream=buf).strip_dirs().sort_stats(key)
        st.print_stats(n)
        text = buf.getvalue()
        body = text[text.find("   ncalls"):] if "   ncalls" in text else text
        print(f"\ntop {n} by {key}:\n{body.rstrip()}", file=out)
    return 0


def run_bench(args: argparse.Namespace) -> int:
    """The ``bench`` command; returns the exit code."""
    if getattr(args, "list", False):
        for sc in SCENARIOS.values():
            print(f"{sc.name:<22} {sc.group:<10} {sc.title}")
        return 0
    if getattr(args, "profile", None):
        return profile(args.profile, frames=args.frames or 10)
    opts = Options(quick=args.quick, only=args.only, rounds=args.rounds, frames=args.frames,
                   pymunk=not args.no_pymunk, load=getattr(args, "load", 0) or 0,
                   threads=str(getattr(args, "threads", "auto") or "auto"),
                   cref=not getattr(args, "no_cref", False),
                   startup=getattr(args, "startup", None))
    if opts.load < 0 or opts.threads not in ("auto", "1", "2"):
        print("error: --load must be >= 0 and --threads auto, 1 or 2", file=sys.stderr)
        return 2
    if opts.pymunk:                 # the table's point is the comparison: say what is missing
        from .extras import MissingExtra, require
        try:
            require("bench", "the bench's comparison (bench --no-pymunk runs without it)")
        except MissingExtra as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    try:
        for sc in select(opts.only, opts.quick):
            _ = sc.level                # every scene's file read and valid, or stop here
    except levels.LevelError as e:
        print(e, file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    outs = [Path(p) for p in (args.json, args.csv) if p]
    for p in outs:
        if not p.parent.is_dir():
            print(f"error: {p}: folder {p.parent} does not exist", file=sys.stderr)
            return 2
    try:
        report = run_table(opts)
    except KeyboardInterrupt:
        print("\ninterrupted: busy processes stopped, nothing written", file=sys.stderr)
        return 130
    print_report(report)
    written = []
    try:
        if args.json:
            write_json(Path(args.json), report)
            written.append(args.json)
        if args.csv:
            write_csv(Path(args.csv), report["rows"])
            written.append(args.csv)
        if not args.no_save:
            folder = Path(args.results_dir)
            folder.mkdir(parents=True, exist_ok=True)
            stem = results_stem(report["machine"], opts)
            write_json(folder / f"{stem}.json", report)
            write_csv(folder / f"{stem}.csv", report["rows"])
            written += [str(folder / f"{stem}.json"), str(folder / f"{stem}.csv")]
    except OSError as e:          # a full disk, a read-only folder: one line, exit 1
        for w in written:
            print(f"wrote {w}")
        print(f"error: cannot write {e.filename or 'the results'}: {e.strerror or e}",
              file=sys.stderr)
        return 1
    for w in written:
        print(f"wrote {w}")
    return 0

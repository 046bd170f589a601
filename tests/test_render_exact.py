"""The app's renderer with the compiled kernels against the numpy reference, bit for bit.

The kernels draw a cloth's links in one call that bins the strain, orders the links
and draws them (``raster.strain_links``), with a fast path for 1 px segments inside the
window (unrolled per sample count) and another for the rest (clipping, 2 px lines).
Whatever path a link takes, the frame must be the numpy reference's, pixel for pixel:
these tests render whole scenes (cloth with shear links, cut and torn links, pins, a
rope, springs, balls, a grab; float64 and float32 worlds) through ``WorldRenderer`` at
zooms that give every sample count, with the camera putting part of the cloth off
screen, and compare the pixel arrays and the returned strain exactly. The strain kernel
of the view is checked against its numpy reference the same way.
"""

from __future__ import annotations

import numpy as np
import pygame
import pytest

from sandbox.app import raster
from sandbox.app.camera import Camera
from sandbox.app.render import NEUTRAL_BIN, STRAIN_EDGES, WorldRenderer, camera_view
from sandbox.sim import backend as sim_backend
from sandbox.sim import view as view_mod
from sandbox.sim.builders import build_cloth, build_rope
from sandbox.sim.world import World, WorldConfig

needs_numba = pytest.mark.skipif(not sim_backend.INSTALLED, reason="numba not installed")


def _world(dtype: str = "float64", cols: int = 60, rows: int = 45, seed: int = 0) -> World:
    """A cloth (shear links, pinned top points) stretched unevenly so that its links
    fall in every strain bin, cut across and torn where overstretched, with a rope
    (partly slack), springs between balls, and a particle in the hand."""
    rng = np.random.default_rng(seed)
    world = World(WorldConfig(dtype=dtype))
    build_cloth(world, cols=cols, rows=rows, spacing=2.0 / cols, origin=(-1.0, 1.2),
                shear=True, pins="top_points")
    build_rope(world, (-1.5, 1.5), (1.5, 0.5), segments=30, kind="rope")
    balls = world.add_particles(rng.uniform(-1, 1, (5, 2)), radius=0.05)
    world.add_springs(balls[:-1], balls[1:], k=10.0)
    p = world.particles
    # A smooth stretch (a bulge) plus noise: neighbouring links in different bins.
    x = p.x.astype(np.float64)
    x[:, 1] -= 0.08 * np.exp(-((x[:, 0] - 0.2) ** 2 + (x[:, 1] - 0.4) ** 2) / 0.1)
    x += rng.normal(0.0, 0.0001, x.shape)
    p.x[:] = x
    world.cut((-0.3, 1.5), (0.1, 0.2))                      # a cut across the cloth
    c = world.constraints
    c.rest[rng.random(len(c)) < 0.02] *= 0.9                # some links 10 % stretched
    c.rest[:7] = 0.0                                        # rest 0: strain in metres
    torn = c.tear(p.x, 1.08)                                # and the worst ones torn
    assert torn > 0
    world.grab(int(np.flatnonzero(p.inv_mass > 0)[3]))
    return world


def _render(backend: str, world: World, cam: Camera, x=None, ghost: bool = False):
    surf = pygame.Surface(cam.size, 0, 32)
    surf.fill((0, 0, 0))
    r = WorldRenderer(backend)
    view = world.view()
    out = r.world(surf, cam, view, x)
    if ghost:
        r.ghost(surf, cam, view, None if x is None else x - 0.01)
    return pygame.surfarray.array2d(surf), out, view


# Cameras: (centre, width m). The cloth spans x -1..1, y -0.3..1.2.
CAMERAS = {
    "all in view": ((0.0, 0.45), 3.0),
    "half off screen": ((0.9, 0.9), 1.6),                   # clipped on two sides
    "long links": ((0.2, 0.6), 0.35),                       # kk beyond 8: the loop
    "sub-pixel links": ((0.0, 0.4), 40.0),                  # kk == 2
}


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("camera", list(CAMERAS))
@pytest.mark.parametrize("positions", ["view", "interpolated"])
def test_the_rendered_frame_is_the_numpy_references_bit_for_bit(dtype, camera, positions):
    world = _world(dtype)
    assert len(world.constraints) >= 3000                  # 1 px links: the fast path
    centre, width = CAMERAS[camera]
    cam = Camera((331, 207), center=centre, width=width)
    x = None if positions == "view" else world.particles.x.astype(np.float64) + 0.003
    a, oa, va = _render("numpy", world, cam, x, ghost=True)
    b, ob, vb = _render("compiled", world, cam, x, ghost=True)
    assert oa["samples"] == ob["samples"] > 0
    assert np.array_equal(a, b)
    assert len(np.unique(a)) > 6                           # several strain colours...
    # The strain handed back (the HUD's) is the view's, the same numbers either way.
    assert np.array_equal(oa["strain"], ob["strain"])
    assert ob["strain"] is vb.strain()


@needs_numba
@pytest.mark.parametrize("zoom", [0.5, 1.2, 2.5, 6.0])
def test_a_small_world_with_2px_lines_is_the_numpy_references(zoom):
    world = _world("float64", cols=12, rows=9, seed=3)
    assert len(world.constraints) < 3000                   # 2 px lines
    cam = Camera((240, 160), center=(0.3, 0.8), width=zoom)
    a, oa, _ = _render("numpy", world, cam, ghost=True)
    b, ob, _ = _render("compiled", world, cam, ghost=True)
    assert oa["samples"] == ob["samples"] > 0
    assert np.array_equal(a, b)


@needs_numba
def test_every_sample_count_of_the_fast_path_matches_the_reference():
    """In-box segments of every length from 0 to 14 px (sample counts 2..15: each
    unrolled branch and the loop beyond), at fractional, integer and half-integer ends,
    in every direction; overlapping, so that the drawing order shows."""
    rng = np.random.default_rng(8)
    w, h = 83, 71
    m = 6000
    length = rng.uniform(0.0, 14.0, m)
    length[::5] = np.round(length[::5])                    # whole pixel spans
    ang = rng.uniform(0, 2 * np.pi, m)
    ang[::7] = rng.choice([0.0, np.pi / 2, np.pi / 4, np.pi], len(ang[::7]))
    p = rng.uniform(15.0, 55.0, (m, 2))
    p[::3] = np.round(2 * p[::3]) / 2                      # half-pixel ends: ties
    q = p + length[:, None] * np.stack([np.cos(ang), np.sin(ang)], axis=1)
    colours = rng.integers(1, 2**32, m, dtype=np.uint32)
    kk = np.maximum(np.ceil(np.abs(q - p).max(axis=1)).astype(int) + 1, 2)
    assert set(range(2, 16)) <= set(kk.tolist())
    out = {}
    for backend in ("numpy", "compiled"):
        pix = np.zeros((h, w), np.uint32)
        n = raster.segments(pix, p, q, colours, backend=backend)
        out[backend] = pix, n
    assert out["numpy"][1] == out["compiled"][1] == kk.sum()
    assert np.array_equal(out["numpy"][0], out["compiled"][0])


@needs_numba
def test_strain_links_is_strain_colours_then_links():
    world = _world("float64", seed=5)
    view = world.view()
    cam = Camera((300, 200), center=(0.4, 0.7), width=2.2)
    table = np.arange(16, dtype=np.uint32).reshape(2, 8) * 1000 + 7
    strain = view.strain()
    want = np.zeros((200, 300), np.uint32)
    colour, order, _ = raster.strain_colours(None, view.link_i, view.link_j,
                                             view.link_rest, view.link_kind, strain,
                                             STRAIN_EDGES, table, NEUTRAL_BIN, "numpy")
    n_want = raster.links(want, view.x, view.link_i, view.link_j, colour,
                          camera_view(cam), order, 1, "numpy")
    for backend in ("numpy", "compiled"):
        got = np.zeros((200, 300), np.uint32)
        n = raster.strain_links(got, view.x, view.link_i, view.link_j, view.link_kind,
                                strain, STRAIN_EDGES, table, NEUTRAL_BIN, camera_view(cam),
                                1, backend)
        assert n == n_want
        assert np.array_equal(got, want), backend
    with pytest.raises(ValueError):
        raster.strain_links(got, view.x, view.link_i, view.link_j, view.link_kind, None,
                            STRAIN_EDGES, table, NEUTRAL_BIN)


@needs_numba
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_views_strain_kernel_is_its_numpy_reference_bit_for_bit(dtype):
    world = _world("float64", seed=2)
    c = world.constraints
    x = world.particles.x.astype(dtype)
    x[5] = np.nan                                          # a blown-up particle
    kind = c.kind.astype(np.int8)
    want = view_mod.link_strain_numpy(x, c.i, c.j, c.rest, kind)
    got = np.empty(len(c))
    ro = view_mod._ro
    view_mod._strain_kernel(ro(np.ascontiguousarray(x)), ro(c.i), ro(c.j), ro(c.rest),
                            ro(kind), got)
    assert (kind == 1).any() and (want[kind == 1] == 0).any()      # slack rope links
    assert np.isnan(want).any()
    assert np.array_equal(want, got, equal_nan=True)


@needs_numba
def test_points_are_mapped_to_the_screen_with_the_cameras_float64_operations():
    """The kernels map every point once; the coordinates must be the reference's to the
    last bit (``hx + (x - cx) kx``, in that order), or samples near a pixel boundary
    would land in the neighbour."""
    rng = np.random.default_rng(12)
    x = rng.normal(0.0, 3.0, (5000, 2))
    x[::11] *= 1e6
    x[7] = np.nan
    for cam in (Camera((331, 207), center=(0.37, -1.3), width=2.9),
                Camera((1280, 800), center=(1e-3, 7.1), width=0.013)):
        hx, hy, cx, cy, kx, ky = camera_view(cam)
        sx, sy = np.empty(len(x)), np.empty(len(x))
        raster._screen_kernel(raster._frozen(x), hx, hy, cx, cy, kx, ky, sx, sy)
        assert np.array_equal(sx, hx + (x[:, 0] - cx) * kx, equal_nan=True)
        assert np.array_equal(sy, hy + (x[:, 1] - cy) * ky, equal_nan=True)


@needs_numba
@pytest.mark.parametrize("width", [1, 2])
def test_segments_that_only_touch_the_window_are_drawn_as_the_reference(width):
    """Segments from outside that reach the window's edge or corner exactly (the clip
    leaves one point), run along an edge, or end on it."""
    w, h = 40, 30
    p = np.array([[-5.0, -5.0], [45.0, 35.0], [-3.0, 10.0], [20.0, -8.0], [-4.0, 29.0],
                  [39.0, -6.0], [-2.0, 0.0], [10.0, 29.0], [39.0, 3.0], [-1e-9, 5.0]])
    q = np.array([[0.0, 0.0], [39.0, 29.0], [0.0, 10.0], [20.0, 0.0], [50.0, 29.0],
                  [39.0, 40.0], [0.0, 0.0], [10.0, 60.0], [60.0, 3.0], [5.0, 5.0]])
    colours = np.arange(1, len(p) + 1, dtype=np.uint32)
    out = {}
    for backend in ("numpy", "compiled"):
        pix = np.zeros((h, w), np.uint32)
        n = raster.segments(pix, p, q, colours, width, backend=backend)
        out[backend] = pix, n
    assert out["numpy"][1] == out["compiled"][1]
    assert np.array_equal(out["numpy"][0], out["compiled"][0])
    assert out["compiled"][0][0, 0] != 0 and out["compiled"][0][29, 39] != 0   # the corners


@pytest.mark.parametrize("centre, width", [((0.0, 0.0), 7.5), ((13.7, -4.2), 0.9),
                                           ((-1e3, 2e3), 55.0), ((0.5, 0.5), 1e-3)])
def test_the_grid_is_drawn_where_one_to_screen_call_per_line_put_it(centre, width):
    """background() maps all grid lines in one call; the lines must be where mapping
    them one at a time (``int(round(to_screen(...)))``) put them."""
    from sandbox.app import render

    cam = Camera((331, 207), center=centre, width=width)
    got = pygame.Surface(cam.size, 0, 32)
    WorldRenderer().background(got, cam, bounds=(-3.0, -2.0, 3.0, 2.0))
    # The grid by the per-line rule, alone on a blank surface.
    w, h = cam.size
    step = render.nice_step(cam.view_width)
    (wx0, wy1), (wx1, wy0) = cam.to_world([[0, 0], [w, h]])
    ref = pygame.Surface(cam.size, 0, 32)
    ref.fill((1, 2, 3))
    for k in range(int(np.floor(wx0 / step)), int(np.ceil(wx1 / step)) + 1):
        sx = int(round(cam.to_screen([k * step, 0.0])[0]))
        pygame.draw.line(ref, render.AXIS if k == 0 else render.GRID, (sx, 0), (sx, h))
    for k in range(int(np.floor(wy0 / step)), int(np.ceil(wy1 / step)) + 1):
        sy = int(round(cam.to_screen([0.0, k * step])[1]))
        pygame.draw.line(ref, render.AXIS if k == 0 else render.GRID, (0, sy), (w, sy))
    a = pygame.surfarray.array2d(got)
    r = pygame.surfarray.array2d(ref)
    lines = r != ref.map_rgb((1, 2, 3))
    assert lines.any()
    # Where the reference has a grid line, the frame has it too (the walls' outline
    # may cover it); and no grid pixel appears elsewhere.
    walls = a == got.map_rgb(render.WALL)
    assert np.array_equal(a[lines & ~walls], r[lines & ~walls])
    grid_colours = [got.map_rgb(render.GRID), got.map_rgb(render.AXIS)]
    assert not np.isin(a[~lines], grid_colours).any()

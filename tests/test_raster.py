"""The link rasteriser: the numba kernels against the numpy reference, pixel for pixel.

Both paths implement one pixel rule (see ``sandbox/app/raster.py``), so the tolerance is
zero: the same pixels lit, in the same colours, and the same sample counts, on random
segments that include far off-screen, non-finite, zero-length, vertical, horizontal and
half-pixel ones, and on whole rendered worlds (cloth with shear links, ropes, springs,
pins, balls, ghost). The kernel tests are skipped when numba is not installed; the
numpy path is tested either way.
"""

from __future__ import annotations

import numpy as np
import pygame
import pytest

from sandbox.app import raster, render
from sandbox.app.camera import Camera
from sandbox.app.render import NEUTRAL_BIN, STRAIN_EDGES, STRAIN_RGB, WorldRenderer, camera_view
from sandbox.sim import backend as sim_backend
from sandbox.sim.builders import build_cloth, build_rope
from sandbox.sim.world import World, WorldConfig

needs_numba = pytest.mark.skipif(not sim_backend.INSTALLED, reason="numba not installed")
W, H = 97, 61                                       # odd sizes: no lucky alignment


def random_segments(rng: np.random.Generator, m: int, w: int = W, h: int = H):
    """``(m, 2)`` start and end points (px) mixing every kind of awkward segment."""
    p = rng.uniform(-0.3 * w, 1.3 * w, (m, 2))
    q = p + rng.normal(0.0, 6.0, (m, 2))
    kind = rng.integers(0, 10, m)
    # 1 zero-length, 2 vertical, 3 horizontal, 4 long across the box, 5 far away, 6 huge
    # coordinates, 7 integer and half-integer ends (rounding ties), 8 on the box edges.
    q[kind == 1] = p[kind == 1]
    q[kind == 2, 0] = p[kind == 2, 0]
    q[kind == 3, 1] = p[kind == 3, 1]
    sel = kind == 4
    q[sel] = rng.uniform(-2 * w, 3 * w, (sel.sum(), 2))
    sel = kind == 5
    p[sel] += 1e5
    q[sel] += 1e5
    sel = kind == 6
    p[sel] = rng.choice([-1e300, 1e300, -3e12, 5e15], (sel.sum(), 2))
    q[sel] = rng.uniform(0, w, (sel.sum(), 2))
    sel = kind == 7
    p[sel] = np.round(2 * p[sel]) / 2
    q[sel] = np.round(2 * q[sel]) / 2
    sel = kind == 8
    p[sel] = rng.choice([0.0, w - 1.0], (sel.sum(), 2))
    q[sel, 0] = rng.choice([0.0, w - 1.0, -0.0, 1e-300], sel.sum())
    p[rng.random(m) < 0.01] = np.nan
    q[rng.random(m) < 0.01] = np.inf
    return p, q


def draw(backend: str, p, q, colours, width: int = 1, shape=(H, W)):
    pix = np.zeros(shape, np.uint32)
    n = raster.segments(pix, p, q, colours, width, backend=backend)
    return pix, n


# --------------------------------------------------------------------------- segments

@needs_numba
@pytest.mark.parametrize("width", [1, 2])
@pytest.mark.parametrize("seed", range(4))
def test_kernel_lights_exactly_the_pixels_of_the_numpy_reference(seed, width):
    rng = np.random.default_rng(seed)
    p, q = random_segments(rng, 3000)
    colours = rng.integers(1, 2**32, len(p), dtype=np.uint32)   # overlaps: order counts
    a, na = draw("numpy", p, q, colours, width)
    b, nb = draw("compiled", p, q, colours, width)
    assert na == nb
    assert (a != 0).sum() > 0.3 * a.size                 # the test draws something
    assert np.array_equal(a, b)


@needs_numba
def test_kernel_agrees_on_each_awkward_segment_alone():
    """Degenerate, vertical, horizontal, edge and off-screen segments one at a time (no
    overlap can hide a difference)."""
    rng = np.random.default_rng(7)
    p, q = random_segments(rng, 400)
    for k in range(len(p)):
        a, na = draw("numpy", p[k:k + 1], q[k:k + 1], 5)
        b, nb = draw("compiled", p[k:k + 1], q[k:k + 1], 5)
        assert na == nb and np.array_equal(a, b), (p[k], q[k])


@pytest.mark.parametrize("backend", ["numpy", pytest.param("compiled", marks=needs_numba)])
def test_lines_are_gapless_and_reach_both_ends(backend):
    rng = np.random.default_rng(3)
    box = np.array([W - 1, H - 1])
    p = rng.uniform(0, 1, (300, 2)) * box
    q = p + rng.normal(0, 15, (300, 2))
    q = np.clip(q, 0, box)
    for a, b in zip(p, q, strict=True):
        pix, _ = draw(backend, a[None], b[None], 1)
        ys, xs = np.nonzero(pix)
        # no gap along either axis (one sample per pixel of the longer one), 8-connected
        for along in (xs, ys):
            assert len(np.unique(along)) == np.ptp(along) + 1
        cells = set(zip(xs.tolist(), ys.tolist(), strict=True))
        for x, y in cells:
            assert len(cells) == 1 or any((x + dx, y + dy) in cells for dx in (-1, 0, 1)
                                          for dy in (-1, 0, 1) if dx or dy)
        for end in (a, b):
            ex, ey = np.floor(end + 0.5).astype(int)
            assert pix[ey, ex] == 1


@pytest.mark.parametrize("backend", ["numpy", pytest.param("compiled", marks=needs_numba)])
def test_special_segments(backend):
    pix = np.zeros((20, 30), np.uint32)
    raster.segments(pix, [[4.2, 7.0]], [[4.2, 7.0]], 3, backend=backend)      # a point
    assert np.flatnonzero(pix).tolist() == [7 * 30 + 4]
    pix[:] = 0
    raster.segments(pix, [[5.0, -50.0]], [[5.0, 50.0]], 3, backend=backend)   # vertical
    assert (pix[:, 5] == 3).all() and pix.sum() == 3 * 20
    pix[:] = 0
    raster.segments(pix, [[-5.0, 19.0]], [[40.0, 19.0]], 3, backend=backend)  # bottom row
    assert (pix[19] == 3).all() and pix.sum() == 3 * 30
    pix[:] = 0
    raster.segments(pix, [[-5.0, 19.6], [31.0, 0.0], [1e9, 1e9]],           # all outside
                    [[40.0, 19.6], [31.0, 19.0], [2e9, -1e9]], 3, backend=backend)
    assert pix.sum() == 0
    pix[:] = 0
    raster.segments(pix, [[2.0, 2.0]], [[12.0, 2.0]], 3, width=2, backend=backend)
    assert (pix[2:4, 2:13] == 3).all() and pix[2:4, 13].sum() == 3       # right neighbour
    pix[:] = 0
    raster.segments(pix, [[29.0, 19.0]], [[29.0, 19.0]], 3, width=2, backend=backend)
    assert pix[19, 29] == 3 and pix.sum() == 3                          # clamped, no wrap


@pytest.mark.parametrize("backend", ["numpy", pytest.param("compiled", marks=needs_numba)])
def test_the_last_segment_wins_an_overlap(backend):
    pix = np.zeros((10, 40), np.uint32)
    long = ([[0.0, 5.0]], [[39.0, 5.0]])
    short = ([[10.0, 5.0]], [[12.0, 5.0]])
    raster.segments(pix, np.r_[long[0], short[0]], np.r_[long[1], short[1]], [1, 2],
                    backend=backend)
    assert pix[5, 9] == 1 and (pix[5, 10:13] == 2).all() and pix[5, 13] == 1
    raster.segments(pix, np.r_[short[0], long[0]], np.r_[short[1], long[1]], [2, 1],
                    backend=backend)
    assert (pix[5] == 1).all()


@needs_numba
def test_links_with_a_camera_view_and_an_order_agree():
    rng = np.random.default_rng(11)
    cam = Camera((W, H), center=(0.3, -0.2), width=4.0)
    x = rng.normal(0.0, 2.0, (500, 2))
    i = rng.integers(0, 500, 4000)
    j = rng.integers(0, 500, 4000)
    colours = rng.integers(1, 2**32, 4000, dtype=np.uint32)
    order = rng.permutation(4000)[:3000]
    view = camera_view(cam)
    s = cam.to_screen(x)
    out = {}
    for backend in ("numpy", "compiled"):
        pix = np.zeros((H, W), np.uint32)
        n = raster.links(pix, x, i, j, colours, view, order, 1, backend)
        out[backend] = pix, n
    assert out["numpy"][1] == out["compiled"][1]
    assert np.array_equal(out["numpy"][0], out["compiled"][0])
    # ... and they are the screen segments of the camera
    ref = np.zeros((H, W), np.uint32)
    raster.segments(ref, s[i[order]], s[j[order]], colours[order], backend="numpy")
    assert np.array_equal(ref, out["compiled"][0])


# --------------------------------------------------------------------------- strain

def test_strain_colours_pick_the_right_bins():
    table = np.arange(16, dtype=np.uint32).reshape(2, 8) + 100
    s = np.array([-0.5, -0.01, -0.002, 0.0, 0.002, 0.01, 0.03, 0.2, 0.05, -0.02, np.nan,
                  0.0, -0.3, 0.01])
    kind = np.array([0] * 11 + [1, 1, 1], np.int8)
    want_bins = [0, 1, 2, 3, 4, 5, 6, 7, 7, 1, 7, 3, 0, 5]
    for backend in ["numpy"] + (["compiled"] if sim_backend.INSTALLED else []):
        colour, order, _ = raster.strain_colours(None, np.zeros(14), np.ones(14),
                                                 np.ones(14), kind, s, STRAIN_EDGES,
                                                 table, NEUTRAL_BIN, backend)
        assert colour.tolist() == [table[k, b] for k, b in zip(kind, want_bins, strict=True)]
        # neutral first, the most strained last (on top); ties keep their index order
        level = np.abs(np.array(want_bins) - NEUTRAL_BIN)
        assert order.tolist() == np.argsort(level, kind="stable").tolist()
    # bins and colours as the legend shows them
    assert render.strain_bins(s[:10]).tolist() == want_bins[:10]
    assert len(STRAIN_RGB[0]) == len(STRAIN_RGB[1]) == len(STRAIN_EDGES) + 1


@pytest.mark.parametrize("backend", ["numpy", pytest.param("compiled", marks=needs_numba)])
def test_strain_computed_from_positions_matches_the_constraints(backend):
    rng = np.random.default_rng(5)
    world = World(WorldConfig())
    build_cloth(world, cols=12, rows=9, spacing=0.1, shear=True)
    build_rope(world, (0.0, 2.0), (1.0, 2.0), segments=10, kind="rope")
    p, c = world.particles, world.constraints
    p.x += rng.normal(0.0, 0.004, p.x.shape)
    assert (c.kind == 1).any() and (c.strain(p.x) > 0.005).any()
    table = np.arange(16, dtype=np.uint32).reshape(2, 8)
    given = raster.strain_colours(p.x, c.i, c.j, c.rest, c.kind, c.strain(p.x),
                                  STRAIN_EDGES, table, NEUTRAL_BIN, backend)
    computed = raster.strain_colours(p.x, c.i, c.j, c.rest, c.kind, None, STRAIN_EDGES,
                                     table, NEUTRAL_BIN, backend)
    np.testing.assert_allclose(computed[2], c.strain(p.x), rtol=0, atol=1e-12)
    assert (computed[2][c.kind == 1] >= 0).all()                 # slack ropes: 0
    assert np.array_equal(given[0], computed[0])
    assert np.array_equal(given[1], computed[1])


@needs_numba
def test_strain_colours_kernel_equals_numpy():
    rng = np.random.default_rng(2)
    m = 20000
    s = rng.normal(0.0, 0.02, m)
    s[::97] = rng.choice(STRAIN_EDGES, len(s[::97]))              # exactly on an edge
    s[::131] = np.nan
    kind = rng.integers(0, 2, m).astype(np.int8)
    table = rng.integers(0, 2**32, (2, 8), dtype=np.uint32)
    z = np.zeros(m, np.int64)
    a = raster.strain_colours(None, z, z, np.ones(m), kind, s, STRAIN_EDGES, table,
                              NEUTRAL_BIN, "numpy")
    b = raster.strain_colours(None, z, z, np.ones(m), kind, s, STRAIN_EDGES, table,
                              NEUTRAL_BIN, "compiled")
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


# --------------------------------------------------------------------------- dots

@needs_numba
def test_stamp_kernel_equals_numpy():
    rng = np.random.default_rng(4)
    pts = rng.uniform(-10, W + 10, (600, 2))
    pts[::50] = np.nan
    pts[1::50] = 1e12
    pts[2::50] = np.round(pts[2::50]) + 0.5                      # rounding ties
    colours = rng.integers(1, 2**32, 600, dtype=np.uint32)
    for offs in (raster.square_offsets(1), raster.square_offsets(4, hollow=True),
                 raster.ring_offsets(9.0, 2.0), np.array([[0, 0], [1, 0], [0, 1], [1, 1]])):
        a = np.zeros((H, W), np.uint32)
        b = np.zeros((H, W), np.uint32)
        raster.stamp(a, pts, offs, colours, backend="numpy")
        raster.stamp(b, pts, offs, colours, backend="compiled")
        assert a.any() and np.array_equal(a, b)


# --------------------------------------------------------------------------- the scene

def _scene(seed: int = 0, cols: int = 40, rows: int = 30) -> World:
    """A perturbed cloth with shear links, a rope, springs, balls, pins and a grab."""
    rng = np.random.default_rng(seed)
    world = World(WorldConfig())
    build_cloth(world, cols=cols, rows=rows, spacing=2.0 / cols, origin=(-1.0, 1.2),
                shear=True, pins="top_points")
    build_rope(world, (-1.5, 1.5), (1.5, 0.5), segments=30, kind="rope")
    balls = world.add_particles(rng.uniform(-1, 1, (5, 2)), radius=0.05)
    world.add_springs(balls[:-1], balls[1:], k=10.0)
    world.particles.x += rng.normal(0.0, 0.002, world.particles.x.shape)
    world.grab(int(np.flatnonzero(world.particles.inv_mass > 0)[3]))
    return world


def _render(backend: str, world: World, cam: Camera, ghost=False):
    surf = pygame.Surface(cam.size, 0, 32)
    surf.fill((0, 0, 0))
    r = WorldRenderer(backend)
    view = world.view()
    x = world.particles.x
    out = r.world(surf, cam, view, x + 0.001)          # drawn at other positions
    if ghost:
        r.ghost(surf, cam, view, x - 0.01)
    return pygame.surfarray.array2d(surf), out


@needs_numba
@pytest.mark.parametrize("zoom", [2.0, 3.5, 12.0])       # cropped, all in view, tiny
@pytest.mark.parametrize("cols", [12, 40])               # 2 px links, 1 px links
def test_rendered_world_is_identical_with_and_without_numba(zoom, cols):
    world = _scene(1, cols, cols * 3 // 4)
    c = world.constraints
    assert (len(c) < 3000) == (cols == 12)
    cam = Camera((320, 200), center=(0.2, 0.6), width=zoom)
    a, oa = _render("numpy", world, cam, ghost=True)
    b, ob = _render("compiled", world, cam, ghost=True)
    assert oa["samples"] == ob["samples"] > 0
    # The strain comes from the core's view, the same for both drawing backends.
    np.testing.assert_allclose(oa["strain"], c.strain(world.particles.x), rtol=0, atol=1e-12)
    assert np.array_equal(oa["strain"], ob["strain"])
    assert len(np.unique(a)) > 5                        # several strain colours, pins...
    assert np.array_equal(a, b)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("compiled", marks=needs_numba)])
def test_particles_pins_and_grab_are_drawn(backend):
    world = World(WorldConfig())
    idx = world.add_particles([[0.0, 0.0], [1.0, 0.5], [-1.0, -0.5]], radius=0.0,
                              pinned=[False, True, False])
    world.grab(int(idx[2]))
    cam = Camera((200, 100), center=(0.0, 0.0), width=4.0)
    surf = pygame.Surface(cam.size, 0, 32)
    WorldRenderer(backend).world(surf, cam, world.view())
    pix = pygame.surfarray.pixels2d(surf)
    for k, rgb in ((0, render.PARTICLE), (1, render.PIN), (2, render.GRAB)):
        sx, sy = np.floor(cam.to_screen(world.particles.x[k]) + 0.5).astype(int)
        want = surf.map_rgb(rgb)
        near = pix[sx - 4:sx + 5, sy - 4:sy + 5]
        assert (near == want).sum() >= 4, rgb
    del pix


@needs_numba
def test_the_kernels_draw_a_large_cloth_without_the_numpy_path(monkeypatch):
    """With numba the drawing of links never goes through the numpy rasteriser (nor a
    per-link Python loop): the compiled kernels are called once per frame (the world's
    links: one call that bins, orders and draws them; the ghost's: one call)."""
    world = World(WorldConfig())
    build_cloth(world, cols=60, rows=60, spacing=0.02, shear=True)
    calls = {"links": 0, "strain_links": 0, "colours": 0}
    links_k, colours_k = raster._links_kernel, raster._strain_colours_kernel
    strain_links_k = raster._strain_links_kernel

    def count(name, f):
        def wrapped(*a):
            calls[name] += 1
            return f(*a)
        return wrapped

    def forbidden(*a, **k):
        raise AssertionError("numpy rasteriser used")

    monkeypatch.setattr(raster, "_segments_numpy", forbidden)
    monkeypatch.setattr(raster, "_links_kernel", count("links", links_k))
    monkeypatch.setattr(raster, "_strain_colours_kernel", count("colours", colours_k))
    monkeypatch.setattr(raster, "_strain_links_kernel",
                        count("strain_links", strain_links_k))
    cam = Camera((400, 300), center=(0.6, -0.6), width=2.0)
    surf = pygame.Surface(cam.size, 0, 32)
    r = WorldRenderer()                                   # backend "auto"
    view = world.view()
    r.world(surf, cam, view)
    r.ghost(surf, cam, view)
    assert calls == {"links": 1, "strain_links": 1, "colours": 0}


def test_warm_up_and_backend_choice():
    raster.warm_up()
    WorldRenderer.warm_up()
    with pytest.raises(ValueError):
        raster.segments(np.zeros((2, 2), np.uint32), [[0, 0]], [[1, 1]], 1, backend="gpu")
    if not sim_backend.INSTALLED:
        with pytest.raises(RuntimeError):
            raster.segments(np.zeros((2, 2), np.uint32), [[0, 0]], [[1, 1]], 1,
                            backend="compiled")


def test_without_numba_the_numpy_path_draws_the_same_scene(monkeypatch):
    world = _scene(2, 12, 9)
    cam = Camera((320, 200), center=(0.2, 0.6), width=3.5)
    want, _ = _render("numpy", world, cam, ghost=True)

    def forbidden(*a):
        raise AssertionError("kernel called without numba")

    monkeypatch.setattr(sim_backend, "INSTALLED", False)
    for name in ("_links_kernel", "_strain_colours_kernel", "_stamp_kernel",
                 "_strain_links_kernel", "_screen_kernel", "_draw_kernel"):
        monkeypatch.setattr(raster, name, forbidden)
    raster.warm_up()                                    # nothing to compile
    got, out = _render("auto", world, cam, ghost=True)
    assert out["samples"] > 0 and np.array_equal(got, want)


def test_auto_draws_with_numpy_when_numba_turns_out_unusable(monkeypatch):
    """numba is imported when first needed; if that fails (no cache folder anywhere, a
    broken install), "auto" draws with numpy and "compiled" says why."""
    from sandbox.sim import backend
    monkeypatch.setattr(backend, "_numba", None)
    monkeypatch.setattr(backend, "_failed", "ImportError: broken llvmlite")
    assert not raster._use_kernels("auto")
    if sim_backend.INSTALLED:
        with pytest.raises(RuntimeError, match="broken llvmlite"):
            raster._use_kernels("compiled")


@needs_numba
def test_stamp_hands_the_kernel_one_colour_type(monkeypatch):
    """Per-point colours (read-only through ``broadcast_to``) and one colour reach the
    compiled stamp as the same type, writable and C order: a read-only array is another
    type to numba, whose first call loaded a second kernel in the middle of a frame."""
    seen = []
    monkeypatch.setattr(raster, "_stamp_kernel",
                        lambda pix, pts, offs, colours: seen.append(
                            (colours.dtype, colours.flags.writeable,
                             colours.flags.c_contiguous)))
    pix = np.zeros((8, 8), np.uint32)
    pts = np.array([[1.0, 1.0], [3.0, 4.0]])
    offs = np.zeros((1, 2), np.int64)
    per_point = np.array([5, 6], np.uint32)
    per_point.flags.writeable = False
    raster.stamp(pix, pts, offs, per_point, backend="compiled")
    raster.stamp(pix, pts, offs, 7, backend="compiled")
    assert seen == [(np.dtype(np.uint32), True, True)] * 2


#: One example of every shape type the level files and the colliders know, a rounded box
#: too: the drawing is the app's, keyed by the same names.
SHAPE_EXAMPLES = [
    {"type": "circle", "center": [0.0, 0.0], "radius": 1.0},
    {"type": "segment", "a": [-1.0, 0.0], "b": [1.0, 0.5], "thickness": 0.1},
    {"type": "polygon", "points": [[-1.0, -1.0], [1.0, -1.0], [0.0, 1.0]]},
    {"type": "box", "min": [-1.0, -0.5], "max": [1.0, 0.5]},
    {"type": "box", "min": [-1.0, -0.5], "max": [1.0, 0.5], "radius": 0.4},
]


@pytest.mark.parametrize("spec", SHAPE_EXAMPLES, ids=lambda s: s["type"] + (
    " rounded" if s.get("radius") and s["type"] == "box" else ""))
def test_every_shape_type_is_drawn(spec):
    """Every shape type draws pixels where it is and none far from it; a rounded box
    leaves its corners' outer pixels empty, a sharp box fills them."""
    from sandbox.sim.collide.shapes import SHAPE_SETS

    assert {s["type"] for s in SHAPE_EXAMPLES} == set(SHAPE_SETS)
    surf = pygame.Surface((200, 200))
    surf.fill((0, 0, 0))
    cam = Camera((200, 200), center=(0.0, 0.0), width=4.0)     # 50 px/m
    render.WorldRenderer().shapes(surf, cam, [spec])          # the window's own call
    px = pygame.surfarray.array3d(surf).sum(axis=2)
    assert px[100, 100] > 0 or spec["type"] == "segment" and px[100, 84:92].any()
    assert not px[:15].any() and not px[-15:].any()             # nothing 1.7 m away
    if spec["type"] == "box":
        corner = px[51:53, 76:78]                               # just inside (-1, 0.5)
        assert corner.any() == (not spec.get("radius"))

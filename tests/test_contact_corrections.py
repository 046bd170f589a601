"""The contact solver's position corrections of the last substep, read-only
(``World.contact_corrections``, ``Colliders.last_corrections``): the numpy reference's
``Contacts.dx``, and the same bits from the compiled substep (``FlatContacts.dx``) and
the compiled frame (its ``dx`` scratch); and the debug overlay's arrows (its corrections
layer, Alt+2) drawn from them.

A ball resting on a floor: each step of ``h`` gravity moves it ``g h^2`` into the floor
(a Verlet step from rest) and the contact pushes it back out by as much, straight up:
2.725 mm at 60 Hz.
"""

from __future__ import annotations

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app import debug
from sandbox.app.camera import Camera
from sandbox.app.main import App, scene_from_world
from sandbox.levels import build_world, find_level, load_level
from sandbox.sim import backend
from sandbox.sim.collide.colliders import Colliders
from sandbox.sim.collide.contacts import Contacts
from sandbox.sim.collide.frame import FlatContacts
from sandbox.sim.world import World, WorldConfig

H = 1 / 60
G = 9.81


@pytest.fixture
def kernels_ready():
    if not backend.runnable():
        pytest.skip("numba cannot run here")
    before = backend.ready()
    yield
    backend.set_ready(before)


def resting_ball() -> World:
    """A ball of radius 0.1 resting on the floor of a box, another falling beside it."""
    w = World(WorldConfig(bounds=(-2.0, 0.0, 2.0, 3.0)))
    w.add_particles([[0.0, 0.1], [1.0, 2.0]], radius=0.1)
    w.start(H)
    return w


def _run(world: World, way: str, frames: int, begun: list) -> list:
    """``frames`` steps of ``world`` the ``way`` asked ("numpy": the reference,
    "substeps": the compiled contacts substep by substep, "frame": the compiled frame),
    each step's corrections; checks that the way ran."""
    backend.set_ready(way != "numpy")
    world.scratch.compile_frames = way == "frame"
    out = []
    for _ in range(frames):
        begun.clear()
        world.step(H)
        out.append(world.contact_corrections())
        kinds = {type(c) for c in begun} - {type(None)}
        assert kinds <= {"numpy": {Contacts}, "substeps": {FlatContacts},
                         "frame": set()}[way]
        assert (way == "frame") == (world.scratch.lane is not None)
        assert (way == "frame") == (not begun)
    return out


@pytest.fixture
def begun(monkeypatch):
    """What each substep's ``Colliders.begin`` returned (none: the compiled frame)."""
    got = []
    real = Colliders.begin

    def begin(self, *args, **kwargs):
        c = real(self, *args, **kwargs)
        got.append(c)
        return c
    monkeypatch.setattr(Colliders, "begin", begin)
    return got


@pytest.mark.parametrize("make", ["resting ball", "pile"])
def test_the_compiled_paths_give_the_references_corrections_bit_for_bit(
        kernels_ready, begun, make):
    """The same world run three ways: every step's corrections are the reference's, bit
    for bit (and so are the states), nonzero where the contacts pushed."""
    def new():
        if make == "resting ball":
            return resting_ball()
        return build_world(load_level(find_level(make)))
    runs = {}
    for way in ("numpy", "substeps", "frame"):
        w = new()
        assert w.contact_corrections() is None                 # no contacts ran yet
        runs[way] = (_run(w, way, 40, begun), w.state_hash())
    ref, digest = runs["numpy"]
    for way in ("substeps", "frame"):
        got, other = runs[way]
        assert other == digest
        for k, (a, b) in enumerate(zip(ref, got, strict=True)):
            assert a.dtype == b.dtype == np.float64 and a.shape == b.shape
            assert a.tobytes() == b.tobytes(), (way, k)
    moved = [int(np.count_nonzero(np.abs(c).sum(axis=1))) for c in ref]
    assert max(moved) > 0


@pytest.fixture
def numpy_only():
    before = backend.ready()
    backend.set_ready(False)
    yield
    backend.set_ready(before)


def test_a_resting_ball_is_pushed_up_by_g_h_squared(numpy_only, begun):
    w = resting_ball()
    for _ in range(30):
        w.step(H)
    dx = w.contact_corrections()
    assert isinstance(begun[-1], Contacts)                  # the reference's own dx
    assert dx is not None and dx.shape == (2, 2)
    assert np.array_equal(dx, begun[-1].dx) and dx is not begun[-1].dx
    assert dx[0] == pytest.approx([0.0, G * H * H], rel=1e-6, abs=1e-12)
    assert dx[1].tolist() == [0.0, 0.0]                     # falling: no contact
    dx[0] = 1.0                                             # a copy: the world's stays
    assert w.contact_corrections()[0, 1] == pytest.approx(G * H * H)


def test_a_world_without_contacts_has_none(kernels_ready):
    w = World(WorldConfig())
    w.add_particles([[0.0, 0.0], [0.0, -1.0]], pinned=[True, False])
    w.add_constraints([0], [1])
    w.start(H)
    w.step(H)
    assert w.contact_corrections() is None


# --------------------------------------------------------------------------- the overlay

def test_the_overlay_draws_an_arrow_up_from_the_resting_ball():
    """From the ball's centre on screen, straight up (y down on screen), 10 px a mm at
    one substep of 1/60 s: 27 px for its 2.7 mm, whatever the zoom; none from the
    falling ball."""
    w = resting_ball()
    for _ in range(30):
        w.step(H)
    assert debug.arrow_scale(w) == 10.0
    cam = Camera((800, 600), center=(0.0, 1.5), width=5.0)
    tails, heads = debug.correction_arrows(w, cam)
    assert len(tails) == 1
    assert np.allclose(tails[0], cam.to_screen(w.particles.x[0]))
    d = heads[0] - tails[0]
    assert d[0] == pytest.approx(0.0, abs=1e-9)
    assert -d[1] == pytest.approx(G * H * H * 1e3 * 10.0, rel=1e-6)
    cam.zoom_at((400, 300), 4.0)                              # the same length zoomed in
    tails, heads = debug.correction_arrows(w, cam)
    assert heads[0][1] - tails[0][1] == pytest.approx(d[1], rel=1e-9)


@pytest.mark.parametrize("substeps, scale", [(1, 10.0), (2, 20.0), (8, 500.0),
                                             (10, 500.0), (20, 2000.0), (64, 2e4)])
def test_the_scale_goes_with_the_substep_so_a_resting_arrow_is_seen(substeps, scale):
    """A resting contact's correction, ``g hs^2``, drawn 10 to 30 px long at every
    substep count (8 substeps: 0.04 mm, half a pixel at 10 px a mm); the legend says
    what its 20 px arrow stands for."""
    w = World(WorldConfig(bounds=(-2.0, 0.0, 2.0, 3.0), substeps=substeps))
    w.add_particles([[0.0, 0.1]], radius=0.1)
    w.start(H)
    for _ in range(20):
        w.step(H)
    assert debug.arrow_scale(w) == scale
    tails, heads = debug.correction_arrows(w, Camera((800, 600), width=5.0))
    length = float(tails[0][1] - heads[0][1])
    assert 10.0 <= length < 30.0
    assert length == pytest.approx(G * (H / substeps) ** 2 * 1e3 * scale, rel=1e-6)
    assert debug.legend_text(scale).startswith(f"= {20 / scale:g} mm: ")


def test_long_corrections_are_capped_and_none_is_no_arrow():
    """A ball hitting the floor at 10 m/s is cut back at its time of impact by about
    v h = 167 mm: drawn ``ARROW_MAX_PX`` long. A world whose contacts never ran: None."""
    w = World(WorldConfig(bounds=(-2.0, 0.0, 2.0, 3.0), gravity=(0.0, 0.0)))
    w.add_particles([[0.0, 0.15]], v=[[0.0, -10.0]], radius=0.1)
    w.start(H)
    w.step(H)
    assert w.contact_corrections()[0, 1] > 0.1
    cam = Camera((800, 600), width=5.0)
    tails, heads = debug.correction_arrows(w, cam)
    assert len(tails) == 1 and heads[0] - tails[0] == pytest.approx(
        [0.0, -debug.ARROW_MAX_PX])
    assert debug.correction_arrows(World(WorldConfig()), cam) is None


def test_alt_2_shows_the_corrections_in_the_window_with_their_scale(tmp_path):
    """X: the contacts only, no arrow; Alt+2 adds the corrections: the canvas has the
    arrow's colour along the arrow the overlay returns and the legend's scale."""
    pygame.display.init()
    pygame.display.set_mode((800, 600))
    pygame.event.clear()
    app = App(scene_from_world(resting_ball(), h=H), size=(800, 600), out_dir=tmp_path)
    for _ in range(20):
        app.frame(H)
    app.session.paused = True

    def arrow_pixels() -> list:
        tails, heads = debug.correction_arrows(app.world, app.camera)
        assert len(tails) == 1
        pts = [tails[0] + (heads[0] - tails[0]) * f for f in (0.3, 0.5, 0.7)]
        return [tuple(app.canvas.get_at((round(p[0]), round(p[1]))))[:3] for p in pts]
    ev.press(pygame.K_x)
    app.frame(H)
    assert app.debug_layers == {"contacts"} and debug.ARROW not in arrow_pixels()
    ev.press(pygame.K_2, pygame.KMOD_LALT)
    app.frame(H)
    assert app.debug_layers == {"contacts", "corrections"}
    assert arrow_pixels() == [debug.ARROW] * 3
    assert app.messages[-1][0] == "debug draw: contacts + corrections (X: off; Alt+1-4: each)"
    drawn = app.debug_draw.drawn
    assert drawn.legend == ["contacts", "corrections"]       # a line each, in order
    x, y, w, h = app.safe_area()
    assert pygame.Rect(x, y, w, h).contains(drawn.legend_rect)
    legend = app.canvas.subsurface(drawn.legend_rect)
    colours = {tuple(legend.get_at((i, j)))[:3] for i in range(legend.get_width())
               for j in range(legend.get_height())}
    assert debug.ARROW in colours

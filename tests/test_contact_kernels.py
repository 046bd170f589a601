"""The compiled contact kernels (the twins in ``sandbox.sim.collide``) against the numpy
reference (``Colliders.backend = "numpy"``).

The kernels repeat the reference's operations in its order and in its float types (see
the module docstring of ``collide.frame``), so the expected difference is zero: every
comparison here is exact (``assert_array_equal``, under which -0.0 equals 0.0, the one
freedom the kernels take). No tolerance would do instead: a pile is chaotic (moving one
ball of the test pile by 1e-15 m moves balls by 1e-11 m after 60 frames and 3e-8 m after
100, three orders of magnitude per 40 frames), so a round-off bound would have to grow with
the run and the scene. Timing lives in ``python main.py bench``; these tests only check
numbers.
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.sim import builders as B
from sandbox.sim import pipeline
from sandbox.sim.backend import usable
from sandbox.sim.collide import begin as begin_stage
from sandbox.sim.collide import finish as finish_stage
from sandbox.sim.collide import frame as frames
from sandbox.sim.collide import project as project_stage
from sandbox.sim.collide.broad import _PairList, any_moving, moved_less, pair_list, particle_pairs
from sandbox.sim.collide.colliders import _NO_KEYS, Colliders
from sandbox.sim.collide.contacts import BRUTE_PAIRS, SKIN, TOUCH, Contacts
from sandbox.sim.collide.frame import FlatContacts
from sandbox.sim.collide.geometry import WALL, _distance, _sweep
from sandbox.sim.collide.records import Bounce, Moves, Rules
from sandbox.sim.collide.shapes import _KIND, Walls
from sandbox.sim.world import SimulationDiverged, World, WorldConfig

pytestmark = pytest.mark.skipif(not usable("contacts"), reason="numba is not installed")

FRAME = 1 / 60
DTYPES = ["float64", "float32"]


def _assert_same(ref: World, got: World) -> None:
    p, q = ref.particles, got.particles
    assert np.isfinite(p.x).all()
    np.testing.assert_array_equal(q.x, p.x)
    np.testing.assert_array_equal(q.v, p.v)
    np.testing.assert_array_equal(q.x_prev, p.x_prev)


def _both(build, frames: int, **kw) -> tuple[World, World]:
    """The scene ``build(**kw)`` run ``frames`` frames with each backend."""
    out = []
    for backend in ("numpy", "compiled"):
        w = build(**kw)
        w.colliders.backend = backend
        w.start(FRAME)
        for _ in range(frames):
            w.step(FRAME)
        out.append(w)
    return out[0], out[1]


# --------------------------------------------------------------------------- scenes

def _pile(dtype="float64", integrator="tcv_corrected") -> World:
    """The benchmark's pile, smaller: 300 balls with jitter into a funnel of two thick
    segments, two circles, a box and a polygon inside the bounds; 10 substeps x 1."""
    w = World(WorldConfig(dtype=dtype, integrator=integrator, substeps=10, iterations=1,
                          bounds=(-1.5, -1.0, 1.5, 6.0), collide_particles=True,
                          friction=0.3))
    rng = np.random.default_rng(4)
    r, c = np.meshgrid(np.arange(15), np.arange(20), indexing="ij")
    x = np.stack([(c.ravel() - 9.5) * 0.11, 3.0 + r.ravel() * 0.11], axis=1)
    w.add_particles(x + 0.001 * rng.standard_normal(x.shape), mass=0.05, radius=0.05)
    w.add_shape("segment", a=(-1.45, 2.6), b=(-0.25, 1.6), thickness=0.05)
    w.add_shape("segment", a=(1.45, 2.6), b=(0.25, 1.6), thickness=0.05)
    w.add_shape("circle", center=(-0.8, 0.3), radius=0.3)
    w.add_shape("circle", center=(0.8, 0.3), radius=0.3)
    w.add_shape("box", min=(-0.2, -0.6), max=(0.2, -0.3))
    w.add_shape("polygon", points=[(-1.5, -1.0), (-0.9, -1.0), (-1.5, -0.4)])
    return w


def _slope(dtype="float64", integrator="tcv_corrected") -> World:
    """Balls on two 30 degree slopes, a thick segment that grips (friction 0.9: they
    stick) and a polygon that does not (0.05: they slide), plus particle friction
    between a stack of balls on a third, flat and frictionless floor."""
    w = World(WorldConfig(dtype=dtype, integrator=integrator, substeps=4, iterations=4,
                          collide_particles=True, friction=0.4))
    s, c = np.sin(np.pi / 6), np.cos(np.pi / 6)
    w.add_shape("segment", a=(-4.0, 2.0), b=(-4.0 + 2 * c, 2.0 - 2 * s), thickness=0.03,
                friction=0.9)
    w.add_shape("polygon", points=[(0.0, 1.0), (2 * c, 1.0 - 2 * s), (2 * c, 0.0), (0.0, 0.0)],
                friction=0.05)
    w.add_shape("box", min=(3.0, -1.0), max=(6.0, 0.0), friction=0.0)
    along = np.linspace(0.3, 1.5, 5)
    on_seg = np.stack([-4.0 + along * c, 2.0 - along * s], 1) + (0.03 + 0.1) * np.array([s, c])
    on_poly = np.stack([along * c, 1.0 - along * s], 1) + 0.1 * np.array([s, c])
    stack = np.stack([np.full(6, 4.5) + 0.01 * np.arange(6), 0.1 + 0.2 * np.arange(6)], 1)
    w.add_particles(np.concatenate([on_seg, on_poly, stack]), mass=0.2, radius=0.1)
    return w


def _bounce(dtype="float64", integrator="tcv_corrected") -> World:
    """Restitution everywhere: balls dropped on an elastic circle, a half-elastic box and
    the bounds' floor (the world's 0.8), a Newton's cradle of touching balls hit by a
    fast one (particle restitution), and a fast ball at a thin segment (swept)."""
    w = World(WorldConfig(dtype=dtype, integrator=integrator, substeps=8, iterations=2,
                          restitution=0.8, friction=0.2, collide_particles=True,
                          bounds=(-6.0, -2.0, 6.0, 8.0)))
    w.add_shape("circle", center=(-3.0, 0.0), radius=0.5, restitution=1.0)
    w.add_shape("box", min=(0.0, -0.5), max=(1.5, 0.0), restitution=0.5, friction=0.6)
    w.add_shape("segment", a=(3.0, -1.0), b=(5.0, -1.0))
    w.add_particles([[-3.0, 2.0], [-2.9, 3.5], [0.7, 1.0], [0.75, 2.5], [-5.0, 5.0]],
                    radius=0.1)
    w.add_particles(np.stack([np.arange(5) * 0.2 - 1.0, np.full(5, -1.9)], 1), radius=0.1)
    w.add_particles([[-2.0, -1.9]], v=[[6.0, 0.0]], radius=0.1)
    w.add_particles([[4.0, 3.0]], v=[[0.0, -60.0]], radius=0.05)        # through the line
    return w


def _every_shape(dtype="float64", integrator="tcv_corrected") -> World:
    """Particles of different masses and radii (points among them), pinned ones and a
    chain (linked pairs never collide) against a circle, a thick and a thin segment, a
    clockwise pentagon, a box, a rounded box and the walls, with fast particles aimed at each shape
    (continuous detection: discs, capsule sides and ends, polygon faces and corners)."""
    w = World(WorldConfig(dtype=dtype, integrator=integrator, substeps=3, iterations=3,
                          restitution=0.3, friction=0.5, collide_particles=True,
                          bounds=(-8.0, -4.0, 8.0, 8.0)))
    w.add_shape("circle", center=(-5.0, 0.0), radius=0.6, friction=0.1)
    w.add_shape("segment", a=(-3.0, -1.0), b=(-1.0, 0.0), thickness=0.1, restitution=0.9)
    w.add_shape("segment", a=(-1.0, -2.0), b=(1.0, -2.0))
    ang = -np.linspace(0.0, 2 * np.pi, 5, endpoint=False)                  # clockwise
    w.add_shape("polygon", points=np.stack([2.0 + 0.8 * np.cos(ang), 0.8 * np.sin(ang)], 1))
    w.add_shape("box", min=(4.0, -1.0), max=(6.0, 0.0), restitution=0.0, friction=1.0)
    w.add_shape("box", min=(6.2, 1.5), max=(7.6, 2.3), radius=0.3)          # rounded
    rng = np.random.default_rng(9)
    x = np.stack([rng.uniform(-6.5, 6.5, 60), rng.uniform(1.0, 5.0, 60)], 1)
    w.add_particles(x, mass=rng.uniform(0.1, 2.0, 60), radius=rng.uniform(0.05, 0.2, 60))
    w.add_particles([[-4.0, 6.0], [3.0, 6.0]], radius=0.0)                # points
    w.add_particles([[0.0, 3.0]], pinned=True, radius=0.3)
    # Fast ones, one substep's path longer than the gap: the sweep cuts them at impact.
    aims = [(-5.0, 3.0, 0.0, -200.0), (-2.0, 2.0, 0.0, -250.0), (0.0, 1.0, 0.0, -300.0),
            (2.0, 4.0, 0.0, -320.0), (2.6, 3.0, 0.0, -280.0), (5.0, 3.0, 0.0, -260.0),
            (1.0, 1.0, 0.0, -400.0), (6.35, 5.0, 0.0, -330.0)]     # a rounded corner
    for k, (px, py, vx, vy) in enumerate(aims):
        w.add_particles([[px, py]], v=[[vx, vy]], radius=0.0 if k == 6 else 0.08)
    # Neighbours overlap (0.4 > 4/12): only the exclusion keeps them from colliding.
    B.build_rope(w, (-7.0, 6.0), (-3.0, 6.0), 12, mass=0.1, radius=0.2, kind="stick")
    return w


def _soft_blob(dtype="float64", integrator="tcv_corrected") -> World:
    """The benchmark's soft blob, smaller: a 6 x 6 lattice of compliant links resting on
    the bounds' floor (links and walls only), restitution and friction, 20 substeps."""
    w = World(WorldConfig(dtype=dtype, integrator=integrator, substeps=20, iterations=1,
                          bounds=(-2.0, -1.0, 2.0, 3.0), restitution=0.3, friction=0.5))
    B.build_soft_blob(w, center=(0.0, -0.6), cols=6, rows=6, spacing=0.1, mass=0.05,
                            radius=0.04, compliance=1e-5)
    return w


def _cornered(dtype="float64", integrator="tcv_corrected") -> World:
    """Three balls thrown into three corners of the bounds, no shapes: more wall
    contacts than particles, so the walls-only start (``_begin_walls``) hands over to
    ``begin_into``, which grows its rows."""
    w = World(WorldConfig(dtype=dtype, integrator=integrator, substeps=4, iterations=2,
                          bounds=(-1.0, -1.0, 1.0, 1.0), restitution=0.5, friction=0.2))
    w.add_particles([[0.85, 0.85], [-0.85, -0.85], [0.85, -0.85]],
                    v=[[3.0, 3.0], [-3.0, -2.0], [2.0, -3.0]], mass=0.1, radius=0.1)
    return w


def _many_shapes(dtype="float64", integrator="tcv_corrected") -> World:
    """Enough particles times shapes (430 x 70) for the grid broad phase, not brute
    force, with a long floor and pegs of every type."""
    w = World(WorldConfig(dtype=dtype, integrator=integrator, substeps=2, iterations=2,
                          collide_particles=True, friction=0.2, restitution=0.2))
    w.add_shape("box", min=(-12.0, -3.0), max=(12.0, -2.0))
    for k in range(69):
        cx, cy = -10.0 + 0.3 * k, -1.0 + 0.5 * (k % 3)
        kind = k % 4
        if kind == 0:
            w.add_shape("circle", center=(cx, cy), radius=0.08)
        elif kind == 1:
            w.add_shape("segment", a=(cx - 0.1, cy), b=(cx + 0.1, cy + 0.05), thickness=0.02)
        elif kind == 2:
            w.add_shape("polygon", points=[(cx, cy), (cx + 0.15, cy), (cx, cy + 0.15)])
        else:
            w.add_shape("box", min=(cx, cy), max=(cx + 0.1, cy + 0.1))
    k = np.arange(430)
    w.add_particles(np.stack([-10.0 + 0.05 * k, 1.0 + 0.3 * (k % 5)], 1), radius=0.04)
    return w


def _crammed(dtype="float64", integrator="tcv_corrected") -> World:
    """Sixteen balls crammed into a box narrower than one of them, on four small
    circles: every ball near all four walls and all four circles (128 contacts), more
    than the compiled begin's first room for their state (the broad phase's 64, plus
    one wall a particle), which then grows."""
    w = World(WorldConfig(dtype=dtype, integrator=integrator, substeps=4, iterations=1,
                          bounds=(0.0, 0.0, 0.15, 0.15), restitution=0.3, friction=0.5))
    k = np.arange(16)
    w.add_particles(np.stack([0.06 + 0.002 * k, 0.09 - 0.002 * (k % 4)], 1),
                    v=0.1 * np.stack([np.cos(k), np.sin(k)], 1), radius=0.09)
    for c in ((0.07, 0.07), (0.08, 0.07), (0.07, 0.08), (0.08, 0.08)):
        w.add_shape("circle", center=c, radius=0.02)
    return w


# --------------------------------------------------------------------------- whole scenes

@pytest.mark.parametrize("dtype", DTYPES)
def test_pile_matches_the_reference_bit_for_bit(dtype):
    ref, got = _both(_pile, 100, dtype=dtype)
    _assert_same(ref, got)
    x, L = ref.particles.x, ref.colliders._pair_list
    touching = np.linalg.norm(x[L.j] - x[L.i], axis=1) < L.reach + 1e-6
    assert touching.sum() > 200                      # a pile, not a rain of balls


def _pinned_row(dtype="float64", integrator="tcv_corrected") -> World:
    """``_pile`` with a row of 40 pinned balls that overlap one another (7 cm apart,
    10 cm wide) across the funnel's mouth."""
    w = _pile(dtype, integrator)
    xs = np.linspace(-1.4, 1.4, 40)
    w.add_particles(np.stack([xs, np.full(40, 1.0)], axis=1), radius=0.05, pinned=True)
    return w


@pytest.mark.parametrize("dtype", DTYPES)
def test_pinned_overlapping_balls_under_a_pile_match_the_reference(dtype):
    """Pairs of two pinned ends are within reach but never contacts: the compiled
    projection and velocity pass list the pairs within reach first and drop those
    from their contact lists, which then move down over them. With the pile falling
    onto the pinned row, frames give the reference's state bit for bit, and the row
    held the balls (some rest on it)."""
    ref, got = _both(_pinned_row, 45, dtype=dtype)
    _assert_same(ref, got)
    x, L = ref.particles.x, ref.colliders._pair_list
    w = ref.particles.inv_mass
    dist = np.linalg.norm(x[L.j] - x[L.i], axis=1)
    assert ((dist < L.reach) & (w[L.i] == 0) & (w[L.j] == 0)).sum() >= 39   # the row's own
    # Balls on it: touching (a falling ball stops at its time of impact, so it rests at
    # the contact distance rather than inside it).
    assert ((dist < L.reach + 1e-6) & ((w[L.i] == 0) != (w[L.j] == 0))).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_more_contacts_than_particles_match_the_reference(dtype):
    """In ``_crammed`` the compiled begin grows its contact rows past their first
    room and keeps the shapes' swept contacts in them: one detection gives the
    reference's contacts in its order, and frames (whole, and substep by substep)
    give its positions and velocities, bit for bit."""
    out = {}
    for backend in ("numpy", "compiled"):
        w = _crammed(dtype)
        w.colliders.backend = backend
        p = w.particles
        x0 = p.x.copy()
        p.x += (0.01 * p.v).astype(dtype)
        out[backend] = (p, w.colliders.begin(p, x0, w.config))
    (p_ref, ref), (p_got, got) = out["numpy"], out["compiled"]
    np.testing.assert_array_equal(p_got.x, p_ref.x)
    want = [(int(q), g.shapes.kind, bool(t)) for g in ref.groups
            for q, t in zip(g.pi, g.touched, strict=True)]
    kinds = got.shapes.kinds
    names = {code: name for name, code in _KIND.items()} | {WALL: "wall"}
    have = [(int(q), names[int(kinds[g])], bool(t))
            for q, g, t in zip(got.cp, got.cg, got.touched, strict=True)]
    assert have == want
    assert len(have) == 16 * 8 > 64 + 16 + 1           # past the first room
    ref_w, got_w = _both(_crammed, 10, dtype=dtype)
    _assert_same(ref_w, got_w)
    sub = _crammed(dtype)
    sub.scratch.compile_frames = False
    sub.start(FRAME)
    for _ in range(10):
        sub.step(FRAME)
    _assert_same(ref_w, sub)


@pytest.mark.parametrize("integrator", ["tcv_corrected", "velocity_verlet"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_balls_on_slopes_with_friction_match_the_reference(dtype, integrator):
    ref, got = _both(_slope, 90, dtype=dtype, integrator=integrator)
    _assert_same(ref, got)
    v = ref.particles.v
    # The gripping slope holds its balls, the slippery one lets them go.
    assert np.abs(v[:5]).max() < 0.05 and np.abs(v[5:10]).max() > 0.5


@pytest.mark.parametrize("integrator", ["tcv_corrected", "velocity_verlet"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bouncing_with_restitution_matches_the_reference(dtype, integrator):
    ref, got = _both(_bounce, 75, dtype=dtype, integrator=integrator)
    _assert_same(ref, got)
    x = ref.particles.x
    assert x[-1, 1] > -1.0                           # the fast ball stayed above the line
    assert x[10, 0] < -1.1 and x[9, 0] > -0.2        # the striker stopped, the row moved on


@pytest.mark.parametrize("dtype", DTYPES)
def test_balls_in_corners_match_the_reference(dtype):
    """More wall contacts than particles: the walls-only start (``_begin_walls``)
    says so (-1) and ``begin`` grows its rows (two walls a ball), and frames of
    ``_cornered`` give the reference's bits."""
    x1 = np.array([[0.95, 0.95], [-0.95, -0.95], [0.95, -0.95]], dtype)
    x0 = x1.copy()
    w, r = np.ones(3, dtype), np.full(3, 0.1, dtype)
    t = Colliders().tables((-1.0, -1.0, 1.0, 1.0))
    rules = Rules(0.0, 0.0, float(np.finfo(dtype).eps), SKIN, TOUCH, 1e-3, BRUTE_PAIRS,
                  10_000)
    space = begin_stage.begin_space(x1, 0, 4, False)
    moves = Moves(x0, x1, w, r, np.zeros((3, 2)))
    C_, _, _ = begin_stage._begin_walls(moves, t.shapes, rules, space[4])
    assert C_ == -1
    out = begin_stage.begin(moves, t.shapes, t.grid, rules,
                            Bounce(np.zeros((0, 2), dtype), np.zeros((0, 2), dtype), 0.0,
                                   np.inf))
    assert sorted(out[0].tolist()) == [0, 0, 1, 1, 2, 2]
    ref, got = _both(_cornered, 20, dtype=dtype)
    _assert_same(ref, got)
    assert np.all(np.abs(ref.particles.x) <= 0.9 + 1e-6)       # kept in the box


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_shape_type_and_sweeps_match_the_reference(dtype):
    ref, got = _both(_every_shape, 60, dtype=dtype)
    _assert_same(ref, got)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grid_broad_phase_scene_matches_the_reference(dtype):
    w = _many_shapes(dtype)
    assert w.n * len(w.colliders) > BRUTE_PAIRS                   # the grid, not brute force
    ref, got = _both(_many_shapes, 40, dtype=dtype)
    _assert_same(ref, got)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build", [_pile, _slope, _bounce, _every_shape, _soft_blob,
                                   _cornered], ids=lambda f: f.__name__)
def test_compiled_frames_match_the_substep_path(build, dtype, monkeypatch):
    """``Colliders.run_frame`` (a whole frame in ``collide.frames.frame``) against the
    compiled kernels called substep by substep from Python (``Scratch.compile_frames``
    off): the same bits, Verlet list carried across frames included. The frame runs
    (counted), and the substep path never calls it."""
    calls = []
    real = frames.frame
    monkeypatch.setattr(frames, "frame", lambda *a: calls.append(1) or real(*a))
    out = []
    for compiled in (False, True):
        out.append(_forty_frames(build, dtype, monkeypatch, compiled))
        assert len(calls) == (40 if compiled else 0)
    _assert_same(*out)


def _forty_frames(build, dtype, monkeypatch, compiled: bool) -> World:
    """40 frames of the scene ``build`` makes, in whole compiled frames or substep by
    substep (``pipeline.Scratch.compile_frames``)."""
    monkeypatch.setattr(pipeline.Scratch, "compile_frames", compiled)
    w = build(dtype)
    w.start(FRAME)
    for _ in range(40):
        w.step(FRAME)
    return w


def _replace(**changes):
    return lambda w: w.configure(dataclasses.replace(w.config, **changes))


#: What a person or a script may change between two frames, in order; each must reach
#: the next compiled frame (``pipeline.lane_holds``: the arguments kept from the frame
#: before are made again).
_CHANGES = [
    ("nothing", lambda w: None),
    ("pin", lambda w: w.toggle_pin(3)),
    ("unpin", lambda w: w.toggle_pin(3)),
    ("heavier, still movable", lambda w: w.particles.inv_mass.__setitem__(
        5, w.particles.inv_mass[5] * 0.25)),
    ("gravity", _replace(gravity=(2.0, -6.0))),
    ("restitution and friction", _replace(restitution=0.9, friction=0.05)),
    ("iterations", _replace(iterations=3)),
    ("odd substeps", _replace(substeps=7)),
    ("a shape on particle 0", lambda w: w.add_shape(
        "circle", center=w.particles.x[0].tolist(), radius=0.15)),
    ("the bounds", _replace(bounds=(-1.4, -0.9, 1.6, 6.0))),
    ("a cut through the middle", lambda w: w.cut(w.particles.x.mean(0) - (3.0, 0.0),
                                                 w.particles.x.mean(0) + (3.0, 0.01))),
    ("a link", lambda w: w.add_constraints([0], [w.n - 1], compliance=1e-4)),
    ("integrator", lambda w: w.set_integrator("verlet")),
    ("a grab", lambda w: w.grab(int(np.argmax(w.particles.inv_mass)))),
    ("a release", lambda w: w.release()),
    ("energy ledger", lambda w: w.track_energy(True)),
    ("no ledger", lambda w: w.track_energy(False)),
    ("more particles", lambda w: w.add_particles([[0.0, 5.0]], mass=0.05, radius=0.05)),
    ("a longer frame", lambda w: None),             # 1/50 s (the frames before: 1/60)
    ("frames of 1/60 s again", lambda w: None),
]


@pytest.mark.parametrize("build", [_pile, _soft_blob], ids=lambda f: f.__name__)
def test_a_frame_kept_from_the_frame_before_follows_every_change(build, monkeypatch):
    """A world keeps its compiled contact frame's arguments while nothing they were made
    from changes. Against a world that makes them every frame (the lane refused),
    after each change of ``_CHANGES`` and over a time step that changes (1/60 s, then
    1/50 s): the same bits every frame. Each change comes when the arguments would
    otherwise be kept, and they are kept (``frame_args`` called fewer times: a new step
    makes them again, twice, as the integrator's coefficients depend on the step before
    too)."""
    made = {}
    real = Colliders.frame_args

    def counted(self, *a):
        made[id(self)] = made.get(id(self), 0) + 1
        return real(self, *a)

    monkeypatch.setattr(Colliders, "frame_args", counted)
    ref, got = build(), build()
    holds = pipeline.lane_holds
    monkeypatch.setattr(pipeline, "lane_holds",
                        lambda world, *a: world is not ref and holds(world, *a))
    for w in (ref, got):
        w.start(FRAME)
    for name, change in _CHANGES:
        for w in (ref, got):
            change(w)
        h = 1 / 50 if name == "a longer frame" else FRAME
        for k in range(4):
            for w in (ref, got):
                w.step(h)
            try:
                _assert_same(ref, got)
            except AssertionError as e:
                raise AssertionError(f"after {name!r}, frame {k}: {e}") from None
    kept = made[id(ref.colliders)] - made[id(got.colliders)]   # frames on kept arguments
    assert made[id(got.colliders)] > 0 and kept >= 2 * len(_CHANGES)
    fresh = build()                       # the changes did something
    assert len(got.shapes) == len(fresh.shapes) + 1
    assert len(got.constraints) < len(fresh.constraints) or build is _pile
    assert len(got.constraints) > 0


def test_a_cached_frame_runs_in_a_fresh_process():
    """``collide.frames.frame`` is serial and calls the links' parallel sweep: loaded
    from the disk cache into a process where no parallel kernel had run, it jumped to
    address 0 (a segfault on every run after the one that compiled it).
    ``launch_threads`` prevents it. A fresh process loads the frame the test above
    compiled and cached, and finishes its frames."""
    import os
    import subprocess
    import sys
    code = ("from tests.test_contact_kernels import _soft_blob; w = _soft_blob('float64'); "
            "w.start(1/60); [w.step(1/60) for _ in range(3)]; print('ok')")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


# --------------------------------------------------------------------------- one stage at a time

def _shapes_and_points(dtype):
    """Every shape type (a circle, a thick and a thin segment, a clockwise pentagon, a
    box, the bounds) and points on the cases where the formulas branch: centres, corners,
    edges and their extensions, the box's diagonals (equal depth to two faces), a point
    beyond a segment's end, plus a lattice."""
    col = Colliders()
    col.add("circle", center=(0.0, 0.0), radius=0.5)
    col.add("segment", a=(1.0, 0.0), b=(2.0, 0.5), thickness=0.1)
    col.add("segment", a=(-2.0, -1.0), b=(-1.0, -1.0))
    ang = -np.linspace(0.0, 2 * np.pi, 5, endpoint=False)
    col.add("polygon", points=np.stack([3.0 + np.cos(ang), np.sin(ang)], 1))
    col.add("box", min=(-3.0, 1.0), max=(-2.0, 1.5))
    poly = col.sets["polygon"]
    v = poly.verts[0, :5]
    special = [(0.0, 0.0), (0.5, 0.0), (1.0, 0.0), (2.0, 0.5), (1.5, 0.25), (2.5, 0.75),
               (-2.0, -1.0), (-1.5, -1.0), (-0.5, -1.0), (-1.5, -0.9), (-2.5, 1.25),
               (-2.75, 1.25), (-2.25, 1.25), (-2.125, 1.375), (-2.875, 1.125), (-3.0, 1.0),
               (-2.0, 1.5), (-2.5, 1.0), (3.0, 0.0), (-2.5, -2.0), (4.0, 3.0)]
    pts = np.concatenate([special, v, 0.5 * (v + np.roll(v, -1, 0)),
                          2 * v - np.roll(v, -1, 0)])
    lat = np.stack(np.meshgrid(np.linspace(-3.5, 4.5, 17), np.linspace(-2, 2, 9)), -1)
    pts = np.concatenate([pts, lat.reshape(-1, 2)]).astype(dtype)
    return col, pts


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_point_queries_match_the_reference_on_edges_corners_and_ties(dtype):
    """``ShapeSet.distance`` and ``.contact`` (segments with each starting side;
    polygons and boxes from starts that put the path through them, into them, along
    them and nowhere near, and from the point itself)."""
    col, pts = _shapes_and_points(dtype)
    bounds = (-3.0, -2.0, 4.0, 3.0)
    args = col.tables(bounds).shapes
    kinds, rows = args.kinds, args.rows
    sets = [col.sets[n] for n in _KIND] + [Walls.from_bounds(bounds)]
    rng = np.random.default_rng(12)
    starts = [pts, (pts + rng.normal(0, 0.3, pts.shape)).astype(dtype),
              (pts + rng.normal(0, 2.0, pts.shape)).astype(dtype)]
    checked = crossed = 0
    for g in range(kinds.size):
        shapes, row = sets[kinds[g]], int(rows[g])
        s = np.full(pts.shape[0], row)
        for contact, ref in ((False, 0.0), (True, -1.0), (True, 0.0), (True, 1.0)):
            for p0 in starts if contact else starts[:1]:
                if contact:
                    want = shapes.contact(pts, s, np.full(pts.shape[0], ref), p0)
                    crossed += int(np.sum(want[0] != shapes.distance(pts, s)[0]))
                else:
                    want = shapes.distance(pts, s)
                d, _, n = want
                got = np.array([_distance(g, a[0], a[1], ref, contact, args, b[0], b[1])
                                for a, b in zip(pts, p0, strict=True)])
                np.testing.assert_array_equal(got[:, 0], d)
                np.testing.assert_array_equal(got[:, 1:], n)
                checked += pts.shape[0]
    assert checked > 1000 and crossed > 50


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sweeps_match_the_reference(dtype):
    """``ShapeSet.sweep``: time of impact (inf when missed) and normal, for paths aimed
    through the special points from many directions, for discs and points (radius 0:
    no corner discs on polygons), and zero-length paths."""
    col, pts = _shapes_and_points(dtype)
    args = col.tables(None).shapes
    kinds, rows = args.kinds, args.rows
    sets = [col.sets[n] for n in _KIND]
    rng = np.random.default_rng(6)
    m = pts.shape[0]
    ang = rng.uniform(0, 2 * np.pi, m)
    step = rng.choice([0.0, 0.3, 1.5], m)
    p1 = pts + 0.2 * np.stack([np.cos(ang), np.sin(ang)], 1).astype(dtype)
    p0 = (p1 - step[:, None] * np.stack([np.cos(ang), np.sin(ang)], 1)).astype(dtype)
    hits = 0
    for r in (0.0, 0.05):
        rr = np.full(m, r, dtype)
        for g in range(kinds.size):
            shapes, row = sets[kinds[g]], int(rows[g])
            hit, t, n = shapes.sweep(p0, p1, np.full(m, row), rr)
            got = np.array([_sweep(g, a[0], a[1], b[0], b[1], rr[0], args)
                            for a, b in zip(p0, p1, strict=True)])
            np.testing.assert_array_equal(got[:, 0], t)
            np.testing.assert_array_equal(got[hit, 1:], n[hit])
            hits += hit.sum()
    assert hits > 50


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True])
def test_pair_list_is_the_references_list_in_its_order(dtype, sparse):
    """``particle_pairs`` + ``_PairList.build``: the same pairs in the same order (the
    Jacobi sums run in that order), with radius-0 particles skipped and excluded pairs
    dropped; ``sparse`` (one particle far away) takes the binary-search path."""
    rng = np.random.default_rng(11)
    n = 1200
    x = rng.uniform(0, 5, (n, 2)).astype(dtype)
    if sparse:
        x[7] = (3e5, -2e4)
    r = np.where(rng.random(n) < 0.1, 0.0, rng.uniform(0.01, 0.1, n)).astype(dtype)
    i, j = particle_pairs(x, r, 0.05)
    exclude = np.unique(i[::5] * n + j[::5])
    sizes = []
    for ex in (None, exclude):
        i, j = particle_pairs(x, r, 0.05, ex)
        want = _PairList.build(None, x, 0.05, i, j, r)
        got = pair_list(x, r, 0.05, _NO_KEYS if ex is None else ex)
        for name, a, b in zip(("i", "j", "a", "b", "nodes", "reach"), got,
                              (want.i, want.j, want.a, want.b, want.nodes, want.reach),
                              strict=True):
            assert a.dtype == b.dtype, name
            np.testing.assert_array_equal(a, b, err_msg=name)
        sizes.append(got[0].size)
    assert sizes[0] > 1000 and sizes[1] == sizes[0] - exclude.size


@pytest.mark.parametrize("exclude", [False, True])
def test_pair_list_of_a_crowd_outgrows_its_first_arrays(exclude):
    """Every particle within reach of every other (300 in a 5 cm square: 44,850
    pairs, more than ``pair_list``'s first guess of eight a particle): the scan runs
    out of room, starts again with four times as much until the pairs fit, and gives
    the reference's list, with and without excluded pairs."""
    rng = np.random.default_rng(5)
    n = 300
    x = rng.uniform(0, 0.05, (n, 2))
    r = np.full(n, 0.05)
    ex = None
    if exclude:
        i, j = particle_pairs(x, r, 0.05)
        ex = np.unique(i[::7] * n + j[::7])
    i, j = particle_pairs(x, r, 0.05, ex)
    assert i.size > 16 * 8 * n // 4          # beyond 8 n, then beyond 32 n
    want = _PairList.build(None, x, 0.05, i, j, r)
    got = pair_list(x, r, 0.05, _NO_KEYS if ex is None else ex)
    for name, a, b in zip(("i", "j", "a", "b", "nodes", "reach"), got,
                          (want.i, want.j, want.a, want.b, want.nodes, want.reach),
                          strict=True):
        np.testing.assert_array_equal(a, b, err_msg=name)


class _State:
    """The particle arrays ``Colliders.begin`` reads."""

    def __init__(self, x, v, w, r):
        self.x, self.v, self.x_prev, self.inv_mass, self.radius = x, v, x.copy(), w, r


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("grid", [False, True])
def test_begin_finds_the_references_contacts_and_cuts(dtype, grid):
    """One detection: the compiled contacts are the reference's groups one after
    another (particle, shape, touched, material, side), and the swept particles land
    where the reference puts them, with the same corrections ``dx``."""
    rng = np.random.default_rng(2)
    col = Colliders()
    for k in range(40 if grid else 8):
        c = rng.uniform(-4, 4, 2)
        kind = k % 4
        if kind == 0:
            col.add("circle", center=c, radius=rng.uniform(0.1, 0.5), restitution=0.5)
        elif kind == 1:
            col.add("segment", a=c, b=c + rng.uniform(-1, 1, 2),
                    thickness=rng.choice([0.0, 0.05]), friction=0.7)
        elif kind == 2:
            a = np.sort(rng.uniform(0, 2 * np.pi, 5))
            col.add("polygon", points=c + 0.4 * np.stack([np.cos(a), np.sin(a)], 1))
        else:
            col.add("box", min=c, max=c + rng.uniform(0.1, 0.8, 2))
    n = 700
    x0 = rng.uniform(-5, 5, (n, 2)).astype(dtype)
    path = rng.normal(0, 0.05, (n, 2))
    path[:200] *= 40                                    # fast: through shapes
    w = np.where(rng.random(n) < 0.05, 0.0, 1.0).astype(dtype)
    r = np.where(rng.random(n) < 0.1, 0.0, rng.uniform(0.02, 0.1, n)).astype(dtype)
    assert (n * len(col) > BRUTE_PAIRS) == grid
    config = WorldConfig(bounds=(-4.5, -4.5, 4.5, 4.5), restitution=0.2, friction=0.4,
                         dtype=np.dtype(dtype).name)
    out = {}
    for backend in ("numpy", "compiled"):
        col.backend = backend
        p = _State((x0 + path).astype(dtype), np.zeros((n, 2), dtype), w, r)
        out[backend] = (p, col.begin(p, x0, config))
    (p_ref, ref), (p_got, got) = out["numpy"], out["compiled"]
    assert isinstance(ref, Contacts) and isinstance(got, FlatContacts)
    np.testing.assert_array_equal(p_got.x, p_ref.x)
    np.testing.assert_array_equal(got.dx, ref.dx)
    assert got.skin == ref.skin and got.touch == ref.touch
    # The reference's contacts in its order: group after group, each in pair order.
    kinds, rows = got.shapes.kinds, got.shapes.rows
    names = {code: name for name, code in _KIND.items()} | {WALL: "wall"}
    want = [(int(p), g.shapes.kind, int(s), bool(t), float(e), float(m),
             0.0 if g.ref is None else float(f))
            for g in ref.groups
            for p, s, t, e, m, f in zip(g.pi, g.si, g.touched, g.e, g.mu,
                                        np.zeros(g.pi.size) if g.ref is None else g.ref,
                                        strict=True)]
    have = [(int(p), names[int(kinds[g])], int(rows[g]), bool(t), float(e), float(m),
             float(f)) for p, g, t, e, m, f in zip(got.cp, got.cg, got.touched, got.e,
                                                    got.mu, got.ref, strict=True)]
    # The grid lists a particle's pairs by particle, its fastest ones at the end of
    # each group (the brute-force rows): the order within one particle is what counts.
    if grid:
        want.sort(key=lambda c: (c[1] == "wall", c[1], c[0]))
        have.sort(key=lambda c: (c[1] == "wall", c[1], c[0]))
    assert have == want
    assert sum(c[3] for c in want) >= 5                # some paths were cut
    assert {c[1] for c in want} == {"circle", "segment", "polygon", "box", "wall"}


@pytest.mark.parametrize("backend", ["numpy", "compiled"])
def test_a_non_finite_state_is_restored_by_the_world(backend):
    """A NaN position reaches every kernel before the world notices: the kernels must not
    index out of their arrays (no pairs from a non-finite grid), and the step is undone."""
    w = _pile()
    w.colliders.backend = backend
    w.start(FRAME)
    for _ in range(20):
        w.step(FRAME)
    before = w.particles.x.copy()
    w.particles.x[5] = np.nan
    with pytest.raises(SimulationDiverged):
        w.step(FRAME)
    np.testing.assert_array_equal(w.particles.x[:5], before[:5])


def test_backend_switch():
    w = _slope()
    w.start(FRAME)
    p, col = w.particles, w.colliders
    assert col.backend == "auto" and col.compiled(p, p.x_prev)
    col.backend = "numpy"
    assert not col.compiled(p, p.x_prev)
    col.backend = "fast"
    with pytest.raises(ValueError, match="backend"):
        w.step(FRAME)


def test_warm_up_compiles_every_kernel_for_both_float_types():
    from sandbox import warmup
    warmup.warm_up()
    # The positions' type: a plain argument's, or a record's (Moves: its x1).
    for f, arg in ((begin_stage.begin, 0), (pair_list, 0), (project_stage.project, 0),
                   (finish_stage.finish, 0), (moved_less, 0), (any_moving, 2)):
        types = [sig[arg].types[1] if hasattr(sig[arg], "types") else sig[arg]
                 for sig in f.signatures]
        assert {str(t.dtype) for t in types} >= {"float32", "float64"}, f


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_walls_near_a_particle_are_found_for_any_number_of_walls(dtype):
    """``begin``'s wall rule: particle ``q`` is near wall ``k`` when ``n_k . x1 - o_k``
    is below ``r + max(|x1 - x0|, 0) + margin`` (in float64; never for a pinned or a
    NaN particle), the hits in (particle, wall) order. The four walls of ``bounds``
    take a vectorised test (``_near_walls``), any other number the plain loop
    (``_other_walls``): both against the rule written in numpy, and three walls
    against the four without the last. Particle 1's path is so long that its square
    overflows: near every wall."""
    rng = np.random.default_rng(5)
    n = 600
    x0 = rng.uniform(-4.2, 4.2, (n, 2)).astype(dtype)
    x1 = (x0 + rng.normal(0, 0.05, (n, 2))).astype(dtype)
    x1[::97] = np.nan
    big = np.sqrt(np.finfo(dtype).max) * 2      # a path whose square overflows
    x0[1], x1[1] = (1.0, 1.0 - big), (1.0, 1.0)
    w = np.where(rng.random(n) < 0.1, 0.0, 1.0).astype(dtype)
    w[1] = 1.0
    r = rng.uniform(0.0, 0.1, n).astype(dtype)
    col = Colliders()
    t = col.tables((-4.0, -4.0, 4.0, 4.0))
    kinds, rows, geo, S, nw = t.shapes[:5]
    assert S == 0 and nw == 4
    margin = 1e-3
    rules = Rules(0.0, 0.0, float(np.finfo(dtype).eps), SKIN, TOUCH, margin, BRUTE_PAIRS,
                  10_000)

    def hits(nwalls):
        shapes = t.shapes._replace(kinds=kinds[:nwalls], rows=rows[:nwalls],
                                   geo=geo[:nwalls], nwalls=nwalls)
        out = begin_stage.begin(Moves(x0, x1.copy(), w, r, np.zeros((n, 2))), shapes,
                                t.grid, rules, Bounce(np.zeros((0, 2), dtype),
                                                      np.zeros((0, 2), dtype), 0.0, np.inf))
        return [(int(p), int(g)) for p, g in zip(out[0], out[1], strict=True)]

    m = np.asarray(margin, dtype)
    with np.errstate(over="ignore"):
        path = np.sqrt(((x1 - x0) ** 2).sum(axis=1))
    lim = np.maximum(r + m, r + path + m).astype(np.float64)
    lim = np.where(w > 0, lim, -np.inf)
    dw = (geo[:4, 0] * x1[:, :1] + geo[:4, 1] * x1[:, 1:]) - geo[:4, 2]   # (n, 4)
    want = [(q, k) for q in range(n) for k in range(4) if dw[q, k] < lim[q]]
    four, three = hits(4), hits(3)
    assert four == want
    assert three == [(q, k) for q, k in want if k < 3]
    assert len({q for q, _ in want}) > 30 and any(k == 3 for _, k in want)
    assert [(1, k) for k in range(4)] == [h for h in want if h[0] == 1]
    # The vector loop's bound on the path (2 (|dx| + |dy|)) lets these through to the
    # exact test, which turns them away:
    bound = (r + 2 * np.abs(x1 - x0).sum(axis=1) + m).astype(np.float64)
    assert ((lim[:, None] <= dw) & (dw < bound[:, None])).sum() > 10


@pytest.mark.parametrize("dtype", DTYPES)
def test_largest_magnitude_as_integer_keys_is_numpys(dtype):
    """``_largest_abs`` (the tolerances' scale) takes an integer maximum of the floats'
    bits with the sign cleared: the same number as ``np.abs(x).max()`` (``_tolerances``),
    infinities and NaN of either sign included, and 0.0 for zeros of either sign."""
    rng = np.random.default_rng(11)
    x = (rng.normal(size=(257, 2)) * 10.0 ** rng.integers(-30, 30, size=(257, 2)))
    x = x.astype(dtype)
    assert begin_stage._largest_abs(x) == np.abs(x).max()
    x[200, 1] = -2 * np.abs(x).max()       # the largest, negative
    assert begin_stage._largest_abs(x) == np.abs(x).max() == -x[200, 1]
    z = np.array([[0.0, -0.0], [-0.0, 0.0]], dtype)
    top = begin_stage._largest_abs(z)
    assert top == 0.0 and not np.signbit(top)
    for bad in (np.inf, -np.inf):
        y = x.copy()
        y[100, 0] = bad
        assert begin_stage._largest_abs(y) == np.inf
    for bad in (np.nan, -np.nan, np.copysign(np.nan, -1.0)):
        y = x.copy()
        y[3, 1] = bad
        y[250, 0] = np.inf                  # NaN wins over infinity, as np.max's
        assert np.isnan(begin_stage._largest_abs(y)) and np.isnan(np.abs(y).max())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build", [_pile, _every_shape], ids=lambda f: f.__name__)
def test_a_refused_fast_start_leaves_the_substep_to_begin_into(build, dtype, monkeypatch):
    """The frame's contact start without reference counts (``_begin_fast``) refuses a
    substep whose shape contacts outgrow its scratch, before it changes anything, and
    ``begin_into`` does that substep: with no room at all for the sort and the sweep,
    every substep with a shape contact goes that way, and the frames keep the substep
    path's bits."""
    real = begin_stage.begin_space

    def no_room(x, nshapes, nwalls, scratch):
        space = real(x, nshapes, nwalls, scratch)
        fast = space[-1]
        return (*space[:-1], (*fast[:5], np.empty(0, np.int64), np.empty(0), fast[7],
                              begin_stage.toi_space(0, 0)))

    ref = _forty_frames(build, dtype, monkeypatch, False)
    # After the substep path compiled its kernels with the real one.
    monkeypatch.setattr(begin_stage, "begin_space", no_room)
    got = _forty_frames(build, dtype, monkeypatch, True)
    assert np.any(got.particles.x[:, 1] < 1.6)        # in and below the funnel: shapes hit
    _assert_same(ref, got)


def test_the_frames_flat_entry_takes_the_records_fields_in_order():
    """``frame.frame``, the compiled frame's one entry from Python, keeps its arguments
    flat (a record passed in from Python costs ~2 us a call) and builds the records
    itself: each record's fields are a run of its parameters, in the record's order
    (``Colliders.frame_args`` passes them so: ``*shapes, *grid, *rules``)."""
    import inspect

    from sandbox.sim.collide import records

    fn = getattr(frames.frame, "py_func", frames.frame)
    params = list(inspect.signature(fn).parameters)
    for record in (records.Bodies, records.Steps, records.Shapes, records.Grid,
                   records.Rules, records.Pairs):
        fields = list(record._fields)
        k = params.index(fields[0])
        assert params[k:k + len(fields)] == fields, record.__name__


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-2**62, 2**62), max_size=40), st.data())
def test_sort_head_sorts_the_head_as_numpy_does(values, data):
    """The broad phase's in-place heap sort of ``buf[:m]`` (shape ids; duplicates
    too) gives ``np.sort``'s values and leaves the tail alone."""
    from sandbox.sim.collide.jit import _sort_head
    a = np.array(values + [7, -3], np.int64)
    m = data.draw(st.integers(0, len(values)))
    want = np.concatenate([np.sort(a[:m]), a[m:]])
    _sort_head(a, np.int64(m))
    np.testing.assert_array_equal(a, want)

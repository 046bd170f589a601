"""Static colliders and contacts: exact distances and sweeps, the broad phase against brute
force, restitution, friction, pins, every integrator at rest on a floor, Newton's cradle,
thin segments, snapshots and the level shapes."""

import math

import numpy as np
import pytest

from sandbox import snapshot
from sandbox.levels import build_world, find_level, load_level
from sandbox.sim import builders as B
from sandbox.sim.collide.broad import particle_pairs, rank_batches
from sandbox.sim.collide.colliders import Colliders
from sandbox.sim.collide.geometry import (
    box_distance,
    box_polygon,
    capsule_distance,
    circle_distance,
    polygon_distance,
    sweep_circle,
)
from sandbox.sim.collide.shapes import Boxes, Polygons, Segments, Walls
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.world import World, WorldConfig
from sandbox.snapshot import SnapshotError

ALL = list(INTEGRATORS)
G = 9.81
FRAME = 1 / 60


def one(*rows):
    """Single-row arrays for the pairwise geometry functions."""
    return [np.atleast_2d(np.asarray(r, float)) if np.ndim(r) else np.array([float(r)])
            for r in rows]


def run(world, seconds, h=FRAME, every=None):
    world.start(h)
    out = []
    for _ in range(int(round(seconds / h))):
        world.step(h)
        if every is not None:
            out.append(every(world))
    return out


# --------------------------------------------------------------------------- geometry

def test_circle_distance_closest_point_and_normal():
    p, c, R = one([3.0, 4.0], [0.0, 0.0], 2.0)
    d, q, n = circle_distance(p, c, R)
    assert d[0] == pytest.approx(3.0) and np.allclose(n, [[0.6, 0.8]])
    assert np.allclose(q, [[1.2, 1.6]])
    d, q, n = circle_distance(*one([0.5, 0.0], [0.0, 0.0], 2.0))        # inside
    assert d[0] == pytest.approx(-1.5) and np.allclose(n, [[1, 0]]) and np.allclose(q, [[2, 0]])
    d, q, n = circle_distance(*one([1.0, 1.0], [1.0, 1.0], 2.0))        # the centre: up
    assert d[0] == -2.0 and np.allclose(n, [[0, 1]]) and np.allclose(q, [[1, 3]])


def test_capsule_distance_on_the_side_beyond_an_end_and_inside():
    a, b, r = [0.0, 0.0], [2.0, 0.0], 0.5
    cases = {                       # point: (distance, normal, closest point)
        (1.0, 2.0): (1.5, (0, 1), (1.0, 0.5)),
        (1.0, -2.0): (1.5, (0, -1), (1.0, -0.5)),
        (3.0, 0.0): (0.5, (1, 0), (2.5, 0.0)),
        (-3.0, -4.0): (4.5, (-0.6, -0.8), (-0.3, -0.4)),
        (1.0, -0.25): (-0.25, (0, -1), (1.0, -0.5)),
        (1.0, 0.0): (-0.5, (0, -1), (1.0, -0.5)),        # on the axis: pymunk's normal
    }
    for pt, (dist, nrm, cp) in cases.items():
        d, q, n = capsule_distance(*one(pt, a, b, r))
        assert d[0] == pytest.approx(dist) and np.allclose(n[0], nrm) and np.allclose(q[0], cp)
    # A point-like segment (a == b) is a disc.
    d, q, n = capsule_distance(*one([0.0, 3.0], [0.0, 1.0], [0.0, 1.0], 0.5))
    assert d[0] == pytest.approx(1.5) and np.allclose(n[0], [0, 1])


@pytest.mark.parametrize("winding", [1, -1])
def test_polygon_distance_outside_edge_vertex_inside_and_on_the_boundary(winding):
    tri = [(0.0, 0.0), (4.0, 0.0), (0.0, 3.0)][::winding]
    polys = Polygons()
    polys.add(points=tri)
    cases = {
        (2.0, -1.0): (1.0, (0, -1), (2.0, 0.0)),                # below the bottom edge
        (5.0, -1.0): (math.sqrt(2), (1 / math.sqrt(2), -1 / math.sqrt(2)), (4.0, 0.0)),
        # Beyond the hypotenuse 3x + 4y = 12: distance (24 - 12)/5, foot (4, 3) - 2.4 n.
        (4.0, 3.0): (2.4, (0.6, 0.8), (2.56, 1.08)),
        (0.5, 1.0): (-0.5, (-1, 0), (0.0, 1.0)),                # inside, nearest the left edge
        (2.0, 0.0): (0.0, (0, -1), (2.0, 0.0)),                 # on the boundary
    }
    for pt, (dist, nrm, cp) in cases.items():
        d, q, n = polys.distance(np.array([pt]), np.array([0]))
        assert d[0] == pytest.approx(dist, abs=1e-12), pt
        assert np.allclose(n[0], nrm) and np.allclose(q[0], cp), pt
    assert polys.spec(0)["points"] == [list(p) for p in tri]    # reported as given


def test_box_distance_matches_its_polygon_and_the_closed_form():
    lo, hi = np.array([[0.0, 0.0]]), np.array([[2.0, 1.0]])
    d, q, n = box_distance(np.array([[3.0, 2.0]]), lo, hi)
    assert d[0] == pytest.approx(math.sqrt(2)) and np.allclose(q, [[2, 1]])
    assert np.allclose(n, [[1 / math.sqrt(2), 1 / math.sqrt(2)]])
    d, q, n = box_distance(np.array([[1.8, 0.5]]), lo, hi)
    assert d[0] == pytest.approx(-0.2) and np.allclose(n, [[1, 0]]) and np.allclose(q, [[2, 0.5]])
    rng = np.random.default_rng(3)
    p = rng.uniform(-2, 4, (2000, 2))
    lo = np.repeat(lo, 2000, 0)
    hi = np.repeat(hi, 2000, 0)
    verts, normals = box_polygon(lo, hi)
    for got, want in zip(box_distance(p, lo, hi), polygon_distance(p, verts, normals),
                         strict=True):
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_walls_are_the_bounds_seen_from_inside():
    walls = Walls.from_bounds((-1.0, -2.0, 3.0, 4.0))
    p = np.array([[0.0, 0.0]] * 4)
    d, q, n = walls.distance(p, np.arange(4))
    assert np.allclose(d, [2.0, 4.0, 1.0, 3.0])                 # floor, ceiling, left, right
    assert np.allclose(q, [[0, -2], [0, 4], [-1, 0], [3, 0]])


def test_sweeps_hit_at_the_analytic_time_of_impact():
    # Falling straight down from y = 2 to y = -2 (a path of length 4), disc radius 0.1.
    p0, p1, r = np.array([[0.3, 2.0]]), np.array([[0.3, -2.0]]), np.array([0.1])
    hit, t = sweep_circle(p0, p1, np.array([[0.0, 0.0]]), np.array([0.5]) + r)
    y = math.sqrt(0.6 ** 2 - 0.3 ** 2)                          # centre height at impact
    assert hit[0] and t[0] == pytest.approx((2 - y) / 4)
    seg = Segments()
    seg.add(a=(-1.0, 0.0), b=(1.0, 0.0), thickness=0.05)
    hit, t, n = seg.sweep(p0, p1, np.array([0]), r)
    assert hit[0] and t[0] == pytest.approx((2 - 0.15) / 4) and np.allclose(n, [[0, 1]])
    hit, t, n = seg.sweep(np.array([[1.1, 2.0]]), np.array([[1.1, -2.0]]), np.array([0]), r)
    y = math.sqrt(0.15 ** 2 - 0.1 ** 2)                         # past the end: the cap
    assert hit[0] and t[0] == pytest.approx((2 - y) / 4)
    box = Boxes()
    box.add(min=(-1.0, -1.0), max=(1.0, 0.0))
    hit, t, n = box.sweep(np.array([[-3.0, 0.5]]), np.array([[3.0, 0.5]]), np.array([0]), r)
    assert not hit[0]                                           # passes 0.5 above the top
    hit, t, n = box.sweep(np.array([[-3.0, 0.05]]), np.array([[3.0, 0.05]]), np.array([0]), r)
    x = -1.0 - math.sqrt(0.1 ** 2 - 0.05 ** 2)                  # the rounded corner
    assert hit[0] and t[0] == pytest.approx((x + 3.0) / 6.0)
    # A start inside is no hit (projection deals with penetration), nor is a miss.
    hit, _ = sweep_circle(np.array([[0.0, 0.1]]), p1, np.array([[0.0, 0.0]]), np.array([1.0]))
    assert not hit[0]
    hit, _, _ = seg.sweep(np.array([[5.0, 2.0]]), np.array([[5.0, -2.0]]), np.array([0]), r)
    assert not hit[0]


# --------------------------------------------------------------------------- broad phase

def _random_shapes(colliders, rng, count):
    for k in range(count):
        c = rng.uniform(-20, 20, 2)
        kind = ("circle", "segment", "polygon", "box")[k % 4]
        s = rng.uniform(0.05, 1.5)
        if kind == "circle":
            colliders.add("circle", center=c, radius=s)
        elif kind == "segment":
            colliders.add("segment", a=c, b=c + rng.uniform(-3, 3, 2), thickness=0.1 * s)
        elif kind == "polygon":
            ang = np.sort(rng.uniform(0, 2 * np.pi, rng.integers(3, 12)))
            if np.ptp(ang) < 1.0:
                ang = np.array([0.0, 2.0, 4.0])
            colliders.add("polygon", points=c + s * np.stack([np.cos(ang), np.sin(ang)], 1))
        else:
            colliders.add("box", min=c, max=c + rng.uniform(0.05, 4.0, 2))
    # And one huge floor, which the grid must not list in every cell.
    colliders.add("box", min=(-100, -30), max=(100, -25))


def test_broad_phase_finds_exactly_the_overlapping_boxes_and_contacts_of_brute_force():
    rng = np.random.default_rng(7)
    col = Colliders()
    _random_shapes(col, rng, 400)
    x = rng.uniform(-25, 25, (5000, 2))
    r = rng.uniform(0.0, 0.3, 5000)
    path = rng.normal(0, 0.2, (5000, 2))
    path[:5] *= 300                                             # a few very fast particles
    lo = np.minimum(x, x + path) - r[:, None]
    hi = np.maximum(x, x + path) + r[:, None]
    grid = col.candidates(lo, hi)
    brute = col.candidates(lo, hi, brute=True)
    assert grid.keys() == brute.keys()
    for kind in grid:
        g = set(zip(*(a.tolist() for a in grid[kind]), strict=True))
        b = set(zip(*(a.tolist() for a in brute[kind]), strict=True))
        assert g == b, kind
    # The contacts themselves: every particle against every shape, by distance.
    for kind, shapes in col.sets.items():
        S = len(shapes)
        pi, si = np.repeat(np.arange(5000), S), np.tile(np.arange(S), 5000)
        d, _, _ = shapes.distance(x[pi], si)
        touching = set(zip(pi[d < r[pi]].tolist(), si[d < r[pi]].tolist(), strict=True))
        pg, sg = grid[kind]
        d, _, _ = shapes.distance(x[pg], sg)
        found = set(zip(pg[d < r[pg]].tolist(), sg[d < r[pg]].tolist(), strict=True))
        assert found == touching and touching, kind
    n_pairs = sum(a.size for a, _ in grid.values())
    assert n_pairs < 0.01 * 5000 * len(col)       # the grid tests a tiny share of n x S


def test_particle_pair_grid_finds_every_pair_in_reach_once():
    rng = np.random.default_rng(11)
    n = 1500
    x = rng.uniform(0, 6, (n, 2))
    r = np.where(rng.random(n) < 0.1, 0.0, rng.uniform(0.01, 0.1, n))
    i, j = particle_pairs(x, r, 0.02)
    got = set(zip(i.tolist(), j.tolist(), strict=True))
    assert len(got) == i.size and (i < j).all()
    a, b = np.triu_indices(n, 1)
    d = np.linalg.norm(x[a] - x[b], axis=1)
    want = (d < r[a] + r[b] + 0.02) & (r[a] > 0) & (r[b] > 0)
    assert got == set(zip(a[want].tolist(), b[want].tolist(), strict=True))
    ex = np.sort(np.array([a[want][0] * n + b[want][0]]))       # an excluded pair
    i2, j2 = particle_pairs(x, r, 0.02, exclude=ex)
    assert i2.size == i.size - 1


def test_rank_batches_share_no_particle_and_cover_every_pair():
    rng = np.random.default_rng(5)
    i = rng.integers(0, 50, 400)
    batches = rank_batches(i)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(400))
    for b in batches:
        assert np.unique(i[b]).size == b.size
    assert len(rank_batches(np.arange(7))) == 1               # one contact each: one batch


# --------------------------------------------------------------------------- dynamics

def _drop(method, e, H=1.0, R=0.1, substeps=10, seconds=2.5, shape="segment"):
    w = World(WorldConfig(integrator=method, substeps=substeps, iterations=4, restitution=e))
    if shape == "segment":
        w.add_shape("segment", a=(-5, 0), b=(5, 0))
    else:
        w.add_shape("box", min=(-5, -1), max=(5, 0))
    w.add_particles([[0.0, H + R]], radius=R)
    return w, np.array(run(w, seconds, every=lambda w: w.particles.x[0, 1] - R))


@pytest.mark.parametrize("method", ALL)
def test_restitution_zero_stops_dead_and_one_gives_the_drop_height_back(method):
    # No bounce: after the impact the ball never rises above the surface (by more than the
    # 1e-9 m skin). Elastic: the apex comes back within 2 v h, v = sqrt(2 g H) the impact
    # speed, h the substep: the impact is resolved at a substep boundary (up to v h of
    # travel) and first-order integrators carry a shadow energy off by g h v / 2 per leg.
    H, h = 1.0, FRAME / 10
    _, y0 = _drop(method, 0.0, H)
    first = np.argmax(y0 < 1e-6)
    assert first > 0 and y0[first:].max() < 1e-8
    _, y1 = _drop(method, 1.0, H, shape="box")
    low = np.argmax(y1 < 0.05)
    apex = y1[low:low + 90].max()
    assert abs(apex - H) < 2 * math.sqrt(2 * G * H) * h, apex


@pytest.mark.parametrize("method", ALL)
def test_a_particle_resting_on_a_floor_reads_zero_velocity_and_stays_put(method):
    w = World(WorldConfig(integrator=method, substeps=4, iterations=2, restitution=0.5,
                          friction=0.3))
    w.add_shape("box", min=(-2, -1), max=(2, 0))
    w.add_particles([[0.0, 0.05]], radius=0.05)
    heights = run(w, 2.0, every=lambda w: w.particles.x[0, 1])
    assert np.allclose(heights, 0.05, atol=2e-9)                # contact height + skin
    assert np.abs(w.particles.v[0]).max() < 1e-12
    assert abs(w.particles.x[0, 0]) < 1e-12


def _slope(method, mu, deg=20.0, seconds=1.0):
    th = math.radians(deg)
    u = np.array([math.cos(th), -math.sin(th)])                 # downhill
    nrm = np.array([math.sin(th), math.cos(th)])
    w = World(WorldConfig(integrator=method, substeps=8, iterations=4, friction=mu))
    w.add_shape("segment", a=-10 * u, b=10 * u, thickness=0.02)
    x0 = 0.12 * nrm
    w.add_particles([x0], radius=0.1)
    run(w, seconds)
    return (w.particles.x[0] - x0) @ u, w.particles.v[0] @ u, th


@pytest.mark.parametrize("method", ALL)
def test_friction_zero_slides_and_friction_above_the_angle_sticks(method):
    # Exact: s = a T^2 / 2 with a = g (sin - mu cos), T = 1 s, h = 1/480 s. The Euler
    # methods are off by exactly a T h / 2 (symplectic: x_N = a h^2 N (N + 1) / 2), the
    # second-order ones by round-off, with friction or without: it acts on the positions
    # (before, on the velocity after a frictionless position update, it put every slide
    # ahead by mu g cos T h, 6 mm here). On contact rows the position-based integrators
    # report v = (x - x_prev)/h, the mean over the last substep, which lags the velocity
    # by a h / 2.
    T, h = 1.0, FRAME / 8
    first = method in ("euler", "symplectic_euler")
    for mu in (0.0, 0.3):                                       # tan 20 deg = 0.36 > 0.3
        s, v, th = _slope(method, mu)
        a = G * (math.sin(th) - mu * math.cos(th))
        assert s == pytest.approx(0.5 * a * T * T, abs=(a * T * h / 2 if first else 0) + 1e-9)
        assert v == pytest.approx(a * T, abs=a * h / 2 + 1e-9)
    s, v, _ = _slope(method, 0.4)                               # above the friction angle
    assert abs(s) < 1e-9 and abs(v) < 1e-9


@pytest.mark.parametrize("method", ALL)
def test_pinned_particles_never_move_against_shapes_and_balls(method):
    w = World(WorldConfig(integrator=method, substeps=4, iterations=3, collide_particles=True,
                          restitution=0.5, friction=0.5, bounds=(-1, -1, 1, 1)))
    w.add_shape("circle", center=(0, 0), radius=0.3)
    w.add_shape("segment", a=(-1, 0.5), b=(1, 0.5), thickness=0.0)
    # Pinned: inside the circle, on the segment, outside the bounds, under a falling ball.
    pins = w.add_particles([[0.1, 0.0], [0.0, 0.5], [2.0, 0.0], [0.6, 0.0]], radius=0.1,
                           pinned=True)
    w.add_particles([[0.6, 0.3], [0.0, 0.9]], radius=0.1)
    x = w.particles.x[pins].copy()
    run(w, 1.0)
    assert np.array_equal(w.particles.x[pins], x)
    assert np.all(w.particles.v[pins] == 0)


def test_newtons_cradle_passes_one_ball_through_the_row():
    # The shipped level (restitution 1, 20 substeps, 4 iterations): ball 1 swings in at
    # 0.6 rad; after the impact ball 5 swings out and the rest stay still. The impact is
    # found at its time (``Contacts.pair_impacts``), so no overlap is left to push apart:
    # balls 1-4 keep no velocity at all and balls 2-4 never move. (Found after the fact,
    # the overlap became ~0.045 m/s in balls 1 and 4, which swung out 14.5 mm.)
    level = load_level(find_level("cradle"))
    assert level.world.restitution == 1.0 and level.world.collide_particles
    w = build_world(level)
    balls = np.arange(5, 10)
    rest = w.particles.x[balls[1:4]].copy()
    angle = np.zeros(5)
    moved, still = 0.0, 0.0
    for _ in range(int(1.0 / level.world.h)):                   # up to ball 5's apex
        w.step(level.world.h)
        d = w.particles.x[balls] - w.particles.x[:5]
        angle = np.maximum(angle, np.abs(np.arctan2(d[:, 0], -d[:, 1])))
        moved = max(moved, float(np.abs(w.particles.x[balls[1:4]] - rest).max()))
        if w.particles.v[balls[4], 0] != 0:                     # after the impact
            still = max(still, float(np.abs(w.particles.v[balls[:4]]).max()))
    assert angle[4] > 0.95 * 0.6
    assert moved < 1e-9 and still < 1e-9


@pytest.mark.parametrize("backend", ["numpy", "compiled"])
@pytest.mark.parametrize("method", ALL)
def test_a_ball_hitting_a_row_passes_on_its_momentum_and_energy_exactly(method, backend):
    """Newton's cradle without strings or gravity: a ball at 1 m/s hits a row of four
    touching balls of its mass (restitution 1) between two substeps. An ideal cradle
    (equal masses, elastic) leaves the first four at rest and the last at 1 m/s: kinetic
    energy 0.5 J and momentum 1 kg m/s, exactly, with balls 2-4 where they were. Every
    integrator, both backends: the impact is found at its time of impact (a fraction of
    the substep), so nothing is pushed apart afterwards. Found after the fact, balls 1
    and 4 kept -/+0.0015 m/s and the row moved 1 mm."""
    w = World(WorldConfig(integrator=method, gravity=(0.0, 0.0), collide_particles=True,
                          restitution=1.0, substeps=4, iterations=4))
    w.add_particles([[-0.5123, 0.0]] + [[0.2 * k, 0.0] for k in range(4)], radius=0.1,
                    mass=1.0)
    w.particles.v[0] = [1.0, 0.0]
    w.colliders.backend = backend
    run(w, 1.0)
    v, x = w.particles.v, w.particles.x
    assert np.abs(v[:4]).max() < 1e-12 and abs(v[4, 0] - 1.0) < 1e-12 and v[4, 1] == 0
    assert abs(0.5 * float((v * v).sum()) - 0.5) < 1e-12
    assert np.abs(x[1:4] - [[0.0, 0.0], [0.2, 0.0], [0.4, 0.0]]).max() < 1e-9


def test_a_thin_segment_holds_a_rope_that_constraints_pull_across_it():
    # A zero-thickness segment and radius-0 particles: the sweep never sees them cross,
    # the constraints pull them; the side each started the substep on is kept.
    w = World(WorldConfig(substeps=8, iterations=4))
    w.add_shape("segment", a=(-1, 0), b=(1, 0))
    B.build_rope(w, (-0.9, 0.05), (0.9, 0.05), segments=30, mass=0.05, kind="stick",
                 pin="none")
    w.add_particles([[0.0, 0.1]], mass=5.0)                     # a weight on the middle
    w.add_constraints([15], [w.n - 1])
    run(w, 2.0)
    assert (w.particles.x[:, 1] > 0).all()


# --------------------------------------------------------------------------- world API

def test_add_shape_validates_and_shapes_reports_the_level_fields():
    w = World()
    w.add_shape("circle", center=(0, 1), radius=0.5, friction=0.2)
    w.add_shape("segment", a=(0, 0), b=(1, 0), thickness=0.1, restitution=1.0)
    w.add_shape("polygon", points=[(0, 0), (0, 1), (1, 0)])          # clockwise is fine
    w.add_shape("box", min=(0, 0), max=(1, 2))
    assert [s["type"] for s in w.shapes] == ["circle", "segment", "polygon", "box"]
    assert w.shapes[0] == {"type": "circle", "center": [0.0, 1.0], "radius": 0.5,
                           "restitution": None, "friction": 0.2}
    assert w.shapes[2]["points"] == [[0, 0], [0, 1], [1, 0]]
    assert w.shapes[3]["min"] == [0, 0] and w.shapes[3]["max"] == [1, 2]
    for kind, fields, word in [
            ("star", {}, "unknown shape type"),
            ("circle", {"center": (0, 0), "radius": 0.0}, "radius"),
            ("circle", {"center": (0, float("nan")), "radius": 1.0}, "center"),
            ("segment", {"a": (0, 0)}, "segment"),
            ("polygon", {"points": [(0, 0), (1, 1), (1, 0), (0, 1)]}, "convex"),
            ("box", {"min": (0, 0), "max": (1, 0)}, "max"),
            ("box", {"min": (0, 0), "max": (1, 1), "restitution": 2.0}, "restitution")]:
        with pytest.raises(ValueError, match=word):
            w.add_shape(kind, **fields)
    assert len(w.shapes) == 4


def test_snapshots_keep_the_shapes_and_continue_identically(tmp_path):
    w = World(WorldConfig(substeps=2, iterations=3, restitution=0.4, friction=0.5,
                          collide_particles=True, bounds=(-3, -3, 3, 3)))
    w.add_shape("circle", center=(0, 0), radius=0.4, restitution=0.9)
    w.add_shape("polygon", points=[(-2, -1), (2, -1), (0, -1.5)])
    B.build_cloth(w, 6, 4, 0.1, origin=(-0.3, 1.0), radius=0.02)
    w.add_particles([[1.0, 1.0], [1.05, 1.3]], radius=0.1)
    run(w, 0.5)
    snapshot.save(w, tmp_path / "s.npz")
    other = World()
    snapshot.load(other, tmp_path / "s.npz")
    assert other.shapes == w.shapes and other.state_hash() == w.state_hash()
    for _ in range(30):
        w.step(FRAME)
        other.step(FRAME)
    assert other.state_hash() == w.state_hash()
    with np.load(tmp_path / "s.npz") as z:
        data = {k: z[k] for k in z.files}
    import json
    meta = json.loads(bytes(data["meta"]).decode())
    meta["shapes"][0]["radius"] = -1.0
    data["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(tmp_path / "bad.npz", **data)
    h = other.state_hash()
    with pytest.raises(SnapshotError, match="shapes"):
        snapshot.load(other, tmp_path / "bad.npz")
    assert other.state_hash() == h and len(other.shapes) == 2


def _inside(world):
    """Deepest penetration (m) of any movable particle into any shape or wall."""
    p, worst = world.particles, 0.0
    for shapes in world.colliders.sets.values():
        if len(shapes):
            n, S = p.n, len(shapes)
            pi, si = np.repeat(np.arange(n), S), np.tile(np.arange(S), n)
            d, _, _ = shapes.distance(p.x[pi], si)
            pen = np.where(p.inv_mass[pi] > 0, p.radius[pi] - d, 0.0)
            worst = max(worst, float(pen.max()))
    return worst


@pytest.mark.parametrize("name", ["drape", "rope", "soft_body", "pile"])
def test_shipped_scenes_with_shapes_settle_outside_them(name):
    # Every particle ends outside every shape, up to what the last constraint pass may push
    # back in (the constraints run before the contacts in each iteration, not after).
    level = load_level(find_level(name))
    assert level.shapes
    w = build_world(level)
    assert len(w.shapes) == len(level.shapes)
    for _ in range(int(3.0 / level.world.h)):
        w.step(level.world.h)
    assert np.isfinite(w.particles.x).all()
    assert _inside(w) < 1e-6


# ------------------------------------------------------------------ rounded boxes

def test_a_rounded_box_is_its_inner_box_grown_by_its_radius():
    """``radius`` R: the distance to the inner box ``[min + R, max - R]`` less R, the
    closest point on the arc at a corner, the inner box's normal; its bounding box is
    ``[min, max]``; a sharp box (R = 0) is the box itself, bit for bit."""
    b = Boxes()
    b.add(min=(0.0, 0.0), max=(2.0, 1.0), radius=0.25)
    b.add(min=(0.0, 0.0), max=(2.0, 1.0))
    p = np.array([[2.5, 1.5], [1.0, 2.0], [1.0, 0.5]])
    d, q, n = b.distance(p, np.zeros(3, int))
    c = np.array([1.75, 0.75])                              # the top-right corner's centre
    assert d[0] == pytest.approx(np.hypot(*(p[0] - c)) - 0.25, rel=1e-15)
    np.testing.assert_allclose(q[0], c + 0.25 * (p[0] - c) / np.hypot(*(p[0] - c)))
    assert d[1] == pytest.approx(1.0) and tuple(n[1]) == (0.0, 1.0)   # above the top face
    assert d[2] == pytest.approx(-0.5)                       # inside: to the nearest face
    lo, hi = b.aabb()
    np.testing.assert_array_equal(lo, [[0.0, 0.0], [0.0, 0.0]])
    np.testing.assert_array_equal(hi, [[2.0, 1.0], [2.0, 1.0]])
    sharp = Boxes()
    sharp.add(min=(0.0, 0.0), max=(2.0, 1.0))
    for got, want in zip(b.distance(p, np.ones(3, int)), sharp.distance(p, np.zeros(3, int)),
                         strict=True):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("backend", ["numpy", "compiled"])
def test_a_ball_rolls_around_a_rounded_corner(backend):
    """A frictionless ball let go on the flat top of a rounded box near its corner slides
    off over the arc: while it touches the arc its centre stays at R + r from the arc's
    centre (to the contact skin), and it leaves the box past its side."""
    from sandbox.sim.backend import usable
    if backend == "compiled" and not usable("contacts"):
        pytest.skip("numba is not installed")
    R, r = 0.3, 0.1
    w = World(WorldConfig(substeps=8, iterations=4, friction=0.0, restitution=0.0))
    w.colliders.backend = backend
    w.add_shape("box", min=(-1.0, -1.0), max=(1.0, 0.0), radius=R)
    w.add_particles([[1.0 - R - 0.05, r + 1e-6]], v=[[0.5, 0.0]], radius=r)
    c = np.array([1.0 - R, -R])
    on_arc = 0
    for _ in range(120):
        w.step(1 / 60)
        x = w.particles.x[0]
        if x[0] > c[0] and x[1] > c[1]:                     # beside the arc
            dist = np.hypot(*(x - c))
            assert dist >= R + r - 1e-6
            on_arc += dist < R + r + 1e-3
    assert on_arc >= 3                                      # it rolled over the arc ...
    assert w.particles.x[0, 0] > 1.0 + r                    # ... and off past the side

"""Randomised shots into the places where static shapes meet or end, for the contact tests
(``test_contact_shots.py``) and for measuring a change by hand::

    python -m tests.contact_scenes          # shots through / bounces lost, every scene

Every scene is a world with one substep of 1/60 s and many particles that do not collide
with each other (one shot each), so one world holds hundreds of shots. A shot *goes
through* when, at the end of a step, its centre is inside a shape's rounded outline (by
more than ``TOL``), or when the straight chord between its positions at two consecutive
step ends crosses a shape: the chord test is pymunk's ``segment_query``, independent of
the code under test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sandbox.reference import pymunk_shape
from sandbox.sim.collide.contacts import SKIN
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.world import World, WorldConfig

FRAME = 1 / 60
G = 9.81
#: Penetration (m) that counts as inside: far above the 1e-9 m skin and round-off on
#: coordinates of a few metres, far below anything visible.
TOL = 1e-6
ALL = list(INTEGRATORS)
#: The contact backend the scenes run ("auto": compiled when numba is there).
BACKEND = "auto"


@dataclass
class Shots:
    """A world of shots and what to check: ``shapes`` as ``World.add_shape`` takes them;
    ``bounce`` particles whose first contact is a flat face with outward normal
    ``normal``, their centres at the touch ``touch``: after the step that ``hit_step``
    names, ``v . n`` must be ``-e`` times the normal speed at the touch, carried on
    by gravity (see :func:`run`)."""

    world: World
    steps: int
    shapes: list[dict]
    bounce: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    normal: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    hit_step: int = 0
    touch: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))


def _world(integrator, shapes, e, mu, g=G, substeps=1):
    w = World(WorldConfig(integrator=integrator, gravity=(0.0, -g), restitution=e,
                          friction=mu, substeps=substeps, iterations=4))
    w.colliders.backend = BACKEND
    for s in shapes:
        w.add_shape(**s)
    return w


def _radii(rng, n, big=0.1):
    """A quarter points (radius 0), the rest discs from 5 mm to ``big``."""
    return np.where(rng.random(n) < 0.25, 0.0, rng.uniform(0.005, big, n))


def corner(integrator, rng, n=120) -> Shots:
    """Balls rolling along a floor box at 1-10 m/s into a thin box wall standing on it."""
    xw = rng.uniform(-0.5, 0.5)
    th, hw = rng.uniform(0.001, 0.02), rng.uniform(0.25, 1.0)
    shapes = [dict(type="box", min=(-3.0, -1.0), max=(3.0, 0.0)),
              dict(type="box", min=(xw, 0.0), max=(xw + th, hw))]
    w = _world(integrator, shapes, rng.uniform(0, 1), rng.choice([0.0, 0.3]))
    r = np.minimum(_radii(rng, n), 0.2 * hw)
    x = np.stack([xw - r - rng.uniform(0.01, 0.3, n), r + SKIN], 1)
    v = np.stack([rng.uniform(1.0, 10.0, n), np.zeros(n)], 1)
    w.add_particles(x, v=v, radius=r)
    return Shots(w, 30, shapes)


def _plate(apex, angle, length, th, ext, outward):
    """A thin quad whose inner face runs from ``apex`` at ``angle`` for ``length``,
    ``th`` thick on the ``outward`` side, reaching ``ext`` past the apex."""
    u = np.array([math.cos(angle), math.sin(angle)])
    a = np.asarray(apex) - ext * u
    b = np.asarray(apex) + length * u
    o = th * np.asarray(outward)
    return dict(type="polygon", points=[tuple(a), tuple(b), tuple(b + o), tuple(a + o)])


def wedge(integrator, rng, n=120) -> Shots:
    """Shots at 1-600 m/s into a V of two thin polygons (1-20 mm) that meet at an apex,
    aimed near the apex from inside the V."""
    al, be = rng.uniform(math.radians(15), math.radians(75), 2)
    th = rng.uniform(0.001, 0.02, 2)
    left = np.pi - al                                  # the left plate rises to the left
    nl = np.array([math.sin(al), math.cos(al)])         # into the V
    nr = np.array([-math.sin(be), math.cos(be)])
    shapes = [_plate((0.0, 0.0), left, 1.5, th[0], 0.05, -nl),
              _plate((0.0, 0.0), be, 1.5, th[1], 0.05, -nr)]
    w = _world(integrator, shapes, rng.uniform(0, 1), rng.choice([0.0, 0.3]))
    r = _radii(rng, n, 0.05)
    # Starts inside the V, clear of both plates by the radius and 1 mm.
    x = np.zeros((n, 2))
    for k in range(n):
        while True:
            p = np.array([rng.uniform(-0.8, 0.8), rng.uniform(0.05, 1.0)])
            if p @ nl > r[k] + 1e-3 and p @ nr > r[k] + 1e-3:
                x[k] = p
                break
    aim = rng.normal(0.0, 0.03, (n, 2)) + np.array([0.0, 0.02])
    d = aim - x
    speed = np.exp(rng.uniform(0.0, math.log(600.0), n))
    v = speed[:, None] * d / np.linalg.norm(d, axis=1)[:, None]
    w.add_particles(x, v=v, radius=r)
    return Shots(w, 12, shapes)


def _rot(theta):
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


def ends(integrator, rng, n=120, kind="box", g=G, speeds=(50.0, 600.0)) -> Shots:
    """Shots at ``speeds`` m/s onto the top face of a platform 5-50 mm from its right
    end, coming down from the left, restitution 0.2-1 and no friction: each must leave
    with its normal speed times ``e``. ``kind``: "box" (thin or thick), "polygon"
    (the same box tilted by up to 30 degrees) or "segment" (a capsule)."""
    W = 1.0
    T = rng.choice([rng.uniform(0.002, 0.02), rng.uniform(0.1, 1.0)])
    e = rng.uniform(0.2, 1.0)
    tilt = rng.uniform(-math.radians(30), math.radians(30)) if kind == "polygon" else 0.0
    R = _rot(tilt)
    if kind == "box":
        shapes = [dict(type="box", min=(0.0, -T), max=(W, 0.0))]
    elif kind == "polygon":
        pts = np.array([(0.0, -T), (W, -T), (W, 0.0), (0.0, 0.0)]) @ R.T
        shapes = [dict(type="polygon", points=[tuple(p) for p in pts])]
    else:
        shapes = [dict(type="segment", a=(0.0, -T / 2), b=(W, -T / 2), thickness=T / 2)]
    w = _world(integrator, shapes, e, 0.0, g=g)
    r = _radii(rng, n)
    delta = rng.uniform(0.005, 0.05, n)
    hit = np.stack([W - delta, r], 1)                    # centre at the touch
    phi = rng.uniform(math.radians(20), math.radians(70), n)
    speed = rng.uniform(*speeds, n)
    v = speed[:, None] * np.stack([np.cos(phi), -np.sin(phi)], 1)
    tau = rng.uniform(0.2, 0.9, n) * FRAME                # touch within the first step
    x = hit - v * tau[:, None]
    x, v = x @ R.T, v @ R.T
    # Gravity bends the path before the touch: aim for it (x(tau) = hit, v(tau) = v).
    x[:, 1] -= 0.5 * g * tau ** 2
    v[:, 1] += g * tau
    w.add_particles(x, v=v, radius=r)
    nrm = np.tile(R @ np.array([0.0, 1.0]), (n, 1))
    return Shots(w, 6, shapes, bounce=np.arange(n), normal=nrm, hit_step=0,
                 touch=hit @ R.T)


def drops(integrator, rng, n=120, g=G, thick=(1e-4, 6e-3), kind="box") -> Shots:
    """Point particles dropped from 1 mm to 1 m onto a thin box or polygon (``thick``
    m): they land and must stay on top."""
    T = rng.uniform(*thick)
    if kind == "box":
        shapes = [dict(type="box", min=(-1.0, -T), max=(1.0, 0.0))]
    else:
        shapes = [dict(type="polygon", points=[(-1.0, -T), (1.0, -T), (1.2, 0.0),
                                               (-1.0, 0.0)])]
    w = _world(integrator, shapes, rng.choice([0.0, rng.uniform(0, 1)]),
               rng.choice([0.0, 0.5]), g=g)
    x = np.stack([rng.uniform(-0.9, 0.9, n), np.exp(rng.uniform(math.log(1e-3), 0.0, n))], 1)
    w.add_particles(x, radius=0.0)
    steps = int(math.sqrt(2.0 / g) / FRAME) + 40
    return Shots(w, steps, shapes)


SCENES = {"corner": corner, "wedge": wedge, "ends": ends, "drops": drops}


# --------------------------------------------------------------------------- running

def _pymunk_shapes(shapes):
    """pymunk's shapes of a scene (``sandbox.reference``'s converter), for their
    ``segment_query``: the independent test of a path through a shape."""
    return [pymunk_shape(s) for s in shapes]


def _inside(world, x):
    """Per particle, the deepest penetration (m) of its disc into any shape."""
    r = world.particles.radius
    worst = np.full(x.shape[0], -np.inf)
    for shapes in world.colliders.sets.values():
        for s in range(len(shapes)):
            d, _, _ = shapes.distance(x, np.full(x.shape[0], s))
            worst = np.maximum(worst, r - d)
    return worst


def run(shots: Shots):
    """Step the world; returns ``(through, lost, v_before, v_after)``: per particle
    whether it went through a shape at some step; for the ``bounce`` particles whether
    their normal velocity after the hit step is off the bounce at the time of impact by
    more than round-off, and their velocities before and after that step.

    The bounce: from the normal velocity ``vn0`` at the start of the step and the
    normal distance ``dn`` to the touch, under gravity's normal part ``an`` the touch
    comes at ``vn = -sqrt(vn0^2 + 2 an dn)``, ``tau = 2 dn / (vn0 + vn)`` into the
    step; the particle leaves at ``-e vn`` and gravity carries that on to the time the
    integrator's velocity holds (``velocity_time``: the step's end, or its middle for
    the position-based ones): ``-e vn + an (velocity_time h - tau)``. An approach
    slower than the resting threshold ``2 g h`` must end at 0."""
    w = shots.world
    w.start(FRAME)
    ref = _pymunk_shapes(shots.shapes)
    p = w.particles
    n = p.n
    through = np.zeros(n, bool)
    lost = np.zeros(shots.bounce.size, bool)
    v_after = np.zeros((shots.bounce.size, 2))
    v_in = np.zeros((shots.bounce.size, 2))
    v_th = 2.0 * math.hypot(*w.config.gravity) * FRAME / w.config.substeps
    x_old = p.x.copy()
    for k in range(shots.steps):
        v_before = p.v[shots.bounce].copy()
        x_before = p.x[shots.bounce].copy()
        w.step(FRAME)
        x = p.x.copy()
        through |= _inside(w, x) > TOL
        lo, hi = np.minimum(x_old, x), np.maximum(x_old, x)
        for q in ref:
            bb = q.bb
            near = np.flatnonzero((hi[:, 0] >= bb.left) & (lo[:, 0] <= bb.right)
                                  & (hi[:, 1] >= bb.bottom) & (lo[:, 1] <= bb.top)
                                  & ~through)
            for i in near:
                if q.segment_query(tuple(x_old[i]), tuple(x[i]), 0.0) is not None:
                    through[i] = True
        if k == shots.hit_step and shots.bounce.size:
            e = w.config.restitution
            vn0 = np.einsum("ij,ij->i", v_before, shots.normal)
            vn = np.einsum("ij,ij->i", p.v[shots.bounce], shots.normal)
            an = shots.normal @ np.asarray(w.config.gravity, float)
            dn = np.einsum("ij,ij->i", shots.touch - x_before, shots.normal)
            v_hit = -np.sqrt(vn0 * vn0 + 2.0 * an * dn)
            tau = 2.0 * dn / (vn0 + v_hit)
            h = FRAME / w.config.substeps
            at = w.integrator.velocity_time
            want = np.where(v_hit < -v_th, -e * v_hit + an * (at * h - tau), 0.0)
            lost = np.abs(vn - want) > 1e-9 * (1.0 + np.abs(vn0))
            v_after = p.v[shots.bounce].copy()
            v_in = v_before
        x_old = x
    return through, lost, v_in, v_after


def main() -> None:
    import sys
    global BACKEND
    BACKEND = sys.argv[1] if len(sys.argv) > 1 else BACKEND
    rng = np.random.default_rng(0)
    for name, scene in SCENES.items():
        through = lost = total = 0
        for integrator in ALL:
            for _ in range(2):
                shots = scene(integrator, rng)
                t, lo, _, _ = run(shots)
                through += int(t.sum())
                lost += int(lo.sum())
                total += shots.world.n
        print(f"{name:8s} {total:5d} shots: {through:4d} through ({100 * through / total:.1f} %)"
              f", {lost} bounces lost")


if __name__ == "__main__":
    main()

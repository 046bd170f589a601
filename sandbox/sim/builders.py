"""Scene builders: cloth, rope, bridge, soft bodies, pendulums, Newton's cradle, orbits,
spring chains and spring pendulums.

One set of builders serves the levels, the app, the benchmark and the tests (as Box2D's
samples and benchmark share theirs). Each ``build_*(world, **params)`` appends particles
and constraints to a :class:`~sandbox.sim.world.World` and returns a
:class:`~sandbox.sim.world.Body`. Builders give the colouring of their own topology (a
grid's edges split into batches that share no particle) so the solver never needs the
generic greedy colouring for them. Positions are in metres, y up.
"""

from __future__ import annotations

import math

import numpy as np

from .world import Body, World


def _pt(p) -> np.ndarray:
    a = np.asarray(p, float)
    if a.shape != (2,) or not np.isfinite(a).all():
        raise ValueError(f"expected a finite point (x, y), got {p!r}")
    return a


def grid_edges(rows: int, cols: int, shear: bool = False, bend: bool = False):
    """Edges of a ``rows x cols`` grid (index ``r*cols + c``) with a valid colouring.

    Returns ``i, j, colour, family`` where family is 0 structural, 1 shear, 2 bend.
    Horizontal edges alternate colour with the column, vertical with the row, each
    diagonal direction with the row, bend edges with ``(c // 2) % 2`` / ``(r // 2) % 2``:
    no two edges of a colour share a particle.
    """
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    idx = r * cols + c
    parts = []

    def add(a, b, colour, family):
        parts.append((a.ravel(), b.ravel(), colour.ravel(), np.full(a.size, family)))

    add(idx[:, :-1], idx[:, 1:], c[:, :-1] % 2, 0)
    add(idx[:-1, :], idx[1:, :], 2 + r[:-1, :] % 2, 0)
    if shear:
        add(idx[:-1, :-1], idx[1:, 1:], 4 + r[:-1, :-1] % 2, 1)
        add(idx[:-1, 1:], idx[1:, :-1], 6 + r[:-1, 1:] % 2, 1)
    if bend:
        add(idx[:, :-2], idx[:, 2:], 8 + (c[:, :-2] // 2) % 2, 2)
        add(idx[:-2, :], idx[2:, :], 10 + (r[:-2, :] // 2) % 2, 2)
    i, j, col, fam = (np.concatenate(x) for x in zip(*parts, strict=True))
    return i, j, col, fam


def build_cloth(world: World, cols: int, rows: int, spacing: float = 0.1, origin=(0.0, 0.0),
                pins: str = "top_corners", mass: float = 0.01, radius: float = 0.0,
                compliance: float = 0.0, shear: bool = False, bend: bool = False,
                shear_compliance: float = 0.0, bend_compliance: float = 1e-4) -> Body:
    """A ``cols x rows`` cloth hanging down from its top-left corner ``origin``.

    ``pins``: ``top_row``, ``top_corners``, ``top_points`` (five points along the top:
    the benchmark's choice, since a fully pinned top row makes a cloth effectively
    one-dimensional), ``top_middle`` (the two neighbours at the middle of the top edge:
    the rest of the cloth is free to fall and fold) or ``none``.
    """
    if cols < 2 or rows < 2:
        raise ValueError("a cloth needs cols >= 2 and rows >= 2")
    o = _pt(origin)
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    x = np.stack([o[0] + c.ravel() * spacing, o[1] - r.ravel() * spacing], axis=1)
    top = np.arange(cols)
    pinned = np.zeros(rows * cols, bool)
    if pins == "top_row":
        pinned[top] = True
    elif pins == "top_corners":
        pinned[[0, cols - 1]] = True
    elif pins == "top_points":
        pinned[np.unique(np.round(np.linspace(0, cols - 1, 5)).astype(int))] = True
    elif pins == "top_middle":
        pinned[[(cols - 1) // 2, (cols - 1) // 2 + 1]] = True
    elif pins != "none":
        raise ValueError(f"unknown pins {pins!r}: top_row, top_corners, top_points, "
                         "top_middle, none")
    base = world.n
    pidx = world.add_particles(x, mass=mass, radius=radius, pinned=pinned)
    i, j, col, fam = grid_edges(rows, cols, shear, bend)
    comp = np.choose(fam, [compliance, shear_compliance, bend_compliance])
    # The grid's own lengths, not the distances measured between the rounded positions:
    # in float32 those scatter by up to ~5e-6 of the spacing, so a run of the compiled
    # sweep would have to read a rest length a link instead of one a run.
    rest = np.choose(fam, [spacing, spacing * math.sqrt(2.0), 2.0 * spacing])
    cidx = world.add_constraints(base + i, base + j, rest=rest, compliance=comp, kind="stick",
                                 colour=col)
    world.constraints.add_grid(base, rows, cols)      # the compiled frame's layout
    body = Body("cloth", pidx, cidx)
    world.bodies.append(body)
    return body


def _chain(world, points, mass, radius, compliance, pinned, kind, rest=None, name="rope"):
    base = world.n
    pidx = world.add_particles(points, mass=mass, radius=radius, pinned=pinned)
    k = len(points) - 1
    i = base + np.arange(k)
    cidx = world.add_constraints(i, i + 1, rest=rest, compliance=compliance, kind=kind,
                                 colour=np.arange(k) % 2)
    body = Body(name, pidx, cidx)
    world.bodies.append(body)
    return body


def build_rope(world: World, start, end, segments: int = 20, mass: float = 0.05,
               radius: float = 0.0, compliance: float = 0.0, pin: str = "start",
               kind: str = "rope") -> Body:
    """A straight rope of ``segments`` links from ``start`` to ``end``.

    ``kind`` ``rope`` links resist stretching only; ``stick`` links hold their length.
    """
    a, b = _pt(start), _pt(end)
    if segments < 1 or np.allclose(a, b):
        raise ValueError("a rope needs segments >= 1 and distinct ends")
    s = np.linspace(0.0, 1.0, segments + 1)[:, None]
    pinned = np.zeros(segments + 1, bool)
    if pin in ("start", "both"):
        pinned[0] = True
    if pin == "both":
        pinned[-1] = True
    return _chain(world, a + s * (b - a), mass, radius, compliance, pinned, kind)


def build_bridge(world: World, start, end, links: int = 20, slack: float = 0.05,
                 mass: float = 0.1, radius: float = 0.0, compliance: float = 0.0) -> Body:
    """A chain bridge pinned at both ends, ``slack`` longer than the span.

    Laid out on a parabola whose arc length matches the chain (sag ``d`` from
    ``L (1 + slack) = L + 8 d^2 / (3 L)``), so it starts near its hanging shape.
    """
    a, b = _pt(start), _pt(end)
    span = float(np.linalg.norm(b - a))
    if links < 2 or span == 0:
        raise ValueError("a bridge needs links >= 2 and distinct ends")
    s = np.linspace(0.0, 1.0, links + 1)
    sag = span * math.sqrt(3.0 * slack / 8.0)
    pts = a + s[:, None] * (b - a)
    pts[:, 1] -= 4.0 * sag * s * (1 - s)
    pinned = np.zeros(links + 1, bool)
    pinned[[0, -1]] = True
    rest = span * (1.0 + slack) / links
    return _chain(world, pts, mass, radius, compliance, pinned, "stick", rest=rest,
                  name="bridge")


def build_soft_ring(world: World, center, radius_ring: float = 1.0, segments: int = 24,
                    pressure: float = 1.0, mass: float = 0.05, radius: float = 0.0,
                    compliance: float = 0.0) -> Body:
    """A closed ring of sticks filled with gas at ``pressure`` (N/m, 2-D)."""
    c = _pt(center)
    if segments < 3:
        raise ValueError("a ring needs at least 3 segments")
    th = 2 * np.pi * np.arange(segments) / segments
    x = c + radius_ring * np.stack([np.cos(th), np.sin(th)], axis=1)   # counter-clockwise
    base = world.n
    pidx = world.add_particles(x, mass=mass, radius=radius)
    i = base + np.arange(segments)
    j = base + (np.arange(segments) + 1) % segments
    colour = np.arange(segments) % 2 if segments % 2 == 0 else None
    cidx = world.add_constraints(i, j, compliance=compliance, colour=colour)
    if pressure > 0:
        world.add_pressure(pidx, pressure)
    body = Body("soft_ring", pidx, cidx)
    world.bodies.append(body)
    return body


def build_soft_blob(world: World, center, cols: int = 6, rows: int = 6, spacing: float = 0.2,
                    mass: float = 0.05, radius: float = 0.0, compliance: float = 1e-5) -> Body:
    """A soft lattice: structural, shear and bend constraints, all compliant."""
    c = _pt(center)
    r, q = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    x = np.stack([q.ravel() * spacing, -r.ravel() * spacing], axis=1)
    x += c - x.mean(axis=0)
    base = world.n
    pidx = world.add_particles(x, mass=mass, radius=radius)
    i, j, col, _ = grid_edges(rows, cols, shear=True, bend=True)
    cidx = world.add_constraints(base + i, base + j, compliance=compliance, colour=col)
    body = Body("soft_blob", pidx, cidx)
    world.bodies.append(body)
    return body


def _bob(pivot, length, angle):
    return pivot + length * np.array([math.sin(angle), -math.cos(angle)])


def _rods(world, points, mass, radius, stiffness, name):
    """A pinned first particle and bobs joined in a row: by rigid rods (constraints) when
    ``stiffness`` is 0, by springs of that stiffness (N/m, at their rest length) when > 0.

    Rods are XPBD constraints: the solver takes a little energy out of every step that
    bends them (more the fewer substeps). Stiff springs are forces that a symplectic
    integrator keeps the energy of, so a chaotic swing stays chaotic.
    """
    if stiffness < 0:
        raise ValueError("stiffness must be >= 0 (0: rigid rods)")
    pinned = [True] + [False] * (len(points) - 1)
    if stiffness == 0:
        return _chain(world, points, mass, radius, 0.0, pinned, "stick", name=name)
    base = world.n
    pidx = world.add_particles(points, mass=mass, radius=radius, pinned=pinned)
    i = base + np.arange(len(points) - 1)
    world.add_springs(i, i + 1, stiffness)
    body = Body(name, pidx)
    world.bodies.append(body)
    return body


def build_pendulum(world: World, pivot, length: float = 1.0, angle: float = 0.5,
                   mass: float = 1.0, radius: float = 0.05, stiffness: float = 0.0) -> Body:
    """A bob on a massless rod, ``angle`` radians from straight down; the rod is rigid
    (``stiffness`` 0) or a stiff spring (N/m)."""
    p = _pt(pivot)
    pts = np.stack([p, _bob(p, length, angle)])
    return _rods(world, pts, mass, [0.0, radius], stiffness, "pendulum")


def build_double_pendulum(world: World, pivot, lengths=(1.0, 1.0), angles=(1.5, 1.5),
                          masses=(1.0, 1.0), radius: float = 0.05,
                          stiffness: float = 0.0) -> Body:
    """Two bobs on rods: the classic chaotic double pendulum. Rigid rods (``stiffness``
    0) or stiff springs (N/m), as :func:`build_pendulum`."""
    p = _pt(pivot)
    b1 = _bob(p, lengths[0], angles[0])
    b2 = _bob(b1, lengths[1], angles[1])
    return _rods(world, np.stack([p, b1, b2]), [1.0, masses[0], masses[1]],
                 [0.0, radius, radius], stiffness, "double_pendulum")


def build_cradle(world: World, pivot, balls: int = 5, length: float = 1.0,
                 ball_radius: float = 0.1, pull: int = 1, angle: float = 0.6,
                 mass: float = 1.0) -> Body:
    """Newton's cradle: ``balls`` touching balls on strings; ``pull`` lifted to the left.

    Needs ``collide_particles`` in the world config for the balls to touch.
    """
    p = _pt(pivot)
    if not 0 <= pull <= balls:
        raise ValueError("pull must be between 0 and the number of balls")
    xs = p[0] + (np.arange(balls) - (balls - 1) / 2) * 2.0 * ball_radius
    pivots = np.stack([xs, np.full(balls, p[1])], axis=1)
    bobs = np.array([_bob(pv, length, -angle if k < pull else 0.0)
                     for k, pv in enumerate(pivots)])
    base = world.n
    pidx = world.add_particles(np.concatenate([pivots, bobs]), mass=mass,
                               radius=np.r_[np.zeros(balls), np.full(balls, ball_radius)],
                               pinned=np.r_[np.ones(balls, bool), np.zeros(balls, bool)])
    i = base + np.arange(balls)
    cidx = world.add_constraints(i, i + balls, colour=0)
    body = Body("cradle", pidx, cidx)
    world.bodies.append(body)
    return body


def build_balls(world: World, cols: int = 10, rows: int = 10, spacing: float = 0.2,
                origin=(0.0, 0.0), radius: float = 0.08, mass: float = 0.1) -> Body:
    """A block of ``cols x rows`` free balls (no links) for piles; ``origin`` is the
    lower-left ball, odd rows are shifted right by ``spacing / 2`` (a staggered stack that
    does not balance on itself). Needs ``collide_particles`` for the balls to touch."""
    o = _pt(origin)
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    x = np.stack([o[0] + spacing * (c + 0.5 * (r % 2)), o[1] + spacing * r], axis=-1)
    pidx = world.add_particles(x.reshape(-1, 2), mass=mass, radius=radius)
    body = Body("balls", pidx)
    world.bodies.append(body)
    return body


def build_orbit(world: World, center=(0.0, 0.0), central_mass: float = 1000.0,
                moons=({"distance": 10.0, "speed_factor": 1.1, "mass": 1.0},),
                radius: float = 0.1, fixed_center: bool = False) -> Body:
    """A heavy central mass and moons (article 000). Needs ``world.config.G > 0``.

    Each moon starts at ``distance`` at ``angle`` (rad) with ``speed_factor`` times the
    circular speed ``sqrt(G (M + m) / r)``, counter-clockwise. A free centre gets the
    opposite momentum, so the centre of mass stays at rest.
    """
    G = world.config.G
    if G <= 0:
        raise ValueError("an orbit needs world gravitational constant G > 0")
    c = _pt(center)
    pos, vel, mass = [c], [np.zeros(2)], [central_mass]
    for moon in moons:
        moon = dict(moon)
        r, f = float(moon["distance"]), float(moon.get("speed_factor", 1.0))
        m, th = float(moon.get("mass", 1.0)), float(moon.get("angle", 0.0))
        u = np.array([math.cos(th), math.sin(th)])
        speed = f * math.sqrt(G * (central_mass + m) / r)
        pos.append(c + r * u)
        vel.append(speed * np.array([-u[1], u[0]]))
        mass.append(m)
    pos, vel, mass = np.array(pos), np.array(vel), np.array(mass)
    if not fixed_center:
        vel[0] = -(mass[1:, None] * vel[1:]).sum(axis=0) / central_mass
    pinned = np.zeros(len(mass), bool)
    pinned[0] = fixed_center
    if fixed_center:
        vel[0] = 0.0
    pidx = world.add_particles(pos, vel, mass=mass, radius=radius, pinned=pinned)
    body = Body("orbit", pidx)
    world.bodies.append(body)
    return body


def build_spring_chain(world: World, start, end, segments: int = 10, mass: float = 0.1,
                       radius: float = 0.0, stiffness: float = 100.0, damping: float = 0.0,
                       pin: str = "start") -> Body:
    """A straight chain of ``segments`` springs from ``start`` to ``end``, each at its rest
    length: forces, not constraints, so every integrator (RK4 included) integrates them
    and the chain stretches, bounces and swings as fast as ``sqrt(stiffness / mass)``.

    ``stiffness`` N/m and ``damping`` N s/m per spring; ``pin`` ``start``, ``both`` or
    ``none``.
    """
    a, b = _pt(start), _pt(end)
    if segments < 1 or np.allclose(a, b):
        raise ValueError("a spring chain needs segments >= 1 and distinct ends")
    if pin not in ("start", "both", "none"):
        raise ValueError(f"unknown pin {pin!r}: start, both, none")
    s = np.linspace(0.0, 1.0, segments + 1)[:, None]
    pinned = np.zeros(segments + 1, bool)
    pinned[0] = pin in ("start", "both")
    pinned[-1] = pin == "both"
    base = world.n
    pidx = world.add_particles(a + s * (b - a), mass=mass, radius=radius, pinned=pinned)
    i = base + np.arange(segments)
    world.add_springs(i, i + 1, stiffness, damping)
    body = Body("spring_chain", pidx)
    world.bodies.append(body)
    return body


def build_spring_pendulum(world: World, pivot, length: float = 1.0, angle: float = 0.0,
                          stretch: float = 0.0, stiffness: float = 50.0,
                          damping: float = 0.0, mass: float = 1.0,
                          radius: float = 0.05) -> Body:
    """A bob on a spring of rest length ``length`` from a fixed pivot, ``angle`` radians
    from straight down: a pendulum that also bounces (an elastic pendulum).

    The bob starts ``stretch`` metres beyond the hanging equilibrium, where the spring
    holds the weight (extension ``mass |g| / stiffness``): ``stretch = 0`` and ``angle =
    0`` hang still, ``stretch > 0`` bounces at ``sqrt(stiffness / mass)`` rad/s.
    """
    p = _pt(pivot)
    if length <= 0 or stiffness <= 0 or mass <= 0:
        raise ValueError("a spring pendulum needs length, stiffness and mass > 0")
    g = float(np.hypot(*world.config.gravity))
    reach = length + mass * g / stiffness + stretch
    if reach <= 0:
        raise ValueError("stretch would put the bob on the other side of the pivot")
    base = world.n
    pidx = world.add_particles(np.stack([p, _bob(p, reach, angle)]), mass=[1.0, mass],
                               radius=[0.0, radius], pinned=[True, False])
    world.add_springs(base, base + 1, stiffness, damping, rest=length)
    body = Body("spring_pendulum", pidx)
    world.bodies.append(body)
    return body


#: Builders by the ``type`` name that level files use.
def build_particles(world: World, points, mass: float = 0.1, radius: float = 0.0,
                    pinned: bool = False) -> Body:
    """Free particles at ``points (k, 2)`` m."""
    pts = np.asarray(points, float).reshape(-1, 2)
    idx = world.add_particles(pts, mass=mass, radius=radius,
                              pinned=np.full(len(pts), bool(pinned)))
    body = Body("particles", idx)
    world.bodies.append(body)
    return body


def build_links(world: World, pairs, compliance: float = 0.0, kind: str = "stick") -> Body:
    """Links between existing particles ``pairs (k, 2)`` (their indices in the world),
    at their current distance. ``ValueError`` naming the pair if a particle does not
    exist or a pair joins a particle to itself."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    for i, j in pairs.tolist():
        if not (0 <= i < world.n and 0 <= j < world.n):
            raise ValueError(f"link [{i}, {j}]: there are only {world.n} particles before "
                             "it (indices count from 0 in build order)")
        if i == j:
            raise ValueError(f"link [{i}, {j}] joins a particle to itself")
    c = world.add_constraints(pairs[:, 0], pairs[:, 1], compliance=compliance, kind=kind)
    body = Body("links", np.zeros(0, np.int64), np.asarray(c, np.int64))
    world.bodies.append(body)
    return body


def build_chain(world: World, points, mass: float = 0.05, radius: float = 0.0,
                compliance: float = 0.0, kind: str = "stick", pin: str = "none") -> Body:
    """Particles through ``points (k, 2)`` m, each linked to the next at its distance."""
    pts = np.asarray(points, float).reshape(-1, 2)
    pinned = np.zeros(len(pts), bool)
    pinned[0] = pin in ("start", "both")
    pinned[-1] |= pin in ("end", "both")
    return _chain(world, pts, mass, radius, compliance, pinned, kind, name="chain")


def build_nbody_disc(world: World, n: int = 100, center=(0.0, 0.0), disc_radius: float = 10.0,
                     total_mass: float = 100.0, spread: float = 0.1, radius: float = 0.05,
                     seed: int = 0) -> Body:
    """``n`` equal bodies scattered uniformly over a disc of ``disc_radius`` m about
    ``center``, ``total_mass`` kg in all, on near-circular orbits about the centre (the
    benchmark's n-body scene). Needs ``world.config.G > 0``.

    With the mass inside ``r`` being ``M r^2 / R^2``, the circular speed is
    ``sqrt(G M r) / R``; each body gets that speed counter-clockwise plus a random
    velocity of ``spread`` times the mean speed (normal, per axis), and the whole is then
    shifted so that the centre of mass is at rest. The same ``seed`` gives the same disc.
    """
    G = world.config.G
    if G <= 0:
        raise ValueError("an n-body disc needs world gravitational constant G > 0")
    if n < 2 or disc_radius <= 0 or total_mass <= 0 or spread < 0:
        raise ValueError("an n-body disc needs n >= 2, disc_radius > 0, total_mass > 0 "
                         "and spread >= 0")
    c = _pt(center)
    rng = np.random.default_rng(seed)
    r = disc_radius * np.sqrt(rng.random(n))
    th = 2.0 * np.pi * rng.random(n)
    x = np.stack([r * np.cos(th), r * np.sin(th)], axis=1)
    speed = np.sqrt(G * total_mass * r) / disc_radius
    v = speed[:, None] * np.stack([-np.sin(th), np.cos(th)], axis=1)
    v += spread * speed.mean() * rng.standard_normal((n, 2))
    v -= v.mean(axis=0)                            # centre of mass at rest
    pidx = world.add_particles(x + c, v, mass=total_mass / n, radius=radius)
    body = Body("nbody_disc", pidx)
    world.bodies.append(body)
    return body


def build_ball_block(world: World, cols: int = 40, rows: int = 50, spacing: float = 0.11,
                     bottom_center=(0.0, 0.0), radius: float = 0.05, mass: float = 0.05,
                     jitter: float = 0.001, seed: int = 0) -> Body:
    """A block of ``cols x rows`` free balls in straight columns ``spacing`` m apart,
    ``bottom_center`` the middle of the bottom row, each moved by a random offset of
    ``jitter`` m (normal, per axis, from ``seed``) so that a pile does not stack in
    perfect columns (the benchmark's pile). Needs ``collide_particles`` to touch."""
    o = _pt(bottom_center)
    if cols < 1 or rows < 1 or spacing <= 0 or jitter < 0:
        raise ValueError("a ball block needs cols, rows >= 1, spacing > 0 and jitter >= 0")
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    x = np.stack([o[0] + (c.ravel() - (cols - 1) / 2) * spacing, o[1] + r.ravel() * spacing],
                 axis=1)
    x += jitter * np.random.default_rng(seed).standard_normal(x.shape)
    pidx = world.add_particles(x, mass=mass, radius=radius)
    body = Body("ball_block", pidx)
    world.bodies.append(body)
    return body


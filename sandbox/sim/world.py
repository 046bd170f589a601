"""The world: particles, the forces on them, their links, springs and static shapes,
what a hand and a person do to them, and what they measure.

Building (``add_*``), configuring (a frozen :class:`WorldConfig`; a hotkey makes a new
one with ``dataclasses.replace`` and hands it to :meth:`World.configure`), the forces
(:meth:`World.accel`), interaction (grab, drag, pin, cut) and measuring (energy, the
links' error, the state hash, a read-only view). ``World.step(h)`` checks ``h`` and hands
the frame to ``pipeline.step``, whose module docstring is the script of a frame's
physics: which way it runs and the stages of a substep, in order.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from . import lagrange, pipeline
from .collide.colliders import Colliders
from .constraints import Constraints, softness_factor
from .forces import PressureBody, Springs, UniformField, nbody_potential, point_gravity
from .integrators import INTEGRATORS, Integrator, get_integrator
from .mouse import G_REF, MouseSpring, component
from .particles import Particles, state_hash
from .pipeline import SimulationDiverged
from .view import WorldView
from .view import view as make_view

__all__ = ["Body", "LinkSoftnessError", "SimulationDiverged", "World", "WorldConfig",
           "integrator_names"]


class LinkSoftnessError(ValueError):
    """A world under Lagrange multipliers or RATTLE was asked to make links soft; the
    message says why in one sentence, and the links are as they were."""


@dataclass(frozen=True)
class WorldConfig:
    """World settings; SI units, y up.

    ``tear_ratio`` 0 never tears, else a constraint breaks beyond ``ratio * rest``.
    ``G`` > 0 switches on softened n-body gravity between all particles (``softening``
    m). ``bounds`` ``(xmin, ymin, xmax, ymax)`` is a box that particles stay inside.
    ``restitution`` (0..1) and ``friction`` (Coulomb coefficient) apply to the walls, to
    shapes that give none of their own and between particles when ``collide_particles``.
    """

    gravity: tuple[float, float] = (0.0, -9.81)
    integrator: str = "tcv_corrected"
    iterations: int = 10
    substeps: int = 1
    tear_ratio: float = 0.0
    drag: float = 0.0
    G: float = 0.0
    softening: float = 0.01
    bounds: tuple[float, float, float, float] | None = None
    restitution: float = 0.0
    friction: float = 0.0
    collide_particles: bool = False
    dtype: str = "float64"
    #: How rigid links are solved: "xpbd" (projection after the step), "lagrange"
    #: (multiplier forces inside a(x, v)) or "rattle" (RATTLE / SHAKE); see lagrange.py.
    constraint_method: str = "xpbd"

    def __post_init__(self):
        get_integrator(self.integrator)            # ValueError listing the valid names
        if self.iterations < 0 or self.substeps < 1:
            raise ValueError("iterations must be >= 0 and substeps >= 1")
        if self.dtype not in ("float64", "float32"):
            raise ValueError("dtype must be 'float64' or 'float32'")
        if self.constraint_method not in lagrange.CONSTRAINT_METHODS:
            raise ValueError(f"unknown constraint method {self.constraint_method!r}; valid: "
                             f"{', '.join(lagrange.CONSTRAINT_METHODS)}")


@dataclass
class Body:
    """What a builder added: a name, its particle and constraint index ranges."""

    kind: str
    particles: np.ndarray
    constraints: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


class World:
    """Particles, the forces on them, their constraints, and time."""

    def __init__(self, config: WorldConfig | None = None, **kwargs) -> None:
        self.config = config or WorldConfig(**kwargs)
        dtype = np.dtype(self.config.dtype)
        self.particles = Particles.empty(2, dtype)
        self.constraints = Constraints()
        self.colliders = Colliders()
        self.gravity_field = UniformField()    # gravity on the movable rows, kept
        self.scratch = pipeline.Scratch()      # what stepping keeps: buffers, caches
        self.springs = Springs()
        self.pressure: list[PressureBody] = []
        self.bodies: list[Body] = []
        self.integrator: Integrator = get_integrator(self.config.integrator)
        self.mouse: MouseSpring | None = None      # the hand's spring (see mouse.py)
        self.ledger: dict[str, float] | None = None  # where energy goes (track_energy)
        self.lagrange_options = lagrange.Options()   # Lagrange / RATTLE: tolerance, drift
        self.steps = 0
        self.torn = 0
        self.started = False

    # --- building -----------------------------------------------------------------------

    @property
    def t(self) -> float:
        return self.particles.t

    @property
    def n(self) -> int:
        return self.particles.n

    def add_particles(self, x, v=None, mass=1.0, radius=0.0, pinned=False) -> np.ndarray:
        self.started = False
        return self.particles.append(x, v, mass=mass, radius=radius, pinned=pinned)

    def add_constraints(self, i, j, rest=None, compliance=0.0, kind="stick",
                        colour=None) -> np.ndarray:
        return self.constraints.add(i, j, self.particles.x, rest=rest, compliance=compliance,
                                    kind=kind, colour=colour)

    def add_shape(self, type: str, **fields) -> int:   # noqa: A002 - the level files' key
        """Add a static shape; ``type`` and ``fields`` as in a level's ``[[shapes]]``:
        ``circle(center, radius)``, ``segment(a, b, thickness=0)``, ``polygon(points)``
        (convex, either winding), ``box(min, max)``, each with optional ``restitution``
        and ``friction`` (None: the world's). Returns its index in :attr:`shapes`."""
        return self.colliders.add(type, **fields)

    @property
    def shapes(self) -> list[dict]:
        """The static shapes as dicts for drawing and saving: ``{"type": "circle", "center":
        [x, y], "radius": r, "restitution": e | None, "friction": mu | None}``, segments
        ``a``, ``b``, ``thickness``; polygons ``points``; boxes ``min``, ``max`` (m)."""
        return self.colliders.specs

    def add_springs(self, i, j, k, c=0.0, rest=None) -> np.ndarray:
        return self.springs.add(i, j, k, c, rest=rest, x=self.particles.x)

    def add_pressure(self, ring, pressure: float) -> PressureBody:
        ring = np.asarray(ring, np.int64)
        body = PressureBody(ring, 0.0, 1.0)
        area0 = body.area(self.particles.x)
        if area0 <= 0:
            raise ValueError("a pressure ring must be counter-clockwise with positive area")
        body.nrt, body.area0 = pressure * area0, area0
        self.pressure.append(body)
        return body

    def start(self, h: float) -> None:
        """(Re)start the integrator from the current ``(x, v)`` for frames of about ``h``.

        ``h`` is a frame step, like :meth:`step`'s; the integrator starts for the substep
        ``h / substeps`` it will actually take (a Verlet start for the frame step would
        make the first substep's ratio ``h/h_prev`` equal to ``1/substeps``).
        """
        lagrange.check(self, self.config.constraint_method)  # ConstraintMethodError
        self.integrator.start(self.particles, h / self.config.substeps,
                              lagrange.start_accel(self))
        self.started = True

    def configure(self, config: WorldConfig, h: float | None = None) -> None:
        """Adopt a new configuration; a new integrator takes over without a jump. A new
        constraint method the world cannot use raises ``ConstraintMethodError`` (a
        ValueError; see :meth:`set_constraint_method`) and nothing changes."""
        old = self.config
        switch = config.constraint_method != old.constraint_method
        if switch:
            lagrange.check(self, config.constraint_method)
        self.config = config
        if switch and config.constraint_method != "xpbd":
            lagrange.adopt(self)                # onto the links: XPBD leaves a residual
        prev = self.particles.h_prev * old.substeps if self.particles.h_prev else 0.0
        # A new step size is a new start (article 001, eq. 2): position Verlet replays
        # its last displacement over the next step whatever its length, so halving the
        # substep would double every velocity.
        resized = config.substeps != old.substeps or (
            h is not None and prev > 0 and not math.isclose(h, prev, rel_tol=1e-9))
        if config.integrator != old.integrator or not self.started or switch or resized:
            self.integrator = get_integrator(config.integrator)
            self.start(h or prev or 1 / 60)

    def set_integrator(self, name: str, h: float | None = None) -> None:
        self.configure(dataclasses.replace(self.config, integrator=name), h)

    def set_constraint_method(self, name: str, h: float | None = None) -> None:
        """Solve the rigid links by ``name`` in ``lagrange.CONSTRAINT_METHODS`` ("xpbd",
        "lagrange", "rattle"). A world that cannot (too many links, rope or compliant
        links, redundant links, float32) raises ``lagrange.ConstraintMethodError``, whose
        message says why in one sentence, and keeps its method."""
        self.configure(dataclasses.replace(self.config, constraint_method=name), h)

    @property
    def link_softness(self) -> float:
        """The factor every link's own compliance is taken times (1: as built; see
        :meth:`set_link_softness`)."""
        return self.constraints.softness

    def set_link_softness(self, factor: float) -> None:
        """Make every soft link ``factor`` times as soft as it was built (its compliance,
        m/N, times ``factor``; finite, >= 0): 0 makes them rigid, 1 gives them back as
        built; rigid links stay rigid. The links' tables are made again and their
        multipliers start from zero at the next step: a compiled frame's kept
        arguments no longer hold (``Constraints.set_softness``), and the world steps
        on as if built with these compliances.

        Lagrange multipliers and RATTLE hold rigid links only: under them a factor that
        would make a link soft raises :class:`LinkSoftnessError` (a ValueError) saying
        so, and nothing changes."""
        f = softness_factor(factor)
        c, p = self.constraints, self.particles
        method = self.config.constraint_method
        if method != "xpbd" and len(c):
            live = (p.inv_mass[c.i] + p.inv_mass[c.j]) > 0
            if np.any(c.own_compliance[live] * f != 0):
                label = lagrange.CONSTRAINT_METHODS[method].label
                raise LinkSoftnessError(
                    f"{label} holds rigid links only, so the links stay rigid (link "
                    f"softness {c.softness:g}); soft links need XPBD (M switches back)")
        c.set_softness(f)
        self.scratch.lam = None

    @property
    def constraint_scheme(self) -> lagrange.Combination:
        """What the constraint method and the integrator amount to (``.scheme``,
        ``.symplectic``, ``.note``, ``.hud``: one HUD line)."""
        return lagrange.describe(self.config.constraint_method, self.integrator,
                                 rigid_links=bool(len(self.constraints)))

    # --- forces -------------------------------------------------------------------------

    def accel(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Acceleration of every particle ``(n, 2)`` m/s^2; zero on pinned rows."""
        p, cfg = self.particles, self.config
        uniform = self.gravity_field.get(cfg.gravity, x, p.inv_mass)
        if self.gravity_only:
            return uniform          # read-only: nobody may scribble on the shared field
        a = np.zeros_like(x)
        if cfg.drag:
            a -= cfg.drag * v
        if cfg.G:
            a += point_gravity(x, p.mass, cfg.G, cfg.softening)
        if len(self.springs) or self.pressure:
            f = self.springs.force(x, v)
            for body in self.pressure:
                body.force(x, f)
            a += f * p.inv_mass[:, None]
        a *= (p.inv_mass > 0)[:, None]
        a += uniform
        return a

    @property
    def gravity_only(self) -> bool:
        """True when the acceleration is the uniform gravity field alone."""
        cfg = self.config
        return not (cfg.drag or cfg.G or len(self.springs) or self.pressure)

    @property
    def has_contacts(self) -> bool:
        """True when particles may touch walls, shapes or each other."""
        cfg = self.config
        return bool(cfg.bounds is not None or cfg.collide_particles or len(self.colliders))

    # --- stepping -----------------------------------------------------------------------

    def step(self, h: float) -> None:
        """Advance by ``h`` seconds, one frame's step: ``pipeline.step``, whose module
        docstring is the script. A state that is no longer finite raises
        :class:`SimulationDiverged` and is left as it was before the step."""
        if not (isinstance(h, (int, float, np.floating)) and math.isfinite(h) and h > 0):
            raise ValueError(f"step h must be a positive finite number, got {h!r}")
        pipeline.step(self, h)

    # --- where energy goes ----------------------------------------------------------------

    def track_energy(self, on: bool = True) -> None:
        """Keep a ledger of where the total energy changes: ``ledger["integrator"]`` (J,
        the integrator's own step: its truncation error and, for explicit Euler, its
        growth), ``ledger["solver"]`` (J, the position corrections of constraints,
        contacts and the hand, which XPBD makes inelastically, including what they leave
        in the displacement a position-based step replays), ``ledger["drag"]`` (J, the
        air drag's work) and ``ledger["links"]`` (J, the change of the energy compliant
        links store). The four add up to the change of ``energy()["total"]``. Off by
        default: it costs two energy evaluations a substep and the substep-by-substep
        path."""
        self.ledger = ({"integrator": 0.0, "solver": 0.0, "drag": 0.0, "links": 0.0}
                       if on else None)
        self.scratch.corrected = False

    # --- interaction --------------------------------------------------------------------

    def nearest(self, point, radius: float) -> int | None:
        """Index of the particle nearest ``point`` within ``radius`` m, or None."""
        if not self.n:
            return None
        d2 = np.sum((self.particles.x - np.asarray(point, float)) ** 2, axis=1)
        k = int(np.argmin(d2))
        return k if d2[k] <= radius * radius else None

    def nearest_movable(self, point, radius: float) -> int | None:
        """Index of the movable (not pinned) particle nearest ``point`` within ``radius``
        m, or None: what a hand can grab."""
        movable = self.particles.inv_mass > 0
        if not movable.any():
            return None
        d2 = np.sum((self.particles.x - np.asarray(point, float)) ** 2, axis=1)
        d2[~movable] = np.inf
        k = int(np.argmin(d2))
        return k if d2[k] <= radius * radius else None

    def body(self, k: int) -> np.ndarray:
        """Indices of the particles joined to ``k`` by links or springs (its body)."""
        c, s = self.constraints, self.springs
        return component(self.n, np.concatenate([c.i, s.i]), np.concatenate([c.j, s.j]), k)

    def grab(self, k: int, target=None, radius: float = 0.0) -> None:
        """Hold particle ``k`` with the mouse spring (``sim/mouse.py``), pulling it towards
        ``target`` (m; its own position by default). The hand also holds every movable
        particle of the same body within ``radius`` m of particle ``k``, at its offset.
        A pinned particle cannot be grabbed (``ValueError``)."""
        p = self.particles
        if not (0 <= k < p.n):
            raise IndexError(f"no particle {k} (the world has {p.n})")
        if p.inv_mass[k] <= 0:
            raise ValueError(f"particle {k} is pinned; unpin it to drag it")
        body = self.body(k)
        movable = body[p.inv_mass[body] > 0]
        d = p.x[movable] - p.x[k]
        near = movable[(np.einsum("ij,ij->i", d, d) <= radius * radius) & (movable != k)]
        idx = np.concatenate([[k], near]).astype(np.int64)
        target = np.array(p.x[k] if target is None else target, float)
        g = float(np.hypot(*self.config.gravity))
        self.mouse = MouseSpring(idx, p.x[idx] - p.x[k], target,
                                 float(np.sum(p.mass[movable])), g=g if g > 0 else G_REF)

    @property
    def grabbed(self) -> dict[int, np.ndarray]:
        """``{particle: target}`` of the mouse spring's particles (empty: nothing held)."""
        m = self.mouse
        if m is None:
            return {}
        return {int(k): a for k, a in zip(m.idx.tolist(), m.anchors(), strict=True)}

    def drag_to(self, target) -> None:
        """Move the mouse spring's end to ``target`` (m); ignored when nothing is held or
        the target is not finite (a spring to infinity would fling the body)."""
        t = np.asarray(target, float)
        if self.mouse is not None and t.shape == (2,) and np.isfinite(t).all():
            self.mouse.target = t.copy()

    def release(self) -> None:
        """Let go: the body keeps the velocity the spring gave it."""
        self.mouse = None

    def toggle_pin(self, k: int) -> bool:
        """Pin or unpin particle ``k``; returns True if it is now pinned."""
        p = self.particles
        pinned = p.inv_mass[k] == 0
        p.inv_mass[k] = 1.0 / p.mass[k] if pinned else 0.0
        if not pinned:                      # now pinned: at rest where it is
            p.v[k] = 0.0
            p.x_prev[k] = p.x[k]
        p.a_valid = False
        return not pinned

    def cut(self, a, b) -> int:
        """Cut every constraint that the segment ``a b`` (m) crosses; returns the count."""
        return self.constraints.cut(self.particles.x, a, b)

    # --- measuring ----------------------------------------------------------------------

    def view(self) -> WorldView:
        """A read-only :class:`~sandbox.sim.view.WorldView` of the world now: what drawing
        and the HUD read (arrays not writeable, the links' strain computed once)."""
        return make_view(self)

    def energy(self) -> dict[str, float]:
        """Energies in J: kinetic, gravity, nbody, elastic (springs, compliance, gas)."""
        p, cfg = self.particles, self.config
        movable = p.inv_mass > 0
        m = np.where(movable, p.mass, 0.0)
        ke = 0.5 * float(np.sum(m * np.einsum("ij,ij->i", p.v, p.v)))
        g = np.asarray(cfg.gravity, float)
        pe_g = -float(np.sum(m * (p.x @ g)))
        pe_n = nbody_potential(p.x, p.mass, cfg.G, cfg.softening) if cfg.G else 0.0
        elastic = self.springs.potential(p.x) + self.constraints.potential(p.x)
        elastic += sum(b.potential(p.x) for b in self.pressure)
        potential = pe_g + pe_n + elastic
        return {"kinetic": ke, "gravity": pe_g, "nbody": pe_n, "elastic": elastic,
                "potential": potential, "total": ke + potential}

    def contact_corrections(self) -> np.ndarray | None:
        """How far (m) the contact solver moved each particle in the last substep:
        ``(n, 2)``, a copy, zero rows where no contact moved it; None before any
        substep's contacts ran (see ``Colliders.last_corrections``). The same on the
        numpy reference and the compiled paths."""
        return self.colliders.last_corrections()

    def constraint_error(self) -> tuple[float, float]:
        """Mean and max relative stretch of the constraints."""
        return self.constraints.error(self.particles.x)

    def state_hash(self) -> str:
        p, c = self.particles, self.constraints
        return state_hash(p.x, p.v, p.x_prev, p.mass, p.inv_mass, p.radius, c.i, c.j, c.rest,
                          c.compliance, c.kind, scalars=(p.t, p.h_prev, self.integrator.name))

    # --- replacing the state ------------------------------------------------------------

    def take_state(self, other: World) -> None:
        """Become ``other`` in place, for callers that hold on to this world (a snapshot
        loaded into the running window, ``sandbox.snapshot.load``): its configuration,
        integrator, particles, links, springs, pressure bodies, shapes, counters and
        caches, shared with ``other``, which is not to be used afterwards. What belongs to
        the session rather than to the state stays: the energy ledger and the Lagrange
        options; the hand lets go."""
        ledger, options = self.ledger, self.lagrange_options
        self.__dict__.update(other.__dict__)
        self.mouse, self.ledger, self.lagrange_options = None, ledger, options


def integrator_names() -> list[str]:
    return list(INTEGRATORS)

"""The world: particles, forces, constraints, static shapes and the one canonical step
pipeline.

``World.step(h)`` reads as the script of a frame's physics::

    for each of `substeps` substeps hs = h / substeps:
        integrator.step(particles, hs, accel)        forces evaluated inside
        pinned rows never move: inv_mass 0
        colliders.begin()                              broad phase, swept paths cut at impact
        repeat `iterations`: constraints.project(); contacts.project(); mouse.project()
        integrator.fold(corrections)                   into v for integrators that keep it
        contacts.finish()                              restitution and friction, contact rows
    non-finite state -> restore the state from before the step, raise SimulationDiverged
    tearing

With ``constraint_method`` "lagrange" or "rattle" a substep is ``lagrange.substep``
instead: the links' forces inside the integrator's step (or RATTLE / SHAKE), then the
contacts and the hand, with the links projected in each iteration.

Configuration is a frozen :class:`WorldConfig`; a hotkey makes a new one with
``dataclasses.replace`` and hands it to :meth:`World.configure`.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass, field

import numpy as np

from . import backend, kernels, lagrange
from .colliders import Colliders
from .constraints import Constraints
from .forces import PressureBody, Springs, UniformField, nbody_potential, point_gravity
from .integrators import INTEGRATORS, Integrator, can_overwrite, get_integrator
from .mouse import G_REF, MouseSpring, component
from .particles import Particles, state_hash
from .view import WorldView
from .view import view as make_view


class SimulationDiverged(RuntimeError):
    """The state became non-finite (or exploded); the world was left as before the step."""

    def __init__(self, t: float, integrator: str, h: float, reason: str = "non-finite state"):
        self.t, self.integrator, self.h, self.reason = t, integrator, h, reason
        super().__init__(f"simulation diverged at t = {t:.4f} s with {integrator}, "
                         f"h = {h * 1e3:.3f} ms: {reason}")


#: No gravity field kept yet: no rows to compare (``World._back_up``).
_NO_ROWS = np.zeros(0, np.bool_)


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
        self._exclude: tuple[tuple, np.ndarray] | None = None
        self.gravity_field = UniformField()    # gravity on the movable rows, kept
        self._lam: np.ndarray | None = None    # scratch multipliers (see _multipliers)
        self._backup: tuple | None = None      # the state before a step, buffers reused
        self._lane: tuple | None = None        # a contact frame's arguments (_lane_holds)
        self.springs = Springs()
        self.pressure: list[PressureBody] = []
        self.bodies: list[Body] = []
        self.integrator: Integrator = get_integrator(self.config.integrator)
        self.mouse: MouseSpring | None = None      # the hand's spring (see mouse.py)
        self.ledger: dict[str, float] | None = None  # where energy goes (track_energy)
        self._lagrange: tuple | None = None        # the links' multiplier solver (lagrange.py)
        self.lagrange_options = lagrange.Options()   # its tolerance and stabilisation
        self._solver_step = 0.0
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

    def _back_up(self) -> tuple[tuple, bool]:
        """The state before a step ``(State, inv_mass)``, into the same buffers every
        frame (see ``State.copy``; never aliased with the particles' arrays), and
        whether the rows free to move are still those of the kept gravity field
        (``gravity_field`` then need not compare them again this step).

        One compiled pass (``kernels.back_up``) where the arrays fit it, else numpy."""
        p = self.particles
        b = self._backup
        x, v, xp, w = p.x, p.v, p.x_prev, p.inv_mass
        if b is not None and kernels.AVAILABLE:
            state, bw = b
            dt = x.dtype
            if (x.ndim == 2 and x.shape == v.shape == xp.shape == state.x.shape
                    == state.v.shape == state.x_prev.shape
                    and w.shape == bw.shape == x.shape[:1]
                    and dt == v.dtype == xp.dtype == w.dtype == state.x.dtype
                    == state.v.dtype == state.x_prev.dtype == bw.dtype
                    and x.flags.c_contiguous and v.flags.c_contiguous
                    and xp.flags.c_contiguous and w.flags.c_contiguous):
                movable = self.gravity_field.movable
                return b, self._back_up_into(b, _NO_ROWS if movable is None else movable)
        state = p.copy(into=b[0] if b else None)
        bw = b[1] if b else None
        if bw is None or bw.shape != w.shape or bw.dtype != w.dtype:
            bw = w.copy()
        else:
            np.copyto(bw, w)
        self._backup = backup = (state, bw)
        return backup, False

    def _back_up_into(self, backup: tuple, movable: np.ndarray) -> bool:
        """The compiled backup into ``backup``'s buffers (they fit: :meth:`_back_up`
        checked, or a kept lane holds them); whether the movable rows are ``movable``."""
        p = self.particles
        state, bw = backup
        kept = kernels.back_up(p.x, p.v, p.x_prev, p.inv_mass, state.x, state.v,
                               state.x_prev, bw, movable)
        p.copy_rest(state)
        return bool(kept)

    # --- stepping -----------------------------------------------------------------------

    def step(self, h: float) -> None:
        """Advance by ``h`` seconds (one frame's step); see the module docstring."""
        if not (isinstance(h, (int, float, np.floating)) and math.isfinite(h) and h > 0):
            raise ValueError(f"step h must be a positive finite number, got {h!r}")
        if not self.started:
            self.start(h)
        lane = self._lane
        if lane is not None and self._lane_step(lane, h):
            return
        if self._links_step(h):
            return
        backup, pins_kept = self._back_up()
        hs = h / self.config.substeps
        n = self.config.substeps
        if self.mouse is not None:
            self.mouse.start_step(n)      # a grab may pin: the field is checked again
            pins_kept = False
        ledger = self.ledger
        if ledger is not None:
            e0 = self.energy()["total"]
            self._solver_step = 0.0
        field = self.gravity_field
        field.checked = pins_kept
        try:
            with np.errstate(all="ignore"):
                if self.config.constraint_method != "xpbd":
                    for _ in range(n):          # Lagrange or RATTLE: see lagrange.py
                        lagrange.substep(self, hs)
                elif not self._frame_compiled(hs, n, h):
                    for k in range(n):
                        self._substep(hs, last=k == n - 1)
        except FloatingPointError:        # pragma: no cover - errstate ignores them
            pass
        finally:
            field.checked = False      # outside a step every call checks
        self._step_end(backup, h)
        if ledger is not None:
            change = self.energy()["total"] - e0
            ledger["solver"] += self._solver_step
            ledger["integrator"] += change - self._solver_step

    def _step_end(self, backup: tuple, h: float, contiguous: bool = False) -> None:
        """After a step's substeps: back to ``backup`` and ``SimulationDiverged`` if
        some number is no longer finite, else the links torn and the step counted.
        ``contiguous``: the kernels are in use and the state's arrays C-contiguous (a
        compiled frame's)."""
        p = self.particles
        x, v, xp = p.x, p.v, p.x_prev
        if not (kernels.all_finite(x, v, xp)
                if contiguous or (kernels.AVAILABLE and x.flags.c_contiguous
                                  and v.flags.c_contiguous and xp.flags.c_contiguous)
                else p.is_finite()):
            p.restore(backup[0])
            p.inv_mass[:] = backup[1]
            raise SimulationDiverged(p.t, self.integrator.name, h)
        self._step_done()

    def _step_done(self) -> None:
        """A finite step's end: the links torn, the step counted."""
        self.torn += self.constraints.tear(self.particles.x, self.config.tear_ratio)
        self.steps += 1

    def _links_step(self, h: float) -> bool:
        """A whole step of a world of links and no contacts in one compiled frame
        (:meth:`_frame_compiled`'s ``kernels.verlet_frame``), without :meth:`step`'s
        backup: the frame works on copies and writes the state back only when all of
        it is finite, so a frame that diverges leaves the state as it was
        (``SimulationDiverged``). False, with nothing done, where the frame does not
        apply: :meth:`step` goes on.

        The backup and the finite check after the frame read and wrote the whole state
        twice: 0.17 ms a frame of the 200x200 cloth in float32, 0.3 in float64."""
        cfg = self.config
        if cfg.constraint_method != "xpbd" or self.has_contacts or not len(self.constraints):
            return False
        field = self.gravity_field
        field.checked = False                     # no backup compared the pins
        try:
            if not self._frame_compiled(h / cfg.substeps, cfg.substeps, h):
                return False
        finally:
            field.checked = False                 # outside a step every call checks
        self._step_done()
        return True

    def _lane_step(self, lane: tuple, h: float) -> bool:
        """A whole step on the contact frame's arguments kept from the frame before
        (:meth:`_lane_holds`): :meth:`step`'s work in its order (the backup, the
        compiled frame, the finite check, tearing) without what the kept arguments
        settle (the backup's buffers fit, no hand, no ledger, no other force; the
        compiled frame raises no floating-point warning). False, with nothing done but
        the backup, when they do not hold or a pin changed: :meth:`step` goes on.

        After a frame of drawing, the soft blob's Python around its compiled frame
        (median of 200 frames): ~87 us making the arguments every frame, ~57 keeping
        them but on the full path, 34-42 on this one."""
        cfg, p = self.config, self.particles
        hs = h / cfg.substeps
        if not self._lane_holds(lane, hs):
            return False
        backup = self._backup
        field = self.gravity_field
        a = field.a
        if not self._back_up_into(backup, field.movable):
            return False
        self._frame_end(self.colliders.run_frame(p, a, lane[2]), a, hs, cfg.substeps)
        self._step_end(backup, h, contiguous=True)
        return True

    #: Whole frames in one compiled call where :meth:`_frame_compiled` applies; False
    #: keeps the substep-by-substep path (the tests compare the two bit for bit).
    compile_frames = True

    def _frame_compiled(self, hs: float, n: int, h: float) -> bool:
        """Run the frame's ``n`` substeps in one compiled call if this world is the
        common case it covers: a Verlet-family integrator, gravity as the only force,
        no hand; links only (``kernels.verlet_frame``) or contacts with or without
        links (``Colliders.frame_args``, ``run_frame``). Returns False (nothing done) otherwise.
        Links only: ``SimulationDiverged`` for the step ``h``, the state as it was,
        when the frame's result is not finite (the frame did not write it).

        The substeps of a 1,000-link rope cost ~30 us each in Python calls, five times
        pymunk's whole step; the compiled frame performs the same operations.
        """
        p, cfg, integ = self.particles, self.config, self.integrator
        self._lane = None
        contacts = self.has_contacts
        if not (self.compile_frames and kernels.AVAILABLE
                and (len(self.constraints) or contacts)
                and self.gravity_only and self.mouse is None and self.ledger is None):
            return False
        # The integrator's own frame: its coefficients, or None when it has no compiled
        # frame (all but the position-based family, or one held to numpy).
        coef = integ.compiled_frame(hs, p.h_prev, n, p.x.dtype)
        if coef is None:
            return False
        x = p.x
        args = (self.constraints.kernel_args(x, p.inv_mass, frame=not contacts)
                if len(self.constraints) else None)
        if args is None and (len(self.constraints) or not contacts):
            return False
        field = self.gravity_field
        a = field.get(cfg.gravity, x, p.inv_mass)
        if not (x.flags.c_contiguous and x.dtype == a.dtype == p.v.dtype
                and can_overwrite(p.x_prev, x) and can_overwrite(p.v, x, p.x_prev)):
            return False
        f = x.dtype.type
        lam = self._multipliers()
        if contacts:
            fargs = self.colliders.frame_args(p, cfg, self._exclude_pairs(),
                                              args and args[:-1], lam,
                                              self.constraints.compliant, coef, hs,
                                              integ.contact_fold(hs))
            if fargs is None:
                return False
            swapped = self.colliders.run_frame(p, a, fargs)
            if a is field.a:
                self._lane = (self._lane_objects(), self._lane_numbers(hs), fargs)
        else:
            *arrays, perm, min_parallel = args        # links in the grid layout's slots
            r, ca, c1, c2 = coef
            kin = np.zeros(0, np.int64)               # no kinematic rows: the mouse is a
            kin_x = np.zeros((0, 2), x.dtype)         # spring, solved on the substep path
            if not kernels.verlet_frame(x, p.x_prev, p.v, a, p.inv_mass, *arrays,
                                        f(1.0 / (hs * hs)), lam, self.constraints.compliant,
                                        max(cfg.iterations, 1), r, ca, c1[-1], c2[-1], kin,
                                        kin_x, min_parallel, perm):
                raise SimulationDiverged(p.t, integ.name, h)
            swapped = False
        return self._frame_end(swapped, a, hs, n)

    def _frame_end(self, swapped: bool, a: np.ndarray, hs: float, n: int) -> bool:
        """After a compiled frame of ``n`` substeps of ``hs`` under the gravity field
        ``a``: the particles' state as the substeps leave it."""
        p = self.particles
        if swapped:
            p.x, p.x_prev = p.x_prev, p.x
        p.a, p.a_valid, p.h_prev = a, False, hs
        t = p.t
        for _ in range(n):
            t += hs                                   # as n substeps add it
        p.t = t
        return True

    def _lane_objects(self) -> tuple:
        """What a compiled contact frame's arguments were made from, by identity: the
        settings (frozen, replaced by ``configure``), the integrator, the links'
        index array and flat tables and the colliders' (rebuilt, never edited, on any
        change: adding or removing links makes a new index array), the
        particles' arrays (the positions' two in either order: an odd number of
        substeps swaps them), the gravity field, the multipliers, the excluded pairs,
        the backup's buffers, the hand and the energy ledger (none)."""
        p, c, col, integ = self.particles, self.constraints, self.colliders, self.integrator
        x, xp = (p.x, p.x_prev) if id(p.x) < id(p.x_prev) else (p.x_prev, p.x)
        return (self.config, integ, getattr(integ, "backend", None), c, c.i, c._flat,
                c.backend, col, col._frame_args, col._table, col.backend, p, x, xp, p.v,
                p.inv_mass, p.radius, self.gravity_field.a, self._lam, self._exclude, self._backup,
                self.mouse, self.ledger, self.compile_frames, self.started,
                backend.usable("kernels"), backend.usable("contacts"))

    def _lane_numbers(self, hs: float) -> tuple:
        """What else the arguments were made from, by value: the substep, the step
        before it, how many springs and pressure bodies (none)."""
        return hs, self.particles.h_prev, len(self.springs), len(self.pressure)

    def _lane_holds(self, lane: tuple, hs: float) -> bool:
        """Whether the compiled contact frame's arguments kept in ``lane`` stand: the
        same objects (the lane holds them, so no id is reused) and the same numbers.
        After a frame of drawing, the checks, conversions and lookups that made them
        cost the soft blob ~50 us of Python a frame; these ~10 (under 1 warm)."""
        return (lane[1] == self._lane_numbers(hs)
                and all(map(operator.is_, self._lane_objects(), lane[0])))

    def _substep(self, hs: float, last: bool = True) -> None:
        p, cfg = self.particles, self.config
        h_old = p.h_prev
        has_contacts = self.has_contacts
        mouse = self.mouse
        corrected = bool(len(self.constraints) or has_contacts or mouse is not None)
        # Position-based integrators fold corrections by finishing their velocity
        # estimate afterwards instead of through a copy and a difference of positions,
        # and skip it in all but the last substep when nothing reads v in between
        # (velocity forces or contacts): x+ is made from x and x_prev alone.
        defer = self.integrator.defers_velocity
        v_needed = (last or has_contacts or bool(cfg.drag or len(self.springs))
                    or self.ledger is not None)       # (positions are the same either way)
        mode = "now" if not defer else ("none" if not v_needed else
                                         "later" if corrected else "now")
        v_old = p.v.copy() if has_contacts else None
        if defer:
            self.integrator.step(p, hs, self.accel, velocity=mode)
        else:
            self.integrator.step(p, hs, self.accel)
        x_old = p.x_prev          # every integrator leaves the pre-step positions there
        if mouse is not None:
            mouse.begin(x_old)
        if corrected:
            x_pred = p.x.copy() if mode == "now" else None
            if self.ledger is not None:
                x_before, v_before = p.x.copy(), None if defer else p.v.copy()
            contacts = (self.colliders.begin(p, x_old, cfg, self._exclude_pairs(), v_old, hs)
                        if has_contacts else None)
            lam = self._multipliers()
            for _ in range(max(cfg.iterations, 1)):
                self.constraints.project(p.x, p.inv_mass, hs, lam)
                if contacts is not None:
                    contacts.project(p.x, p.inv_mass)
                if mouse is not None:
                    mouse.project(p.x, p.inv_mass, hs)
            if mode == "later":
                self.integrator.finish_velocity(p, hs, h_old)
            elif mode == "now":
                self.integrator.fold(p, p.x - x_pred, hs, h_old)
            if self.ledger is not None and v_before is None:
                # A position-based estimate is linear in x+ (v = c1 x+ + ...): the
                # velocity the prediction implied differs by c1 times the corrections.
                c1 = self.integrator.velocity_coefficients(hs, h_old)[0]
                v_before = p.v - (p.x - x_before) * c1
            if contacts is not None:
                # After the fold, overwriting the contact rows: nothing is counted twice.
                contacts.finish(p, self.integrator, v_old, hs, cfg.gravity,
                                sweeps=cfg.iterations)
            if self.ledger is not None:
                self._solver_step += self._correction_work(x_before, v_before)
        p.t += hs

    # --- where energy goes ----------------------------------------------------------------

    def track_energy(self, on: bool = True) -> None:
        """Keep a ledger of where the total energy changes: ``ledger["integrator"]`` (J,
        the integrator's own step: its truncation error and, for explicit Euler, its
        growth) and ``ledger["solver"]`` (J, the position corrections of constraints,
        contacts and the hand, which XPBD makes inelastically). Off by default: it
        costs two energy evaluations a substep and the substep-by-substep path."""
        self.ledger = {"integrator": 0.0, "solver": 0.0} if on else None

    def _correction_work(self, x_pred: np.ndarray, v_pred: np.ndarray) -> float:
        """Energy change (J) of a substep's corrections: the state now against the
        predicted one ``(x_pred, v_pred)``, with the integrator's own velocity on both
        sides (the one the energy graph reads)."""
        p = self.particles
        m = np.where(p.inv_mass > 0, p.mass, 0.0)
        ke = 0.5 * float(np.sum(m * (np.einsum("ij,ij->i", p.v, p.v)
                                     - np.einsum("ij,ij->i", v_pred, v_pred))))
        return ke + self._potential(p.x) - self._potential(x_pred)

    def _potential(self, x: np.ndarray) -> float:
        """Potential energy (J) of positions ``x``: gravity, n-body, elastic."""
        p, cfg = self.particles, self.config
        m = np.where(p.inv_mass > 0, p.mass, 0.0)
        u = -float(np.sum(m * (x @ np.asarray(cfg.gravity, float))))
        if cfg.G:
            u += nbody_potential(x, p.mass, cfg.G, cfg.softening)
        u += self.springs.potential(x) + self.constraints.potential(x)
        return u + sum(b.potential(x) for b in self.pressure)

    def _multipliers(self) -> np.ndarray:
        """The constraints' Lagrange multipliers for a substep, zero for the compliant
        ones (rigid links never read theirs): kept between substeps, not reallocated."""
        m = len(self.constraints)
        lam = self._lam
        dtype = self.particles.x.dtype
        if lam is None or lam.size != m or lam.dtype != dtype:
            self._lam = lam = np.zeros(m, dtype)
        elif self.constraints.compliant:
            lam.fill(0.0)
        return lam

    def _exclude_pairs(self) -> np.ndarray | None:
        """Sorted keys ``min * n + max`` of particles joined by a constraint: they keep the
        constraint's distance and never collide with each other."""
        if not self.config.collide_particles or not len(self.constraints):
            return None
        c, n = self.constraints, self.n
        tag = (id(c.i), id(c.j), len(c), n)
        if self._exclude is None or self._exclude[0] != tag:
            keys = np.minimum(c.i, c.j) * n + np.maximum(c.i, c.j)
            self._exclude = (tag, np.unique(keys))
        return self._exclude[1]

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

"""The step's script: how ``World.step(h)`` advances a world by one frame step ``h``, in
one place, with the way it takes and the stages of a substep in their order.

:func:`step` takes the first way that applies::

    kept        the compiled contact frame on the arguments kept from the frame before
                (the lane, while everything they were made from stands): ~35 us of
                Python a frame around it instead of ~90
    links       links and no contacts: the whole frame compiled (kernels.verlet_frame),
                on copies of the state that it writes back only if all of it is
                finite, so no backup is needed
    --------    otherwise the state is backed up (reused buffers), then
    compiled    contacts, XPBD, a Verlet-family integrator, gravity the only force, no
                hand, no ledger: the whole frame compiled (collide.frame.frame)
    substeps    anything else: `substeps` numpy substeps of hs = h / substeps, under
                XPBD or Lagrange / RATTLE (the constraint method picks the links stage)
    --------    then
    non-finite state -> the backup restored, SimulationDiverged
    the links torn, the step counted

One numpy substep (:func:`substep`)::

    integrate        integrator.step(particles, hs, accel)   forces evaluated inside;
                                                             pinned rows (inv_mass 0)
                                                             never move
    begin_contacts   broad phase, swept paths cut at impact  the paths x_prev -> x the
                                                             step just made
    solve            repeat `iterations`: links, contacts,   Gauss-Seidel: each pass
                     hand                                    sees those before it
    fold             the corrections into v                  for integrators that keep
                                                             a velocity
    finish           contacts: restitution and friction     after fold: the contact
                                                             rows are overwritten, so
                                                             nothing counts twice

The constraint method picks the links stage (:data:`LINK_STAGES`). "xpbd"
(:class:`XPBDLinks`): the integrator steps under the free forces and the links are one
more correction, the first in every pass of ``solve``. "lagrange" and "rattle"
(``lagrange.HeldLinks``): the links are held inside the integrator's step (the
multipliers' forces, or RATTLE / SHAKE), put back after the contacts and the hand in
every pass, and the velocities projected onto them after ``finish``.

The compiled frames run the same stages substep by substep in one call; the tests
compare them with this script bit for bit (``Scratch.compile_frames`` off). Each stage is
a function of a few named things; :class:`Scratch` is what the step keeps for a world
from frame to frame.
"""

from __future__ import annotations

import operator
from typing import cast

import numpy as np

from . import backend, kernels, lagrange, step_kernels
from .forces import nbody_potential
from .integrators import can_overwrite


class SimulationDiverged(RuntimeError):
    """The state became non-finite (or exploded); the world was left as before the step."""

    def __init__(self, t: float, integrator: str, h: float, reason: str = "non-finite state"):
        self.t, self.integrator, self.h, self.reason = t, integrator, h, reason
        super().__init__(f"simulation diverged at t = {t:.4f} s with {integrator}, "
                         f"h = {h * 1e3:.3f} ms: {reason}")


class Scratch:
    """What the step keeps for one world from frame to frame: buffers and caches, none of
    them state (a world given a fresh ``Scratch`` steps to the same bits)."""

    #: Whole frames in one compiled call where they apply; False keeps the substep path
    #: (the tests compare the two bit for bit).
    compile_frames = True

    def __init__(self) -> None:
        self.backup: tuple | None = None       # (State, inv_mass) before a step: back_up
        self.lam: np.ndarray | None = None     # the links' multipliers: multipliers
        self.exclude: tuple | None = None      # (tag, keys) of linked pairs: excluded_pairs
        self.lane: tuple | None = None         # a contact frame's arguments: kept_frame
        self.rigid_links: tuple | None = None  # the multiplier solver: lagrange.links
        self.solver_work = 0.0                 # J, this step's corrections (the ledger)
        self.drag_work = 0.0                   # J, this step's air drag (the ledger)
        self.corrected = False                 # the last substep was corrected (ledger)


#: No gravity field kept yet: no rows to compare (:func:`back_up`).
_NO_ROWS = np.zeros(0, np.bool_)


# --------------------------------------------------------------------------- the frame

def step(world, h: float) -> None:
    """Advance ``world`` by the frame step ``h`` (s; positive and finite, as
    ``World.step`` checked): the first way of the module docstring that applies."""
    backend.settle()        # the warm-up's switches, between steps only
    if not world.started:
        world.start(h)
    scratch = world.scratch
    lane = scratch.lane
    if lane is not None:
        if kept_frame(world, scratch, lane, h):                             # kept
            return
        scratch.lane = None
    cfg = world.config
    xpbd = cfg.constraint_method == "xpbd"
    contacts = world.has_contacts
    if xpbd and not contacts and len(world.constraints) and links_frame(world, scratch, h):
        return                                                              # links
    field = world.gravity_field
    backup, pins_kept = back_up(world.particles, scratch, field)
    n = cfg.substeps
    hs = h / n
    hand = world.mouse
    if hand is not None:
        hand.start_step(n)          # a grab may pin: the field is checked again
        pins_kept = False
    ledger = world.ledger
    if ledger is not None:
        e0 = world.energy()["total"]
        stored0 = world.constraints.potential(world.particles.x)
        scratch.solver_work = scratch.drag_work = 0.0
    field.checked = pins_kept
    try:
        with np.errstate(all="ignore"):
            if not (xpbd and contacts and compiled_frame(world, scratch, hs, n, h)):
                links = LINK_STAGES[cfg.constraint_method](world)         # substeps
                for k in range(n):
                    substep(world, hs, last=k == n - 1, links=links)
    except FloatingPointError:        # pragma: no cover - errstate ignores them
        pass
    finally:
        field.checked = False         # outside a step every call checks
    end_step(world, backup, h)
    if ledger is not None:
        change = world.energy()["total"] - e0
        stored = world.constraints.potential(world.particles.x) - stored0
        ledger["solver"] += scratch.solver_work
        ledger["drag"] += scratch.drag_work
        ledger["links"] += stored
        ledger["integrator"] += change - scratch.solver_work - scratch.drag_work - stored


def kept_frame(world, scratch: Scratch, lane: tuple, h: float) -> bool:
    """A whole step on the contact frame's arguments kept from the frame before
    (:func:`lane_holds`): :func:`step`'s work in its order (the backup, the compiled
    frame, the finite check, tearing) without what the kept arguments settle (the
    backup's buffers fit, no hand, no ledger, no other force; the compiled frame raises
    no floating-point warning). False, with nothing done but the backup, when they do
    not hold or a pin changed: :func:`step` goes on.

    After a frame of drawing, the soft blob's Python around its compiled frame (median
    of 200 frames): ~87 us making the arguments every frame, ~57 keeping them but on
    the full path, 34-42 on this one."""
    cfg, p = world.config, world.particles
    hs = h / cfg.substeps
    if not lane_holds(world, scratch, lane, hs):
        return False
    backup = scratch.backup
    assert backup is not None           # a kept lane holds the backup's buffers
    field = world.gravity_field
    a = field.a
    if not back_up_into(p, backup, field.movable):
        return False
    frame_end(p, world.colliders.run_frame(p, a, lane[2]), a, hs, cfg.substeps)
    end_step(world, backup, h, contiguous=True)
    return True


def links_frame(world, scratch: Scratch, h: float) -> bool:
    """A whole step of a world of links and no contacts in one compiled frame
    (:func:`compiled_frame`'s ``kernels.verlet_frame``), without :func:`step`'s backup:
    the frame works on copies and writes the state back only when all of it is finite,
    so a frame that diverges leaves the state as it was (``SimulationDiverged``).
    False, with nothing done, where the frame does not apply.

    The backup and the finite check after the frame read and wrote the whole state
    twice: 0.17 ms a frame of the 200x200 cloth in float32, 0.3 in float64."""
    cfg, field = world.config, world.gravity_field
    field.checked = False                     # no backup compared the pins
    try:
        if not compiled_frame(world, scratch, h / cfg.substeps, cfg.substeps, h):
            return False
    finally:
        field.checked = False                 # outside a step every call checks
    count_step(world)
    return True


def compiled_frame(world, scratch: Scratch, hs: float, n: int, h: float) -> bool:
    """Run the frame's ``n`` substeps of ``hs`` in one compiled call if this world is the
    common case it covers: a Verlet-family integrator, gravity as the only force, no
    hand, no ledger; links only (``kernels.verlet_frame``) or contacts with or without
    links (``Colliders.frame_args``, ``run_frame``; the arguments are kept as the lane).
    Returns False (nothing done) otherwise. Links only: ``SimulationDiverged`` for the
    step ``h``, the state as it was, when the frame's result is not finite (the frame
    did not write it).

    The substeps of a 1,000-link rope cost ~30 us each in Python calls, five times
    pymunk's whole step; the compiled frame performs the same operations."""
    p, cfg, integ, c = world.particles, world.config, world.integrator, world.constraints
    scratch.lane = None
    contacts = world.has_contacts
    if not (scratch.compile_frames and backend.compiled("auto", dtype=p.x.dtype)
            and (len(c) or contacts)
            and world.gravity_only and world.mouse is None and world.ledger is None):
        return False
    # The integrator's own frame: its coefficients, or None when it has no compiled
    # frame (all but the position-based family, or one held to numpy).
    coef = integ.compiled_frame(hs, p.h_prev, n, p.x.dtype)
    if coef is None:
        return False
    x = p.x
    args = c.kernel_args(x, p.inv_mass, frame=not contacts) if len(c) else None
    if args is None and (len(c) or not contacts):
        return False
    field = world.gravity_field
    a = field.get(cfg.gravity, x, p.inv_mass)
    if not (x.flags.c_contiguous and x.dtype == a.dtype == p.v.dtype
            and can_overwrite(p.x_prev, x) and can_overwrite(p.v, x, p.x_prev)):
        return False
    f = x.dtype.type
    lam = multipliers(world, scratch)
    if contacts:
        fargs = world.colliders.frame_args(p, cfg, excluded_pairs(world, scratch),
                                           args[0] if args else None, lam, c.compliant,
                                           coef, hs,
                                           integ.contact_fold(hs))
        if fargs is None:
            return False
        swapped = world.colliders.run_frame(p, a, fargs)
        if a is field.a:
            scratch.lane = (lane_objects(world, scratch), lane_numbers(world, hs), fargs)
    else:
        assert args is not None                   # links and no contacts: returned above
        links, perm, min_parallel = args          # links in the grid layout's slots
        r, ca, c1, c2 = coef
        if not kernels.verlet_frame((x, p.x_prev, p.v, a, p.inv_mass), links,
                                    (f(1.0 / (hs * hs)), lam, c.compliant,
                                     max(cfg.iterations, 1), min_parallel),
                                    (r, ca, c1[-1], c2[-1]), perm):
            raise SimulationDiverged(p.t, integ.name, h)
        swapped = False
    return frame_end(p, swapped, a, hs, n)


def frame_end(p, swapped: bool, a: np.ndarray, hs: float, n: int) -> bool:
    """After a compiled frame of ``n`` substeps of ``hs`` under the gravity field ``a``:
    the particles' state as the substeps leave it."""
    if swapped:
        p.x, p.x_prev = p.x_prev, p.x
    p.a, p.a_valid, p.h_prev = a, False, hs
    t = p.t
    for _ in range(n):
        t += hs                                   # as n substeps add it
    p.t = t
    return True


def end_step(world, backup: tuple, h: float, contiguous: bool = False) -> None:
    """After a step's substeps: back to ``backup`` and ``SimulationDiverged`` if some
    number is no longer finite, else :func:`count_step`. ``contiguous``: the kernels
    are in use and the state's arrays C-contiguous (a compiled frame's)."""
    p = world.particles
    x, v, xp = p.x, p.v, p.x_prev
    if not (step_kernels.all_finite(x, v, xp)
            if contiguous or (backend.compiled("auto", dtype=x.dtype)
                              and backend.fits(x, v, xp))
            else p.is_finite()):
        p.restore(backup[0])
        p.inv_mass[:] = backup[1]
        raise SimulationDiverged(p.t, world.integrator.name, h)
    count_step(world)


def count_step(world) -> None:
    """A finite step's end: the links torn, the step counted."""
    world.torn += world.constraints.tear(world.particles.x, world.config.tear_ratio)
    world.steps += 1


# --------------------------------------------------------------------------- the lane

def lane_objects(world, scratch: Scratch) -> tuple:
    """What a compiled contact frame's arguments were made from, by identity: the
    settings (frozen, replaced by ``configure``), the integrator, the links' index array
    and flat tables and the colliders' (rebuilt, never edited, on any change: adding or
    removing links makes a new index array), the particles' arrays (the positions' two
    in either order: an odd number of substeps swaps them), the gravity field, the
    multipliers, the excluded pairs, the backup's buffers, the hand and the energy
    ledger (none)."""
    p, c, col, integ = world.particles, world.constraints, world.colliders, world.integrator
    x, xp = (p.x, p.x_prev) if id(p.x) < id(p.x_prev) else (p.x_prev, p.x)
    return (world.config, integ, getattr(integ, "backend", None), c, c.i, c.tables_made,
            c.backend, col, *col.kept, col.backend, p, x, xp, p.v,
            p.inv_mass, p.radius, world.gravity_field.a, scratch.lam, scratch.exclude,
            scratch.backup, world.mouse, world.ledger, scratch.compile_frames,
            world.started, backend.usable("kernels", p.x.dtype),
            backend.usable("contacts", p.x.dtype))


def lane_numbers(world, hs: float) -> tuple:
    """What else the arguments were made from, by value: the substep, the step before
    it, how many springs and pressure bodies (none)."""
    return hs, world.particles.h_prev, len(world.springs), len(world.pressure)


def lane_holds(world, scratch: Scratch, lane: tuple, hs: float) -> bool:
    """Whether the compiled contact frame's arguments kept in ``lane`` stand: the same
    objects (the lane holds them, so no id is reused) and the same numbers. After a
    frame of drawing, the checks, conversions and lookups that made them cost the soft
    blob ~50 us of Python a frame; these ~10 (under 1 warm)."""
    return (lane[1] == lane_numbers(world, hs)
            and all(map(operator.is_, lane_objects(world, scratch), lane[0])))


# --------------------------------------------------------------------------- the backup

def back_up(p, scratch: Scratch, field) -> tuple[tuple, bool]:
    """The state of the particles ``p`` before a step ``(State, inv_mass)``, into the
    same buffers every frame (``scratch.backup``; see ``State.copy``; never aliased
    with the particles' arrays), and whether the rows free to move are still those of
    the gravity ``field`` (then it need not compare them again this step).

    One compiled pass (``step_kernels.back_up``) where the arrays fit it, else numpy."""
    b = scratch.backup
    x, v, xp, w = p.x, p.v, p.x_prev, p.inv_mass
    if b is not None and backend.compiled("auto", dtype=x.dtype):
        state, bw = b
        if (x.ndim == 2 and x.shape == v.shape == xp.shape == state.x.shape
                == state.v.shape == state.x_prev.shape
                and w.shape == bw.shape == x.shape[:1]
                and backend.fits(x, v, xp, w, state.x, state.v, state.x_prev, bw)):
            movable = field.movable
            return b, back_up_into(p, b, _NO_ROWS if movable is None else movable)
    state = p.copy(into=b[0] if b else None)
    bw = b[1] if b else None
    if bw is None or bw.shape != w.shape or bw.dtype != w.dtype:
        bw = w.copy()
    else:
        np.copyto(bw, w)
    scratch.backup = backup = (state, bw)
    return backup, False


def back_up_into(p, backup: tuple, movable: np.ndarray) -> bool:
    """The compiled backup of ``p`` into ``backup``'s buffers (they fit: :func:`back_up`
    checked, or a kept lane holds them); whether the movable rows are ``movable``."""
    state, bw = backup
    kept = step_kernels.back_up(p.x, p.v, p.x_prev, p.inv_mass, state.x, state.v,
                           state.x_prev, bw, movable)
    p.copy_rest(state)
    return bool(kept)


# --------------------------------------------------------------------------- a substep

def substep(world, hs: float, last: bool = True, links=None) -> None:
    """One numpy substep of ``hs`` s, the module docstring's script. ``last``: the
    frame's last substep (a position-based integrator may leave the velocity of the
    others unmade when nothing reads it). ``links``: the frame's links stage (None:
    the constraint method's, made for this substep)."""
    p, cfg, integ = world.particles, world.config, world.integrator
    h_old = p.h_prev
    if links is None:
        links = LINK_STAGES[cfg.constraint_method](world)
    has_contacts, hand = world.has_contacts, world.mouse
    corrected = links.corrects or has_contacts or hand is not None
    velocity = velocity_mode(world, has_contacts, corrected, last) if links.free_step \
        else "now"
    v_old = p.v.copy() if has_contacts else None
    start = None                        # the energy ledger's (x_prev, x, v) at the start
    if world.ledger is not None:
        start = (p.x_prev.copy(), p.x.copy(), p.v.copy())
    links.integrate(p, hs, velocity)
    before = None                       # the energy ledger's prediction (x, v)
    if world.ledger is not None and (corrected or not links.free_step):
        before = (p.x.copy(), None if velocity == "later" else p.v.copy())
        if integ.position_based and world.scratch.corrected:
            assert start is not None    # kept since the ledger is on
            world.scratch.solver_work += replayed_work(p, *start, hs, h_old)
    if corrected:
        x_old = p.x_prev              # every integrator leaves the pre-step positions there
        if hand is not None:
            hand.begin(x_old)
        x_pred = p.x.copy() if velocity == "now" else None
        contacts = None
        if has_contacts:              # held links: begun without the start velocities
            contacts = (begin_contacts(world, x_old, v_old, hs) if links.free_step
                        else begin_contacts(world, x_old))
        solve(links, contacts, hand, p, hs, cfg.iterations)
        fold(integ, p, velocity, x_pred, hs, h_old)
        if before is not None and before[1] is None:
            before = (before[0], predicted_velocity(integ, p, before[0], hs, h_old))
        if contacts is not None:
            assert v_old is not None    # copied when there are contacts
            finish(contacts, p, integ, v_old, hs, cfg)
        links.settle(p)
    else:
        links.stabilise(p, hs, h_old)
    if before is not None:
        # both are arrays here: a velocity left None is predicted above
        world.scratch.solver_work += correction_work(
            world, *cast("tuple[np.ndarray, np.ndarray]", before))
    if start is not None:
        world.scratch.corrected = before is not None
        if cfg.drag:
            world.scratch.drag_work += drag_work(p, start[1], start[2], cfg.drag)
    p.t += hs


def velocity_mode(world, has_contacts: bool, corrected: bool, last: bool) -> str:
    """How the integrator's step makes the velocity (``Integrator.step``'s ``velocity``):
    "now" for integrators that keep one. Position-based ones fold the corrections by
    finishing their estimate afterwards ("later") instead of through a copy and a
    difference of positions, and skip it ("none") in all but the last substep when
    nothing reads v in between (velocity forces, contacts, the ledger): x+ is made from
    x and x_prev alone, so the positions are the same either way."""
    if not world.integrator.defers_velocity:
        return "now"
    cfg = world.config
    v_needed = (last or has_contacts or bool(cfg.drag or len(world.springs))
                or world.ledger is not None)
    return "none" if not v_needed else "later" if corrected else "now"


def integrate(integ, p, hs: float, accel, velocity: str) -> None:
    """The integrator's step of ``hs`` under ``accel(x, v)``; ``velocity`` as
    :func:`velocity_mode` says, for integrators that can defer it."""
    if integ.defers_velocity:
        integ.step(p, hs, accel, velocity=velocity)
    else:
        integ.step(p, hs, accel)


def begin_contacts(world, x_old: np.ndarray, v_old: np.ndarray | None = None,
                   hs: float = 0.0):
    """This substep's contacts for the paths ``x_old -> p.x`` (``Colliders.begin``), or
    None; with the velocities ``v_old`` at the substep's start a swept hit bounces at
    its time of impact."""
    return world.colliders.begin(world.particles, x_old, world.config,
                                 excluded_pairs(world, world.scratch), v_old, hs)


def solve(links, contacts, hand, p, hs: float, iterations: int) -> None:
    """``iterations`` Gauss-Seidel passes (at least one) over the corrections, in place on
    ``p.x``: the links when they are a correction (XPBD: first), the contacts, the hand,
    then the links when they are held (Lagrange / RATTLE: back onto them to their
    tolerance, whatever the contacts and the hand did)."""
    x, w = p.x, p.inv_mass
    first, last = links.project, links.hold
    for _ in range(max(iterations, 1)):
        if first is not None:
            first(x, w, hs)
        if contacts is not None:
            contacts.project(x, w)
        if hand is not None:
            hand.project(x, w, hs)
        if last is not None:
            last(x)


def fold(integ, p, velocity: str, x_pred: np.ndarray | None, hs: float,
         h_old: float) -> None:
    """The corrections since the prediction ``x_pred`` into the velocity: the deferred
    estimate finished ("later"), or ``Integrator.fold`` of the difference ("now")."""
    if velocity == "later":
        integ.finish_velocity(p, hs, h_old)
    elif velocity == "now":
        integ.fold(p, p.x - x_pred, hs, h_old)


def finish(contacts, p, integ, v_old: np.ndarray, hs: float, config) -> None:
    """The contacts' velocity pass: restitution and friction on the contact rows, after
    the fold, overwriting them."""
    contacts.finish(p, integ, v_old, hs, config.gravity, sweeps=config.iterations)


class XPBDLinks:
    """The links as XPBD solves them (``constraints.py``), a substep's links stage: the
    integrator steps under the free forces, then the links are one more correction, the
    first of every pass of :func:`solve`."""

    #: The integrator steps alone: its velocity may wait for the corrections
    #: (:func:`velocity_mode`) and the contacts may bounce swept hits under its ``p.a``.
    free_step = True
    hold = None                 # nothing is put back after the other corrections

    def __init__(self, world) -> None:
        self.world, self.integrator, self.accel = world, world.integrator, world.accel
        self.constraints = world.constraints
        #: The links alone make a substep corrected; without any there is no pass.
        self.corrects = bool(len(self.constraints))
        self.project = self._project if self.corrects else None
        self.lam: np.ndarray | None = None

    def integrate(self, p, hs: float, velocity: str) -> None:
        """The integrator's free step of ``hs``; a new substep's multipliers start at
        zero (:func:`multipliers`)."""
        integrate(self.integrator, p, hs, self.accel, velocity)
        if self.corrects:
            self.lam = multipliers(self.world, self.world.scratch)

    def _project(self, x: np.ndarray, w: np.ndarray, hs: float) -> None:
        """One pass over the links (``Constraints.project``), ``(x, w, hs)``."""
        self.constraints.project(x, w, hs, self.lam)

    def settle(self, p) -> None:
        """Nothing: the fold carried the links' corrections into the velocity."""

    def stabilise(self, p, hs: float, h_old: float) -> None:
        """Nothing: without corrections the free step stands."""


#: The links stage of each constraint method (``WorldConfig.constraint_method``), made
#: from the world for a frame's substeps: ``free_step`` (the integrator steps under the free
#: forces), ``corrects`` (the links alone need ``solve``), ``integrate(p, hs, velocity)``,
#: ``project(x, w, hs)`` (a pass first among the corrections, or None), ``hold(x)`` (a pass
#: after them, or None), ``settle(p)`` (after ``finish``) and ``stabilise(p, hs, h_old)``
#: (instead of the corrections when there are none).
LINK_STAGES = {"xpbd": XPBDLinks, "lagrange": lagrange.HeldLinks,
               "rattle": lagrange.HeldLinks}


def multipliers(world, scratch: Scratch) -> np.ndarray:
    """The links' Lagrange multipliers for a substep, zero for the compliant ones (rigid
    links never read theirs): kept between substeps, not reallocated."""
    m = len(world.constraints)
    lam = scratch.lam
    dtype = world.particles.x.dtype
    if lam is None or lam.size != m or lam.dtype != dtype:
        scratch.lam = lam = np.zeros(m, dtype)
    elif world.constraints.compliant:
        lam.fill(0.0)
    return lam


def excluded_pairs(world, scratch: Scratch) -> np.ndarray | None:
    """Sorted keys ``min * n + max`` of particles joined by a link: they keep the link's
    distance and never collide with each other (None: no particle pairs collide)."""
    if not world.config.collide_particles or not len(world.constraints):
        return None
    c, n = world.constraints, world.n
    tag = (id(c.i), id(c.j), len(c), n)
    if scratch.exclude is None or scratch.exclude[0] != tag:
        keys = np.minimum(c.i, c.j) * n + np.maximum(c.i, c.j)
        scratch.exclude = (tag, np.unique(keys))
    return scratch.exclude[1]


# --------------------------------------------------------------------------- the ledger

def predicted_velocity(integ, p, x_pred: np.ndarray, hs: float, h_old: float) -> np.ndarray:
    """The velocity a position-based step's prediction ``x_pred`` implied, after its
    estimate was finished on the corrected positions: the estimate is linear in x+
    (``v = c1 x+ + ...``), so the two differ by ``c1`` times the corrections."""
    c1 = integ.velocity_coefficients(hs, h_old)[0]
    return p.v - (p.x - x_pred) * c1


def replayed_work(p, x_prev: np.ndarray, x: np.ndarray, v: np.ndarray, hs: float,
                  h_old: float) -> float:
    """The part of a position-based step's energy change that the last substep's
    corrections made (J): the step replays ``x - x_prev``, a displacement the
    corrections shaped, so it moves on as if the particles had the velocity of the
    parabola through ``x_prev, x`` and its prediction ``p.x`` (at the step's start:
    ``(d1 h_old + d0 h) / (h + h_old)``), not the velocity ``v`` shown. The kinetic
    energy between the two is the solver's, booked when the step shows it. A bob held
    still reads ``v = 0`` but steps as if it moved at ``g h/2``: without this the
    integrator was booked ``m g^2 h^2 / 8`` a substep and the solver the opposite."""
    m = np.where(p.inv_mass > 0, p.mass, 0.0)
    d0 = (x - x_prev) / h_old
    d1 = (p.x - x) / hs
    u = (d1 * h_old + d0 * hs) / (hs + h_old)
    return 0.5 * float(np.sum(m * (np.einsum("ij,ij->i", u, u)
                                   - np.einsum("ij,ij->i", v, v))))


def drag_work(p, x: np.ndarray, v: np.ndarray, drag: float) -> float:
    """The air drag's work over a substep from ``(x, v)`` to the state now (J): the
    force ``-drag m v`` at the mean of the two velocities along the displacement."""
    m = np.where(p.inv_mass > 0, p.mass, 0.0)
    vm = 0.5 * (v + p.v)
    return -drag * float(np.sum(m * np.einsum("ij,ij->i", vm, p.x - x)))


def correction_work(world, x_pred: np.ndarray, v_pred: np.ndarray) -> float:
    """Energy change (J) of a substep's corrections: the state now against the predicted
    one ``(x_pred, v_pred)``, with the integrator's own velocity on both sides (the one
    the energy graph reads). The energy compliant links store is left out: it is
    booked on its own line (``ledger["links"]``), for no step of the integrator's
    moves it, the links' solve does (the free step that stretches a link does not feel
    it, so booking that change to either would be a fiction)."""
    p = world.particles
    m = np.where(p.inv_mass > 0, p.mass, 0.0)
    ke = 0.5 * float(np.sum(m * (np.einsum("ij,ij->i", p.v, p.v)
                                 - np.einsum("ij,ij->i", v_pred, v_pred))))
    return ke + potential(world, p.x) - potential(world, x_pred)


def potential(world, x: np.ndarray) -> float:
    """Potential energy (J) of positions ``x`` that the integrator's forces make:
    gravity, n-body, springs and pressure (not the compliant links')."""
    p, cfg = world.particles, world.config
    m = np.where(p.inv_mass > 0, p.mass, 0.0)
    u = -float(np.sum(m * (x @ np.asarray(cfg.gravity, float))))
    if cfg.G:
        u += nbody_potential(x, p.mass, cfg.G, cfg.softening)
    u += world.springs.potential(x)
    return u + sum(b.potential(x) for b in world.pressure)

"""Time integrators behind one small interface, collected in the ``INTEGRATORS`` registry.

Every integrator advances a :class:`~sandbox.sim.particles.State` by a step ``h`` (s)
given an acceleration field ``accel(x, v) -> a`` shaped like ``x`` (m/s^2). A method is
mostly data, as in scipy's ``integrate._ivp``: its global order at a fixed step, its
order when the step changes from one step to the next, whether it is symplectic,
whether it is position based (advances ``x_prev``) and how many force evaluations a
step costs.

Orders are *global*: the error at a fixed end time as ``h -> 0``. The articles call
position Verlet "4th order"; that is the local error of one position step. Globally
position Verlet, velocity Verlet and leapfrog are all 2nd order (``sandbox/lab`` and
the tests measure it).

The interface, used by ``integrate()`` and by the world:

``start(s, h, accel)``
    Make the integrator's own state consistent with ``(s.x, s.v)`` for a first step
    of about ``h``. Every start, swap, reset and load goes through it: position Verlet
    started with ``x_prev = x0 - v0*h`` loses ``a*h^2/2`` (article 001, eq. 2).
``step(s, h, accel)``
    Advance ``s`` by ``h``; afterwards ``s.v`` is valid (kept or estimated),
    ``s.x_prev`` holds the positions before the step and ``s.h_prev == h``.
``h`` is a float, or an array that broadcasts against ``x`` (one step per row: the lab
advances many randomly stepped runs at once this way).

``fold(s, dx, h, h_old)``
    Position corrections ``dx`` made after ``step`` (constraints, contacts) are
    folded into the velocity so every integrator, not only the Verlet family, works
    with sticks. ``h_old`` is ``s.h_prev`` as it was before the step.
``contact_fold(h)``
    How the contacts' velocity pass reads and writes this integrator's velocity after
    a step of ``h`` (a :class:`ContactFold`): the contacts never ask which kind of
    integrator they serve.
``compiled_frame(h, h_old, n, dtype)``
    The coefficients of ``n`` substeps of ``h`` for a world's compiled frame, or None
    when the integrator has none (only the position-based family has one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from . import backend, kernels
from .particles import State

AccelFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ContactFold:
    """A velocity integrator's side of the contacts' velocity pass after a step of
    ``h``: its velocity ``v`` is the one to correct, holding at the step's end
    (``velocity_time`` 1), and a position correction ``dx`` counts ``gain * dx``
    in it (``fold``'s ``fold_gain / h``)."""

    h: float
    gain: float
    velocity_time: float = 1.0
    #: The compiled velocity pass's switch: ``views`` as :class:`PositionFold`'s.
    from_positions: ClassVar[bool] = False

    def views(self, p, x0: np.ndarray, dx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(v_pos, v_pre)``: the velocity the positions say (with the corrections
        ``dx``) and the one without them."""
        v_pos = p.v.copy()
        return v_pos, v_pos - self.gain * dx

    def write(self, p, rows: np.ndarray, v: np.ndarray) -> None:
        """The velocity pass's result ``v`` on ``rows``."""
        p.v[rows] = v


@dataclass(frozen=True)
class PositionFold(ContactFold):
    """The position-based family's side: the velocity is the chord ``(x - x0)/h`` (it
    holds half a step back, ``velocity_time`` 1/2), and writing it sets ``x_prev = x -
    h v`` so the next step continues with it."""

    from_positions: ClassVar[bool] = True

    def views(self, p, x0, dx):
        h = self.h
        v_pos = (p.x - x0) / h
        return v_pos, v_pos - dx / h

    def write(self, p, rows, v):
        p.x_prev[rows] = p.x[rows] - self.h * v
        p.v[rows] = v


class Integrator:
    """Base class; subclasses set the class attributes and implement ``_step``."""

    name: ClassVar[str]
    label: ClassVar[str]
    order: ClassVar[int]              # global order at a fixed step
    order_variable: ClassVar[int]     # global order when h varies (0: does not converge)
    symplectic: ClassVar[bool]
    position_based: ClassVar[bool] = False
    fevals: ClassVar[int] = 1         # force evaluations per step
    # Velocity change per unit of position correction, times h: dv = fold_gain*dx/h.
    # 1, the PBD convention, for every velocity integrator (see VelocityVerlet for why
    # not 2); the Verlet family folds through x_prev instead.
    fold_gain: ClassVar[float] = 1.0
    #: True: ``step(..., velocity="later" | "none")`` and ``finish_velocity`` exist.
    defers_velocity: ClassVar[bool] = False
    #: When in a step (fraction of ``h``) the velocity a contact pass writes holds: 1,
    #: the end, for the velocity integrators; the position-based ones take the chord
    #: ``(x - x_prev)/h``, the velocity half a step back (exact under constant force).
    velocity_time: ClassVar[float] = 1.0
    #: Its symplectic constrained form, what ``constraint_method = "rattle"`` runs with
    #: it (``lagrange.py``): "RATTLE" (velocity Verlet's kick-drift-kick with the
    #: constraint forces at both ends), "SHAKE" (its own position update plus the
    #: constraint force, the velocity projected), or None: it has none, and takes the
    #: Lagrange multipliers' forces instead.
    constrained_form: ClassVar[str | None] = None
    #: What the HUD calls that combination ("" : the form's name).
    constrained_label: ClassVar[str] = ""

    def __repr__(self) -> str:
        return f"<integrator {self.name}: order {self.order}, symplectic={self.symplectic}>"

    def start(self, s: State, h: float, accel: AccelFn) -> None:
        # One-step methods need nothing but (x, v); the force is evaluated by the
        # first step (velocity Verlet and leapfrog then keep it for the next one).
        s.a_valid = False
        s.x_prev = s.x.copy()
        s.h_prev = h

    def step(self, s: State, h: float, accel: AccelFn) -> None:
        raise NotImplementedError

    def fold(self, s: State, dx: np.ndarray, h: float, h_old: float) -> None:
        s.v += dx * (self.fold_gain / h)
        s.a_valid = False

    def velocity(self, s: State) -> np.ndarray:
        """The velocity at ``s.t``: kept, or estimated from positions (see subclasses)."""
        return s.v

    def contact_fold(self, h: float) -> ContactFold:
        """How the contacts' velocity pass reads and writes the velocity after a step
        of ``h`` (the module docstring)."""
        return ContactFold(h, self.fold_gain / h, self.velocity_time)

    def compiled_frame(self, h, h_old, n, dtype):
        """The compiled frame's coefficients for ``n`` substeps of ``h``; None: none."""
        return None


class ExplicitEuler(Integrator):
    """Forward Euler: ``x+ = x + h v``, ``v+ = v + h a(x, v)``. Global order 1.

    Not symplectic: on an oscillator the energy grows by a factor ``1 + (w h)^2`` every
    step, and phase-space area with it (article 002).
    """

    name, label, order, order_variable, symplectic = "euler", "Explicit Euler", 1, 1, False

    def step(self, s, h, accel):
        a = accel(s.x, s.v)
        s.x_prev = s.x.copy()
        s.x += h * s.v
        s.v += h * a
        s.a, s.a_valid, s.h_prev = a, False, h


class SymplecticEuler(Integrator):
    """Semi-implicit Euler: ``v+ = v + h a(x, v)``, then ``x+ = x + h v+``. Global order 1.

    Symplectic (it is leapfrog with its velocity read half a step off), so the energy
    error stays bounded at a fixed step. Chipmunk/pymunk integrate bodies this way.
    """

    name, label, order, order_variable, symplectic = (
        "symplectic_euler", "Symplectic Euler", 1, 1, True)
    # SHAKE's first-order member: x+ = x + h v + h^2 (a_f + W J^T lam).
    constrained_form, constrained_label = "SHAKE", "SHAKE (symplectic Euler)"

    def step(self, s, h, accel):
        a = accel(s.x, s.v)
        s.x_prev = s.x.copy()
        s.v += h * a
        s.x += h * s.v
        s.a, s.a_valid, s.h_prev = a, False, h


class VelocityVerlet(Integrator):
    """Velocity Verlet: ``x+ = x + h v + h^2/2 a``; ``v+ = v + h/2 (a + a+)``. Order 2.

    The trapezoid rule for ``v`` (article 000). One force evaluation per step: ``a+`` is
    kept for the next step. For a velocity-dependent force (drag) ``a+`` is evaluated
    with the predicted velocity ``v + h a``, which keeps the method second order.
    """

    name, label, order, order_variable, symplectic = (
        "velocity_verlet", "Velocity Verlet", 2, 2, True)
    constrained_form = "RATTLE"
    # Position corrections fold as dv = dx/h (the PBD convention, the base class's).
    # dv = 2 dx/h would match a constant constraint force (x moves h^2/2 a_c, v moves
    # h a_c) and halves a lone pendulum's PBD damping, but it over-relaxes coupled
    # constraints: measured, the playground level blew up to 7e6 J within 600 steps.

    def step(self, s, h, accel):
        a = s.a if s.a_valid else accel(s.x, s.v)
        s.x_prev = s.x.copy()
        s.x += h * s.v + (0.5 * h * h) * a
        a_new = accel(s.x, s.v + h * a)
        s.v += (0.5 * h) * (a + a_new)
        s.a, s.a_valid, s.h_prev = a_new, True, h


class Leapfrog(Integrator):
    """Leapfrog, kick-drift-kick: ``v½ = v + h/2 a``; ``x+ = x + h v½``; ``v+ = v½ + h/2 a+``.

    Algebraically the same map as velocity Verlet, evaluated in another order, so the
    two agree to round-off (a test checks it). Order 2, symplectic, time reversible.
    """

    name, label, order, order_variable, symplectic = ("leapfrog", "Leapfrog (KDK)", 2, 2, True)
    constrained_form = "RATTLE"

    def step(self, s, h, accel):
        a = s.a if s.a_valid else accel(s.x, s.v)
        s.x_prev = s.x.copy()
        s.v += (0.5 * h) * a                     # kick
        s.x += h * s.v                           # drift
        a_new = accel(s.x, s.v + (0.5 * h) * a)  # velocity predicted at t + h
        s.v += (0.5 * h) * a_new                 # kick
        s.a, s.a_valid, s.h_prev = a_new, True, h


def can_overwrite(a: np.ndarray, *others: np.ndarray) -> bool:
    """True when ``a`` can be overwritten in place by a kernel: a writeable, contiguous
    float array that owns its data and is none of ``others``."""
    return (a.flags.c_contiguous and a.flags.writeable and a.flags.owndata
            and a.dtype.kind == "f" and all(a is not o for o in others))


class _PositionVerlet(Integrator):
    """Shared machinery of the position-based (Störmer) Verlet family.

    State is ``(x, x_prev, h_prev)``; subclasses differ only in ``position_coefficients``.

    Start (article 001, eq. 2): ``x_prev = x0 - v0 h + a0 h^2/2``, the Taylor
    expansion of ``x(t - h)``. With it, position Verlet at a fixed step reproduces a
    projectile exactly; with ``x0 - v0 h`` it is off by ``a h^2/2`` forever.

    Velocity estimate, from positions only: the three-point backward difference on the
    (possibly uneven) grid ``t-h_old, t, t+h``::

        d0 = (x - x_prev_old) / h_old,  d1 = (x+ - x) / h
        v+ = d1 + (d1 - d0) * h / (h + h_old)

    It is second order (``O(h^2)``, exact for constant acceleration; the plain backward
    difference ``d1`` is only first order, ``O(h)``), and it needs no force: a particle
    held at rest by a constraint or a floor reads ``v = 0``, not ``g h/2``.
    """

    position_based = True
    symplectic = True
    velocity_time = 0.5
    constrained_form = "SHAKE"

    def start(self, s, h, accel):
        a = np.asarray(accel(s.x, s.v), dtype=s.x.dtype)
        s.x_prev = s.x - h * s.v + (0.5 * h * h) * a   # article 001, eq. (2)
        s.a, s.a_valid, s.h_prev = a, False, h

    #: One of ``backend.BACKENDS``: "auto" runs the compiled one-pass kernel for float
    #: (n, 2) states and scalar steps when the kernels may run; "compiled", "numpy".
    backend: ClassVar[str] = "auto"
    #: frame_coefficients' results by (class, h, h_old, n, dtype): nobody writes into
    #: these arrays.
    _frames: ClassVar[dict] = {}
    #: ``step(..., velocity="later")`` + ``finish_velocity`` replaces ``fold``.
    defers_velocity: ClassVar[bool] = True

    def step(self, s, h, accel, velocity="now"):
        """One step. ``velocity`` "now" estimates ``s.v`` as described above. "later":
        ``s.v`` keeps only the part that does not depend on ``x+`` (``-back * c2``); the
        caller corrects ``x+`` and then calls :meth:`finish_velocity`, which adds
        ``fwd * c1``: the numbers ``fold`` of the corrections would give, for two passes
        over the arrays instead of five, and without corrections ``"now"``'s bit for
        bit. "none": ``s.v`` is left as it was, for a world whose forces do not read
        ``v`` and that takes another step before anyone looks (the substeps of a
        frame: the position update never needs ``v``)."""
        if velocity not in ("now", "later", "none"):
            raise ValueError(f"velocity must be 'now', 'later' or 'none', not {velocity!r}")
        h_old = s.h_prev
        a = accel(s.x, s.v)
        c1, c2 = self.velocity_coefficients(h, h_old)
        if velocity == "later":
            c1 = 0.0
        if (backend.compiled(self.backend) and np.ndim(h) == 0
                and s.x.ndim == 2 and backend.fits(s.x, a)
                and s.x.dtype == s.x_prev.dtype and s.x.shape == s.x_prev.shape):
            # Coefficients in the state's float type, as numpy treats Python floats:
            # a float32 world computes in float32 (and vectorises twice as wide).
            f = s.x.dtype.type
            r, ca = (f(c) for c in self.position_coefficients(h, h_old))
            # A world's particles are stepped in place: the new positions overwrite
            # x_prev (each element is read first) and v is rewritten; fresh 40,000-row
            # arrays cost more (page faults) than the arithmetic. A bare state gets new
            # arrays, as a step always gave it.
            reuse = s.reuse_buffers
            out = s.x_prev if reuse and can_overwrite(s.x_prev, s.x) else s.x_prev.copy()
            if velocity == "none":
                kernels.verlet_positions(s.x, out, a, r, ca)
            else:
                v = (s.v if reuse and can_overwrite(s.v, s.x, s.x_prev)
                     else np.empty_like(s.x))
                kernels.verlet_step(s.x, out, a, r, ca, f(c1), f(c2), v)
                s.v = v
            s.x_prev, s.x = s.x, out
            s.a, s.a_valid, s.h_prev = a, False, h
            return
        back = s.x - s.x_prev                          # h_old * d0
        x_new = self._advance(s.x, back, a, h, h_old)
        if velocity != "none":
            fwd = x_new - s.x                          # h * d1
            # v = d1 + (d1 - d0) h/(h + h_old), regrouped to two scaled arrays.
            s.v = fwd * c1
            s.v -= back * c2
        s.x_prev = s.x
        s.x = x_new
        s.a, s.a_valid, s.h_prev = a, False, h

    @staticmethod
    def velocity_coefficients(h, h_old):
        """``(c1, c2)`` of the three-point velocity ``v = fwd * c1 - back * c2``: the
        step, ``finish_velocity`` and a world's compiled frame all take them from here."""
        return 1.0 / h + 1.0 / (h + h_old), h / (h_old * (h + h_old))

    def contact_fold(self, h):
        return PositionFold(h, 1.0 / h, self.velocity_time)

    def compiled_frame(self, h, h_old, n, dtype):
        """:meth:`frame_coefficients` unless this integrator's ``backend`` keeps it on
        numpy now."""
        if not backend.compiled(self.backend):
            return None
        return self.frame_coefficients(h, h_old, n, dtype)

    def frame_coefficients(self, h, h_old, n, dtype):
        """``(r, ca, c1, c2)``, arrays of ``n`` in ``dtype``: the coefficients of the
        position step (:meth:`position_coefficients`) and of the velocity
        (:meth:`velocity_coefficients`) of ``n`` substeps of ``h``, the first after a
        step of ``h_old``, as :meth:`step` and :meth:`finish_velocity` take them substep
        by substep. A world's compiled frames run the integrator with these."""
        key = (type(self), h, h_old, n, np.dtype(dtype).str)
        cache = self._frames
        out = cache.get(key)
        if out is None:                 # a fixed step asks for the same ones every frame
            f = np.dtype(dtype).type
            olds = [h_old] + [h] * (n - 1)
            pos = [self.position_coefficients(h, ho) for ho in olds]
            vel = [self.velocity_coefficients(h, ho) for ho in olds]
            out = tuple(np.array([f(c[k]) for c in cs], dtype)
                        for cs, k in ((pos, 0), (pos, 1), (vel, 0), (vel, 1)))
            if len(cache) > 64:
                cache.clear()
            cache[key] = out
        return out

    def finish_velocity(self, s, h, h_old):
        """After ``step(..., velocity="later")`` and the corrections: ``v += fwd * c1``
        with ``fwd = x+ - x`` (``x`` now in ``x_prev``); ``h_old`` as before the step."""
        c1 = self.velocity_coefficients(h, h_old)[0]
        if (backend.compiled(self.backend) and s.reuse_buffers and can_overwrite(s.v)
                and backend.fits(s.x, s.x_prev, s.v) and s.x.shape == s.v.shape):
            kernels.add_scaled_difference(s.v, s.x, s.x_prev, s.v.dtype.type(c1))
        else:
            s.v += (s.x - s.x_prev) * c1

    def fold(self, s, dx, h, h_old):
        # x_prev is untouched by corrections, so the implied velocity already carries
        # dx; only the estimate above must follow: d1 changes by dx/h.
        s.v += dx * self.velocity_coefficients(h, h_old)[0]

    def _advance(self, x, back, a, h, h_old):
        """``x+ = x + back * r + a * ca`` from the last displacement ``back = x - x_prev``."""
        r, ca = self.position_coefficients(h, h_old)
        out = a * ca
        out += x
        out += back * r
        return out

    @staticmethod
    def position_coefficients(h, h_old):
        """``(r, ca)``: the weights of the last displacement and of the acceleration."""
        raise NotImplementedError


class Verlet(_PositionVerlet):
    """Position Verlet, no time correction: ``x+ = 2x - x_prev + a h^2``.

    Order 2 at a fixed step. Under a changing step it keeps the plain formula on
    purpose: the displacement of the last step is replayed over a step of another
    length, an ``O(h)`` error every step, so it does not converge at all.
    """

    name, label, order, order_variable = "verlet", "Position Verlet", 2, 0

    @staticmethod
    def position_coefficients(h, h_old):
        return 1.0, h * h


class TimeCorrectedVerlet(_PositionVerlet):
    """Time-Corrected Verlet exactly as article 001 publishes it (eq. 7).

    ``x+ = x + (x - x_prev) (h/h_prev) + a h h``. The ratio rescales the old
    displacement, but ``(x - x_prev)/h_prev = v - a h_prev/2 + O(h^2)``, so the
    acceleration term should be ``a h (h + h_prev)/2``: every change of step leaves an
    ``a h (h - h_prev)/2`` error, and under random steps it is only first order.
    """

    name, label, order, order_variable = "tcv", "TCV (as published)", 2, 1

    @staticmethod
    def position_coefficients(h, h_old):
        # TCV as published: first order when h changes.
        return h / h_old, h * h


class TimeCorrectedVerletFixed(_PositionVerlet):
    """Variable-step Störmer-Verlet: ``x+ = x + (x - x_prev)(h/h_prev) + a h (h + h_prev)/2``.

    From the Taylor series ``x(t ± h) = x ± v h + a h^2/2 ± j h^3/6``, eliminating ``v``.
    Second order under any step sequence with bounded ratios, exact for constant
    acceleration, and identical to position Verlet at a fixed step.
    """

    name, label, order, order_variable = "tcv_corrected", "TCV (corrected)", 2, 2

    @staticmethod
    def position_coefficients(h, h_old):
        return h / h_old, 0.5 * h * (h + h_old)


class RK4(Integrator):
    """Classical fourth-order Runge-Kutta on ``(x, v)``. Order 4, four evaluations a step.

    Not symplectic: on an oscillator its energy decays slowly (by ``(w h)^6/72`` a step),
    which is why it is the accuracy reference and not a game integrator.
    """

    name, label, order, order_variable, symplectic = "rk4", "Runge-Kutta 4", 4, 4, False
    fevals = 4

    def step(self, s, h, accel):
        x, v = s.x, s.v
        hh = 0.5 * h
        a1 = accel(x, v)
        v2 = v + hh * a1
        a2 = accel(x + hh * v, v2)
        v3 = v + hh * a2
        a3 = accel(x + hh * v2, v3)
        v4 = v + h * a3
        a4 = accel(x + h * v3, v4)
        s.x_prev = x.copy()
        s.x += (h / 6.0) * (v + 2.0 * v2 + 2.0 * v3 + v4)
        s.v += (h / 6.0) * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
        s.a, s.a_valid, s.h_prev = a1, False, h


#: Every integrator, in the order the hotkey cycles through them.
INTEGRATORS: dict[str, Integrator] = {
    cls.name: cls() for cls in (
        ExplicitEuler, SymplecticEuler, VelocityVerlet, Leapfrog,
        Verlet, TimeCorrectedVerlet, TimeCorrectedVerletFixed, RK4)
}


def switch(s: State, new: str | Integrator, h: float, accel: AccelFn) -> Integrator:
    """Hand a running state to another integrator without a jump.

    Positions are untouched; ``s.v`` is always valid (kept, or estimated from
    positions to second order), and the new integrator starts from ``(s.x, s.v)``, so
    the trajectory stays continuous to the order of the integrators involved.
    """
    integ = get_integrator(new)
    integ.start(s, h, accel)
    return integ


def get_integrator(name: str | Integrator) -> Integrator:
    """The registered integrator called ``name``; ``ValueError`` listing the valid names."""
    if isinstance(name, Integrator):
        return name
    try:
        return INTEGRATORS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown integrator {name!r}; valid names: {', '.join(INTEGRATORS)}") from None


def check_steps(dts) -> np.ndarray:
    """``dts`` as a 1-D float64 array, or ``ValueError`` naming the first bad index."""
    arr = np.asarray(dts, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"dts must be one-dimensional, got shape {arr.shape}")
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"step dts[{i}] = {arr[i]!r} is not a positive finite number")
    return arr


@dataclass(frozen=True)
class Trajectory:
    """The result of :func:`integrate`.

    ``t (k+1,)`` s; ``x``, ``v`` ``(k+1, *x0.shape)``; ``nfev`` acceleration evaluations.
    """

    t: np.ndarray
    x: np.ndarray
    v: np.ndarray
    nfev: int
    method: str


def integrate(accel: AccelFn, x0, v0, dts, method: str = "velocity_verlet",
              t0: float = 0.0) -> Trajectory:
    """Integrate ``x'' = accel(x, v)`` from ``(x0, v0)`` over the steps ``dts``.

    ``x0`` may have any shape (``(1,)`` for a scalar oscillator, ``(n, 2)`` for
    particles); ``accel(x, v)`` returns an array shaped like ``x``. Every step is
    checked before anything runs: a non-positive or non-finite step raises
    ``ValueError`` naming its index, an unknown method raises ``ValueError`` listing
    the valid names, and the inputs are never modified.

    >>> import numpy as np
    >>> tr = integrate(lambda x, v: -x, np.array([1.0]), np.array([0.0]), [0.1] * 10, "rk4")
    >>> tr.x.shape, tr.nfev
    ((11, 1), 40)
    """
    integ = get_integrator(method)
    hs = check_steps(dts)
    s = State.from_xv(x0, v0)
    shape = s.x.shape
    nfev = 0

    def counted(x, v):
        nonlocal nfev
        nfev += 1
        a = np.asarray(accel(x, v), dtype=np.float64)
        if a.shape != shape:
            raise ValueError(f"accel returned shape {a.shape}, expected {shape} (the shape of x0)")
        return a

    k = hs.size
    xs = np.empty((k + 1, *shape))
    vs = np.empty((k + 1, *shape))
    xs[0], vs[0] = s.x, s.v
    if k:
        integ.start(s, hs[0], counted)
    for i in range(k):
        integ.step(s, hs[i], counted)
        xs[i + 1], vs[i + 1] = s.x, s.v
    t = np.empty(k + 1)
    t[0] = t0
    np.cumsum(hs, out=t[1:])
    t[1:] += t0
    return Trajectory(t=t, x=xs, v=vs, nfev=nfev, method=integ.name)

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
from typing import ClassVar, cast

import numpy as np

from . import backend, step_kernels
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
    #: Global order at a fixed step when the force depends on the velocity (drag, the
    #: Lagrange multipliers' constraint forces): ``order`` unless the method reads the
    #: force at a predicted velocity (Forest-Ruth: 3). Measured by
    #: ``tests/test_lagrange.py`` on the pendulum in Lagrange mode.
    @property
    def order_velocity_force(self) -> int:
        return self.order
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
    #: Colour, marker and line (matplotlib's codes) in every figure of the lab.
    style: ClassVar[tuple[str, str, str]]
    #: The largest stable step, from the method's own one-step map (its amplification
    #: matrix's spectral radius stays <= 1 below it): ``"oscillator"`` the largest
    #: ``w h`` on ``x'' = -w^2 x`` (0: unstable at every step), ``"damping"`` the
    #: largest ``c h`` on ``x'' = -c v``. ``experiment stability`` and
    #: ``experiment stability-map`` measure both and judge them.
    stability: ClassVar[dict[str, float]]

    def __repr__(self) -> str:
        return f"<integrator {self.name}: order {self.order}, symplectic={self.symplectic}>"

    @property
    def local_order(self) -> int:
        """The order of the position error of one step from exact data: one above the
        global order for a one-step method, two above for the two-step position Verlet
        family (the articles' "4th order" Verlet)."""
        return self.order + (2 if self.position_based else 1)

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
    style = ("#d62728", "o", "-")
    stability = {"oscillator": 0.0, "damping": 2.0}

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
    style = ("#ff7f0e", "s", "-")
    stability = {"oscillator": 2.0, "damping": 2.0}
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
    style = ("#1f77b4", "^", "-")
    stability = {"oscillator": 2.0, "damping": 1.0}
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
    style = ("#17becf", "v", "--")
    stability = {"oscillator": 2.0, "damping": 1.0}
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
    #: At a fixed step all three are the same map: Störmer's on the oscillator (its
    #: edge ``w h = 2``), and on the damping ``x'' = -c v`` (``a`` read from the
    #: three-point velocity) the edge is ``c h = 1``.
    stability = {"oscillator": 2.0, "damping": 1.0}

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
        if (backend.compiled(self.backend, dtype=s.x.dtype) and np.ndim(h) == 0
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
                step_kernels.verlet_positions(s.x, out, a, r, ca)
            else:
                v = (s.v if reuse and can_overwrite(s.v, s.x, s.x_prev)
                     else np.empty_like(s.x))
                step_kernels.verlet_step(s.x, out, a, r, ca, f(c1), f(c2), v)
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
        if not backend.compiled(self.backend, dtype=np.dtype(dtype)):
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
        if (backend.compiled(self.backend, dtype=s.x.dtype) and s.reuse_buffers
                and can_overwrite(s.v)
                and backend.fits(s.x, s.x_prev, s.v) and s.x.shape == s.v.shape):
            step_kernels.add_scaled_difference(s.v, s.x, s.x_prev, s.v.dtype.type(c1))
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
    style = ("#7f7f7f", "D", "-")

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
    style = ("#9467bd", "P", "--")

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
    style = ("#2ca02c", "X", "--")

    @staticmethod
    def position_coefficients(h, h_old):
        return h / h_old, 0.5 * h * (h + h_old)


def _rk4_damping_limit() -> float:
    """RK4 on ``v' = -c v``: the amplification ``1 - z + z^2/2 - z^3/6 + z^4/24`` falls to
    -1... never; it returns to 1 at the positive real root of ``-1 + z/2 - z^2/6 +
    z^3/24`` (``z = c h`` ~ 2.785)."""
    r = np.roots([1 / 24, -1 / 6, 1 / 2, -1])
    return float(min(x.real for x in r if abs(x.imag) < 1e-12 and x.real > 0))


def _verlet_composition_limits(weights) -> dict[str, float]:
    """The stability edges of velocity Verlet composed over substeps of ``weights``
    (fractions of ``h``), from its one-step maps written as polynomials in ``z``:

    - oscillator (``w = 1``), on ``(x, v)``: ``[[1 - t^2/2, t], [-t + t^3/4, 1 - t^2/2]]``;
    - damping (``c = 1``), on ``(v, a)``, the kept ``a`` evaluated at the predicted
      velocity ``v + t a`` as :class:`VelocityVerlet` does: ``[[1 - t/2, t/2 - t^2/2],
      [-1, -t]]``

    with ``t = w_k z``. The edge is the smallest ``z > 0`` where an eigenvalue of the
    product reaches the unit circle (``1 - tr + det = 0``: +1; ``1 + tr + det = 0``:
    -1; ``det = 1``: a complex pair) and beyond which the spectral radius exceeds 1.
    For one weight this gives velocity Verlet's 2 and 1."""
    from numpy.polynomial import Polynomial

    z = Polynomial([0.0, 1.0])
    one = Polynomial([1.0])

    def maps(t):
        return {"oscillator": [[1 - t * t / 2, t], [-t + t ** 3 / 4, 1 - t * t / 2]],
                "damping": [[1 - t / 2, t / 2 - t * t / 2], [-one, -t]]}

    def mul(A, B):
        return [[A[i][0] * B[0][j] + A[i][1] * B[1][j] for j in range(2)] for i in range(2)]

    out = {}
    for problem in ("oscillator", "damping"):
        M = [[one, 0 * one], [0 * one, one]]
        for w in weights:
            M = mul(maps(w * z)[problem], M)
        tr, det = M[0][0] + M[1][1], M[0][0] * M[1][1] - M[0][1] * M[1][0]

        def rho(x, M=M):
            return max(abs(np.linalg.eigvals(np.array([[c(x) for c in r] for r in M]))))

        polys = (1 - tr + det, 1 + tr + det, det - 1)
        edges = sorted(r.real for poly in polys for r in cast("list[complex]", poly.roots())
                       if abs(r.imag) < 1e-9 and r.real > 1e-9)
        out[problem] = next(float(e) for e in edges if rho(e * (1 + 1e-9)) > 1 + 1e-12)
    return out


class RK4(Integrator):
    """Classical fourth-order Runge-Kutta on ``(x, v)``. Order 4, four evaluations a step.

    Not symplectic: on an oscillator its energy decays slowly (by ``(w h)^6/72`` a step),
    which is why it is the accuracy reference and not a game integrator.
    """

    name, label, order, order_variable, symplectic = "rk4", "Runge-Kutta 4", 4, 4, False
    style = ("#8c564b", "*", "-")
    stability = {"oscillator": 2.0 * 2.0 ** 0.5, "damping": _rk4_damping_limit()}
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


#: Yoshida's triple-jump weights (1990), the Forest-Ruth integrator (1990): ``w1 + w0 +
#: w1 = 1`` and ``2 w1^3 + w0^3 = 0``, which cancels the third-order error of the
#: symmetric composition.
_W1 = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))
_W0 = 1.0 - 2.0 * _W1


class ForestRuth(Integrator):
    """Forest-Ruth: velocity Verlet over ``w1 h``, ``w0 h``, ``w1 h`` with ``w1 =
    1/(2 - 2^(1/3))`` ~ 1.3512 and ``w0 = 1 - 2 w1`` ~ -1.7024 (the middle substep runs
    backwards). Global order 4, symplectic and time reversible (a symmetric composition
    of a symmetric symplectic map); three force evaluations a step, the last kept for
    the next step as velocity Verlet keeps its own.

    The price of order 4: the stability edge on the oscillator falls from velocity
    Verlet's ``w h = 2`` to ~1.573 (``w1 h`` already passes 2 at ``w h = 1.48``), and a
    step costs three of velocity Verlet's. Per force evaluation it still wins at small
    errors: the error falls 16x for each halving of the step, velocity Verlet's 4x.

    Under varying frame steps (each step's ratio to the last in [0.5, 2]) it stays a
    one-step method of order 4 (measured: 4.0 on the oscillator and 4.0 on the
    eccentric orbit, ``experiment convergence``), but its energy error is no longer
    bounded: as for every symplectic method, random steps break the conserved
    modified energy, and it drifts like a random walk.
    """

    name, label, order, order_variable, symplectic = (
        "forest_ruth", "Forest-Ruth", 4, 4, True)
    fevals = 3
    #: With a force that reads the velocity, velocity Verlet's predicted ``v + h a``
    #: makes each substep unsymmetric by O(h^3): the composition is third order
    #: (measured 2.94 on the pendulum in Lagrange mode, RK4 4.02).
    order_velocity_force = 3
    style = ("#e377c2", "h", "-.")
    stability = _verlet_composition_limits((_W1, _W0, _W1))
    weights: ClassVar[tuple[float, float, float]] = (_W1, _W0, _W1)

    def step(self, s, h, accel):
        a = s.a if s.a_valid else accel(s.x, s.v)
        s.x_prev = s.x.copy()
        for w in self.weights:
            hw = w * h
            s.x += hw * s.v + (0.5 * hw * hw) * a
            a_new = accel(s.x, s.v + hw * a)
            s.v += (0.5 * hw) * (a + a_new)
            a = a_new
        s.a, s.a_valid, s.h_prev = a, True, h


#: Every integrator, in the order the hotkey cycles through them.
INTEGRATORS: dict[str, Integrator] = {
    cls.name: cls() for cls in (
        ExplicitEuler, SymplecticEuler, VelocityVerlet, Leapfrog,
        Verlet, TimeCorrectedVerlet, TimeCorrectedVerletFixed, RK4, ForestRuth)
}


def contrast(name: str, varying_steps: bool) -> str:
    """The integrator whose motion differs most from ``name``'s, decided from the
    registry's data alone (no trial run: choosing a ghost never stalls a frame):

    - under varying steps, a position-based integrator that loses order there
      (``verlet``, ``tcv``) meets its family's best (``tcv_corrected``), and one that
      keeps it meets its family's worst (``verlet``: the time correction's point);
    - otherwise a symplectic integrator meets the non-symplectic one of the lowest order
      (explicit Euler: its energy grows where the other's stays bounded), and a
      non-symplectic one the symplectic one of its own order (Euler -> symplectic Euler,
      RK4 -> Forest-Ruth: energy drift against energy kept).

    Never ``name`` itself nor one that is the same map at these steps (leapfrog and
    velocity Verlet; the position Verlet family at a fixed step)."""
    own = get_integrator(name)
    others = [i for i in INTEGRATORS.values() if i.name != own.name]
    if varying_steps and own.position_based:
        family = [i for i in others if i.position_based]
        if own.order_variable < own.order:
            return max(family, key=lambda i: i.order_variable).name
        return min(family, key=lambda i: i.order_variable).name
    if own.symplectic:
        pool = [i for i in others if not i.symplectic]
        return min(pool, key=lambda i: i.order).name
    pool = [i for i in others if i.symplectic and not i.position_based]
    return min(pool, key=lambda i: (abs(i.order - own.order), i.order)).name


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

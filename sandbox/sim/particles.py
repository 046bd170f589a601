"""Particle state as a structure of arrays, the one thing every integrator advances.

Shapes: ``x``, ``v``, ``x_prev`` and ``a`` share one shape, ``(n, d)`` for particles in
``d`` dimensions, or any shape for the scripting API (a scalar oscillator is ``(1,)``).
Units are SI: metres, metres per second, metres per second squared, kilograms.

- ``x``       positions at the current time ``t``
- ``v``       velocities at ``t`` (kept by velocity integrators, *estimated from
              positions* by the position-based ones; always valid to read)
- ``x_prev``  positions one step back, ``t - h_prev`` (position-based integrators)
- ``a``       the last acceleration the integrator evaluated (velocity Verlet and
              leapfrog reuse it, so they cost one force evaluation per step)
- ``h_prev``  the previous step in seconds (Time-Corrected Verlet divides by it)

``Particles`` adds the per-particle properties of a world: ``mass`` (kg, always finite:
a pinned planet still attracts its moons), ``inv_mass`` (the *dynamic* inverse mass:
0 means pinned, never moved by forces or constraints; unpinning restores ``1/mass``)
and ``radius`` (m).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

FLOAT = np.float64


@dataclass
class State:
    """Kinematic state advanced by an :class:`~sandbox.sim.integrators.Integrator`."""

    x: np.ndarray
    v: np.ndarray
    x_prev: np.ndarray
    a: np.ndarray
    h_prev: float = 0.0
    t: float = 0.0
    a_valid: bool = False   # True while ``a`` is the acceleration at the current ``x``
    #: May an integrator overwrite ``x_prev`` and ``v`` in place? Not for a bare state:
    #: a script may keep ``s.x`` from an earlier step (``xs.append(s.x)``), and a step
    #: has always given new arrays. A world's particles say yes (see Particles).
    reuse_buffers: ClassVar[bool] = False

    @classmethod
    def from_xv(cls, x0, v0, dtype=FLOAT) -> State:
        """A state at rest in time: copies of ``x0`` and ``v0``; ``x_prev`` and ``a``
        are filled by the integrator's ``start()``."""
        x = np.array(x0, dtype=dtype, copy=True)
        v = np.array(v0, dtype=dtype, copy=True)
        if x.shape != v.shape:
            raise ValueError(f"x0 has shape {x.shape} but v0 has shape {v.shape}")
        if x.ndim == 0:
            raise ValueError("x0 must be at least 1-dimensional, e.g. shape (1,) for a scalar")
        return cls(x=x, v=v, x_prev=x.copy(), a=np.zeros_like(x))

    def copy(self, into: State | None = None) -> State:
        """A deep copy of the kinematic state (a world backs up before every step).

        ``into``: an earlier copy whose arrays are reused when their shapes and types
        still fit (a world backs up into the same buffers every frame: fresh 640 kB
        arrays page-fault, and copying a 40,000-particle state into new arrays took
        0.44 ms against 0.05 ms into old ones). A read-only ``a`` (the world's shared
        gravity field) is shared, not copied: nobody can change it.
        """
        x, v, xp = self.x, self.v, self.x_prev
        if into is None or not (_fits(into.x, x) and _fits(into.v, v)
                                and _fits(into.x_prev, xp)):
            into = State(x.copy(), v.copy(), xp.copy(), self.a)
        else:
            np.copyto(into.x, x)
            np.copyto(into.v, v)
            np.copyto(into.x_prev, xp)
        self.copy_rest(into)
        return into

    def copy_rest(self, into: State) -> None:
        """What :meth:`copy` copies besides the three arrays: ``a`` (shared when
        read-only), ``h_prev``, ``t`` and ``a_valid`` (a world's compiled backup copies
        the arrays itself)."""
        into.a = self.a if not self.a.flags.writeable else self.a.copy()
        into.h_prev, into.t, into.a_valid = self.h_prev, self.t, self.a_valid

    def restore(self, other: State) -> None:
        """Copy ``other`` into this state (``x``, ``v``, ``x_prev`` keep their identity)."""
        self.x[...] = other.x
        self.v[...] = other.v
        self.x_prev[...] = other.x_prev
        self.a = other.a.copy()   # ``a`` may be the world's shared read-only gravity field
        self.h_prev = other.h_prev
        self.t = other.t
        self.a_valid = other.a_valid

    def is_finite(self) -> bool:
        return bool(np.isfinite(self.x).all() and np.isfinite(self.v).all()
                    and np.isfinite(self.x_prev).all())


@dataclass
class Particles(State):
    """A world's particles: a :class:`State` plus ``mass``, ``inv_mass`` and ``radius (n,)``.

    The world owns these arrays and hands out copies, so its integrator steps them in
    place (``reuse_buffers``): fresh 40,000-row arrays every substep cost more in page
    faults than the arithmetic. Hold ``world.particles.x`` across a step only as a copy.
    """

    reuse_buffers: ClassVar[bool] = True

    mass: np.ndarray = field(default_factory=lambda: np.zeros(0))
    inv_mass: np.ndarray = field(default_factory=lambda: np.zeros(0))
    radius: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def empty(cls, d: int = 2, dtype=FLOAT) -> Particles:
        z = np.zeros((0, d), dtype=dtype)
        return cls(x=z, v=z.copy(), x_prev=z.copy(), a=z.copy(), mass=np.zeros(0, dtype=dtype),
                   inv_mass=np.zeros(0, dtype=dtype), radius=np.zeros(0, dtype=dtype))

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def pinned(self) -> np.ndarray:
        """Boolean mask ``(n,)``: pinned means ``inv_mass == 0``, nothing else."""
        return self.inv_mass == 0

    @property
    def movable(self) -> np.ndarray:
        return self.inv_mass > 0

    def append(self, x, v=None, mass=1.0, radius=0.0, pinned=False) -> np.ndarray:
        """Append particles at positions ``x (k, d)``; returns their indices ``(k,)``.

        ``mass`` (kg, > 0), ``radius`` (m) and ``pinned`` broadcast over the new rows.

        New particles start consistent: ``x_prev = x`` and ``a = 0`` until the world
        restarts its integrator (every build goes through ``start()``).
        """
        x = np.atleast_2d(np.asarray(x, dtype=self.x.dtype))
        k = x.shape[0]
        v = np.zeros_like(x) if v is None else np.broadcast_to(np.asarray(v, self.x.dtype), x.shape)
        start = self.n
        self.x = np.concatenate([self.x, x])
        self.v = np.concatenate([self.v, v])
        self.x_prev = np.concatenate([self.x_prev, x])
        self.a = np.concatenate([self.a, np.zeros_like(x)])
        m = np.broadcast_to(np.asarray(mass, self.x.dtype), (k,))
        if not (np.isfinite(m).all() and (m > 0).all()):
            raise ValueError("particle masses must be positive and finite")
        pin = np.broadcast_to(np.asarray(pinned, bool), (k,))
        self.mass = np.concatenate([self.mass, m])
        self.inv_mass = np.concatenate([self.inv_mass, np.where(pin, 0.0, 1.0 / m)])
        self.radius = np.concatenate([self.radius, np.broadcast_to(
            np.asarray(radius, self.x.dtype), (k,))])
        return np.arange(start, start + k)


def _fits(buffer: np.ndarray, a: np.ndarray) -> bool:
    """Whether ``a`` may be copied into ``buffer`` as it is (``State.copy``)."""
    return buffer.shape == a.shape and buffer.dtype == a.dtype and buffer.flags.writeable


def state_hash(*arrays: np.ndarray, scalars: tuple = ()) -> str:
    """SHA-256 of the raw bytes of ``arrays`` and the ``repr`` of ``scalars``.

    Bit-identical states give identical hashes; used by determinism tests and snapshots.
    """
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    h.update(repr(scalars).encode())
    return h.hexdigest()

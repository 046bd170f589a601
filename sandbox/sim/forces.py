"""Acceleration fields: uniform gravity, softened point-mass gravity, drag, springs, pressure.

Every function returns an acceleration or a force array ``(n, d)`` and loops over nothing
per particle: pairwise terms are evaluated in blocks of rows against all columns, so the
largest temporary is ``block x n x d`` rather than ``n x n x d`` several times over.
Scatter-adds onto particles use ``np.bincount`` (an index can repeat: a particle with
several springs), never ``a[idx] += f``, which keeps one write per repeated index.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from . import backend as _backend
from . import step_kernels


def scatter_add(out: np.ndarray, idx: np.ndarray, vals: np.ndarray) -> None:
    """``out[idx] += vals`` correct for repeated indices; ``out (n, d)``, ``vals (k, d)``."""
    n = out.shape[0]
    for k in range(out.shape[1]):
        out[:, k] += np.bincount(idx, weights=vals[:, k], minlength=n)


class UniformField:
    """A uniform acceleration (gravity) on the movable rows, zero on pinned ones, as one
    read-only ``(n, 2)`` array kept while neither the field, the shape nor the pins
    change.

    Filling and masking a 40,000-row field cost 0.4 ms a substep, a fifth of the
    200x200 cloth's physics; comparing the mask to the kept one costs a tenth, so within
    a step (pins and grabs change between frames) the step compares it once: it sets
    ``checked`` (the rows are known to be the kept ``movable`` ones, ``pipeline.py``)
    and clears it when the step ends. A new array (``a``) is made whenever anything
    changed, never written into: its identity says it is the same field.
    """

    def __init__(self) -> None:
        self.key: tuple | None = None         # (field, shape, dtype) of ``a``
        self.movable: np.ndarray | None = None
        self.a: np.ndarray | None = None
        self.checked = False

    def __deepcopy__(self, memo) -> UniformField:
        """A copy whose field stays read-only (numpy's deepcopy makes arrays writeable):
        a copied world (the window's ghost) must hand the compiled kernels the same
        types as the original, or its first step loads or compiles other versions of
        them (the cradle's ghost: 90 ms loading three; minutes from an empty cache)."""
        out = UniformField()
        for name, value in vars(self).items():
            setattr(out, name, copy.deepcopy(value, memo))
        if out.a is not None:
            out.a.flags.writeable = False     # the copy the particles share, if they do
        return out

    def get(self, g, x: np.ndarray, inv_mass: np.ndarray) -> np.ndarray:
        """The field ``g`` (m/s^2) on positions shaped like ``x``, zero where
        ``inv_mass`` is 0: the kept array when nothing changed."""
        key = (tuple(g), x.shape, x.dtype.str)
        a = self.a
        if a is not None and self.key == key and self.checked:
            return a                # checked once a step: pins change between frames
        movable = inv_mass > 0
        self.checked = True
        kept = cast(np.ndarray, self.movable)     # None only while ``a`` is
        if a is None or self.key != key or not np.array_equal(kept, movable):
            a = np.empty_like(x)
            a[:] = g
            a *= movable[:, None]
            a.flags.writeable = False
            self.key, self.movable, self.a = key, movable, a
        return a


def point_gravity(x: np.ndarray, m: np.ndarray, G: float, eps: float,
                  block: int = 256, backend: str = "auto") -> np.ndarray:
    """Softened Newtonian gravity of every particle on every other.

    ``x (n, d)`` m, ``m (n,)`` kg -> ``a (n, d)`` m/s^2 with
    ``a_i = G sum_j m_j (x_j - x_i) / (|x_j - x_i|^2 + eps^2)^(3/2)``; the ``j = i`` term
    is zero because its difference is. Plummer softening ``eps`` (m) keeps close
    encounters finite; it must be > 0 if two particles can coincide. ``backend``: one of
    ``backend.BACKENDS`` (the compiled kernel for 64 particles and more in 2-D).
    """
    n = x.shape[0]
    a = np.zeros_like(x)
    if n < 2 or G == 0:
        return a
    e2 = eps * eps
    if _backend.compiled(backend) and x.ndim == 2 and x.shape[1] == 2 and n >= 64:
        step_kernels.point_gravity(np.ascontiguousarray(x, np.float64),
                              np.ascontiguousarray(m, np.float64), float(G), e2, a)
        return a
    for s in range(0, n, block):
        d = x[None, :, :] - x[s:s + block, None, :]          # (b, n, d): x_j - x_i
        r2 = np.einsum("bnk,bnk->bn", d, d) + e2
        if e2 == 0:
            r2[np.arange(min(block, n - s)), np.arange(s, min(s + block, n))] = np.inf
        w = m[None, :] / (r2 * np.sqrt(r2))                   # (b, n)
        a[s:s + block] = G * np.einsum("bn,bnk->bk", w, d)
    return a


def nbody_potential(x: np.ndarray, m: np.ndarray, G: float, eps: float,
                    block: int = 256) -> float:
    """``-G sum_{i<j} m_i m_j / sqrt(r_ij^2 + eps^2)`` in J: the potential of ``point_gravity``."""
    n = x.shape[0]
    if n < 2 or G == 0:
        return 0.0
    total = 0.0
    e2 = eps * eps
    for s in range(0, n, block):
        rows = np.arange(s, min(s + block, n))
        d = x[None, :, :] - x[rows, None, :]
        r2 = np.einsum("bnk,bnk->bn", d, d) + e2
        upper = np.arange(n)[None, :] > rows[:, None]         # each pair once
        inv = np.where(upper, 1.0 / np.sqrt(np.where(upper, r2, 1.0)), 0.0)
        total += float(np.einsum("b,bn,n->", m[rows], inv, m))
    return -G * total


@dataclass
class Springs:
    """Damped springs as forces: ``F_j = -(k (L - rest) + c dL/dt) n``, ``F_i = -F_j``.

    Arrays of length ``m``: endpoints ``i, j``, stiffness ``k`` N/m, damping ``c`` N s/m,
    ``rest`` m. Forces, not constraints, so every integrator, RK4 included, integrates
    them as part of ``accel``.
    """

    i: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    j: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    k: np.ndarray = field(default_factory=lambda: np.zeros(0))
    c: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rest: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return self.i.size

    def add(self, i, j, k, c=0.0, rest=None, x=None) -> np.ndarray:
        i = np.atleast_1d(np.asarray(i, np.int64))
        j = np.atleast_1d(np.asarray(j, np.int64))
        if rest is None:
            rest = np.linalg.norm(x[j] - x[i], axis=1)
        start = self.i.size
        m = i.size
        self.i = np.concatenate([self.i, i])
        self.j = np.concatenate([self.j, j])
        self.k = np.concatenate([self.k, np.broadcast_to(np.asarray(k, float), (m,))])
        self.c = np.concatenate([self.c, np.broadcast_to(np.asarray(c, float), (m,))])
        self.rest = np.concatenate([self.rest, np.broadcast_to(np.asarray(rest, float), (m,))])
        return np.arange(start, start + m)

    def force(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Net spring force on every particle, ``(n, d)`` N."""
        f = np.zeros_like(x)
        if not len(self):
            return f
        d = x[self.j] - x[self.i]
        L = np.sqrt(np.einsum("ij,ij->i", d, d))
        n = d / np.maximum(L, 1e-12)[:, None]
        rate = np.einsum("ij,ij->i", v[self.j] - v[self.i], n)
        fj = -(self.k * (L - self.rest) + self.c * rate)[:, None] * n
        scatter_add(f, self.j, fj)
        scatter_add(f, self.i, -fj)
        return f

    def potential(self, x: np.ndarray) -> float:
        """``sum k (L - rest)^2 / 2`` in J."""
        if not len(self):
            return 0.0
        L = np.linalg.norm(x[self.j] - x[self.i], axis=1)
        return float(0.5 * np.sum(self.k * (L - self.rest) ** 2))


@dataclass
class PressureBody:
    """A closed ring of particles ``ring (k,)`` (counter-clockwise) filled with ideal gas.

    Pressure ``P = nRT / A`` with ``nRT = pressure * A0`` (J per metre of depth): each
    edge is pushed outward by ``P * length`` along its normal, half to each end, which
    is exactly ``P * grad(A)``. Its potential is ``-nRT ln(A / A0)``, so the total energy
    stays checkable. A ring squashed below a tenth of its area (a hard landing can turn
    it inside out, where ``A <= 0``) feels the pressure of a tenth, not an infinity.
    """

    ring: np.ndarray
    nrt: float
    area0: float

    def area(self, x: np.ndarray) -> float:
        p = x[self.ring]
        q = np.roll(p, -1, axis=0)
        return 0.5 * float(np.sum(p[:, 0] * q[:, 1] - q[:, 0] * p[:, 1]))

    def force(self, x: np.ndarray, out: np.ndarray) -> None:
        p = x[self.ring]
        q = np.roll(p, -1, axis=0)
        area = 0.5 * float(np.sum(p[:, 0] * q[:, 1] - q[:, 0] * p[:, 1]))
        P = self.nrt / max(area, 0.1 * self.area0)
        e = q - p
        normal = np.stack([e[:, 1], -e[:, 0]], axis=1)      # outward for a CCW ring, |e| long
        f = 0.5 * P * normal
        nxt = np.roll(self.ring, -1)
        scatter_add(out, self.ring, f)
        scatter_add(out, nxt, f)

    def potential(self, x: np.ndarray) -> float:
        a = self.area(x)
        amin = 0.1 * self.area0
        if a >= amin:
            return -self.nrt * float(np.log(a / self.area0))
        # Below the floor the force is constant, so the potential continues linearly.
        return -self.nrt * (float(np.log(0.1)) + (a - amin) / amin)

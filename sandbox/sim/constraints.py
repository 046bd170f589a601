"""Distance constraints (sticks and rope links) solved by XPBD in colour batches.

Each constraint ties particles ``i`` and ``j`` to a rest length. A *stick* holds the
length both ways; a *rope link* only resists stretching (slack is free). Pins are not
constraints: a pinned particle has ``inv_mass == 0`` and no correction moves it.

XPBD (Macklin, Müller & Chentanez 2016). For ``C = |x_j - x_i| - rest`` with gradient
``n = (x_j - x_i)/|x_j - x_i|`` and compliance ``alpha`` (m/N; 0 is rigid), one
projection of one constraint within a step ``h`` is::

    alpha~ = alpha / h^2
    dlambda = (-C - alpha~ lambda) / (w_i + w_j + alpha~)
    x_i -= w_i dlambda n,   x_j += w_j dlambda n,   lambda += dlambda

``lambda`` accumulates over the iterations of a step, which is what makes the stiffness
independent of the step and of the iteration count. Constraints are split into colour
batches that share no particle; a batch is projected at once with fancy indexing (the
writes cannot collide: a test checks every batch), batches one after another, which is
Gauss-Seidel between batches and exact within one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from . import kernels

STICK, ROPE = 0, 1

#: Batches of at least this many constraints are spread over the cores (unless the
#: backend is "numba"); below it thread start-up costs more than it saves.
PARALLEL_MIN = 1000
PARALLEL_CORES = os.cpu_count() or 1
KINDS = {"stick": STICK, "rope": ROPE}


def greedy_colouring(i: np.ndarray, j: np.ndarray, n: int) -> np.ndarray:
    """Colour edges ``(i, j)`` so that no two edges of one colour share a vertex.

    The generic fallback for topologies whose builder gives no colouring: a greedy pass
    (at most ``2 * max degree - 1`` colours) at build time, in Python, never in a step.
    """
    used = [0] * n                       # bitmask of colours taken at each vertex
    colour = np.empty(i.size, np.int64)
    for k, (a, b) in enumerate(zip(i.tolist(), j.tolist(), strict=True)):
        taken = used[a] | used[b]
        c = (~taken & (taken + 1)).bit_length() - 1   # lowest free colour
        colour[k] = c
        used[a] |= 1 << c
        used[b] |= 1 << c
    return colour


def colouring_is_valid(i: np.ndarray, j: np.ndarray, colour: np.ndarray) -> bool:
    """True when no particle appears twice within one colour."""
    if i.size == 0:
        return True
    ends = np.concatenate([i, j])
    cols = np.concatenate([colour, colour])
    key = cols.astype(np.int64) * (int(ends.max()) + 1) + ends
    return np.unique(key).size == key.size


@dataclass
class Constraints:
    """Structure of arrays of ``m`` distance constraints, with their colour batches."""

    i: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    j: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    rest: np.ndarray = field(default_factory=lambda: np.zeros(0))
    compliance: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    colour: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: "numba" (compiled, one core), "parallel" (compiled, batches over all cores),
    #: "numpy" (the reference) or "auto" (numba if installed, parallel for big batches)
    backend: str = "auto"
    _batches: list[np.ndarray] | None = None
    _flat: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return self.i.size

    @property
    def batches(self) -> list[np.ndarray]:
        """Constraint indices per colour; each batch shares no particle."""
        if self._batches is None:
            order = np.argsort(self.colour, kind="stable")
            cols = self.colour[order]
            cuts = np.flatnonzero(np.diff(cols)) + 1
            self._batches = [b for b in np.split(order, cuts) if b.size]
        return self._batches

    def _flat_batches(self) -> tuple:
        """Copies of the constraint arrays sorted batch after batch, for the kernel.

        Streaming contiguous arrays instead of gathering through an index list is what
        makes the compiled sweep memory friendly; ``lam`` is then kept in this order.
        """
        if self._flat is None:
            bs = self.batches
            order = np.concatenate(bs) if bs else np.zeros(0, np.int64)
            offsets = np.concatenate([[0], np.cumsum([b.size for b in bs])]).astype(np.int64)
            self._flat = (self.i[order], self.j[order], self.rest[order],
                          self.compliance[order], self.kind[order], offsets)
        return self._flat

    def add(self, i, j, x: np.ndarray, rest=None, compliance=0.0, kind="stick",
            colour=None) -> np.ndarray:
        """Append constraints between ``i (k,)`` and ``j (k,)``; returns their indices.

        ``rest`` defaults to the current distance. ``colour`` is the builder's colouring
        of its own topology (any non-negative ints); it is kept when it stays valid next
        to the constraints already present (bodies rarely share particles), otherwise
        the whole set is recoloured greedily.
        """
        i = np.atleast_1d(np.asarray(i, np.int64))
        j = np.atleast_1d(np.asarray(j, np.int64))
        if i.shape != j.shape:
            raise ValueError("constraint endpoints i and j must have the same length")
        if np.any(i == j):
            raise ValueError("a constraint needs two different particles")
        k = i.size
        if rest is None:
            rest = np.linalg.norm(x[j] - x[i], axis=1)
        rest = np.broadcast_to(np.asarray(rest, float), (k,))
        if np.any(rest < 0) or not np.isfinite(rest).all():
            raise ValueError("rest lengths must be finite and >= 0")
        kinds = np.broadcast_to(np.asarray(KINDS[kind] if isinstance(kind, str) else kind,
                                           np.int8), (k,))
        start = self.i.size
        new_colour = (greedy_colouring(i, j, x.shape[0]) if colour is None
                      else np.broadcast_to(np.asarray(colour, np.int64), (k,)))
        self.i = np.concatenate([self.i, i])
        self.j = np.concatenate([self.j, j])
        self.rest = np.concatenate([self.rest, rest])
        self.compliance = np.concatenate([self.compliance, np.broadcast_to(
            np.asarray(compliance, float), (k,))])
        self.kind = np.concatenate([self.kind, kinds])
        self.colour = np.concatenate([self.colour, new_colour])
        if not colouring_is_valid(self.i, self.j, self.colour):
            self.colour = greedy_colouring(self.i, self.j, x.shape[0])
        self._batches = self._flat = None
        return np.arange(start, start + k)

    def remove(self, mask: np.ndarray) -> int:
        """Drop the constraints where ``mask`` is True; a subset of a colouring stays valid."""
        mask = np.asarray(mask, bool)
        count = int(mask.sum())
        if count:
            keep = ~mask
            for name in ("i", "j", "rest", "compliance", "kind", "colour"):
                setattr(self, name, getattr(self, name)[keep])
            self._batches = self._flat = None
        return count

    # --- solving ------------------------------------------------------------------------

    def project(self, x: np.ndarray, w: np.ndarray, h: float, lam: np.ndarray) -> None:
        """One XPBD Gauss-Seidel sweep over the colour batches, in place on ``x (n, 2)``.

        ``w (n,)`` inverse masses (0 = pinned or grabbed), ``h`` the (sub)step in s,
        ``lam (m,)`` the Lagrange multipliers accumulated in this step. Runs the compiled
        kernel when available (``backend``), else :meth:`project_numpy`.
        """
        if not len(self):
            return
        use = self.backend in ("numba", "parallel") or (self.backend == "auto"
                                                        and kernels.AVAILABLE)
        if use and x.ndim == 2 and x.shape[1] == 2 and x.flags.c_contiguous:
            # ``lam`` is private to a step: the kernel keeps it in batch order.
            fi, fj, frest, fcomp, fkind, offsets = self._flat_batches()
            # Smallest batch spread over the cores: "numba" keeps one thread,
            # "parallel" spreads every batch, "auto" only the big ones.
            if self.backend == "numba" or PARALLEL_CORES == 1:
                min_parallel = 2**62
            else:
                min_parallel = 1 if self.backend == "parallel" else PARALLEL_MIN
            kernels.project_batches(x, w, fi, fj, frest, fcomp, fkind, offsets,
                                    1.0 / (h * h), lam, min_parallel)
            return
        self.project_numpy(x, w, h, lam)

    def project_numpy(self, x: np.ndarray, w: np.ndarray, h: float, lam: np.ndarray) -> None:
        """The numpy reference of :meth:`project`: one fancy-indexed update per batch."""
        inv_h2 = 1.0 / (h * h)
        for b in self.batches:
            ci, cj = self.i[b], self.j[b]
            d = x[cj] - x[ci]
            L = np.sqrt(np.einsum("ij,ij->i", d, d))
            C = L - self.rest[b]
            slack = (self.kind[b] == ROPE) & (C < 0)
            at = self.compliance[b] * inv_h2
            wi, wj = w[ci], w[cj]
            denom = wi + wj + at
            ok = (denom > 0) & (L > 1e-12) & ~slack
            dlam = np.where(ok, (-C - at * lam[b]) / np.where(ok, denom, 1.0), 0.0)
            lam[b] += dlam
            corr = (dlam / np.where(L > 1e-12, L, 1.0))[:, None] * d
            x[ci] -= wi[:, None] * corr
            x[cj] += wj[:, None] * corr

    # --- measuring and breaking ---------------------------------------------------------

    def lengths(self, x: np.ndarray) -> np.ndarray:
        d = x[self.j] - x[self.i]
        return np.sqrt(np.einsum("ij,ij->i", d, d))

    def strain(self, x: np.ndarray) -> np.ndarray:
        """Relative stretch ``(L - rest)/rest`` per constraint (ropes: 0 when slack)."""
        rest = np.where(self.rest > 0, self.rest, 1.0)
        s = (self.lengths(x) - self.rest) / rest
        return np.where((self.kind == ROPE) & (s < 0), 0.0, s)

    def error(self, x: np.ndarray) -> tuple[float, float]:
        """Mean and max relative constraint violation ``|L - rest|/rest`` (0, 0 if none)."""
        if not len(self):
            return 0.0, 0.0
        e = np.abs(self.strain(x))
        return float(e.mean()), float(e.max())

    def potential(self, x: np.ndarray) -> float:
        """Elastic energy ``C^2 / (2 alpha)`` of the compliant constraints, in J."""
        soft = self.compliance > 0
        if not soft.any():
            return 0.0
        C = self.lengths(x)[soft] - self.rest[soft]
        C = np.where((self.kind[soft] == ROPE) & (C < 0), 0.0, C)
        return float(np.sum(C * C / (2.0 * self.compliance[soft])))

    def tear(self, x: np.ndarray, ratio: float) -> int:
        """Break every constraint stretched beyond ``ratio * rest``; returns how many."""
        if ratio <= 0 or not len(self):
            return 0
        return self.remove(self.lengths(x) > ratio * self.rest)

    def crossing(self, x: np.ndarray, a, b) -> np.ndarray:
        """Mask of constraints whose segment ``x_i x_j`` properly crosses segment ``a b``."""
        a = np.asarray(a, float)
        b = np.asarray(b, float)
        p, q = x[self.i], x[self.j]

        def orient(o, s, t):
            return (s[..., 0] - o[..., 0]) * (t[..., 1] - o[..., 1]) - \
                   (s[..., 1] - o[..., 1]) * (t[..., 0] - o[..., 0])

        d1 = orient(a, b, p)
        d2 = orient(a, b, q)
        d3 = orient(p, q, a)
        d4 = orient(p, q, b)
        return (d1 * d2 < 0) & (d3 * d4 < 0)

    def cut(self, x: np.ndarray, a, b) -> int:
        """Remove every constraint the segment ``a b`` crosses; returns how many."""
        if not len(self):
            return 0
        return self.remove(self.crossing(x, a, b))

"""Rigid links by Lagrange multipliers, and RATTLE / SHAKE: constrained motion where the
integrator matters.

XPBD (``constraints.py``) projects positions after the integrator's step and derives the
velocity from the projection, so on a pendulum every integrator gives the same motion
and the same damping (amplitude decay ``w^2 h / 2`` a second, implicit Euler's). The two
methods here put the constraint inside the integration instead.

``lagrange``: the constraint force enters the acceleration every integrator evaluates.
A link ``k`` between particles ``i`` and ``j`` is ``g_k = (|d|^2 - rest^2)/2`` with
``d = x_j - x_i``; its Jacobian row ``J_k`` is ``-d`` at ``i`` and ``+d`` at ``j``, and
``d^2 g/dt^2 = J a + |v_j - v_i|^2``. With ``W`` the inverse masses (0 on pins) and the
free acceleration ``a_f(x, v)`` (gravity, springs, drag, ...)::

    (J W J^T) lam = -(J a_f + |dv|^2) [- 2 alpha dg/dt - beta^2 g]    (Baumgarte, optional)
    a = a_f + W J^T lam

``J W J^T`` is solved per connected block (links couple only through a movable particle:
a cradle is five 1x1 systems, a chain one tridiagonal block, all dense here; blocks of
one size are solved in one batched call). Drift is removed after each step by a
projection (``stabilise="projection"``, the default: positions onto ``g = 0`` by Newton
to ``tol``, then velocities onto ``J v = 0``) or by Baumgarte's terms (``"baumgarte"``).
Explicit Euler then gains energy on a pendulum, RK4 loses a little, velocity Verlet
keeps it bounded: the integrators' own characters, now visible.

``rattle``: the symplectic constrained versions (Andersen 1983; Hairer, Lubich &
Wanner, *Geometric Numerical Integration*, VII.1). With velocity Verlet or leapfrog,
RATTLE::

    x+ = x + h v + h^2/2 (a_f + W J(x)^T lam),  g(x+) = 0     (Newton on lam, to tol)
    v+ = (x+ - x)/h + h/2 (a_f(x+) + W J(x+)^T mu),  J(x+) v+ = 0   (a linear solve)

With the position Verlet family, SHAKE: the integrator's own position update plus
``ca W J(x)^T lam`` with ``g(x+) = 0`` (``ca`` its acceleration weight, ``h^2`` at a fixed
step), the velocity its three-point estimate projected onto ``J v = 0``. With
symplectic Euler the first-order member: ``x+ = x + h v + h^2 (a_f + W J^T lam)``. At a
fixed step each is a symplectic map on the constraint manifold, so the energy error is
bounded (``O(h^2)``, ``O(h)`` for symplectic Euler) for ever, and the links hold to
``tol`` at every step. Under variable steps each step is still symplectic and the links
still hold to ``tol``, and the order is the integrator's ``order_variable``, but the
steps no longer share one modified energy: the energy error is no longer bounded (the
tests measure how it grows). Explicit Euler and RK4 have no symplectic constrained form;
in ``rattle`` mode they use the Lagrange multipliers, and :func:`describe` says so.

Both are for small systems: pendulums, chains, cradles, up to :data:`MAX_LINKS` rigid
links. :func:`unsupported_reason` says why a world cannot use them (too many links,
rope or compliant links, redundant links, float32); :func:`check` raises
:class:`ConstraintMethodError` with that sentence, and the world keeps XPBD.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import backend
from .constraints import ROPE
from .integrators import INTEGRATORS, get_integrator

#: The most rigid links a world may have for "lagrange" and "rattle". Measured (2-core
#: Xeon, compiled): a 300-link chain costs 2.6 ms a frame of 10 RATTLE substeps and 3.1
#: ms with RK4, a double pendulum 0.3 ms; without numba the solve is dense, ~1.5 ms each.
MAX_LINKS = 300


class ConstraintMethodError(ValueError):
    """A world cannot use a constraint method; the message says why, in one sentence a
    window can show, ending "; it keeps XPBD" (``reason``: without that ending). The
    world is unchanged (it keeps its method, normally XPBD)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}; it keeps XPBD")


@dataclass(frozen=True)
class ConstraintMethod:
    """One way to solve the distance constraints, as the HUD and the panel list it.

    ``symplectic_with``: the integrators with which the combination is a symplectic map
    at a fixed step (empty: with none).
    """

    name: str
    label: str
    description: str
    symplectic_with: tuple[str, ...] = ()


#: Every constraint method, in the order a hotkey cycles through them.
CONSTRAINT_METHODS: dict[str, ConstraintMethod] = {m.name: m for m in (
    ConstraintMethod("xpbd", "XPBD",
                     "positions projected after each step: the solver, not the integrator, "
                     "decides the motion, and it damps like implicit Euler"),
    ConstraintMethod("lagrange", "Lagrange multipliers",
                     "constraint forces inside a(x, v): every integrator integrates the "
                     "constrained equations, with a projection against drift"),
    ConstraintMethod("rattle", "RATTLE / SHAKE",
                     "the symplectic constrained integrators: energy bounded, links held to "
                     "a tolerance",
                     tuple(name for name, integ in INTEGRATORS.items() if integ.constrained_form)),
)}


@dataclass(frozen=True)
class Combination:
    """What a world's constraint method and integrator amount to, for the HUD.

    ``scheme`` names what actually runs ("RATTLE", "SHAKE", "Lagrange + RK4", "XPBD");
    ``symplectic`` is True when the combination is a symplectic map at a fixed step;
    ``note`` is one short sentence (why not, or what changed), or "".
    """

    method: str
    integrator: str
    scheme: str
    symplectic: bool
    note: str = ""

    @property
    def hud(self) -> str:
        """One HUD line: ``constraints: RATTLE, symplectic``."""
        kind = "symplectic" if self.symplectic else "not symplectic"
        return f"constraints: {self.scheme}, {kind}"


def describe(method: str, integrator, rigid_links: bool = True) -> Combination:
    """The :class:`Combination` of ``method`` and ``integrator`` (a name or an
    :class:`~sandbox.sim.integrators.Integrator`). Without rigid links the method does
    nothing and the integrator alone decides (``rigid_links=False``)."""
    integ = get_integrator(integrator)
    name = integ.name
    if method not in CONSTRAINT_METHODS:
        raise ValueError(f"unknown constraint method {method!r}; valid: "
                         f"{', '.join(CONSTRAINT_METHODS)}")
    if not rigid_links:
        return Combination(method, name, integ.label, integ.symplectic, "no rigid links")
    if method == "xpbd":
        return Combination(method, name, "XPBD", False,
                           "the projection decides the motion and damps it")
    if method == "rattle" and integ.constrained_form:
        return Combination(method, name, integ.constrained_label or integ.constrained_form, True,
                           "" if integ.order_variable == integ.order else
                           "symplectic at a fixed step")
    note = (f"{integ.label} has no symplectic constrained form: Lagrange multipliers"
            if method == "rattle" else "")
    return Combination(method, name, f"Lagrange + {integ.label}", False, note)


@dataclass(frozen=True)
class Options:
    """How the Lagrange and RATTLE solvers work.

    ``tol``: relative length error ``|L - rest| / rest`` the Newton iterations stop at
    (and that the projection guarantees). ``stabilise`` (Lagrange mode): "projection"
    (positions and velocities projected onto the constraints after every step),
    "baumgarte" (``- 2/tau dg/dt - g/tau^2`` in the multiplier equation, ``tau =
    baumgarte_time`` s) or "none" (the drift grows like the integrator's error).
    """

    tol: float = 1e-10
    max_iter: int = 30
    stabilise: str = "projection"
    baumgarte_time: float = 0.05

    def __post_init__(self):
        if self.stabilise not in ("projection", "baumgarte", "none"):
            raise ValueError("stabilise must be 'projection', 'baumgarte' or 'none'")
        if not (self.tol > 0 and self.max_iter >= 1 and self.baumgarte_time > 0):
            raise ValueError("tol and baumgarte_time must be > 0 and max_iter >= 1")


# --------------------------------------------------------------------------- the links

@backend.njit(cache=True, fastmath=False, error_model="numpy")
def _band_solve(band, p, b):  # pragma: no cover - compiled
    """``A^-1 b`` for a band matrix, ``band[r, p + c - r] = A[r, c]`` for ``|c - r| <=
    p``: Gaussian elimination without pivoting (``J W J^T`` is symmetric positive
    definite; SHAKE's ``J(x) W J(x_n)^T`` is close to it), ``O(m p^2)``."""
    m = b.size
    a = band.copy()
    x = b.copy()
    for k in range(m):
        piv = a[k, p]
        for r in range(k + 1, min(k + p + 1, m)):
            f = a[r, p + k - r] / piv
            if f != 0.0:
                for c in range(k + 1, min(k + p + 1, m)):
                    a[r, p + c - r] -= f * a[k, p + c - k]
                x[r] -= f * x[k]
    for k in range(m - 1, -1, -1):
        s = x[k]
        for c in range(k + 1, min(k + p + 1, m)):
            s -= a[k, p + c - k] * x[c]
        x[k] = s / a[k, p]
    return x


@backend.njit(cache=True, fastmath=False, error_model="numpy")
def _diff_into(out, x, i, j):  # pragma: no cover - compiled
    for k in range(i.size):
        out[k, 0] = x[j[k], 0] - x[i[k], 0]
        out[k, 1] = x[j[k], 1] - x[i[k], 1]


@backend.njit(cache=True, fastmath=False, error_model="numpy")
def _band_matrix(d, e, rows, cols, gains, flat, m, width):  # pragma: no cover
    band = np.zeros(m * width)
    for t in range(rows.size):
        r = rows[t]
        c = cols[t]
        band[flat[t]] += gains[t] * (d[r, 0] * e[c, 0] + d[r, 1] * e[c, 1])
    return band.reshape((m, width))


@backend.njit(cache=True, fastmath=False, error_model="numpy")
def _spread_into(out, lam, e, i, j, w, sign):  # pragma: no cover - compiled
    """``out += sign * W J^T lam`` with ``J`` the rows ``e``."""
    for k in range(i.size):
        fx = sign * lam[k] * e[k, 0]
        fy = sign * lam[k] * e[k, 1]
        a = i[k]
        b = j[k]
        out[b, 0] += w[b] * fx
        out[b, 1] += w[b] * fy
        out[a, 0] -= w[a] * fx
        out[a, 1] -= w[a] * fy


class Band(NamedTuple):
    """The links' system as the compiled solvers read it (:meth:`RigidLinks.band`: a
    plain tuple of these fields, in this order, which numba types from its C fast
    path; unpacked at each kernel's top).

    ``i``, ``j``     int64 (m,): each link's particles, body by body
    ``rest2``        float64 (m,): the rest lengths squared
    ``w``            float64 (n,): the inverse masses
    ``rows``, ``cols``, ``gains``
                     the entries ``(r, c, gain)`` of ``J W J^T`` (``gain d_r . e_c``)
    ``flat``         int64: each entry's place in the band storage, flattened
    ``p``, ``width``  int: the half-width of the band and ``2 p + 1``
    """

    i: np.ndarray
    j: np.ndarray
    rest2: np.ndarray
    w: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    gains: np.ndarray
    flat: np.ndarray
    p: int
    width: int


@backend.njit(cache=True, fastmath=False, error_model="numpy")
def _project_positions(x, direction, fixed, band, tol,
                       max_iter):  # pragma: no cover - compiled
    """:meth:`RigidLinks.project_positions` in one call (``band``: :class:`Band`'s
    fields); returns the iterations."""
    i, j, rest2, w, rows, cols, gains, flat, p, width = band
    m = i.size
    d = np.empty((m, 2))
    e = np.empty((m, 2))
    rhs = np.empty(m)
    if fixed:
        _diff_into(e, direction, i, j)
    for it in range(max_iter):
        _diff_into(d, x, i, j)
        done = True
        for k in range(m):
            g = 0.5 * (d[k, 0] * d[k, 0] + d[k, 1] * d[k, 1] - rest2[k])
            rhs[k] = -g
            r = g / rest2[k]
            if not abs(r) <= tol:
                done = False
            if not np.isfinite(r):
                return it
        if done:
            return it
        if not fixed:
            e[:, :] = d
        delta = _band_solve(_band_matrix(d, e, rows, cols, gains, flat, m, width), p, rhs)
        _spread_into(x, delta, e, i, j, w, 1.0)
    return max_iter


@backend.njit(cache=True, fastmath=False, error_model="numpy")
def _project_velocities(x, v, band):  # pragma: no cover - compiled
    """:meth:`RigidLinks.project_velocities` in one call."""
    i, j, _, w, rows, cols, gains, flat, p, width = band
    m = i.size
    d = np.empty((m, 2))
    _diff_into(d, x, i, j)
    rhs = np.empty(m)
    for k in range(m):
        rhs[k] = (d[k, 0] * (v[j[k], 0] - v[i[k], 0])
                  + d[k, 1] * (v[j[k], 1] - v[i[k], 1]))
    mu = _band_solve(_band_matrix(d, d, rows, cols, gains, flat, m, width), p, rhs)
    _spread_into(v, mu, d, i, j, w, -1.0)


@backend.njit(cache=True, fastmath=False, error_model="numpy")
def _accel(a_free, x, v, band, k):  # pragma: no cover - compiled
    """:meth:`RigidLinks.accel` in one call, ``k`` Baumgarte's ``1 / tau``."""
    i, j, rest2, w, rows, cols, gains, flat, p, width = band
    m = i.size
    d = np.empty((m, 2))
    _diff_into(d, x, i, j)
    rhs = np.empty(m)
    for q in range(m):
        a = i[q]
        b = j[q]
        dvx = v[b, 0] - v[a, 0]
        dvy = v[b, 1] - v[a, 1]
        r = -(d[q, 0] * (a_free[b, 0] - a_free[a, 0])
              + d[q, 1] * (a_free[b, 1] - a_free[a, 1]) + dvx * dvx + dvy * dvy)
        if k != 0.0:
            g = 0.5 * (d[q, 0] * d[q, 0] + d[q, 1] * d[q, 1] - rest2[q])
            r -= 2.0 * k * (d[q, 0] * dvx + d[q, 1] * dvy) + k * k * g
        rhs[q] = r
    lam = _band_solve(_band_matrix(d, d, rows, cols, gains, flat, m, width), p, rhs)
    out = a_free.copy()
    _spread_into(out, lam, d, i, j, w, 1.0)
    return out


class RigidLinks:
    """The rigid links of a world as the multiplier solver sees them.

    Links between two pinned particles are dropped (they constrain nothing). Links are
    coupled only where they share a *movable* particle, so ``J W J^T`` is block diagonal
    over connected bodies, and within a body sparse. The links are ordered body by body,
    each by its particles (:attr:`index` maps them back to the world's), which makes the
    matrix *banded* with half-width :attr:`p`: 0 for a cradle (five 1x1 blocks), 1 for
    pendulums and chains, about a row's links for a small grid. It is assembled straight
    into band storage (one ``bincount``) and solved by a compiled band elimination in
    ``O(m p^2)`` (numpy's dense solve when numba is absent or still compiling).
    """

    def __init__(self, i, j, rest, w) -> None:
        i = np.asarray(i, np.int64)
        j = np.asarray(j, np.int64)
        w = np.asarray(w, np.float64)
        self._band: tuple | None = None
        keep = np.flatnonzero((w[i] + w[j]) > 0)
        lo, hi = np.minimum(i[keep], j[keep]), np.maximum(i[keep], j[keep])
        body = self._bodies(lo, hi, w)
        order = np.lexsort((hi, lo, body))
        self.index = keep[order]                   # into the world's constraints
        self.i, self.j = i[self.index], j[self.index]
        self.rest = np.asarray(rest, np.float64)[self.index]
        self.rest2 = self.rest * self.rest
        self.w = w.copy()
        self.n = w.size
        m = self.m = self.i.size
        # Entries (r, c, gain) of J(x) W J(y)^T = gain * d_r . e_c: the diagonal
        # (w_i + w_j), and links r != c sharing a movable particle q: s_r s_c w_q
        # (s = -1 at a link's i end, +1 at its j end).
        rows, cols, gains = [np.arange(m)], [np.arange(m)], [w[self.i] + w[self.j]]
        ends = np.concatenate([self.i, self.j])
        link = np.concatenate([np.arange(m), np.arange(m)])
        sign = np.concatenate([-np.ones(m), np.ones(m)])
        mov = w[ends] > 0
        ends, link, sign = ends[mov], link[mov], sign[mov]
        srt = np.argsort(ends, kind="stable")
        ends, link, sign = ends[srt], link[srt], sign[srt]
        for grp in np.split(np.arange(ends.size), np.flatnonzero(np.diff(ends)) + 1):
            if grp.size > 1:
                a, b = np.meshgrid(grp, grp, indexing="ij")
                off = a != b
                a, b = a[off], b[off]
                rows.append(link[a])
                cols.append(link[b])
                gains.append(sign[a] * sign[b] * w[ends[a]])
        self.rows, self.cols = np.concatenate(rows), np.concatenate(cols)
        self.gains = np.concatenate(gains)
        self.p = p = int(np.max(np.abs(self.rows - self.cols))) if m else 0
        self.width = 2 * p + 1
        self.flat = self.rows * self.width + p + self.cols - self.rows
        # W J^T lam scattered as one bincount over the flat (n, 2) array.
        jj, ii = 2 * self.j, 2 * self.i
        self.scatter = np.concatenate([jj, jj + 1, ii, ii + 1])
        self.w2 = np.repeat(w, 2)

    @staticmethod
    def _bodies(lo, hi, w) -> np.ndarray:
        """A body number per link: links sharing a movable particle share a body."""
        m = lo.size
        parent = list(range(m))

        def root(a):
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        first: dict[int, int] = {}
        for k, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            for q in (a, b):
                if w[q] > 0:
                    if q in first:
                        ra, rb = root(first[q]), root(k)
                        if ra != rb:
                            parent[max(ra, rb)] = min(ra, rb)
                    else:
                        first[q] = k
        return np.array([root(k) for k in range(m)], np.int64)

    # --- the linear algebra --------------------------------------------------------------

    def diff(self, x: np.ndarray) -> np.ndarray:
        """``x_j - x_i`` per link, ``(m, 2)``."""
        return x[self.j] - x[self.i]

    def matrix(self, d: np.ndarray, e: np.ndarray | None = None) -> np.ndarray:
        """``J(x) W J(y)^T`` in band storage ``(m, 2p + 1)``, ``d = diff(x)``, ``e =
        diff(y)`` (``e = d``: the symmetric ``J W J^T``)."""
        e = d if e is None else e
        vals = self.gains * np.einsum("ij,ij->i", d[self.rows], e[self.cols])
        return np.bincount(self.flat, vals, minlength=self.m * self.width).reshape(
            self.m, self.width)

    def dense(self, band: np.ndarray) -> np.ndarray:
        """A band matrix as a dense ``(m, m)`` array."""
        A = np.zeros((self.m, self.m))
        r = np.repeat(np.arange(self.m), self.width)
        c = r + np.tile(np.arange(self.width), self.m) - self.p
        ok = (c >= 0) & (c < self.m)
        A[r[ok], c[ok]] = band.ravel()[ok]
        return A

    def solve(self, band: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``A^-1 b`` for ``A`` in band storage."""
        if self.p == 0:
            return b / band[:, 0]
        if backend.compiled("auto"):
            return _band_solve(band, self.p, b)
        return np.linalg.solve(self.dense(band), b)

    def spread(self, lam: np.ndarray, e: np.ndarray) -> np.ndarray:
        """``W J^T lam`` with ``J`` the rows ``e``: ``(n, 2)`` displacement or acceleration."""
        f = (e * lam[:, None]).T.ravel()            # x components, then y
        out = np.bincount(self.scatter, np.concatenate([f, -f]), minlength=2 * self.n)
        out *= self.w2
        return out.reshape(self.n, 2)

    def residual(self, x: np.ndarray, d: np.ndarray | None = None) -> np.ndarray:
        """``g / rest^2 = (L^2 - rest^2) / (2 rest^2)``: the relative length error to first
        order, per link."""
        d = self.diff(x) if d is None else d
        return (np.einsum("ij,ij->i", d, d) - self.rest2) / (2.0 * self.rest2)

    def rank_deficit(self, x: np.ndarray) -> int:
        """How many links are redundant at ``x`` (``J W J^T`` singular): 0 if none."""
        if not self.m:
            return 0
        A = self.dense(self.matrix(self.diff(x))) / np.sqrt(np.outer(self.rest2, self.rest2))
        s = np.linalg.svd(A, compute_uv=False)
        return int(np.sum(s < 1e-9 * s.max()))

    # --- the solvers ---------------------------------------------------------------------

    #: One of ``backend.BACKENDS`` for the solvers below: "auto" (compiled when the
    #: kernels may run), "compiled", or "numpy" (the reference; the tests compare the
    #: two). :meth:`solve` follows "auto" whatever this says.
    backend = "auto"

    def _kernels(self) -> bool:
        return backend.compiled(self.backend)

    def band(self) -> tuple:
        """The fields of :class:`Band`, one plain tuple kept for these links."""
        if self._band is None:
            self._band = (self.i, self.j, self.rest2, self.w, self.rows, self.cols,
                          self.gains, self.flat, self.p, self.width)
        return self._band

    def accel(self, a_free: np.ndarray, x: np.ndarray, v: np.ndarray,
              baumgarte: float = 0.0) -> np.ndarray:
        """The constrained acceleration ``a_f + W J^T lam`` at ``(x, v)``; ``baumgarte``
        is ``1/tau`` (0: none)."""
        if not self.m:
            return a_free
        if self._kernels():
            return _accel(np.asarray(a_free, np.float64), x, v, self.band(),
                          float(baumgarte))
        d = self.diff(x)
        dv = v[self.j] - v[self.i]
        da = a_free[self.j] - a_free[self.i]
        rhs = -(np.einsum("ij,ij->i", d, da) + np.einsum("ij,ij->i", dv, dv))
        if baumgarte:
            g = 0.5 * (np.einsum("ij,ij->i", d, d) - self.rest2)
            rhs -= 2.0 * baumgarte * np.einsum("ij,ij->i", d, dv) + baumgarte ** 2 * g
        lam = self.solve(self.matrix(d), rhs)
        return a_free + self.spread(lam, d)

    def project_positions(self, x: np.ndarray, direction: np.ndarray | None = None,
                          tol: float = 1e-10, max_iter: int = 30) -> int:
        """Move ``x`` in place onto ``g = 0`` to the relative length error ``tol``, along
        ``W J(direction)^T`` (SHAKE: the positions at the start of the step) or, with
        ``direction=None``, along ``W J(x)^T`` (the mass-weighted closest point). Newton
        on the multipliers; returns the iterations taken (0: already within ``tol``)."""
        if not self.m:
            return 0
        if self._kernels():
            fixed = direction is not None
            return _project_positions(x, direction if fixed else x, fixed, self.band(),
                                      float(tol), int(max_iter))
        e = None if direction is None else self.diff(direction)
        for it in range(max_iter):
            d = self.diff(x)
            r = self.residual(x, d)
            if np.all(np.abs(r) <= tol) or not np.isfinite(r).all():
                return it
            ee = d if e is None else e
            delta = self.solve(self.matrix(d, ee), -r * self.rest2)
            x += self.spread(delta, ee)
        return max_iter

    def project_velocities(self, x: np.ndarray, v: np.ndarray) -> None:
        """Remove from ``v`` (in place) its components along the links: ``J(x) v = 0``,
        the mass-weighted closest such velocity."""
        if not self.m:
            return
        if self._kernels():
            _project_velocities(x, v, self.band())
            return
        d = self.diff(x)
        dv = v[self.j] - v[self.i]
        mu = self.solve(self.matrix(d), np.einsum("ij,ij->i", d, dv))
        v -= self.spread(mu, d)


def warm_up() -> None:
    """Compile (or load from numba's disk cache) this module's kernels on a double
    pendulum of bare arrays: the warm-up's part "kernels" (``warmup._core``), which the
    solvers' "auto" follows. Without it the first switch to "lagrange" or "rattle" on a
    cold cache compiles in the frame (about 6 s here); with a warm cache a first call
    loads in ~0.1 s."""
    if not backend.runnable():
        return
    with backend.loading():
        rl = RigidLinks([0, 1], [1, 2], [1.0, 1.0], np.array([0.0, 1.0, 1.0]))
        x = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, -1.0]])
        v = np.array([[0.0, 0.0], [0.0, -1.0], [1.0, 0.0]])
        a = np.zeros_like(x)
        a[1:, 1] = -9.81
        for free in (a, a.copy()):             # the world's gravity field is read-only
            free.flags.writeable = free is not a
            rl.accel(free, x, v)
            rl.accel(free, x, v, 1.0)
        y = x + 0.01
        rl.project_positions(y)
        rl.project_positions(y, x)
        rl.project_velocities(x, v)


# --------------------------------------------------------------------------- the world

def unsupported_reason(world, method: str = "lagrange") -> str | None:
    """Why ``world`` cannot use ``method`` ("lagrange" or "rattle"), in one sentence, or
    None when it can ("xpbd" always can)."""
    if method not in CONSTRAINT_METHODS:
        return (f"unknown constraint method {method!r}; valid: "
                f"{', '.join(CONSTRAINT_METHODS)}")
    if method == "xpbd":
        return None
    label = CONSTRAINT_METHODS[method].label
    c, p = world.constraints, world.particles
    if p.x.dtype != np.float64:
        return f"{label} needs a float64 world (this one is {p.x.dtype})"
    if not len(c):
        return None
    live = (p.inv_mass[c.i] + p.inv_mass[c.j]) > 0
    m = int(live.sum())
    if m > MAX_LINKS:
        return (f"{label} is for small systems: this world has {m:,} links (at most "
                f"{MAX_LINKS})")
    if np.any(c.kind[live] == ROPE):
        return f"{label} holds rigid links only: rope links may go slack (an inequality)"
    if np.any(c.compliance[live] != 0):
        return f"{label} holds rigid links only: some links are compliant"
    if np.any(c.rest[live] <= 0):
        return f"{label} needs links of positive length"
    links = RigidLinks(c.i, c.j, c.rest, p.inv_mass)
    deficit = links.rank_deficit(p.x)
    if deficit:
        return (f"{label} needs independent links: {deficit} of these {m} are redundant "
                "(they over-constrain a body)")
    return None


def check(world, method: str) -> None:
    """Raise :class:`ConstraintMethodError` if ``world`` cannot use ``method``."""
    reason = unsupported_reason(world, method)
    if reason:
        raise ConstraintMethodError(reason)


def links(world) -> RigidLinks:
    """The world's :class:`RigidLinks`, rebuilt when its links or pins changed."""
    c, p = world.constraints, world.particles
    # Constraints replace their arrays on every change (add, cut, tear, load), never
    # write into them; pins change inv_mass in place. Holding the arrays keeps their
    # identity meaningful (and a deepcopy, the app's ghost, keeps it consistent).
    arrays = (c.i, c.j, c.rest)
    scratch = world.scratch                 # kept with the step's caches (pipeline.py)
    cache = scratch.rigid_links
    if (cache is None or any(a is not b for a, b in zip(cache[0], arrays, strict=True))
            or cache[1].n != p.n or not np.array_equal(cache[1].w, p.inv_mass)):
        cache = (arrays, RigidLinks(c.i, c.j, c.rest, p.inv_mass))
        scratch.rigid_links = cache
    return cache[1]


def options(world) -> Options:
    return getattr(world, "lagrange_options", None) or Options()


def uses_multipliers(world) -> bool:
    """True when the world's integrator runs the Lagrange-multiplier acceleration (mode
    "lagrange", or "rattle" with an integrator that has no RATTLE/SHAKE form)."""
    method = world.config.constraint_method
    return method == "lagrange" or (method == "rattle"
                                    and world.integrator.constrained_form is None)


def constrained_accel(world, rl: RigidLinks | None = None, opt: Options | None = None):
    """``accel(x, v)`` of the world with the links' multiplier forces in it; ``rl`` and
    ``opt``: the world's :func:`links` and :func:`options`, when already at hand."""
    rl = links(world) if rl is None else rl
    opt = options(world) if opt is None else opt
    k = 1.0 / opt.baumgarte_time if opt.stabilise == "baumgarte" else 0.0

    def accel(x, v):
        return rl.accel(world.accel(x, v), x, v, k)
    return accel


def start_accel(world):
    """The acceleration a world's integrator starts from: free under XPBD, constrained
    otherwise (article 001's eq. 2 then puts ``x_prev`` on the links to O(h^3))."""
    if world.config.constraint_method == "xpbd":
        return world.accel
    return constrained_accel(world)


def adopt(world) -> None:
    """Put a world that switches to Lagrange or RATTLE on its links: positions by
    projection to ``tol`` and velocities onto ``J v = 0`` (XPBD leaves a residual
    stretch and a velocity along the links)."""
    p = world.particles
    rl = links(world)
    opt = options(world)
    rl.project_positions(p.x, tol=opt.tol, max_iter=opt.max_iter)
    rl.project_velocities(p.x, p.v)
    p.a_valid = False


def _rattle(p, h, accel, rl, opt, integ) -> None:
    """RATTLE (velocity Verlet's constrained form); see the module docstring."""
    a = p.a if p.a_valid else accel(p.x, p.v)
    x0 = p.x.copy()
    x = x0 + h * p.v + (0.5 * h * h) * a
    rl.project_positions(x, x0, opt.tol, opt.max_iter)
    v_half = (x - x0) / h
    a_new = accel(x, v_half + (0.5 * h) * a)
    v = v_half + (0.5 * h) * a_new
    rl.project_velocities(x, v)
    p.x_prev, p.x, p.v = x0, x, v
    p.a, p.a_valid, p.h_prev = a_new, True, h


def _shake(p, h, accel, rl, opt, integ) -> None:
    """SHAKE: the position Verlet family's update (or symplectic Euler's) with the
    constraint force along ``J(x)^T`` fixed by ``g(x+) = 0``; the velocity estimate
    projected onto ``J v = 0``."""
    a = accel(p.x, p.v)
    x0 = p.x.copy()
    h_old = p.h_prev
    if integ.position_based:
        r, ca = integ.position_coefficients(h, h_old)
        back = x0 - p.x_prev
        x = x0 + r * back + ca * a
    else:                                            # symplectic Euler: x+ = x + h v+
        x = x0 + h * p.v + (h * h) * a
    rl.project_positions(x, x0, opt.tol, opt.max_iter)
    if integ.position_based:
        c1, c2 = integ.velocity_coefficients(h, h_old)
        v = (x - x0) * c1 - back * c2
    else:
        v = (x - x0) / h
    rl.project_velocities(x, v)
    p.x_prev, p.x, p.v = x0, x, v
    p.a, p.a_valid, p.h_prev = a, False, h


#: The constrained step of each form (an integrator's ``constrained_form``).
CONSTRAINED_STEPS = {"RATTLE": _rattle, "SHAKE": _shake}


class HeldLinks:
    """The links as "lagrange" and "rattle" hold them, the links stage of a frame's
    substeps (``pipeline.substep``): inside the integrator's step (the multipliers'
    forces in ``a(x, v)``, or RATTLE / SHAKE), back onto them after the contacts and the
    hand in every pass (:meth:`hold`), the velocities projected onto them at the end
    (:meth:`settle`); with nothing else to correct, Lagrange's projection against drift
    (:meth:`stabilise`)."""

    #: The links are inside the step: its velocity is whole at once ("now"), and the
    #: contacts begin without the start velocities (no bounce at the time of impact).
    free_step = False
    corrects = False            # the step holds them: alone they leave nothing to solve
    project = None              # not a correction among the others: see hold

    def __init__(self, world) -> None:
        self.world, self.integrator = world, world.integrator
        self.links = links(world)
        self.options = options(world)
        self.multipliers = uses_multipliers(world)

    def integrate(self, p, hs: float, velocity: str = "now") -> None:
        """The integrator's constrained step of ``hs`` (its velocity made "now")."""
        integ, rl, opt = self.integrator, self.links, self.options
        if self.multipliers:
            accel = constrained_accel(self.world, rl, opt)
            if integ.defers_velocity:
                integ.step(p, hs, accel, velocity="now")
            else:
                integ.step(p, hs, accel)
        else:
            CONSTRAINED_STEPS[integ.constrained_form](p, hs, self.world.accel, rl, opt,
                                                      integ)

    def hold(self, x: np.ndarray) -> None:
        """Positions ``x`` back onto the links, to the tolerance."""
        self.links.project_positions(x, tol=self.options.tol,
                                     max_iter=self.options.max_iter)

    def settle(self, p) -> None:
        """The velocities onto the links (``J v = 0``)."""
        self.links.project_velocities(p.x, p.v)

    def stabilise(self, p, hs: float, h_old: float) -> None:
        """With the multipliers and ``stabilise="projection"``: positions and velocities
        onto the links against the integrator's drift (RATTLE and SHAKE hold them)."""
        if not (self.multipliers and self.options.stabilise == "projection"):
            return
        rl, opt, integ = self.links, self.options, self.integrator
        x_pred = p.x.copy()
        if rl.project_positions(p.x, tol=opt.tol, max_iter=opt.max_iter) and \
                integ.position_based:
            # The estimate v = c1 x+ + ... follows the corrected x+ (as fold does).
            p.v += (p.x - x_pred) * integ.velocity_coefficients(hs, h_old)[0]
        rl.project_velocities(p.x, p.v)

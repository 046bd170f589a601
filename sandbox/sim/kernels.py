"""The links' compiled kernels (numba): the XPBD sweep over runs of links, in parallel
batches (:func:`project_batches`), and a cloth's whole frame in one call
(:func:`verlet_frame`, on planar copies of the state: :mod:`.planar`), each mirroring a
numpy reference that the tests compare to. The
substep's other kernels are in :mod:`.step_kernels` (the Verlet step, the finite check,
the backup, point-mass gravity), the contact frame's one-thread sweep in
:mod:`.serial_links`; :func:`warm_up` compiles all but the latter (the contact warm-up
does).

numba is optional: without it (or while the app's warm-up compiles them) the callers keep
their numpy path, as ``backend.compiled`` tells them; the kernels are defined either way
(``backend.njit``: run as Python without numba). Kernels are compiled once and cached on
disk (``cache=True``), so the app does not pause on later starts. The arithmetic is
written in the same order as the numpy reference, so both agree bit for bit (the tests
check it, ``tests/test_kernels.py``).

What made them fast, measured on the 200x200 shear cloth (2-core Xeon): the XPBD sweep
vectorised over runs of links (0.65 -> 0.20 ms a pass), the Verlet step in place over
flat arrays (0.26 -> 0.04 ms a substep). What did not: float32 seeds refined by Newton
in place of the exact square root and division (slower: the conversions stop LLVM's
vectoriser), 512-bit vectors (no faster than 256 here), a scalar rest length per run.
Later (issue 13): the frame's copy keeps a cloth in a grid layout of four parity blocks
(``Constraints.grid_order``; cloth200 -20 %, shear -13 %), run kernels make their own
views (-4 %), runs of one inverse mass read it once (-5 %). Merging a cloth's row runs
into 2-D block rows did not pay (-1..+2 %). Then the even split (``Constraints``): a
rigid link between equal masses without the general form's inverse masses and products
(float32 200x200 cloth on one thread -25 %, float64 shear ~-20 %), and the runs of one
inverse mass found from a count of changes (0.21 -> 0.02 ms a frame). A scalar rest
length per run, tried a third time with the even split: within noise (0-5 %).
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from . import backend, cores
from .backend import njit, prange
from .planar import _rows_in, _rows_out, _values_in, copy_runs
from .step_kernels import (
    add_scaled_difference,
    all_finite,
    back_up,
    point_gravity,
    verlet_positions,
    verlet_step,
)

ROPE = 1
# Kernels compiled with ``_nrt=False`` only read and write the arrays they are given
# (none made, none returned): numba counts no references in them, which costs ~5 ns
# an array a call (``collide.jit.jit_borrow`` says more). The links' serial sweep of
# the compiled contact frame and its helpers are such kernels.

#: Modes of a row of a constraint plan (see ``Constraints.plan``) and its longest run.
GATHER, RUN_STRIDE, RUN_PAIRS, GATHER_SOFT = 0, 1, 2, 3
CHUNK = 1024


class LinkTable(NamedTuple):
    """The links as the sweeps of this module read them: ``Constraints.kernel_args``
    gives its fields, in this order, as a plain tuple (numba types a plain tuple from
    its C fast path, ~0.3 us a call for these seven arrays; a named one in Python, ~1.3
    us more); the compiled entries (:func:`_project_batches`, :func:`_verlet_frame`)
    make the record of it, which costs nothing inside them.

    ``ci``, ``cj``    int64 (m,): the linked particles (slots, in the frame's layout)
    ``rest``          float (m,): the rest lengths, m
    ``compliance``    float (m,): the compliances (0: rigid)
    ``kind``          int8 (m,): each link's kind (``ROPE`` pulls only)
    ``plan``          int64 (B, 6): the chunks, a row ``(mode, k0, n, i0, d, rope)``
                      (``Constraints._flat_batches``)
    ``offsets``       int64 (b + 1,): each batch's rows of ``plan``
    """

    ci: np.ndarray
    cj: np.ndarray
    rest: np.ndarray
    compliance: np.ndarray
    kind: np.ndarray
    plan: np.ndarray
    offsets: np.ndarray


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _even(L, hr, half, eps, taut):  # pragma: no cover - compiled
    """The even split's ``s`` (``Constraints`` docstring) for a link of length ``L``
    and half rest length ``hr``: ``half - hr / max(L, eps)`` (``half``, ``eps``:
    0.5 and 1e-12 in the positions' float type), not below 0 for a rope link
    (``taut`` False). Selects that keep a NaN, as numpy's ``maximum`` does; LLVM
    makes them max instructions."""
    se = half - hr / (eps if L < eps else L)
    zero = half - half
    return se if taut else (zero if se < zero else se)


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _rigid(dx, dy, r, wi, wj, taut, half, eps, one,
           zero):  # pragma: no cover - compiled
    """A rigid link's moves ``(xi, yi, xj, yj)`` of its ends, by the reference's
    test: the even split when ``wi == wj > 0``, else the general form (written
    ``x + (-a)`` for ``x - a``: the same bits). Both are computed and one selected,
    so a run of mixed inverse masses stays branch-free and vectorises (runs of one
    inverse mass take the even kernels and skip the general form)."""
    L = math.sqrt(dx * dx + dy * dy)
    C = L - r
    denom = wi + wj
    ok = (denom > 0) & (L > eps) & (taut | (C >= 0))
    s = -C / (denom * L if ok else one)
    s = s if ok else zero
    cx = s * dx
    cy = s * dy
    se = _even(L, r * half, half, eps, taut)
    even = (wi == wj) & (wi > zero)
    return ((se * dx) if even else -(wi * cx), (se * dy) if even else -(wi * cy),
            -(se * dx) if even else wj * cx, -(se * dy) if even else wj * cy)


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _same_w(wi, wj):  # pragma: no cover - compiled
    """The inverse mass shared by every particle of ``wi`` and ``wj`` when there is
    one and it is positive (the run takes the even split), else 0."""
    if wi.size == 0:
        return wi.dtype.type(0.0)
    w0 = wi[0]
    same = w0 > 0
    for t in range(wi.size):
        same &= (wi[t] == w0) & (wj[t] == w0)
    return w0 if same else wi.dtype.type(0.0)


@njit(cache=True, fastmath=False, inline="always")
def _project_one(x, w, t, inv_h2, lam, k):  # pragma: no cover - compiled
    """One XPBD projection of link ``k`` of the table ``t`` (:class:`LinkTable`; see
    ``Constraints.project_numpy``)."""
    ci = t.ci
    cj = t.cj
    rest = t.rest
    compliance = t.compliance
    kind = t.kind
    i = ci[k]
    j = cj[k]
    dx = x[j, 0] - x[i, 0]
    dy = x[j, 1] - x[i, 1]
    L = math.sqrt(dx * dx + dy * dy)
    at = compliance[k] * inv_h2
    wi = w[i]
    wj = w[j]
    if at == 0 and wi == wj and wi > 0:
        half = rest.dtype.type(0.5)
        se = _even(L, rest[k] * half, half, rest.dtype.type(1e-12), kind[k] != ROPE)
        x[i, 0] += se * dx
        x[i, 1] += se * dy
        x[j, 0] -= se * dx
        x[j, 1] -= se * dy
        return
    C = L - rest[k]
    if kind[k] == ROPE and C < 0:
        return
    denom = wi + wj + at
    if denom <= 0 or L <= rest.dtype.type(1e-12):
        return
    num = -C if at == 0 else -C - at * lam[k]   # rigid links never read lam
    s = num / (denom * L)
    lam[k] += s * L
    cx = s * dx
    cy = s * dy
    x[i, 0] -= wi * cx
    x[i, 1] -= wi * cy
    x[j, 0] += wj * cx
    x[j, 1] += wj * cy

# Runs: the links of a batch sorted by (j - i, i) fall into long runs where i steps
# by 1 (a row of vertical or diagonal cloth links, j = i + d) or by 2 with j = i + 1
# (horizontal links, every other rope link). Over a run the particles are addressed
# by offsets instead of index lists, and written so that LLVM vectorises the loops:
# positions as a flat array (a 2-D row length unknown at compile time reads to LLVM
# as a possible overlap between iterations) and views that start at the run
# (non-negative offsets: no wraparound selects). Only rigid links run here (stiff
# cloth, ropes): the compliant ones need their lambda and take the gather path.


@njit(cache=True, fastmath=False, error_model="numpy", _nrt=False)
def _run_stride(xi, xj, wi, wj, rest, taut):  # pragma: no cover - compiled
    """Rigid links between ``xi[t]`` and ``xj[t]`` (flat views of the positions of
    particles ``i0 + t`` and ``i0 + d + t``), with their inverse masses and rest.

    Its own function on purpose: with ``xi`` and ``xj`` as separate arguments LLVM
    checks at run time that they do not overlap and runs the vector loop (inlined,
    it sees one array at an unknown distance and gives up). When they do overlap
    (a run longer than ``d``) the scalar loop runs, link after link: still exact,
    since a batch's links share no particle.
    """
    # Constants in the positions' float type: a bare 1.0 would turn a float32
    # world's arithmetic into float64 (numpy keeps it float32: the reference).
    f = rest.dtype.type
    half, eps, one, zero = f(0.5), f(1e-12), f(1.0), f(0.0)
    if _same_w(wi, wj) > 0:
        for t in range(rest.size):
            dx = xj[2 * t] - xi[2 * t]
            dy = xj[2 * t + 1] - xi[2 * t + 1]
            se = _even(math.sqrt(dx * dx + dy * dy), rest[t] * half, half, eps, taut)
            xi[2 * t] += se * dx
            xi[2 * t + 1] += se * dy
            xj[2 * t] -= se * dx
            xj[2 * t + 1] -= se * dy
        return
    for t in range(rest.size):
        ax, ay, bx, by = _rigid(xj[2 * t] - xi[2 * t], xj[2 * t + 1] - xi[2 * t + 1],
                                rest[t], wi[t], wj[t], taut, half, eps, one, zero)
        xi[2 * t] += ax
        xi[2 * t + 1] += ay
        xj[2 * t] += bx
        xj[2 * t + 1] += by


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _run_pairs(x, w, rest, k0, n, i0, rope):  # pragma: no cover - compiled
    """Rigid links ``(i0 + 2t, i0 + 2t + 1)``: each owns four consecutive numbers
    (the loop is ``_pairs_serial``'s, called on the run's views)."""
    _pairs_serial(x.reshape(-1)[2 * i0:2 * i0 + 4 * n], w[i0:i0 + 2 * n],
                  rest[k0:k0 + n], not rope)


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _chunk(x, w, t, rest, inv_h2, lam, c):  # pragma: no cover - compiled
    """Chunk ``c`` of the plan of ``t`` (:class:`LinkTable`): a run or a gather.
    ``rest`` is ``t.rest``, read by the caller outside its parallel loop: sliced
    here from a field read inside it, numba's array analysis gives the slice's
    length a variable that every worker writes (a ``NumbaParallelSafetyWarning``)."""
    plan = t.plan
    mode, k0, n, i0, d, rope = (plan[c, 0], plan[c, 1], plan[c, 2], plan[c, 3],
                                plan[c, 4], plan[c, 5] != 0)
    if mode == RUN_PAIRS:
        _run_pairs(x, w, rest, k0, n, i0, rope)
    elif mode == RUN_STRIDE:
        xf = x.reshape(-1)
        j0 = i0 + d
        _run_stride(xf[2 * i0:2 * (i0 + n)], xf[2 * j0:2 * (j0 + n)], w[i0:i0 + n],
                    w[j0:j0 + n], rest[k0:k0 + n], not rope)
    else:
        for k in range(k0, k0 + n):
            _project_one(x, w, t, inv_h2, lam, k)


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _sweep(x, w, t, inv_h2, lam, min_parallel):  # pragma: no cover - compiled
    """The batches of ``t`` (:class:`LinkTable`) in order, each chunk by chunk."""
    offsets = t.offsets
    rest = t.rest
    m = t.plan[:, 2]
    for b in range(offsets.size - 1):
        lo, hi = offsets[b], offsets[b + 1]
        links = 0
        for c in range(lo, hi):
            links += m[c]
        if links >= min_parallel and hi - lo > 1:
            for c in prange(lo, hi):
                _chunk(x, w, t, rest, inv_h2, lam, c)
        else:
            for c in range(lo, hi):
                _chunk(x, w, t, rest, inv_h2, lam, c)


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def _project_batches(x, w, links, inv_h2, lam, min_parallel):  # pragma: no cover - compiled
    """XPBD sweep over the chunks of the links' plan, batch after batch (``links``:
    the fields of a :class:`LinkTable`, a plain tuple; ``offsets`` bound each
    batch's rows of ``plan``; see ``Constraints._flat_batches``).

    Batches run in order. A batch shares no particle, so any order within it gives
    the numpy reference's numbers bit for bit (tested); batches of at least
    ``min_parallel`` links spread their chunks over the cores (``prange``), smaller
    ones run in one thread, where starting threads would cost more than it saves.
    One kernel with a switch and not a serial twin: in a plain ``njit`` loop the
    inlined helpers ran up to 9x slower.
    """
    _sweep(x, w, LinkTable(*links), inv_h2, lam, min_parallel)

# The compiled frame works on planar copies of the positions (all x, then all y):
# over a run the x and y of consecutive particles are then consecutive numbers, which
# LLVM loads as whole vectors instead of unpicking interleaved pairs. Same arithmetic
# per link as above, so the same bits; the copies in and out cost ~0.1 ms a frame of
# the 200x200 cloth, the planar sweep saves ~1/3 of it.


@njit(cache=True, fastmath=False, error_model="numpy")
def _stride_planar(X, Y, W, rest, i0, j0, k0, n, taut):  # pragma: no cover - compiled
    """``_run_stride`` on planar positions: links ``k0 + t`` between slots ``i0 + t``
    and ``j0 + t``. Whole arrays in, views made here: the views that ``_chunk_planar``
    made and passed cost ~20 ns more a run (their reference counts and a call of
    eight arrays), ~30 % of the sweep of runs of 32 links. LLVM checks at run time
    that the views of ``i0`` and ``j0`` do not overlap and takes the vector loop."""
    xa = X[i0:i0 + n]
    ya = Y[i0:i0 + n]
    xb = X[j0:j0 + n]
    yb = Y[j0:j0 + n]
    wi = W[i0:i0 + n]
    wj = W[j0:j0 + n]
    rs = rest[k0:k0 + n]
    f = rest.dtype.type
    half, eps, one, zero = f(0.5), f(1e-12), f(1.0), f(0.0)
    for t in range(n):
        ax, ay, bx, by = _rigid(xb[t] - xa[t], yb[t] - ya[t], rs[t], wi[t], wj[t], taut,
                                half, eps, one, zero)
        xa[t] += ax
        ya[t] += ay
        xb[t] += bx
        yb[t] += by


@njit(cache=True, fastmath=False, error_model="numpy")
def _stride_planar_even(X, Y, rest, hr, i0, j0, k0, n,
                        taut):  # pragma: no cover - compiled
    """``_stride_planar`` for a run whose particles all have one positive inverse
    mass: every link the even split, no inverse masses read, no general form
    computed (the 200x200 cloth's sweep in float32 -25 %). ``hr``: half the rest
    length all its links share (``run_rests``), read once; NaN: each link's own.
    The 200x200 shear cloth's rest lengths are 0.6 MB in float32, twice its
    positions: read every pass, they pushed the positions out of the core's cache
    (a sweep 13-15 % slower). The test of ``hr`` is the same for every link: LLVM
    makes two loops of this one."""
    xa = X[i0:i0 + n]
    ya = Y[i0:i0 + n]
    xb = X[j0:j0 + n]
    yb = Y[j0:j0 + n]
    rs = rest[k0:k0 + n]
    half, eps = rest.dtype.type(0.5), rest.dtype.type(1e-12)
    shared = hr == hr
    for t in range(n):
        dx = xb[t] - xa[t]
        dy = yb[t] - ya[t]
        se = _even(math.sqrt(dx * dx + dy * dy), hr if shared else rs[t] * half, half,
                   eps, taut)
        xa[t] += se * dx
        ya[t] += se * dy
        xb[t] -= se * dx
        yb[t] -= se * dy


@njit(cache=True, fastmath=False, error_model="numpy")
def run_rests(plan, rest):  # pragma: no cover - compiled
    """Per row of ``plan``: half the rest length of a ``RUN_STRIDE`` run whose links
    all have the same one (``rest[k] * 0.5``, as the kernels compute it), else NaN
    (other rows, and runs of several lengths or a NaN one)."""
    out = np.empty(plan.shape[0], rest.dtype)
    half = rest.dtype.type(0.5)
    for c in range(plan.shape[0]):
        out[c] = np.nan
        mode, k0, m = plan[c, 0], plan[c, 1], plan[c, 2]
        if mode != RUN_STRIDE or m == 0:
            continue
        r0 = rest[k0]
        same = True
        for k in range(k0, k0 + m):
            same &= rest[k] == r0
        if same:
            out[c] = r0 * half
    return out


@njit(cache=True, fastmath=False, error_model="numpy")
def _uniform_runs(W, plan, out):  # pragma: no cover - compiled
    """``out[c]``: the inverse mass of every particle of run ``c`` of ``plan``
    (``RUN_STRIDE`` or ``RUN_PAIRS``) when they all have the same one and it is
    positive, else 0 (gathered rows: 0). Once a frame: the runs that are 1 take
    the even split without looking at the masses again.

    One pass counts the changes of ``W`` from slot to slot; a run of slots holds
    one value when the count does not move over it. Testing each run's slots
    instead read every link's two ends: 0.21 ms a frame of the 200x200 shear cloth
    against 0.02 ms now. A NaN counts as a change (``!=``)."""
    n = W.size
    changes = np.empty(n, np.int32)
    count = 0
    if n:
        changes[0] = 0
    for k in range(1, n):
        count += W[k] != W[k - 1]
        changes[k] = count
    for c in range(plan.shape[0]):
        out[c] = 0
        mode, m, i0 = plan[c, 0], plan[c, 2], plan[c, 3]
        if mode != RUN_STRIDE and mode != RUN_PAIRS:
            continue
        w0 = W[i0]
        if not w0 > 0:
            continue
        if mode == RUN_PAIRS:           # slots i0 .. i0 + 2m, side by side
            if changes[i0 + 2 * m - 1] == changes[i0]:
                out[c] = w0
            continue
        j0 = i0 + plan[c, 4]
        if (W[j0] == w0 and changes[i0 + m - 1] == changes[i0]
                and changes[j0 + m - 1] == changes[j0]):
            out[c] = w0


@njit(cache=True, fastmath=False, error_model="numpy")
def _pairs_planar(X, Y, W, rest, i0, k0, n, taut,
                  even):  # pragma: no cover - compiled
    """``_run_pairs`` on planar positions: links ``k0 + t`` between slots
    ``i0 + 2t`` and ``i0 + 2t + 1`` (views made here, as in ``_stride_planar``);
    ``even``: all of them have one positive inverse mass (``_uniform_runs``)."""
    q = X[i0:i0 + 2 * n]
    r = Y[i0:i0 + 2 * n]
    ww = W[i0:i0 + 2 * n]
    rs = rest[k0:k0 + n]
    f = rest.dtype.type
    half, eps, one, zero = f(0.5), f(1e-12), f(1.0), f(0.0)
    if even:
        for t in range(n):
            dx = q[2 * t + 1] - q[2 * t]
            dy = r[2 * t + 1] - r[2 * t]
            se = _even(math.sqrt(dx * dx + dy * dy), rs[t] * half, half, eps, taut)
            q[2 * t] += se * dx
            r[2 * t] += se * dy
            q[2 * t + 1] -= se * dx
            r[2 * t + 1] -= se * dy
        return
    for t in range(n):
        xa = q[2 * t]
        xb = q[2 * t + 1]
        ya = r[2 * t]
        yb = r[2 * t + 1]
        ax, ay, bx, by = _rigid(xb - xa, yb - ya, rs[t], ww[2 * t], ww[2 * t + 1], taut,
                                half, eps, one, zero)
        q[2 * t] = xa + ax
        r[2 * t] = ya + ay
        q[2 * t + 1] = xb + bx
        r[2 * t + 1] = yb + by


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _gather_planar(X, Y, w, t, inv_h2, lam, k0, n):  # pragma: no cover - compiled
    """``_project_one`` for links ``k0 .. k0 + n`` of ``t`` on planar positions."""
    ci = t.ci
    cj = t.cj
    rest = t.rest
    compliance = t.compliance
    kind = t.kind
    eps, half = rest.dtype.type(1e-12), rest.dtype.type(0.5)
    for k in range(k0, k0 + n):
        i = ci[k]
        j = cj[k]
        dx = X[j] - X[i]
        dy = Y[j] - Y[i]
        L = math.sqrt(dx * dx + dy * dy)
        at = compliance[k] * inv_h2
        wi = w[i]
        wj = w[j]
        if at == 0 and wi == wj and wi > 0:
            se = _even(L, rest[k] * half, half, eps, kind[k] != ROPE)
            X[i] += se * dx
            Y[i] += se * dy
            X[j] -= se * dx
            Y[j] -= se * dy
            continue
        C = L - rest[k]
        if kind[k] == ROPE and C < 0:
            continue
        denom = wi + wj + at
        if denom <= 0 or L <= eps:
            continue
        num = -C if at == 0 else -C - at * lam[k]   # rigid links never read lam
        s = num / (denom * L)
        lam[k] += s * L
        cx = s * dx
        cy = s * dy
        X[i] -= wi * cx
        Y[i] -= wi * cy
        X[j] += wj * cx
        Y[j] += wj * cy


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _chunk_planar(X, Y, w, t, inv_h2, lam, uniform, hrest,
                  c):  # pragma: no cover - compiled
    """``_chunk`` on planar positions; ``uniform``, ``hrest``: the runs of one inverse
    mass and of one rest length (``_uniform_runs``, ``run_rests``)."""
    plan = t.plan
    rest = t.rest
    mode, k0, n, i0, d = plan[c, 0], plan[c, 1], plan[c, 2], plan[c, 3], plan[c, 4]
    taut = plan[c, 5] == 0
    if mode == RUN_PAIRS:
        _pairs_planar(X, Y, w, rest, i0, k0, n, taut, uniform[c] > 0)
    elif mode == RUN_STRIDE:
        if uniform[c] > 0:
            _stride_planar_even(X, Y, rest, hrest[c], i0, i0 + d, k0, n, taut)
        else:
            _stride_planar(X, Y, w, rest, i0, i0 + d, k0, n, taut)
    else:
        _gather_planar(X, Y, w, t, inv_h2, lam, k0, n)


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def _sweep_planar(X, Y, w, t, inv_h2, lam, uniform, hrest,
                  min_parallel):  # pragma: no cover - compiled
    """``_sweep`` on planar positions (``_chunk_planar``)."""
    offsets = t.offsets
    m = t.plan[:, 2]
    for b in range(offsets.size - 1):
        lo, hi = offsets[b], offsets[b + 1]
        links = 0
        for c in range(lo, hi):
            links += m[c]
        if links >= min_parallel and hi - lo > 1:
            for c in prange(lo, hi):
                _chunk_planar(X, Y, w, t, inv_h2, lam, uniform, hrest, c)
        else:
            for c in range(lo, hi):
                _chunk_planar(X, Y, w, t, inv_h2, lam, uniform, hrest, c)

@njit(cache=True, fastmath=False, error_model="numpy")
def _verlet_frame(bodies, links, solve, coef, layout):  # pragma: no cover - compiled
    """A whole frame of ``r.size`` substeps of a Verlet-family world whose only
    force is a fixed field ``a`` and whose only corrections are links: what
    ``pipeline.substep`` does, in one call instead of a few Python calls a substep.
    Its inputs, plain tuples (typed from numba's C fast path, ~0.3 us a call more
    than flat arguments)::

        bodies  (x, x_prev, v, a, w)   the particles' state, the field, inverse masses
        links   LinkTable's fields     in the layout's slots (below)
        solve   (inv_h2, lam, zero_lam, iterations, min_parallel)
        coef    (r, ca, c1, c2)        the integrator's per-substep ``r``, ``ca`` and
                                       the last substep's ``c1``, ``c2``
        layout  (perm, runs, hrest, planar)

    Per substep ``s``: the position step (``verlet_positions``; the last substep as
    ``verlet_step`` with ``c1 = 0``, "later"), ``lam`` zeroed if ``zero_lam``,
    ``iterations`` sweeps (``_sweep_planar``, the one parallel kernel: the frame's own
    loops run on the calling thread, and compile without numba's parallel passes); then
    ``v += (x - x_prev) * c1``
    (``add_scaled_difference``). The same stages in the same order as
    ``pipeline.substep`` (integrate, solve, fold), so the same bits (tested).
    ``planar (9, n)`` is scratch: the frame runs on planar copies of ``x``,
    ``x_prev``, ``a``, ``w`` and ``v`` and writes ``x``, ``x_prev`` and ``v`` back at
    the end. ``perm``: particle ``k`` sits in slot ``perm[k]`` of the copies, and the
    links address slots (``Constraints.frame_batches``: grids in parity order);
    empty, slot ``k`` is particle ``k``; ``runs`` is ``copy_runs(perm, n)``, what the
    copies in and out follow; ``hrest`` is ``run_rests(plan, rest)``. Each
    substep's arithmetic is per particle and per link, so the slots change no bit.
    Returns True; False, with ``x``, ``x_prev`` and ``v`` left as they were, when
    some number of the result is not finite (what ``all_finite`` would say of what
    it would have written): a world that steps this way needs no backup.
    """
    x, x_prev, v, a, w = bodies
    t = LinkTable(*links)
    inv_h2, lam, zero_lam, iterations, min_parallel = solve
    r, ca, c1, c2 = coef
    perm, runs, hrest, planar = layout
    n = x.shape[0]
    X, Y, PX, PY, AX, AY = (planar[0], planar[1], planar[2], planar[3], planar[4],
                            planar[5])
    W, VX, VY = planar[6], planar[7], planar[8]
    _rows_in(x, X, Y, runs)
    _rows_in(x_prev, PX, PY, runs)
    _rows_in(a, AX, AY, runs)
    _values_in(w, W, runs)
    # Runs whose particles share one inverse mass (fixed within a frame) take the
    # even split without reading them (``_stride_planar_even``, ``_pairs_planar``).
    uniform = np.empty(t.plan.shape[0], W.dtype)
    _uniform_runs(W, t.plan, uniform)
    zero = c1 - c1
    steps = r.size
    for s in range(steps):
        rs = r[s]
        cas = ca[s]
        # New positions over the old ones, then the two swap roles (no copy).
        if s == steps - 1:
            for k in range(n):
                back = X[k] - PX[k]
                xn = AX[k] * cas + X[k] + back * rs
                VX[k] = (xn - X[k]) * zero + -(back * c2)
                PX[k] = xn
            for k in range(n):
                back = Y[k] - PY[k]
                yn = AY[k] * cas + Y[k] + back * rs
                VY[k] = (yn - Y[k]) * zero + -(back * c2)
                PY[k] = yn
        else:
            for k in range(n):
                PX[k] = AX[k] * cas + X[k] + (X[k] - PX[k]) * rs
            for k in range(n):
                PY[k] = AY[k] * cas + Y[k] + (Y[k] - PY[k]) * rs
        X, PX = PX, X
        Y, PY = PY, Y
        if zero_lam:        # a loop, not ``lam[:] = 0`` (see ``planar._values_in``)
            for k in range(lam.size):
                lam[k] = 0
        for _ in range(iterations):
            _sweep_planar(X, Y, W, t, inv_h2, lam, uniform, hrest, min_parallel)
    if steps == 0:                      # no substep wrote the velocity copy
        _rows_in(v, VX, VY, runs)
    # The finished velocity is finite exactly when the positions, the positions
    # before and the velocity all are (a non-finite term makes it non-finite; a
    # finite sum that overflows is a non-finite velocity): counted as it is made.
    bad = 0
    for q in range(n):
        u = (X[q] - PX[q]) * c1 + VX[q]
        VX[q] = u
        bad += (u - u) != 0
    for q in range(n):
        u = (Y[q] - PY[q]) * c1 + VY[q]
        VY[q] = u
        bad += (u - u) != 0
    if bad:
        return False
    _rows_out(x, X, Y, runs)
    _rows_out(x_prev, PX, PY, runs)
    _rows_out(v, VX, VY, runs)
    return True

@njit(cache=True, fastmath=False, error_model="numpy", _nrt=False)
def _pairs_serial(q, ww, rest, taut):  # pragma: no cover - compiled
    """``_run_pairs`` on the flat positions ``q`` from particle ``i0`` (four
    numbers a link) and their inverse masses ``ww``, not inlined."""
    f = rest.dtype.type
    half, eps, one, zero = f(0.5), f(1e-12), f(1.0), f(0.0)
    if _same_w(ww, ww) > 0:
        for t in range(rest.size):
            dx = q[4 * t + 2] - q[4 * t]
            dy = q[4 * t + 3] - q[4 * t + 1]
            se = _even(math.sqrt(dx * dx + dy * dy), rest[t] * half, half, eps, taut)
            q[4 * t] += se * dx
            q[4 * t + 1] += se * dy
            q[4 * t + 2] -= se * dx
            q[4 * t + 3] -= se * dy
        return
    for t in range(rest.size):
        xa = q[4 * t]
        ya = q[4 * t + 1]
        xb = q[4 * t + 2]
        yb = q[4 * t + 3]
        ax, ay, bx, by = _rigid(xb - xa, yb - ya, rest[t], ww[2 * t], ww[2 * t + 1], taut,
                                half, eps, one, zero)
        q[4 * t] = xa + ax
        q[4 * t + 1] = ya + ay
        q[4 * t + 2] = xb + bx
        q[4 * t + 3] = yb + by

_planar: dict = {}
_NO_PERM = np.zeros(0, np.int64)
_derived: dict = {}


def _kept(make, a, b):
    """``make(a, b)``, kept while ``a`` and ``b`` are the same objects (the links'
    frame tables keep theirs; they are held here, so their ids are not reused), or
    for an int ``b`` the same number: ``copy_runs(perm, n)``, ``run_rests(plan,
    rest)``. ~0.5 us a call (a general form with ``*args``: 4)."""
    key = (make, id(a), b if type(b) is int else id(b))
    hit = _derived.get(key)
    if hit is not None and hit[0] is a and (type(b) is int or hit[1] is b):
        return hit[2]
    if len(_derived) > 16:
        _derived.clear()
    out = make(a, b)
    _derived[key] = (a, b, out)
    return out


def project_batches(x, w, links, inv_h2, lam, min_parallel) -> None:
    """``_project_batches`` (``links``: a :class:`LinkTable`'s fields) with the number
    of threads chosen by ``cores.POLICY`` when ``min_parallel`` lies between the two
    fixed ends: 1 (every batch over the cores) and ``2**62`` (one thread);
    ``Constraints.kernel_args`` gives such a threshold for its "auto" backend."""
    if not 1 < min_parallel < 2**62:
        _project_batches(x, w, links, inv_h2, lam, min_parallel)
        return
    m = links[0].size
    key = ("sweep", m, x.dtype.char)
    par = cores.POLICY.parallel(key, m)
    t0 = time.perf_counter()
    _project_batches(x, w, links, inv_h2, lam, min_parallel if par else 2**62)
    cores.POLICY.record(key, par, time.perf_counter() - t0)


def verlet_frame(bodies, links, solve, coef, perm=None) -> bool:
    """``_verlet_frame`` (its ``bodies``, ``links``, ``solve`` and ``coef``) with its
    planar scratch (kept per size and float type) and the threads chosen as in
    :func:`project_batches`; ``perm`` the slots of the particles in it (None or
    empty: their own order). Returns whether the frame was finite and written
    (False: ``x``, ``x_prev`` and ``v`` as they were)."""
    if perm is None:
        perm = _NO_PERM
    x = bodies[0]
    n = x.shape[0]
    skey = (n, x.dtype.char)
    planar = _planar.get(skey)
    if planar is None:
        if len(_planar) > 8:
            _planar.clear()
        planar = _planar[skey] = np.empty((9, n), x.dtype)
    inv_h2, lam, zero_lam, iterations, min_parallel = solve
    m = links[0].size
    auto = 1 < min_parallel < 2**62
    key = ("frame", m, n, x.dtype.char, coef[0].size, iterations)
    par = cores.POLICY.parallel(key, m) if auto else min_parallel == 1
    if auto:
        solve = (inv_h2, lam, zero_lam, iterations, min_parallel if par else 2**62)
    t0 = time.perf_counter()
    ok = _verlet_frame(bodies, links, solve, coef,
                       (perm, _kept(copy_runs, perm, n), _kept(run_rests, links[5], links[2]),
                        planar))
    if auto:
        cores.POLICY.record(key, par, time.perf_counter() - t0)
    return bool(ok)


def warm_up(dtypes=("float64", "float32")) -> None:
    """Compile (or load from the disk cache) every kernel of this module on a tiny
    problem, for worlds of the float types ``dtypes`` (``warmup.warm_up`` does the
    contact kernels too). From the cache well under a second; the first time ~10 s a
    float type on a 2-core machine."""
    if not backend.runnable():
        return
    for dtype in (np.dtype(d).type for d in dtypes):
        x = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], dtype)
        plan = np.array([[GATHER, 0, 1, 0, 1, 0], [RUN_PAIRS, 1, 1, 2, 1, 1],
                         [RUN_STRIDE, 2, 1, 1, 1, 0]], np.int64)
        links = (np.array([0, 2, 1]), np.array([1, 3, 2]), np.full(3, 0.5, dtype),
                 np.zeros(3, dtype), np.zeros(3, np.int8), plan, np.array([0, 2, 3]))
        _project_batches(x, np.ones(4, dtype), links, dtype(3600.0), np.zeros(3, dtype), 1)
        one = dtype(1.0)
        frozen = np.zeros_like(x)
        frozen.flags.writeable = False      # the world's shared gravity field is read-only
        for a in (np.zeros_like(x), frozen):
            verlet_step(x, x.copy(), a, one, one, one, one, np.empty_like(x))
            verlet_positions(x, x.copy(), a, one, one)
        # A compiled frame only ever sees the read-only gravity field.
        perm = np.array([0, 2, 1, 3])
        _verlet_frame((x, x.copy(), np.zeros_like(x), frozen, np.ones(4, dtype)), links,
                      (dtype(3600.0), np.zeros(3, dtype), True, 1, 1),
                      (np.ones(2, dtype), np.ones(2, dtype), one, one),
                      (perm, copy_runs(perm, 4), run_rests(plan, links[2]),
                       np.empty((9, 4), dtype)))
        add_scaled_difference(np.zeros_like(x), x, x, one)
        all_finite(x, x, x)
        w = np.ones(4, dtype)
        for movable in (np.ones(4, np.bool_), np.zeros(0, np.bool_)):
            back_up(x, x, x, w, x.copy(), x.copy(), x.copy(), w.copy(), movable)
    x = np.zeros((2, 2))
    x[1, 0] = 1.0
    point_gravity(x, np.ones(2), 1.0, 0.01, np.zeros((2, 2)))

"""The links' serial sweep (:func:`sweep_serial`, :func:`sweep_factored`) for the compiled
contact frame (``collide.frame.frame``), which sweeps its links in one thread.

Called from a plain (not parallel) kernel, the inlined helpers of :mod:`.kernels`'
parallel sweep compile to code three to five times slower (measured on the soft blob's
compliant links: ~30 ns a link through ``_project_one``): its own loops, written out,
instead. The same numbers as the XPBD sweep of :mod:`.kernels` (``tests/test_kernels.py``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .backend import njit
from .kernels import (
    GATHER_SOFT,
    ROPE,
    RUN_PAIRS,
    RUN_STRIDE,
    _even,
    _pairs_serial,
    _run_stride,
)


class Links(NamedTuple):
    """The links (distance constraints) as the frame's serial sweep takes them
    (:func:`sweep_factored`), a row a link unless said; the frame (``collide.frame``)
    builds it. It lives here, with the sweep that reads it: the contact package uses
    the links, not the other way round.

    ``ci``, ``cj``    int64: the linked particles
    ``rest``          float: the rest lengths, m
    ``compliance``    float: the compliances (0: rigid)
    ``kind``          int8: each link's kind (stick, rope, ...)
    ``plan``          int64 (B, 6): the sweep's blocks
    ``inv_h2``        float: ``1 / h^2``
    ``lam``           float: the multipliers
    ``den``, ``even``  float, bool: the frame's factors (``link_factors``)
    ``buf``           float: the compliant sticks' scratch (``soft_scratch``)
    ``lost``          bool: a link lost its compliance (``link_factors``)
    """

    ci: np.ndarray
    cj: np.ndarray
    rest: np.ndarray
    compliance: np.ndarray
    kind: np.ndarray
    plan: np.ndarray
    inv_h2: float
    lam: np.ndarray
    den: np.ndarray
    even: np.ndarray
    buf: np.ndarray
    lost: bool


@njit(cache=True, fastmath=False, error_model="numpy")
def link_factors(w, ci, cj, compliance, inv_h2, den, even):  # pragma: no cover
    """What a link's projection needs of its ends' inverse masses, fixed for a
    frame: ``den[k] = w_i + w_j + alpha~`` (the general form's denominator, the
    reference's operations) and ``even[k]``, whether it takes the even split.
    Returns whether some compliant link lost its compliance (``alpha~`` 0, below
    ``inv_h2``'s reach): only then may a row of compliant sticks need the general
    loop (``sweep_factored``'s ``lost``)."""
    lost = False
    for k in range(ci.size):
        wi = w[ci[k]]
        wj = w[cj[k]]
        at = compliance[k] * inv_h2
        den[k] = wi + wj + at
        even[k] = (at == 0) & (wi == wj) & (wi > 0)
        lost |= (at == 0) & (compliance[k] != 0)
    return lost


@njit(cache=True, fastmath=False, error_model="numpy", _nrt=False)
def _gather_factored(x, w, links):  # pragma: no cover - compiled
    """``_project_one`` for every link of ``links`` (a :class:`.collide.records.Links`
    of slices), in order, with the factors of ``link_factors``: the inverse masses
    are read only to move the
    ends, after the division (the soft blob's compliant links, ~8 -> ~6.5 ns a
    link). Its own function over ``range(size)``: an index known to be
    non-negative needs no wraparound test, which on six arrays a link cost a fifth
    of the sweep."""
    ci, cj, rest, compliance, kind = links.ci, links.cj, links.rest, links.compliance, links.kind
    lam, inv_h2, den, even = links.lam, links.inv_h2, links.den, links.even
    eps, half = rest.dtype.type(1e-12), rest.dtype.type(0.5)
    for k in range(ci.size):
        i = np.uint64(ci[k])        # unsigned: no wraparound test
        j = np.uint64(cj[k])
        dx = x[j, 0] - x[i, 0]
        dy = x[j, 1] - x[i, 1]
        L = math.sqrt(dx * dx + dy * dy)
        if even[k]:
            se = _even(L, rest[k] * half, half, eps, kind[k] != ROPE)
            x[i, 0] += se * dx
            x[i, 1] += se * dy
            x[j, 0] -= se * dx
            x[j, 1] -= se * dy
            continue
        C = L - rest[k]
        if kind[k] == ROPE and C < 0:
            continue
        denom = den[k]
        if denom <= 0 or L <= eps:
            continue
        at = compliance[k] * inv_h2
        num = -C if at == 0 else -C - at * lam[k]   # rigid links never read lam
        s = num / (denom * L)
        lam[k] += s * L
        cx = s * dx
        cy = s * dy
        wi = w[i]
        wj = w[j]
        x[i, 0] -= wi * cx
        x[i, 1] -= wi * cy
        x[j, 0] += wj * cx
        x[j, 1] += wj * cy


@njit(cache=True, fastmath=False, error_model="numpy", _nrt=False)
def _soft_holds(compliance, inv_h2, k0, n):  # pragma: no cover - compiled
    """Whether every link ``k0 .. k0 + n`` keeps its compliance (``alpha~ != 0``):
    a row of compliant sticks ``_gather_soft`` may take."""
    rigid = False
    for k in range(k0, k0 + n):  # no early exit: LLVM vectorises it without one
        rigid |= compliance[k] * inv_h2 == 0
    return not rigid


@njit(cache=True, fastmath=False, error_model="numpy", _nrt=False, inline="always")
def _soft_block(x, w, links, start, m):  # pragma: no cover - compiled
    """``_gather_soft``'s three passes over the links ``start .. start + m`` of
    ``links`` (``m`` at most the length of the rows of its scratch ``buf``: ``ddx,
    ddy, sb, lb``)."""
    ci, cj, rest, cm, lam = links.ci, links.cj, links.rest, links.compliance, links.lam
    inv_h2, den, buf = links.inv_h2, links.den, links.buf
    ddx, ddy, sb, lb = buf[0], buf[1], buf[2], buf[3]
    eps = rest.dtype.type(1e-12)
    zero = eps - eps
    for t in range(m):                          # gather
        k = start + np.uint64(t)
        i = np.uint64(ci[k])
        j = np.uint64(cj[k])
        ddx[t] = x[j, 0] - x[i, 0]
        ddy[t] = x[j, 1] - x[i, 1]
    for t in range(m):                          # project: vector instructions
        k = start + np.uint64(t)
        dx = ddx[t]
        dy = ddy[t]
        L = math.sqrt(dx * dx + dy * dy)
        s = (-(L - rest[k]) - cm[k] * inv_h2 * lam[k]) / (den[k] * L)
        skip = (den[k] <= 0) | (L <= eps)
        sb[t] = zero if skip else s
        lb[t] = zero if skip else L         # the scatter's test: lb <= eps
        # Adding 0 keeps a multiplier's bits: they start at +0, and sums from
        # +0 are never -0 (a select here stopped LLVM's vectoriser).
        lam[k] += zero if skip else s * L
    for t in range(m):                          # scatter
        if lb[t] <= eps:
            continue
        k = start + np.uint64(t)
        i = np.uint64(ci[k])
        j = np.uint64(cj[k])
        s = sb[t]
        cx = s * ddx[t]
        cy = s * ddy[t]
        wi = w[i]
        wj = w[j]
        x[i, 0] -= wi * cx
        x[i, 1] -= wi * cy
        x[j, 0] += wj * cx
        x[j, 1] += wj * cy


@njit(cache=True, fastmath=False, error_model="numpy", _nrt=False)
def _gather_soft(x, w, links, k0, n):  # pragma: no cover - compiled
    """``_gather_factored`` for the row of compliant sticks (``GATHER_SOFT``) of
    ``links`` ``k0 .. k0 + n``, all keeping their compliance (``_soft_holds``): no
    even split, no rope test.

    A row's links are independent (one colour), so the work may be ordered freely:
    blocks of ``links.buf.shape[1]`` links in three passes (``_soft_block``), the ends'
    differences gathered into ``buf``, the projection over those contiguous rows
    (LLVM makes the square roots and divisions vector instructions: 4.3 -> 1.1 ns
    a link here, the divider being the scalar loop's bound), the moves scattered.
    The operations of each link are the reference's, so the bits are too (tested).
    The soft blob's sweep in a compiled loop: 9.9-10.1 -> 7.9-8.2 us a pass. Whole
    arrays and unsigned indices: slicing seven arrays a row cost ~0.1 us. A row of
    one block (the common case) is its own inlined copy: in the block loop LLVM
    made the passes ~10 % slower (soft blob, 4.2 -> 3.8 us a pass with the
    compliance check moved to ``link_factors``)."""
    B = links.buf.shape[1]
    start = np.uint64(k0)
    if n <= B:
        _soft_block(x, w, links, start, n)
        return
    for b0 in range(0, n, B):
        _soft_block(x, w, links, start + np.uint64(b0), min(B, n - b0))


@njit(cache=True, fastmath=False, error_model="numpy", _nrt=False)
def sweep_factored(x, w, links):  # pragma: no cover - compiled
    """One XPBD sweep of ``links`` (:class:`.collide.records.Links`) in one thread:
    the rows of ``plan`` in order (batch after
    batch), runs by ``_run_stride`` / ``_pairs_serial``, gathered rows link after
    link by ``_gather_factored`` with the frame's ``link_factors``, rows of
    compliant sticks by ``_gather_soft`` in ``buf`` (``soft_scratch``), those
    with a link that lost its compliance (only checked when ``link_factors``
    said ``lost``) by ``_gather_factored``. The same bits as ``_project_batches``
    (tested)."""
    ci, cj, rest, compliance, kind, plan = (links.ci, links.cj, links.rest,
                                            links.compliance, links.kind, links.plan)
    inv_h2, lam, den, even, lost = links.inv_h2, links.lam, links.den, links.even, links.lost
    xf = x.reshape(-1)
    for c in range(plan.shape[0]):
        mode = plan[c, 0]
        k0 = plan[c, 1]
        n = plan[c, 2]
        i0 = plan[c, 3]
        if mode == RUN_STRIDE:
            j0 = i0 + plan[c, 4]
            _run_stride(xf[2 * i0:2 * (i0 + n)], xf[2 * j0:2 * (j0 + n)],
                        w[i0:i0 + n], w[j0:j0 + n], rest[k0:k0 + n], plan[c, 5] == 0)
            continue
        if mode == RUN_PAIRS:
            _pairs_serial(xf[2 * i0:2 * i0 + 4 * n], w[i0:i0 + 2 * n],
                          rest[k0:k0 + n], plan[c, 5] == 0)
            continue
        if mode == GATHER_SOFT and (not lost
                                    or _soft_holds(compliance, inv_h2, k0, n)):
            _gather_soft(x, w, links, k0, n)
            continue
        ks = slice(k0, k0 + n)
        _gather_factored(x, w, Links(ci[ks], cj[ks], rest[ks], compliance[ks], kind[ks],
                                     plan, inv_h2, lam[ks], den[ks], even[ks], links.buf,
                                     lost))


@njit(cache=True, fastmath=False, error_model="numpy")
def sweep_serial(x, w, ci, cj, rest, compliance, kind, plan, inv_h2,
                 lam):  # pragma: no cover - compiled
    """``sweep_factored`` with this sweep's ``link_factors`` (the contact frame
    computes them once a frame)."""
    den = np.empty(ci.size, rest.dtype)
    even = np.empty(ci.size, np.bool_)
    lost = link_factors(w, ci, cj, compliance, inv_h2, den, even)
    sweep_factored(x, w, Links(ci, cj, rest, compliance, kind, plan, inv_h2, lam, den, even,
                               soft_scratch(x), lost))


@njit(cache=True, fastmath=False, error_model="numpy")
def soft_scratch(x):  # pragma: no cover - compiled
    """``sweep_factored``'s ``buf``: blocks of 256 compliant sticks (rows: the
    differences, ``s`` and ``L``; 8 KB in float64, in the first-level cache)."""
    return np.empty((4, 256), x.dtype)

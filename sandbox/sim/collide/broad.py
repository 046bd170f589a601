"""Broad phase: which (particle, shape) and (particle, particle) pairs can touch.

Static shapes sit in a uniform grid over their bounding boxes (:class:`ShapeGrid`);
particle pairs come from a Verlet list (:func:`particle_pairs`, :class:`_PairList`),
built on a grid of particles and reused until a particle has moved half its skin. Each
numpy reference has its compiled twin below it, the same pairs in the same order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .geometry import HI_X, HI_Y, LO_X, LO_Y, SEGMENT, _distance, _dot
from .jit import _as, _max, _min, _sort_head, jit, jit_borrow, jit_inline

#: m: a (particle, segment) pair whose lower bound on the distance (see ``_broad_phase``)
#: is beyond the start-gap filter by more than this skips the exact distance. Both
#: distances are float64 with round-off far below it on any coordinate the levels allow.
GAP_TOL = 1e-6

# ------------------------------------------------------------ pairs by particle

def _first_per_particle(pi: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Indices of the pair with the smallest ``t`` for each distinct particle in ``pi``."""
    order = np.lexsort((t, pi))
    sp = pi[order]
    first = np.ones(sp.size, bool)
    first[1:] = sp[1:] != sp[:-1]
    return order[first]


def rank_batches(pi: np.ndarray) -> list[np.ndarray]:
    """Split pairs into batches in which no particle repeats: batch ``k`` holds the
    ``k``-th contact of every particle. A batch can then be solved at once with fancy
    indexing (no two writes to one row), the batches one after another (Gauss-Seidel)."""
    if pi.size == 0:
        return []
    if (pi[1:] > pi[:-1]).all():           # sorted and distinct: one contact per particle
        return [np.arange(pi.size)]
    order = np.argsort(pi, kind="stable")
    sp = pi[order]
    starts = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]])
    rank = np.arange(sp.size) - np.repeat(starts, np.diff(np.r_[starts, sp.size]))
    o2 = np.argsort(rank, kind="stable")
    cuts = np.flatnonzero(np.diff(rank[o2])) + 1
    return np.split(order[o2], cuts)


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ``counts (m,)``: the owner row of each of ``sum(counts)`` items and its rank
    within its row (``np.repeat`` plus a running offset: a ragged ``arange``)."""
    owner = np.repeat(np.arange(counts.size), counts)
    first = np.cumsum(counts) - counts
    return owner, np.arange(owner.size) - first[owner]

# ----------------------------------------------------------------------- shapes

def aabb_pairs_brute(plo, phi, lo, hi, block: int = 1 << 20):
    """All ``(particle, shape)`` whose boxes overlap, testing every pair (in blocks)."""
    n, S = plo.shape[0], lo.shape[0]
    if n == 0 or S == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rows = max(1, block // S)
    P, Q = [], []
    for a in range(0, n, rows):
        ov = ((plo[a:a + rows, None, :] <= hi[None]) & (phi[a:a + rows, None, :] >= lo[None])
              ).all(axis=2)
        pi, si = np.nonzero(ov)
        P.append(pi + a)
        Q.append(si)
    return np.concatenate(P).astype(np.int64), np.concatenate(Q).astype(np.int64)


class ShapeGrid:
    """Uniform grid over static shapes' bounding boxes; finds the (particle, shape) pairs
    whose boxes overlap without testing all ``n x S`` of them.

    Each shape is listed in every cell its box covers (one sorted array of cell keys). The
    cell is the median shape size, doubled until the listing is at most ``4 S + 4096``
    entries, so a few huge shapes (a floor) do not blow it up. A particle's box looks up
    the cells it covers (``searchsorted`` on the keys), the candidates are de-duplicated
    and kept when the boxes really overlap. A particle box covering more than 64 cells (a
    very fast particle) is tested against every shape instead.
    """

    MAX_CELLS = 64

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.lo, self.hi = lo, hi
        S = lo.shape[0]
        ext = (hi - lo).max(axis=1)
        cell = max(float(np.median(ext)), 1e-3 * float(ext.max()), 1e-9)
        while True:
            c0 = np.floor(lo / cell).astype(np.int64)
            c1 = np.floor(hi / cell).astype(np.int64)
            span = c1 - c0 + 1
            if int(span.prod(axis=1).sum()) <= 4 * S + 4096:
                break
            cell *= 2.0
        self.cell = cell
        self.origin = c0.min(axis=0)
        self.dims = c1.max(axis=0) - self.origin + 1
        sid, k = _expand(span.prod(axis=1))
        cx = c0[sid, 0] + k // span[sid, 1]
        cy = c0[sid, 1] + k % span[sid, 1]
        key = self._key(cx, cy)
        order = np.argsort(key, kind="stable")
        self.keys, self.sids = key[order], sid[order]

    def _key(self, cx, cy):
        return (cx - self.origin[0]) * self.dims[1] + (cy - self.origin[1])

    def query(self, plo: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``(particle row, shape)`` whose boxes overlap; ``plo, phi (n, 2)``."""
        top = self.origin + self.dims - 1
        c0 = np.maximum(np.floor(plo / self.cell).astype(np.int64), self.origin)
        c1 = np.minimum(np.floor(phi / self.cell).astype(np.int64), top)
        span = np.maximum(c1 - c0 + 1, 0)
        cells = span.prod(axis=1)
        big = cells > self.MAX_CELLS
        small = np.flatnonzero(~big & (cells > 0))
        pid, k = _expand(cells[small])
        p = small[pid]
        key = self._key(c0[p, 0] + k // span[p, 1], c0[p, 1] + k % span[p, 1])
        a = np.searchsorted(self.keys, key, "left")
        b = np.searchsorted(self.keys, key, "right")
        own, off = _expand(b - a)
        pi = p[own]
        si = self.sids[a[own] + off]
        S = self.lo.shape[0]
        uniq = np.unique(pi * S + si)
        pi, si = uniq // S, uniq % S
        keep = ((plo[pi] <= self.hi[si]) & (phi[pi] >= self.lo[si])).all(axis=1)
        pi, si = pi[keep], si[keep]
        if big.any():
            rows = np.flatnonzero(big)
            bp, bs = aabb_pairs_brute(plo[rows], phi[rows], self.lo, self.hi)
            pi, si = np.concatenate([pi, rows[bp]]), np.concatenate([si, bs])
        return pi, si


@jit
def _grid_candidates(lox, loy, hix, hiy, grid, cell, max_cells, stamp, q,
                     buf):  # pragma: no cover - compiled
    """``ShapeGrid.query`` for one particle box in ``grid`` (:class:`.records.Grid`):
    the shapes listed in the cells it covers, sorted and distinct, into ``buf``;
    returns their count, or -1 when the box covers more than ``max_cells`` cells
    (then every shape is a candidate). ``cell`` is ``grid.cell`` in the positions'
    float type, as numpy divides them."""
    keys, sids, origin, dims = grid.keys, grid.sids, grid.origin, grid.dims
    c0x = max(np.int64(np.floor(lox / cell)), origin[0])
    c0y = max(np.int64(np.floor(loy / cell)), origin[1])
    c1x = min(np.int64(np.floor(hix / cell)), origin[0] + dims[0] - 1)
    c1y = min(np.int64(np.floor(hiy / cell)), origin[1] + dims[1] - 1)
    sx = max(c1x - c0x + 1, 0)
    sy = max(c1y - c0y + 1, 0)
    cells = sx * sy
    if cells > max_cells:
        return -1
    m = np.int64(0)             # a number, not a constant (collide/jit.py): one compile
    for k in range(cells):
        key = (c0x + k // sy - origin[0]) * dims[1] + (c0y + k % sy - origin[1])
        a = np.searchsorted(keys, key, side="left")
        b = np.searchsorted(keys, key, side="right")
        for t in range(a, b):
            g = sids[t]
            if stamp[g] != q:
                stamp[g] = q
                buf[m] = g
                m += 1
    _sort_head(buf, m)
    return m


@jit_borrow
def shape_boxes(shapes, box, inv_len):  # pragma: no cover - compiled
    """The broad phase's table of ``shapes``' boxes (``box``, ``(nshapes, 4)``: lo x, lo
    y, hi x, hi y) and each segment's ``1 / |b - a|`` (``inv_len``; 0 for other shapes).

    A segment's box is loose when it slants: a lower bound on the distance first, the
    distance to its line less its thickness, ``|(b - a) x (p - a)| / |b - a| - thickness``.
    Only a pair it puts beyond the filter by more than ``GAP_TOL`` (far more than the
    round-off of either) skips the exact distance: the pairs kept are the same."""
    kinds, geo = shapes.kinds, shapes.geo
    for g in range(shapes.nshapes):
        box[g, 0] = geo[g, LO_X]
        box[g, 1] = geo[g, LO_Y]
        box[g, 2] = geo[g, HI_X]
        box[g, 3] = geo[g, HI_Y]
        inv_len[g] = 0.0
        if kinds[g] == SEGMENT:
            ex = geo[g, 2] - geo[g, 0]
            ey = geo[g, 3] - geo[g, 1]
            ln = math.sqrt(ex * ex + ey * ey)
            inv_len[g] = 1.0 / ln if ln > 0 else 0.0


@jit
def _broad_phase(x0, x1, w, r, disp, shapes, grid, rules, brute,
                 found):  # pragma: no cover - compiled
    """The broad phase of ``begin`` with ``Contacts.add_group``'s start-gap filter,
    particle by particle, shapes in table order (``shapes``, ``grid``: the
    :mod:`.records`; ``brute``: every shape a candidate, no grid), into ``found``'s
    ``cp, cg, gap``; returns their number, or -1 when they do not fit. 0.5, 1.5,
    ``rules.margin`` and the grid's cell are rounded to the positions' float type."""
    n = x1.shape[0]
    cp, cg, gap = found
    geo, nshapes = shapes.geo, shapes.nshapes
    max_cells = rules.max_cells
    half = _as(x1, 0.5)
    one_half = _as(x1, 1.5)
    marg = _as(x1, rules.margin)
    cell = _as(x1, grid.cell)
    stamp = np.full(nshapes, -1, np.int64)
    buf = np.empty(nshapes, np.int64)
    inv_len = np.empty(nshapes)
    box = np.empty((nshapes, 4))
    shape_boxes(shapes, box, inv_len)
    if brute and 0 < nshapes <= _MASK_SHAPES:
        return _brute_masks(x0, x1, w, r, disp, shapes, marg, found,
                            (box, inv_len, np.empty((2, n)), np.empty((2, n)),
                             np.empty(n, np.int64)))
    m = 0
    for q in range(n if nshapes else 0):
        if not w[q] > 0:
            continue
        pad = r[q] + half * disp[q] + marg
        lox = _min(x0[q, 0], x1[q, 0]) - pad
        loy = _min(x0[q, 1], x1[q, 1]) - pad
        hix = _max(x0[q, 0], x1[q, 0]) + pad
        hiy = _max(x0[q, 1], x1[q, 1]) + pad
        count = nshapes                     # brute force: every shape, in order
        if not brute:
            count = _grid_candidates(lox, loy, hix, hiy, grid, cell, max_cells, stamp, q,
                                     buf)
            if count < 0:
                for g in range(nshapes):
                    buf[g] = g
                count = nshapes
        near = one_half * disp[q] + marg
        for k in range(count):
            g = np.uint64(k if brute else buf[k])   # unsigned: no wraparound tests
            # One branch for the four tests (& does not short-circuit).
            if not ((lox <= box[g, 2]) & (loy <= box[g, 3]) & (hix >= box[g, 0])
                    & (hiy >= box[g, 1])):
                continue
            # _gap_filter's lines, written out: this kernel counts references (the
            # grid's candidates sort), and an inlined helper's 15 arrays would be
            # counted at every pair (~130 ns).
            if inv_len[g] > 0:
                ax = geo[g, 0]
                ay = geo[g, 1]
                cr = (geo[g, 2] - ax) * (x0[q, 1] - ay) - (geo[g, 3] - ay) * (x0[q, 0] - ax)
                if abs(cr) * inv_len[g] - geo[g, 4] - r[q] > near + GAP_TOL:
                    continue
            d0, _, _ = _distance(np.int64(g), x0[q, 0], x0[q, 1], 0.0, np.bool_(False),
                                 shapes, x0[q, 0], x0[q, 1])
            gq = d0 - r[q]
            if gq < near:
                if m == cp.size:
                    return -1
                cp[m] = q
                cg[m] = g
                gap[m] = gq
                m += 1
    return m


#: Up to this many shapes the brute-force broad phase tests the boxes shape by shape over
#: all particles, one bit a shape (``_brute_masks``).
_MASK_SHAPES = 63


@jit_inline
def _gap_filter(x0, r, q, g, near, m, shapes, inv_len,
                found):  # pragma: no cover - compiled
    """``_broad_phase``'s start-gap filter for particle ``q`` and shape ``g``, whose
    boxes overlap: stored at ``m`` of ``found``'s ``cp, cg, gap`` when it passes.
    Returns the new count, -1 when it does not fit."""
    cp, cg, gap = found
    geo = shapes.geo
    if inv_len[g] > 0:
        ax = geo[g, 0]
        ay = geo[g, 1]
        cr = (geo[g, 2] - ax) * (x0[q, 1] - ay) - (geo[g, 3] - ay) * (x0[q, 0] - ax)
        if abs(cr) * inv_len[g] - geo[g, 4] - r[q] > near + GAP_TOL:
            return m
    d0, _, _ = _distance(np.int64(g), x0[q, 0], x0[q, 1], 0.0, np.bool_(False), shapes,
                         x0[q, 0], x0[q, 1])
    gq = d0 - r[q]
    if gq < near:
        if m == cp.size:
            return -1
        cp[m] = q
        cg[m] = g
        gap[m] = gq
        m += 1
    return m


@jit_borrow
def _brute_masks(x0, x1, w, r, disp, shapes, marg, found,
                 masks):  # pragma: no cover - compiled
    """``_broad_phase``'s brute force for up to ``_MASK_SHAPES`` shapes (into
    ``found``'s ``cp, cg, gap``; ``masks``: ``box, inv_len`` from :func:`shape_boxes`
    and the scratch ``lo, hi, bits``, as below): the
    particles' boxes in one vector loop, each shape's box test over all of them in
    another (a bit a shape), then the particles with a bit set, shape by shape, through
    the gap filter: the same tests on the same numbers in the same order, so the same
    pairs. Particle by particle with a branch per shape, the pile's 2,000 particles and
    six shapes took 21.7 us (12,000 box tests, 669 overlaps)."""
    n = x1.shape[0]
    box, inv_len, lo, hi, bits = masks
    geo, nshapes = shapes.geo, shapes.nshapes
    half = _as(x1, 0.5)
    one_half = _as(x1, 1.5)
    f0 = x0.reshape(-1)
    f1 = x1.reshape(-1)
    # lo, hi: float64 (2, n), holding a box edge of either float type exactly (the same
    # comparisons); bits: int64 (n,), cleared here.
    for q in range(n):
        bits[q] = 0
        pad = r[q] + half * disp[q] + marg
        lo[0, q] = _min(f0[2 * q], f1[2 * q]) - pad
        lo[1, q] = _min(f0[2 * q + 1], f1[2 * q + 1]) - pad
        hi[0, q] = _max(f0[2 * q], f1[2 * q]) + pad
        hi[1, q] = _max(f0[2 * q + 1], f1[2 * q + 1]) + pad
    for g in range(nshapes):
        b0 = box[g, 0]
        b1 = box[g, 1]
        b2 = box[g, 2]
        b3 = box[g, 3]
        bit = np.int64(1) << np.int64(g)
        if inv_len[g] > 0:
            # A segment: the gap filter's lower bound (the distance to its line) in the
            # same loop, the same operations: a slanted segment's box holds many
            # particles its line is far from (the pile's funnel sides: 550 box
            # overlaps a substep, 60 near the line), each a call of the filter.
            ax = geo[g, 0]
            ay = geo[g, 1]
            ex = geo[g, 2] - ax
            ey = geo[g, 3] - ay
            il = inv_len[g]
            th = geo[g, 4]
            for q in range(n):
                hit = ((lo[0, q] <= b2) & (lo[1, q] <= b3) & (hi[0, q] >= b0)
                       & (hi[1, q] >= b1))
                cr = ex * (f0[2 * q + 1] - ay) - ey * (f0[2 * q] - ax)
                far = abs(cr) * il - th - r[q] > one_half * disp[q] + marg + GAP_TOL
                bits[q] |= bit if hit & (not far) else np.int64(0)
            continue
        for q in range(n):
            hit = ((lo[0, q] <= b2) & (lo[1, q] <= b3) & (hi[0, q] >= b0)
                   & (hi[1, q] >= b1))
            bits[q] |= bit if hit else np.int64(0)
    m = 0
    for q in range(n):
        bq = bits[q]
        if bq == 0 or not w[q] > 0:
            continue
        near = one_half * disp[q] + marg
        for g in range(nshapes):
            if (bq >> np.int64(g)) & np.int64(1):
                m = _gap_filter(x0, r, q, np.uint64(g), near, m, shapes, inv_len, found)
                if m < 0:
                    return -1
    return m

# --------------------------------------------------------------- particle pairs

def particle_pairs(x: np.ndarray, r: np.ndarray, margin: float,
                   exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``i < j`` of particles with radius > 0 closer than ``r_i + r_j + margin``.

    Uniform grid with cells of ``2 max(r) + margin``: particles are sorted by cell key, and
    every particle looks up the 3 x 3 cells around its own (``searchsorted`` on the sorted
    keys), so a pair is found from both ends and kept once (``i < j``). ``exclude`` holds
    sorted keys ``min * n + max`` of pairs never to collide (particles joined by a
    constraint, which holds them at its own distance). The pairs come in the order of
    their ends' places in the sorted order (earlier end, then later end), the order
    the compiled ``pair_list`` finds them in: the pair projection's sums run in it.
    """
    n = x.shape[0]
    idx = np.flatnonzero(r > 0)
    empty = np.zeros(0, np.int64)
    if idx.size < 2:
        return empty, empty
    xr, rr = x[idx], r[idx]
    cell = 2.0 * float(rr.max()) + margin
    span = float(np.max(xr.max(axis=0) - xr.min(axis=0)))
    cell = max(cell, span / 2.0 ** 30)          # keeps cell keys within int64
    c = np.floor((xr - xr.min(axis=0)) / cell).astype(np.int64) + 1
    ny = int(c[:, 1].max()) + 2
    key = c[:, 0] * ny + c[:, 1]
    order = np.argsort(key, kind="stable")
    sk = key[order]
    ii, jj = [], []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            nk = key + dx * ny + dy
            a = np.searchsorted(sk, nk, "left")
            b = np.searchsorted(sk, nk, "right")
            own, off = _expand(b - a)
            other = order[a[own] + off]
            keep = own < other
            ii.append(own[keep])
            jj.append(other[keep])
    i, j = np.concatenate(ii), np.concatenate(jj)
    d = xr[j] - xr[i]
    reach = rr[i] + rr[j] + margin
    near = _dot(d, d) < reach * reach
    i, j = i[near], j[near]
    # The order: by the earlier end's place in the sorted order, then the later's (the
    # compiled list finds them so, from a half shell, with no sort).
    place = np.empty(order.size, np.int64)
    place[order] = np.arange(order.size)
    first, second = np.minimum(place[i], place[j]), np.maximum(place[i], place[j])
    o = np.lexsort((second, first))
    i, j = idx[i[o]], idx[j[o]]
    if exclude is not None and exclude.size and i.size:
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        pos = np.searchsorted(exclude, lo * n + hi)
        found = exclude[np.minimum(pos, exclude.size - 1)] == lo * n + hi
        i, j = i[~found], j[~found]
    return i, j


@dataclass
class _PairList:
    """A Verlet list of particle pairs: built at ``x_ref`` with ``skin``; ``a``, ``b``
    number the pairs' particles ``0..m-1`` within ``nodes``."""

    key: tuple
    x_ref: np.ndarray
    skin: float
    i: np.ndarray
    j: np.ndarray
    a: np.ndarray
    b: np.ndarray
    nodes: np.ndarray
    reach: np.ndarray

    @classmethod
    def build(cls, key, x_ref, skin, i, j, r) -> _PairList:
        nodes, local = np.unique(np.concatenate([i, j]), return_inverse=True)
        return cls(key, x_ref, skin, i, j, local[:i.size], local[i.size:], nodes,
                   r[i] + r[j])


@jit
def _stable_order(key, start, table):  # pragma: no cover - compiled
    """``np.argsort(key, kind="stable")``: a counting sort over the cell starts
    ``start`` when ``table``, else a merge sort."""
    if not table:
        return np.argsort(key, kind="mergesort")
    order = np.empty(key.size, np.int64)
    fill = start[:-1].copy()
    for k in range(key.size):
        order[fill[key[k]]] = k
        fill[key[k]] += 1
    return order


@jit
def _scan_pairs(x, r, cells, marg, exclude, out):  # pragma: no cover - compiled
    """The pairs of ``particle_pairs`` into ``out``'s ``pi, pj`` in its order; returns
    their number, or -1 when they do not fit. ``cells``: :func:`pair_list`'s grid of
    the particles ``idx`` (those with a radius), sorted (``order``, keys ``sk``, the
    cell starts ``start`` when ``table``, the column height ``ny``).

    Every pair is looked at once, from a half shell: from each particle in sorted
    order (``order``, keys ``sk``), its own cell after it and the cell above it, then
    the three cells of the column to the right (consecutive keys, one run each), over
    copies of positions and radii in sorted order; the test is symmetric (``(a - b)^2
    == (b - a)^2``, ``r_a + r_b == r_b + r_a`` exactly). Every partner found sits
    later in sorted order than the particle it is found from, and they are found in
    sorted order: the pairs come out by (earlier sorted place, later sorted place),
    the order ``particle_pairs`` gives them, with no sort afterwards.
    """
    idx, order, start, sk, table, ny = cells
    pi, pj = out
    n = x.shape[0]
    m = idx.size
    xs = np.empty(m, x.dtype)
    ys = np.empty(m, x.dtype)
    rs = np.empty(m, r.dtype)
    # The particle at each sorted place: idx rises, so the pair's particles are the
    # smaller and larger of the two (idx[min(order)] without its two dependent loads).
    ps = np.empty(m, np.int64)
    for t in range(m):
        j = idx[order[t]]
        ps[t] = j
        xs[t] = x[j, 0]
        ys[t] = x[j, 1]
        rs[t] = r[j]
    P = 0
    for u in range(m):                       # in sorted order
        ku = sk[u]
        pu = ps[u]
        for col in range(2):
            if col == 0:
                a = u + 1
                b = start[ku + 2] if table else np.searchsorted(sk, ku + 1, side="right")
            elif table:
                a = start[ku + ny - 1]
                b = start[ku + ny + 2]
            else:
                a = np.searchsorted(sk, ku + ny - 1, side="left")
                b = np.searchsorted(sk, ku + ny + 1, side="right")
            # Unsigned: no wraparound tests on the loads (a, b are never negative).
            if not exclude.size:
                # Written always, kept if near: no branch to mispredict (in a pile a
                # third of the candidates pass, at random). Room for all of them first.
                if pi.size - P < b - a:
                    return -1
                for t in range(np.uint64(a), np.uint64(b)):
                    ddx = xs[t] - xs[u]
                    ddy = ys[t] - ys[u]
                    reach = rs[u] + rs[t] + marg
                    pi[P] = min(pu, ps[t])
                    pj[P] = max(pu, ps[t])
                    P += np.int64(ddx * ddx + ddy * ddy < reach * reach)
                continue
            for t in range(np.uint64(a), np.uint64(b)):
                ddx = xs[t] - xs[u]
                ddy = ys[t] - ys[u]
                reach = rs[u] + rs[t] + marg
                if not ddx * ddx + ddy * ddy < reach * reach:
                    continue
                own = min(order[u], order[t])
                other = max(order[u], order[t])
                i = idx[own]
                j = idx[other]
                if exclude.size:
                    kk = i * n + j           # i < j: the key min * n + max
                    q = min(np.searchsorted(exclude, kk), exclude.size - 1)
                    if exclude[q] == kk:
                        continue
                if P == pi.size:
                    return -1
                pi[P] = i
                pj[P] = j
                P += 1
    return P


@jit
def pair_list(x, r, margin, exclude):  # pragma: no cover - compiled
    """``particle_pairs`` and ``_PairList.build``: ``i, j, a, b, nodes, reach``.

    The same grid and the same pairs in the same order (see ``_scan_pairs``). Cells
    are looked up in a table of cell starts (a counting sort, stable as the
    reference's argsort) when the grid is small, else by binary search.
    """
    n = x.shape[0]
    m = 0
    for p in range(n):
        if r[p] > 0:
            m += 1
    ei = np.zeros(0, np.int64)
    if m < 2:
        return ei, ei, ei, ei, ei, np.zeros(0, r.dtype)
    idx = np.empty(m, np.int64)
    m = 0
    for p in range(n):
        if r[p] > 0:
            idx[m] = p
            m += 1
    rmax = r[idx[0]]
    lo0 = x[idx[0], 0]
    lo1 = x[idx[0], 1]
    hi0 = lo0
    hi1 = lo1
    for k in range(1, m):
        p = idx[k]
        rmax = _max(rmax, r[p])
        lo0 = _min(lo0, x[p, 0])
        lo1 = _min(lo1, x[p, 1])
        hi0 = _max(hi0, x[p, 0])
        hi1 = _max(hi1, x[p, 1])
    if not (math.isfinite(lo0) and math.isfinite(lo1) and math.isfinite(hi0)
            and math.isfinite(hi1)):
        # A diverging world (World.step restores it): no pairs, where the reference
        # would put every particle in one garbage cell; cell keys must stay in range.
        return ei, ei, ei, ei, ei, np.zeros(0, r.dtype)
    cell = 2.0 * np.float64(rmax) + margin
    span = np.float64(_max(hi0 - lo0, hi1 - lo1))
    if span / 2.0 ** 30 > cell:                 # keeps cell keys within int64
        cell = span / 2.0 ** 30
    cell_f = _as(x, cell)
    c0 = np.empty(m, np.int64)
    c1 = np.empty(m, np.int64)
    for k in range(m):
        p = idx[k]
        c0[k] = np.int64(np.floor((x[p, 0] - lo0) / cell_f)) + 1
        c1[k] = np.int64(np.floor((x[p, 1] - lo1) / cell_f)) + 1
    ny = c1.max() + 2
    key = c0 * ny + c1
    size = (c0.max() + 2) * ny               # every neighbour key is below this
    table = size <= 16 * m + 65536
    start = np.zeros(size + 1 if table else 1, np.int64)
    if table:
        for k in range(m):
            start[key[k] + 1] += 1
        for s in range(size):
            start[s + 1] += start[s]
    order = _stable_order(key, start, table)
    sk = key[order]
    cap = max(8 * m, 16)
    while True:                 # no regrowing in the loop (see the module docstring)
        pi = np.empty(cap, np.int64)
        pj = np.empty(cap, np.int64)
        P = _scan_pairs(x, r, (idx, order, start, sk, table, ny), _as(x, margin),
                        exclude, (pi, pj))
        if P >= 0:
            break
        cap *= 4
    pi = pi[:P].copy()
    pj = pj[:P].copy()
    # _PairList.build: nodes = np.unique(i, j), a and b number the pairs' ends in it.
    local = np.full(n, -1, np.int64)
    for k in range(P):
        local[np.uint64(pi[k])] = 0
        local[np.uint64(pj[k])] = 0
    M = 0
    for p in range(n):
        if local[p] == 0:
            M += 1
    nodes = np.empty(M, np.int64)
    M = 0
    for p in range(n):
        if local[p] == 0:
            nodes[M] = p
            local[p] = M
            M += 1
    pa = np.empty(P, np.int64)
    pb = np.empty(P, np.int64)
    reach = np.empty(P, r.dtype)
    for k in range(P):
        ii = np.uint64(pi[k])
        jj = np.uint64(pj[k])
        pa[k] = local[ii]
        pb[k] = local[jj]
        reach[k] = r[ii] + r[jj]
    return pi, pj, pa, pb, nodes, reach


@jit
def moved_less(x, x_ref, lim2):  # pragma: no cover - compiled
    """Whether every particle moved less than ``sqrt(lim2)`` from ``x_ref`` (a NaN
    moved too far): the Verlet list's test. A count of the particles that moved too
    far, in a loop of vector instructions; the largest squared move, a chain of
    maxima each waiting for the last, took 3 us a substep of the pile (0.5 now)."""
    far = 0
    for q in range(x.shape[0]):
        mx = x[q, 0] - x_ref[q, 0]
        my = x[q, 1] - x_ref[q, 1]
        far += np.int64(not (mx * mx + my * my < lim2))
    return far == 0


@jit
def any_moving(i, j, w):  # pragma: no cover - compiled
    """Whether a pair has a movable end (``Contacts.set_pairs``)."""
    for k in range(i.size):
        if w[np.uint64(i[k])] > 0 or w[np.uint64(j[k])] > 0:
            return True
    return False

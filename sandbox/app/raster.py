"""Rasterisation of many segments and dots straight into a pixel array.

A 200 x 200 cloth has 158,802 links; one ``pygame.draw.line`` call each costs more than
the physics. Two implementations draw them, with one pixel rule, so that they light the
same pixels in the same colours (the tests compare them pixel for pixel):

* compiled kernels (numba, when it can run; ``backend="auto"`` or ``"compiled"``, the
  vocabulary of ``sim.backend.BACKENDS``): the points mapped to the screen once,
  then one call that bins the links' strain into colours and orders them, and one loop
  over the links that clips and writes each line's pixels (1 px lines inside the window,
  almost all of a cloth in view, unrolled by sample count, without per-sample tests);
* the numpy reference (the fallback without numba): all links clipped at once, then
  the samples of all of them laid out in one flat array (``np.repeat``) and written
  with one fancy-index assignment, never a Python loop over links.

The pixel rule. A segment with both ends inside ``[0, w-1] x [0, h-1]`` is used as is,
any other is clipped to that box (Liang-Barsky; non-finite ones are dropped). With
``d = q - p`` it gets ``k = max(ceil(max(|dx|, |dy|)) + 1, 2)`` samples, one per pixel of
its longer axis, both ends included (a DDA line with no gaps): sample ``s = 0 .. k-1``
lights pixel ``(int(s (dx / (k-1)) + (px + 0.5)), int(s (dy / (k-1)) + (py + 0.5)))``,
every operation in float64 in that order (``dx / (k-1)`` as ``dx * (1 / (k-1))``), so
that both paths round alike. A 2 px line also lights the right and the lower neighbour
of every sample (clamped to the box).

Overlaps: a pixel takes the colour of the last segment in drawing order that lights it,
so callers pass the links they want on top last (both paths honour that order exactly).

``pix`` below is a C-contiguous ``(H, W)`` uint32 view of a 32-bit surface
(``pygame.surfarray.pixels2d(surface).T``); colours are ``surface.map_rgb`` ints.
``view = (hx, hy, cx, cy, kx, ky)`` maps world points to the screen as the camera does:
``sx = hx + (x - cx) kx``, ``sy = hy + (y - cy) ky`` (``ky = -scale``: world y-up, screen
y-down), evaluated in that order so that both paths get the same float64 coordinates.
"""

from __future__ import annotations

import math

import numpy as np

from ..sim import backend as _sim
from ..sim.backend import njit
from ..sim.constraints import ROPE

#: Identity view: the coordinates given are already screen pixels.
SCREEN = (0.0, 0.0, 0.0, 0.0, 1.0, 1.0)


def _use_kernels(backend: str) -> bool:
    # ``backend`` is one of ``sim.backend.BACKENDS``. The drawing's kernels are no part
    # the warm-up holds back (the app keeps the renderer on "numpy" until they are
    # loaded): "auto" draws compiled whenever numba can run (it is imported when first
    # needed, sim/backend.py), with numpy where it turns out unusable; "compiled" says
    # why it cannot.
    return _sim.compiled(backend, None)


# --------------------------------------------------------------------------- kernels

@njit(cache=True, inline="always")
def _strain_bin(s, edges, neutral, fast, lo, hi):  # pragma: no cover - compiled
    """``np.digitize(s, edges)``: the number of edges ``<= s`` (NaN: past the
    last). ``fast``: the neutral bin ``[lo, hi)`` decided by one two-sided test
    first (most links; NaN fails it)."""
    if fast and s >= lo and s < hi:
        return neutral
    ne = edges.size
    bn = 0
    for e in range(ne):                     # edges <= s, without a branch
        bn += edges[e] <= s
    return ne if s != s else bn


@njit(cache=True)
def _strain_colours_kernel(x, i, j, rest, kind, strain, have_strain, edges, table,
                           neutral, colour, order, strain_out):  # pragma: no cover
    """Strain bin -> colour ``table[rope, bin]`` of every link, and the drawing order
    (by ``|bin - neutral|``, then by index: the most strained on top).

    The strain is ``strain[k]`` when ``have_strain``, else computed from ``x`` as
    ``Constraints.strain`` does (ropes: 0 when slack) and written to ``strain_out``.
    The bin is ``np.digitize``'s: the number of edges ``<= s`` (NaN: past the last).
    The order is a counting sort, the same permutation as a stable argsort.
    """
    m = i.size
    ne = edges.size
    nlev = max(neutral, ne - neutral) + 1
    counts = np.zeros(nlev + 1, np.int64)
    level = np.empty(m, np.int32)
    # Most links are in the neutral bin: one two-sided test decides it (NaN fails
    # it), and its count and its place in the order are kept in registers rather
    # than in counts[] (a store and a load per link).
    fast = neutral >= 1 and neutral < ne
    lo = edges[neutral - 1] if fast else 0.0
    hi = edges[neutral] if fast else 0.0
    n0 = 0
    for k in range(m):
        if have_strain:
            s = strain[k]
        else:
            a = i[k]
            b = j[k]
            dx = x[b, 0] - x[a, 0]
            dy = x[b, 1] - x[a, 1]
            L = math.sqrt(dx * dx + dy * dy)
            r = rest[k]
            s = (L - r) / (r if r > 0.0 else 1.0)
            if kind[k] == ROPE and s < 0.0:
                s = 0.0
            strain_out[k] = s
        bn = _strain_bin(s, edges, neutral, fast, lo, hi)
        colour[k] = table[1 if kind[k] == ROPE else 0, bn]
        lv = bn - neutral if bn >= neutral else neutral - bn
        level[k] = lv
        if lv == 0:
            n0 += 1
        else:
            counts[lv + 1] += 1
    counts[1] = n0
    for lv in range(nlev):
        counts[lv + 1] += counts[lv]
    p0 = 0
    for k in range(m):
        lv = level[k]
        if lv == 0:
            order[p0] = k
            p0 += 1
        else:
            order[counts[lv]] = k
            counts[lv] += 1


@njit(cache=True)
def _screen_kernel(x, hx, hy, cx, cy, kx, ky, sx, sy):  # pragma: no cover - compiled
    """``sx, sy (n,)``: the points ``x (n, 2)`` mapped to the screen by the view, with
    the float64 operations of the module docstring in their order."""
    for p in range(x.shape[0]):
        sx[p] = hx + (x[p, 0] - cx) * kx
        sy[p] = hy + (x[p, 1] - cy) * ky


@njit(cache=True)
def _segment_kernel(pix, px, py, qx, qy, col, wide):  # pragma: no cover - compiled
    """One segment (screen px) by the pixel rule, clipped to the box, every sample
    tested (ends clipped from huge coordinates may be off by more than rounding).
    Returns the samples taken. :func:`_draw_kernel`'s path for what is not a 1 px
    segment inside the box: out of its loop, which stays small and fast."""
    h, w = pix.shape
    wm1 = w - 1.0
    hm1 = h - 1.0
    if not (px >= 0.0 and px <= wm1 and py >= 0.0 and py <= hm1
            and qx >= 0.0 and qx <= wm1 and qy >= 0.0 and qy <= hm1):
        # Liang-Barsky, as raster.clip (NaN fails the test above and lands here).
        if not (math.isfinite(px) and math.isfinite(py) and math.isfinite(qx)
                and math.isfinite(qy)):
            return 0
        dx = qx - px
        dy = qy - py
        t0 = 0.0
        t1 = 1.0
        keep = True
        for e in range(4):
            if e == 0:
                pk = -dx
                qk = px
            elif e == 1:
                pk = dx
                qk = wm1 - px
            elif e == 2:
                pk = -dy
                qk = py
            else:
                pk = dy
                qk = hm1 - py
            if pk == 0.0:
                if qk < 0.0:
                    keep = False
            elif pk < 0.0:
                r = qk / pk
                if r > t0:
                    t0 = r
            else:
                r = qk / pk
                if r < t1:
                    t1 = r
        if not (keep and t0 <= t1):
            return 0
        ax = px + t0 * dx
        ay = py + t0 * dy
        bx = px + t1 * dx
        by = py + t1 * dy
        if not (math.isfinite(ax) and math.isfinite(ay) and math.isfinite(bx)
                and math.isfinite(by)):
            return 0
        px = ax
        py = ay
        qx = bx
        qy = by
    dx = qx - px
    dy = qy - py
    adx = abs(dx)
    ady = abs(dy)
    kk = int(math.ceil(adx if adx >= ady else ady)) + 1
    if kk < 2:
        kk = 2
    inv = 1.0 / (kk - 1)
    stx = dx * inv
    sty = dy * inv
    ox = px + 0.5
    oy = py + 0.5
    for s in range(kk):
        fs = float(s)
        xs = np.uint32(np.int32(fs * stx + ox))
        ys = np.uint32(np.int32(fs * sty + oy))
        if xs < w and ys < h:
            pix[ys, xs] = col
            if wide:
                pix[ys, xs + 1 if xs + 1 < w else xs] = col
                pix[ys + 1 if ys + 1 < h else ys, xs] = col
    return kk * (3 if wide else 1)


@njit(cache=True, inline="always")
def _samples(flat, uw, ox, oy, stx, sty, col, kk):  # pragma: no cover - compiled
    """Samples ``s = 0 .. kk-1`` of an in-box 1 px segment into ``flat`` (row
    length ``uw``). Inlined in numba's own IR, so a literal ``kk`` reaches LLVM
    as a constant trip count and the loop is unrolled without per-sample work."""
    for s in range(kk):
        fs = float(s)
        flat[np.uint32(np.int32(fs * sty + oy)) * uw
             + np.uint32(np.int32(fs * stx + ox))] = col


@njit(cache=True)
def _draw_kernel(pix, sx, sy, i, j, order, colour, width):  # pragma: no cover
    """Draw links ``order[o]`` (``(sx, sy)[i[k]] -> (sx, sy)[j[k]]``, screen px) in
    ``colour[k]`` by the module docstring's pixel rule. Returns the samples taken.

    A 1 px segment with both ends inside the box (almost all of a cloth in view) has
    all its samples inside it (they lie between its ends, within rounding) and is
    written here without per-sample tests; its sample count ``kk`` from 2 to 8 has a
    branch of its own with the loop unrolled and ``1 / (kk - 1)`` a constant (the
    same float64 as the division: the same pixels): a loop whose trip count and step
    are known only at run time cost twice as much per link. The rest (clipped
    segments, 2 px lines) goes to :func:`_segment_kernel`, a call, so that this loop
    stays small. Pixel indices go through uint32: numba emits no negative-index
    wraparound for them.
    """
    h, w = pix.shape
    flat = pix.reshape(-1)
    uw = np.uint32(w)
    wm1 = w - 1.0
    hm1 = h - 1.0
    wide = width > 1
    written = 0
    for o in range(order.size):
        k = order[o]
        a = i[k]
        b = j[k]
        px = sx[a]
        py = sy[a]
        qx = sx[b]
        qy = sy[b]
        col = colour[k]
        if wide or not (px >= 0.0 and px <= wm1 and py >= 0.0 and py <= hm1
                        and qx >= 0.0 and qx <= wm1 and qy >= 0.0 and qy <= hm1):
            written += _segment_kernel(pix, px, py, qx, qy, col, wide)
            continue
        dx = qx - px
        dy = qy - py
        adx = abs(dx)
        ady = abs(dy)
        kk = int(math.ceil(adx if adx >= ady else ady)) + 1
        if kk < 2:
            kk = 2
        ox = px + 0.5
        oy = py + 0.5
        written += kk
        if kk == 2:
            _samples(flat, uw, ox, oy, dx * 1.0, dy * 1.0, col, 2)
        elif kk == 3:
            _samples(flat, uw, ox, oy, dx * 0.5, dy * 0.5, col, 3)
        elif kk == 4:
            _samples(flat, uw, ox, oy, dx * 0.3333333333333333, dy * 0.3333333333333333, col, 4)
        elif kk == 5:
            _samples(flat, uw, ox, oy, dx * 0.25, dy * 0.25, col, 5)
        elif kk == 6:
            _samples(flat, uw, ox, oy, dx * 0.2, dy * 0.2, col, 6)
        elif kk == 7:
            _samples(flat, uw, ox, oy, dx * 0.16666666666666666, dy * 0.16666666666666666,
                     col, 7)
        elif kk == 8:
            _samples(flat, uw, ox, oy, dx * 0.14285714285714285, dy * 0.14285714285714285,
                     col, 8)
        else:
            inv = 1.0 / (kk - 1)
            _samples(flat, uw, ox, oy, dx * inv, dy * inv, col, kk)
    return written


@njit(cache=True)
def _links_kernel(pix, x, i, j, order, colour, hx, hy, cx, cy, kx, ky,
                  width):  # pragma: no cover - compiled
    """Draw links ``order[o]`` (``x[i[k]] -> x[j[k]]``, world) in ``colour[k]``: every
    point mapped to the screen once (not once per link end: a cloth's particle ends
    ~8 links), then :func:`_draw_kernel`. Returns the samples taken."""
    n = x.shape[0]
    sx = np.empty(n)
    sy = np.empty(n)
    _screen_kernel(x, hx, hy, cx, cy, kx, ky, sx, sy)
    return _draw_kernel(pix, sx, sy, i, j, order, colour, width)


@njit(cache=True)
def _strain_links_kernel(pix, sx, sy, i, j, kind, strain, edges, table, neutral,
                         width):  # pragma: no cover - compiled
    """:func:`_strain_colours_kernel` (strain given) then :func:`_draw_kernel` in one
    call, without the ``order`` and ``colour`` arrays' round trip through Python.

    The order is the counting sort's: the neutral links (level 0: most of a cloth)
    go straight to the front in index order as they are binned; the others are kept
    with their level and placed after them, stably, by level.
    """
    m = i.size
    ne = edges.size
    nlev = max(neutral, ne - neutral) + 1
    counts = np.zeros(nlev + 1, np.int64)
    colour = np.empty(m, table.dtype)
    order = np.empty(m, np.int32)
    pend = np.empty(m, np.int32)
    plev = np.empty(m, np.int32)
    fast = neutral >= 1 and neutral < ne
    lo = edges[neutral - 1] if fast else 0.0
    hi = edges[neutral] if fast else 0.0
    n0 = 0
    npend = 0
    for k in range(m):
        s = strain[k]
        bn = _strain_bin(s, edges, neutral, fast, lo, hi)
        colour[k] = table[1 if kind[k] == ROPE else 0, bn]
        if bn == neutral:
            order[n0] = k
            n0 += 1
        else:
            lv = bn - neutral if bn >= neutral else neutral - bn
            pend[npend] = k
            plev[npend] = lv
            npend += 1
            counts[lv + 1] += 1
    counts[1] = n0
    for lv in range(nlev):
        counts[lv + 1] += counts[lv]
    for r in range(npend):
        lv = plev[r]
        order[counts[lv]] = pend[r]
        counts[lv] += 1
    return _draw_kernel(pix, sx, sy, i, j, order, colour, width)


@njit(cache=True)
def _stamp_kernel(pix, pts, offsets, colours):  # pragma: no cover - compiled
    """``offsets (s, 2)`` stamped at every point ``pts (k, 2)`` px, as :func:`stamp`."""
    h, w = pix.shape
    for p in range(pts.shape[0]):
        x = pts[p, 0]
        y = pts[p, 1]
        if not (abs(x) < 1e7 and abs(y) < 1e7):      # far away or not finite
            continue
        cx = int(math.floor(x + 0.5))
        cy = int(math.floor(y + 0.5))
        col = colours[p]
        for o in range(offsets.shape[0]):
            xs = cx + offsets[o, 0]
            ys = cy + offsets[o, 1]
            if xs >= 0 and xs < w and ys >= 0 and ys < h:
                pix[ys, xs] = col


def warm_up() -> None:
    """Compile (or load from the disk cache) the kernels on a tiny problem, so that the
    first frame does not pause. Does nothing where numba cannot run."""
    if not _sim.runnable():
        return
    pix = np.zeros((4, 4), np.uint32)
    x = np.array([[0.0, 0.0], [3.0, 2.0]])
    i, j = np.array([0]), np.array([1])
    table = np.ones((2, 8), np.uint32)
    edges = np.array([-0.02, -0.005, -0.001, 0.001, 0.005, 0.02, 0.05])
    strain_colours(x, i, j, np.ones(1), np.zeros(1, np.int8), None, edges, table, 3)
    strain_links(pix, x, i, j, np.zeros(1, np.int8), np.zeros(1), edges, table, 3)
    links(pix, x, i, j, 1, SCREEN, width=2)
    stamp(pix, x, np.zeros((1, 2), np.int64), 1)


# --------------------------------------------------------------------------- links

def strain_colours(x, i, j, rest, kind, strain, edges, table, neutral: int,
                   backend: str = "auto"):
    """Colour and drawing order of links binned by strain.

    ``strain (m,)`` is the links' relative stretch, or None to compute it from ``x``
    (``(|x_j - x_i| - rest) / rest``, ropes (``kind == ROPE``) clamped to 0 when slack,
    as ``Constraints.strain``). Bins are ``np.digitize(strain, edges)``; a link's colour
    is ``table[kind == ROPE, bin]``. Returns ``colour (m,)`` (``table``'s dtype),
    ``order (m,)`` (by distance of the bin from ``neutral``, then by index: draw in this
    order and the most strained links end up on top) and the strain.
    """
    i = np.asarray(i, np.int64)
    j = np.asarray(j, np.int64)
    kind = np.asarray(kind, np.int8)
    if x is None:                                   # the strain is given: x is not read
        if strain is None:
            raise ValueError("strain_colours needs x or strain")
        x = np.zeros((0, 2))
    table = np.ascontiguousarray(table)
    edges = np.ascontiguousarray(edges, np.float64)
    m = len(i)
    if _use_kernels(backend):
        have = strain is not None
        s = (np.ascontiguousarray(strain, np.float64) if have else np.empty(m))
        if not s.flags.writeable:                   # a read-only view's strain
            s = s.copy()
        if have and len(s) != m:
            raise ValueError("strain and links differ in length")
        colour = np.empty(m, table.dtype)
        order = np.empty(m, np.int64)
        _strain_colours_kernel(np.ascontiguousarray(x, np.float64), i, j,
                               np.asarray(rest, np.float64), kind, s, have, edges, table,
                               int(neutral), colour, order, s)
        return colour, order, s
    if strain is None:
        rest = np.asarray(rest, np.float64)
        d = np.asarray(x, np.float64)[j] - np.asarray(x, np.float64)[i]
        s = (np.sqrt(np.einsum("ij,ij->i", d, d)) - rest) / np.where(rest > 0, rest, 1.0)
        strain = np.where((kind == ROPE) & (s < 0), 0.0, s)
    strain = np.asarray(strain, np.float64)
    bins = np.digitize(strain, edges)
    colour = table[(kind == ROPE).astype(np.intp), bins]
    order = np.argsort(np.abs(bins - int(neutral)), kind="stable")
    return colour, order, strain


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` read-only (a view if need be): the kernels see one array type whether the
    caller's array was a world view's (read-only) or a fresh one, so that one compiled
    specialisation (the one :func:`warm_up` makes) serves every call."""
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def strain_links(pix: np.ndarray, x, i, j, kind, strain, edges, table, neutral: int,
                 view=SCREEN, width: int = 1, backend: str = "auto") -> int:
    """:func:`strain_colours` (``strain (m,)`` given) then :func:`links` in the order it
    gives: links ``x[i[k]] -> x[j[k]]`` coloured by their strain bin, the most strained
    on top. With the kernels it is one compiled call (a pass bins and orders the links,
    a second draws them); the numpy reference calls the two functions. Returns the
    samples taken."""
    i = np.asarray(i, np.int64)
    j = np.asarray(j, np.int64)
    m = len(i)
    if strain is None or len(strain) != m:
        raise ValueError("strain_links needs the links' strain")
    if not _use_kernels(backend):
        colour, order, _ = strain_colours(None, i, j, np.ones(m), kind, strain, edges,
                                          table, neutral, backend)
        return links(pix, x, i, j, colour, view, order, width, backend)
    if not m:
        return 0
    x = np.ascontiguousarray(x, np.float64)
    sx = np.empty(len(x))
    sy = np.empty(len(x))
    hx, hy, cx, cy, kx, ky = (float(v) for v in view)
    _screen_kernel(_frozen(x), hx, hy, cx, cy, kx, ky, sx, sy)
    return int(_strain_links_kernel(
        pix, sx, sy, _frozen(i), _frozen(j), _frozen(np.ascontiguousarray(kind, np.int8)),
        _frozen(np.ascontiguousarray(strain, np.float64)),
        _frozen(np.ascontiguousarray(edges, np.float64)),
        _frozen(np.ascontiguousarray(table, np.uint32)), int(neutral), int(width)))


def links(pix: np.ndarray, x, i, j, colours, view=SCREEN, order=None, width: int = 1,
          backend: str = "auto") -> int:
    """Draw links ``x[i[k]] -> x[j[k]]`` (points ``x (n, 2)`` mapped by ``view``, see the
    module docstring) into ``pix`` in ``colours`` (scalar or ``(m,)``, per link), in
    ``order`` (link indices; default all, by index; the last drawn is on top);
    ``width`` 1 or 2 px. Returns the samples taken."""
    i = np.asarray(i, np.int64)
    j = np.asarray(j, np.int64)
    m = len(i)
    colours = np.broadcast_to(np.asarray(colours, pix.dtype), (m,))
    order = np.arange(m) if order is None else np.asarray(order, np.int64)
    hx, hy, cx, cy, kx, ky = (float(v) for v in view)
    if not len(order):
        return 0
    if _use_kernels(backend):
        # Read-only views throughout: the one specialisation warm_up() compiles serves
        # a world view's arrays and fresh ones alike.
        return int(_links_kernel(pix, _frozen(np.ascontiguousarray(x, np.float64)),
                                 _frozen(i), _frozen(j), _frozen(order),
                                 _frozen(np.ascontiguousarray(colours)), hx, hy, cx, cy,
                                 kx, ky, int(width)))
    x = np.asarray(x, np.float64)
    sx = hx + (x[:, 0] - cx) * kx
    sy = hy + (x[:, 1] - cy) * ky
    ci, cj = i[order], j[order]
    return _segments_numpy(pix, sx[ci], sy[ci], sx[cj], sy[cj], colours[order], width)


def segments(pix: np.ndarray, p: np.ndarray, q: np.ndarray, colours, width: int = 1,
             backend: str = "auto") -> int:
    """Draw segments ``p[k] -> q[k]`` (screen px ``(m, 2)``) in ``colours`` (scalar or
    ``(m,)``) into ``pix (H, W)``, in index order; ``width`` 1 or 2 px. Returns the
    samples taken."""
    p = np.asarray(p, float).reshape(-1, 2)
    q = np.asarray(q, float).reshape(-1, 2)
    return segments_xy(pix, p[:, 0], p[:, 1], q[:, 0], q[:, 1], colours, width, backend)


def segments_xy(pix: np.ndarray, px, py, qx, qy, colours, width: int = 1,
                backend: str = "auto") -> int:
    """:func:`segments` with the coordinates as four ``(m,)`` columns."""
    m = len(px)
    if m == 0:
        return 0
    if _use_kernels(backend):
        ends = np.empty((2 * m, 2))
        ends[:m, 0], ends[:m, 1], ends[m:, 0], ends[m:, 1] = px, py, qx, qy
        k = np.arange(m)
        return links(pix, ends, k, k + m, colours, SCREEN, width=width, backend="compiled")
    return _segments_numpy(pix, px, py, qx, qy, colours, width)


def _segments_numpy(pix: np.ndarray, px, py, qx, qy, colours, width: int = 1) -> int:
    """The numpy reference of the pixel rule: the samples of every segment, segment
    after segment, in flat arrays, written with one assignment, so that the last segment
    lighting a pixel wins."""
    h, w = pix.shape
    m = len(px)
    if m == 0:
        return 0
    colours = np.broadcast_to(np.asarray(colours, pix.dtype), (m,))
    px, py, qx, qy = (np.asarray(a, np.float64) for a in (px, py, qx, qy))
    # Segments with both ends on screen need no clipping (a cloth in view is almost all
    # of them). The others are clipped in float64 (far-away ends lose no precision) and
    # put back in their place; NaN compares False, so non-finite ones go to clip() and
    # are dropped there.
    with np.errstate(invalid="ignore"):
        inside = ((px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
                  & (qx >= 0) & (qx <= w - 1) & (qy >= 0) & (qy <= h - 1))
    if not inside.all():
        out = np.flatnonzero(~inside)
        cp, cq, keep = clip(np.stack([px[out], py[out]], axis=1),
                            np.stack([qx[out], qy[out]], axis=1), w, h)
        px, py, qx, qy = (a.copy() for a in (px, py, qx, qy))
        back = out[keep]
        px[back], py[back], qx[back], qy[back] = cp[:, 0], cp[:, 1], cq[:, 0], cq[:, 1]
        valid = inside.copy()
        valid[back] = True
        px, py, qx, qy = px[valid], py[valid], qx[valid], qy[valid]
        colours = colours[valid]
    if not len(px):
        return 0
    dx = qx - px
    dy = qy - py
    # One sample per pixel along the longer axis, both ends included (a DDA line); all
    # the samples of all the segments in one flat array, segment after segment.
    k = np.maximum(np.ceil(np.maximum(np.abs(dx), np.abs(dy))).astype(np.intp) + 1, 2)
    inv = 1.0 / (k - 1)
    start = np.cumsum(k) - k
    s = np.arange(int(start[-1] + k[-1])) - np.repeat(start, k)     # index in its segment
    xs = s * np.repeat(dx * inv, k)
    xs += np.repeat(px + 0.5, k)          # round half up: (x + 0.5) truncated
    xs = xs.astype(np.intp)
    ys = s * np.repeat(dy * inv, k)
    ys += np.repeat(py + 0.5, k)
    ys = ys.astype(np.intp)
    idx = ys * w
    idx += xs
    if width > 1:                         # and the right and the lower neighbour
        idx = np.stack([idx, ys * w + np.minimum(xs + 1, w - 1),
                        np.minimum(ys + 1, h - 1) * w + xs], axis=1).ravel()
    # One 1-D fancy assignment: numpy writes it in index order, so the last write wins.
    pix.reshape(-1)[idx] = np.repeat(colours, k * (len(idx) // len(s)))
    return len(idx)


def clip(p: np.ndarray, q: np.ndarray, w: int, h: int):
    """Clip segments ``p q (m, 2)`` px to the pixel box ``[0, w-1] x [0, h-1]``.

    Liang-Barsky: along ``p + t (q - p)``, each box edge bounds ``t`` from below (the
    segment enters) or above (it leaves); the visible part is ``[t0, t1]`` if non-empty.
    Returns the clipped ``p, q`` and the mask of segments with a visible part.
    """
    p = np.asarray(p, np.float64)
    q = np.asarray(q, np.float64)
    with np.errstate(all="ignore"):             # huge coordinates: dropped below
        d = q - p
        t0 = np.zeros(len(p))
        t1 = np.ones(len(p))
        keep = np.isfinite(p).all(axis=1) & np.isfinite(q).all(axis=1)
        for pk, qk in ((-d[:, 0], p[:, 0]), (d[:, 0], (w - 1) - p[:, 0]),
                       (-d[:, 1], p[:, 1]), (d[:, 1], (h - 1) - p[:, 1])):
            r = qk / pk
            keep &= ~((pk == 0) & (qk < 0))          # parallel to the edge and outside
            t0 = np.where(pk < 0, np.maximum(t0, r), t0)
            t1 = np.where(pk > 0, np.minimum(t1, r), t1)
        keep &= t0 <= t1
        p2 = p + t0[:, None] * d
        q2 = p + t1[:, None] * d
    # Coordinates near the float limit make inf - inf: such a segment is not drawn.
    keep &= np.isfinite(p2).all(axis=1) & np.isfinite(q2).all(axis=1)
    return p2[keep], q2[keep], keep


# --------------------------------------------------------------------------- dots

def disc_offsets(r: float) -> np.ndarray:
    """Integer pixel offsets ``(k, 2)`` of a filled disc of radius ``r`` px."""
    ri = int(np.ceil(r))
    g = np.arange(-ri, ri + 1)
    ox, oy = np.meshgrid(g, g)
    inside = ox * ox + oy * oy <= r * r + 0.25
    return np.stack([ox[inside], oy[inside]], axis=1)


def ring_offsets(r: float, thickness: float = 1.0) -> np.ndarray:
    """Offsets of a ring of radius ``r`` px, ``thickness`` px wide."""
    ri = int(np.ceil(r + thickness))
    g = np.arange(-ri, ri + 1)
    ox, oy = np.meshgrid(g, g)
    d = np.sqrt(ox * ox + oy * oy)
    on = np.abs(d - r) <= 0.5 * thickness + 0.25
    return np.stack([ox[on], oy[on]], axis=1)


def square_offsets(half: int, hollow: bool = False) -> np.ndarray:
    """Offsets of a ``(2 half + 1)`` px square, filled or its outline only."""
    g = np.arange(-half, half + 1)
    ox, oy = np.meshgrid(g, g)
    on = np.ones_like(ox, bool)
    if hollow:
        on = (np.abs(ox) == half) | (np.abs(oy) == half)
    return np.stack([ox[on], oy[on]], axis=1)


def stamp(pix: np.ndarray, pts: np.ndarray, offsets: np.ndarray, colours,
          backend: str = "auto") -> None:
    """Stamp the pixel pattern ``offsets (s, 2)`` at each point ``pts (k, 2)`` px (the
    pixel ``floor(p + 0.5)``), point after point: the last point wins an overlap."""
    h, w = pix.shape
    pts = np.asarray(pts, float).reshape(-1, 2)
    if not len(pts):
        return
    colours = np.broadcast_to(np.asarray(colours, pix.dtype), (len(pts),))
    if _use_kernels(backend):
        # Always a writable copy: a read-only one (per-point colours come through
        # broadcast_to) is another type to numba, and its first call loaded a second
        # kernel in the middle of a frame (74-107 ms, right after the switch).
        _stamp_kernel(pix, np.ascontiguousarray(pts), np.ascontiguousarray(offsets, np.int64),
                      np.array(colours, order="C"))
        return
    ok = np.isfinite(pts).all(axis=1)
    # Far-away points would overflow int32 and can never touch the window.
    ok &= (np.abs(pts) < 1e7).all(axis=1)
    c = np.floor(pts[ok] + 0.5).astype(np.int64)
    colours = colours[ok]
    xs = c[:, 0:1] + offsets[None, :, 0]
    ys = c[:, 1:2] + offsets[None, :, 1]
    inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    col = np.broadcast_to(colours[:, None], xs.shape)
    pix.reshape(-1)[(ys * w + xs)[inside]] = col[inside]

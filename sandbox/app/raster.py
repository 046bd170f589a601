"""Vectorised rasterisation of many segments and dots straight into a pixel array.

A 200 x 200 cloth has 158,802 links; one ``pygame.draw.line`` call each costs more than
the physics. Instead every link is clipped to the window (Liang-Barsky, all at once),
sampled at one point per pixel of its longer axis (a DDA line, so no gaps), and the
samples are written into the surface's pixels with one fancy-index assignment. Links
are grouped by sample count into a few buckets so that each bucket is a single
``(links, samples)`` broadcast, never a Python loop over links.

``pix`` below is a C-contiguous ``(H, W)`` uint32 view of a 32-bit surface
(``pygame.surfarray.pixels2d(surface).T``); colours are ``surface.map_rgb`` ints.
Where links overlap, the one written last wins, so callers pass the links they want on
top last.
"""

from __future__ import annotations

import numpy as np

#: Sample counts a segment is rounded up to (a segment of n pixels gets the next one):
#: at most 1.5x oversampling, and one broadcast per bucket.
_BUCKETS = np.array([2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128, 192, 256,
                     384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192])
#: Bucket index of every sample count 0..8192 (a gather is ten times a searchsorted).
_BUCKET_OF = np.searchsorted(_BUCKETS, np.arange(_BUCKETS[-1] + 1)).astype(np.int8)


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


def segments(pix: np.ndarray, p: np.ndarray, q: np.ndarray, colours, width: int = 1) -> int:
    """Draw segments ``p[k] -> q[k]`` (screen px ``(m, 2)``) in ``colours`` (scalar or
    ``(m,)``) into ``pix (H, W)``; ``width`` 1 or 2 px. Returns the samples written."""
    p = np.asarray(p, float).reshape(-1, 2)
    q = np.asarray(q, float).reshape(-1, 2)
    return segments_xy(pix, p[:, 0], p[:, 1], q[:, 0], q[:, 1], colours, width)


def segments_xy(pix: np.ndarray, px, py, qx, qy, colours, width: int = 1) -> int:
    """:func:`segments` with the coordinates as four ``(m,)`` columns (no gathers into
    ``(m, 2)`` arrays: every pass below is a plain loop over one contiguous vector)."""
    h, w = pix.shape
    m = len(px)
    if m == 0:
        return 0
    colours = np.broadcast_to(np.asarray(colours, pix.dtype), (m,))
    px, py, qx, qy = (np.asarray(a, np.float64) for a in (px, py, qx, qy))
    # Fast path: segments with both ends on screen need no clipping (a cloth in view is
    # almost all of them) and are sampled in float32. The others are clipped in float64
    # first (far-away ends lose no precision); NaN compares False, so non-finite ones
    # go to clip() and are dropped there.
    with np.errstate(invalid="ignore"):
        inside = ((px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
                  & (qx >= 0) & (qx <= w - 1) & (qy >= 0) & (qy <= h - 1))
    if inside.all():
        px, py, qx, qy = (a.astype(np.float32) for a in (px, py, qx, qy))
    else:
        out = ~inside
        cp, cq, keep = clip(np.stack([px[out], py[out]], axis=1),
                            np.stack([qx[out], qy[out]], axis=1), w, h)
        px = np.concatenate([px[inside], cp[:, 0]]).astype(np.float32)
        py = np.concatenate([py[inside], cp[:, 1]]).astype(np.float32)
        qx = np.concatenate([qx[inside], cq[:, 0]]).astype(np.float32)
        qy = np.concatenate([qy[inside], cq[:, 1]]).astype(np.float32)
        colours = np.concatenate([colours[inside], colours[out][keep]])
    if not len(px):
        return 0
    dx = qx - px
    dy = qy - py
    # One sample per pixel along the longer axis, both ends included (a DDA line).
    n = np.ceil(np.maximum(np.abs(dx), np.abs(dy))).astype(np.int32) + 1
    bucket = _BUCKET_OF[np.minimum(n, _BUCKETS[-1])]
    flat_pix = pix.reshape(-1)
    written = 0
    # Offsets of a 2 px line: the sample, its right and its lower neighbour.
    offsets = [(0, 0)] if width <= 1 else [(0, 0), (1, 0), (0, 1)]
    counts = np.bincount(bucket)
    half = np.float32(0.5)
    for b in np.flatnonzero(counts):
        sel = np.flatnonzero(bucket == b) if counts[b] < len(bucket) else slice(None)
        k = int(_BUCKETS[b])
        t = np.linspace(0.0, 1.0, k, dtype=np.float32)
        # Round half up: (x + 0.5) truncated; points lie in [0, w-1] x [0, h-1].
        xs = np.multiply.outer(dx[sel], t)
        xs += (px[sel] + half)[:, None]
        xs = xs.astype(np.int32)
        ys = np.multiply.outer(dy[sel], t)
        ys += (py[sel] + half)[:, None]
        ys = ys.astype(np.int32)
        col = np.repeat(colours[sel], k)
        for ox, oy in offsets:
            xo = np.minimum(xs + ox, w - 1) if ox else xs
            yo = np.minimum(ys + oy, h - 1) if oy else ys
            idx = yo * w
            idx += xo
            flat_pix[idx.ravel()] = col
        written += xs.size * len(offsets)
    return written


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


def stamp(pix: np.ndarray, pts: np.ndarray, offsets: np.ndarray, colours) -> None:
    """Stamp the pixel pattern ``offsets (s, 2)`` at each point ``pts (k, 2)`` px."""
    h, w = pix.shape
    pts = np.asarray(pts, float)
    if not len(pts):
        return
    colours = np.broadcast_to(np.asarray(colours, pix.dtype), (len(pts),))
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

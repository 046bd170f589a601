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
independent of the step and of the iteration count (rigid links, ``alpha = 0``, never
read it). Constraints are split into colour batches that share no particle; a batch is
projected at once with fancy indexing (the writes cannot collide: a test checks every
batch), batches one after another, which is Gauss-Seidel between batches and exact
within one. The compiled sweep (``kernels.project_batches``) walks a *plan* of each
batch: runs of links addressed by offsets, which vectorise, and gathered rows for the
rest (see :meth:`Constraints._flat_batches`).

One projection computes ``s = (-C - alpha~ lambda) / ((w_i + w_j + alpha~) |d|)`` and
moves the ends by ``w s d``: one division instead of two, in the reference and the
kernels alike, so they agree bit for bit.

*Even split.* A rigid link between two equal inverse masses (``alpha = 0``,
``w_i = w_j > 0``: most of a cloth, every free rope link) moves each end by half its
error, ``x_i += s d``, ``x_j -= s d`` with ``s = 1/2 - (rest/2) / max(|d|, 1e-12)`` (a
rope link: ``max(s, 0)``). The same correction as above, without the inverse masses,
``C`` or the ``w`` products: the classic cloth formula (Jakobsen 2001), and in float32
the sweep's operations per link are then few enough that its vector loop keeps up with
a kernel written for the grid alone. ``|d|`` below 1e-12 (ends on top of each other)
moves each end by at most ``rest / 2``, never by a NaN. Reference and kernels choose
between the two forms by the same test, per link, so they still agree bit for bit.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from . import backend as _backend
from . import cores, kernels

STICK, ROPE = 0, 1

#: Batches of at least this many constraints may be spread over the cores (``threads``
#: "auto"); below it thread start-up costs more than it saves.
PARALLEL_MIN = 1000
PARALLEL_CORES = os.cpu_count() or 1
#: Shortest run of a plan (shorter ones are gathered) and the longest gather row.
RUN_MIN = 8
GATHER_MAX = 4096
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


#: A particle's row ``(x, y)`` as one number, for the numpy sweep's gathers and scatters.
_ROW = {np.dtype(np.float64): np.complex128, np.dtype(np.float32): np.complex64}


def softness_factor(factor) -> float:
    """``factor`` as a link softness (a float, finite, >= 0), or ``ValueError`` saying so."""
    f = float(factor)
    if not (math.isfinite(f) and f >= 0):
        raise ValueError(f"link softness must be a finite factor >= 0, got {factor!r}")
    return f


@dataclass
class Constraints:
    """Structure of arrays of ``m`` distance constraints, with their colour batches."""

    i: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    j: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    rest: np.ndarray = field(default_factory=lambda: np.zeros(0))
    compliance: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    colour: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: One of ``backend.BACKENDS``: "auto" (the compiled sweep when the kernels may
    #: run), "compiled" or "numpy" (the reference)
    backend: str = "auto"
    #: The compiled sweep's threads, one of ``cores.MODES``: "auto" (batches of at least
    #: ``PARALLEL_MIN`` links over the cores when ``cores.POLICY`` finds it pays),
    #: "serial" (one thread) or "parallel" (every batch over the cores). The same
    #: numbers whichever: a batch shares no particle.
    threads: str = "auto"
    #: Particle grids ``(first, rows, cols)`` (row-major, ``first + r*cols + c``) that
    #: builders declare; the compiled frame stores them in parity order (see
    #: :meth:`grid_order`). Only a layout hint: any value gives the same numbers.
    grids: list[tuple[int, int, int]] = field(default_factory=list)
    #: The factor :meth:`set_softness` last gave: ``compliance`` is each link's own
    #: compliance (:attr:`own_compliance`) times it. Rigid links (0) stay rigid.
    softness: float = 1.0
    _own: np.ndarray | None = None       # the links' own compliance (None: ``compliance``)
    _batches: list[np.ndarray] | None = None
    _flat: tuple | None = None
    _frame: tuple | None = None
    _compliant: bool | None = None
    _numpy: tuple | None = None          # the numpy sweep's terms (:meth:`_numpy_terms`)

    def __len__(self) -> int:
        return self.i.size

    @property
    def compliant(self) -> bool:
        """True when some constraint has a compliance (only those use ``lam``)."""
        if self._compliant is None:
            self._compliant = bool(np.any(self.compliance != 0))
        return self._compliant

    @property
    def own_compliance(self) -> np.ndarray:
        """Each link's own compliance (m/N), as added: ``compliance`` is it times
        :attr:`softness`."""
        return self.compliance if self._own is None else self._own

    def set_softness(self, factor: float) -> None:
        """Every link's compliance becomes its own (:attr:`own_compliance`) times
        ``factor`` (finite, >= 0): 0 makes every link rigid, 1 gives back the links as
        they were made, 10 ten times as soft; rigid links stay rigid whatever the
        factor. Everything made from the old compliances is forgotten, as :meth:`add`
        and :meth:`remove` forget it: the compiled sweep's flat tables (a new
        :attr:`tables_made`, so a compiled frame's kept arguments no longer hold), the
        frame's layout, the numpy sweep's terms and :attr:`compliant`. The multipliers
        are the stepper's to reset (``World.set_link_softness`` does)."""
        f = softness_factor(factor)
        own = self.own_compliance
        self.compliance, self._own, self.softness = own * f, own, f
        self._forget()

    def _forget(self) -> None:
        """Drop everything made from the links' arrays (they changed)."""
        self._batches = self._flat = self._frame = self._compliant = None
        self._numpy = None

    @property
    def batches(self) -> list[np.ndarray]:
        """Constraint indices per colour; each batch shares no particle."""
        if self._batches is None:
            order = np.argsort(self.colour, kind="stable")
            cols = self.colour[order]
            cuts = np.flatnonzero(np.diff(cols)) + 1
            self._batches = [b for b in np.split(order, cuts) if b.size]
        return self._batches

    def _flat_batches(self, dtype=np.float64) -> tuple:
        """The constraint arrays sorted batch after batch, and the plan of their chunks.

        Returns ``i, j, rest, compliance, kind, plan, offsets``: copies in *flat* order
        (``lam`` is kept in this order), with ``i < j`` (a distance constraint is
        symmetric: swapping its ends changes no bit of the result), the float arrays in
        the positions' ``dtype``. Within a batch the order is free (its links share no
        particle), so links are sorted by ``(compliant, kind, j - i, i)``: a cloth's
        vertical and diagonal links then form long runs of consecutive ``i`` at one
        distance ``j - i``, its horizontal links and a rope's runs of ``i`` stepping by
        2 with ``j = i + 1``. ``plan`` has a row per chunk ``(mode, k0, n, i0, d,
        rope)``: ``n`` flat links from ``k0``, a run from particle ``i0`` at distance
        ``d`` (``kernels.RUN_STRIDE`` / ``RUN_PAIRS``, rigid links only, at most
        ``kernels.CHUNK``) or ``kernels.GATHER`` (``GATHER_SOFT``: compliant sticks
        only), read through the index arrays.
        ``offsets`` bound each batch's rows of ``plan``.
        """
        key = np.dtype(dtype).str
        if self._flat is None or self._flat[0] != key:
            self._flat = (key, self._plan(np.dtype(dtype)))
        return self._flat[1]

    @property
    def tables_made(self) -> tuple | None:
        """The flat tables as :meth:`_flat_batches` last made them (None: not yet): a new
        object whenever they are made again, so a caller that keeps arguments built from
        them (``pipeline.lane_objects``) can tell by identity that they still stand."""
        return self._flat

    def add_grid(self, first: int, rows: int, cols: int) -> None:
        """Declare particles ``first + r*cols + c`` (``r < rows``, ``c < cols``) a grid
        (the cloth builder does), for the compiled frame's layout (:meth:`grid_order`)."""
        self.grids.append((int(first), int(rows), int(cols)))
        self._frame = None

    def grid_order(self, n: int) -> np.ndarray:
        """Where each of ``n`` particles sits in the compiled frame's planar copy:
        ``perm[k]`` is particle ``k``'s slot, or an empty array for the identity.

        Inside each declared grid the particles are split by the parity of their row
        and column into four blocks, (even, even), (even, odd), (odd, even), (odd,
        odd), each a row-major grid of half the rows and columns. A cloth's colour
        batches (rows, columns and diagonals alternate colour with the row or column)
        then join slots at one constant offset: half of each family's links over a
        whole block, the other half (whose last column or row has no partner) row by
        row, all unit-stride runs for the sweep, horizontal links too (``RUN_STRIDE``
        instead of ``RUN_PAIRS``). Outside the grids, and for grids that overlap
        another one, do not fit in ``n`` or have an odd number of columns, the order
        stays (with odd columns the two column blocks differ in width, so the offset
        changes from row to row and the runs would be shorter than in row order).
        """
        perm = np.arange(n, dtype=np.int64)
        taken = np.zeros(n, bool)
        used = False
        for first, rows, cols in self.grids:
            size = rows * cols
            if rows < 2 or cols < 2 or cols % 2 or first < 0 or first + size > n \
                    or taken[first:first + size].any():
                continue
            taken[first:first + size] = True
            r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
            half_r = np.array([(rows + 1) // 2, rows // 2])
            half_c = np.array([(cols + 1) // 2, cols // 2])
            sizes = (half_r[:, None] * half_c[None, :]).ravel()     # blocks 00 01 10 11
            start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            block = 2 * (r % 2) + c % 2
            slot = start[block] + (r // 2) * half_c[c % 2] + c // 2
            perm[first:first + size] = first + slot.ravel()
            used = True
        return perm if used else np.zeros(0, np.int64)

    def frame_batches(self, dtype, n: int) -> tuple:
        """:meth:`_flat_batches` for the compiled frame: ``(links, perm)``, the links'
        seven arrays (``kernels.LinkTable``'s fields, one tuple kept while they hold)
        with their ends and the plan's runs in the slots of :meth:`grid_order`
        ``perm`` (empty: the particles' own order)."""
        key = (np.dtype(dtype).str, n)
        if self._frame is None or self._frame[0] != key:
            perm = self.grid_order(n)
            links = (self._plan(np.dtype(dtype), perm) if perm.size
                     else self._flat_batches(dtype))
            self._frame = (key, links, perm)
        return self._frame[1:]

    def _plan(self, dtype, perm=None) -> tuple:
        m = self.i.size
        bs = self.batches
        batch = np.repeat(np.arange(len(bs)), [b.size for b in bs])
        order = np.concatenate(bs) if bs else np.zeros(0, np.int64)
        ci, cj = (self.i, self.j) if perm is None else (perm[self.i], perm[self.j])
        lo = np.minimum(ci, cj)[order]
        hi = np.maximum(ci, cj)[order]
        d = hi - lo
        soft = (self.compliance[order] != 0).astype(np.int64)
        kind = self.kind[order].astype(np.int64)
        sort = np.lexsort((lo, d, kind, soft, batch))
        order, lo, hi, d = order[sort], lo[sort], hi[sort], d[sort]
        batch, soft, kind = batch[sort], soft[sort], kind[sort]
        # A run continues while batch, softness, kind and distance stay and i steps by
        # 2 (pairs, d = 1) or by 1 (d > 1); runs shorter than RUN_MIN are gathered.
        step = np.where(d == 1, 2, 1)
        cont = np.zeros(m, bool)
        if m > 1:
            cont[1:] = ((batch[1:] == batch[:-1]) & (soft[1:] == 0) & (soft[:-1] == 0)
                        & (kind[1:] == kind[:-1]) & (d[1:] == d[:-1])
                        & (lo[1:] - lo[:-1] == step[1:]))
        starts = np.flatnonzero(~cont)
        length = np.diff(np.append(starts, m))
        run = length >= RUN_MIN
        # Split long runs into chunks of at most CHUNK links (the unit of threading).
        pieces = np.where(run, -(-length // kernels.CHUNK), 1)
        first = np.repeat(starts, pieces)
        within = np.arange(first.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        k0 = first + within * np.where(np.repeat(run, pieces), kernels.CHUNK, 0)
        is_run = np.repeat(run, pieces)
        end = np.append(k0[1:], m)
        n = np.where(is_run, np.minimum(end - k0, kernels.CHUNK), end - k0)
        # Merge neighbouring gather rows of a batch, about GATHER_MAX links a row.
        if k0.size:
            head = np.ones(k0.size, bool)
            # Rows hold one class of link (compliant or not, stick or rope): a row of
            # compliant sticks takes its own loop (``kernels.GATHER_SOFT``).
            cls = soft[k0] * 2 + kind[k0]
            head[1:] = ~(~is_run[1:] & ~is_run[:-1] & (batch[k0[1:]] == batch[k0[:-1]])
                         & (cls[1:] == cls[:-1]))
            before = np.cumsum(n) - n                   # links before each row
            group_start = before[head][np.cumsum(head) - 1]
            piece = (before - group_start) // GATHER_MAX
            head[1:] |= piece[1:] != piece[:-1]
            rows = np.flatnonzero(head)
            k0, n, is_run = k0[rows], np.add.reduceat(n, rows), is_run[rows]
        gather = np.where((soft[k0] == 1) & (kind[k0] == STICK), kernels.GATHER_SOFT,
                          kernels.GATHER)
        mode = np.where(~is_run, gather,
                        np.where(d[k0] == 1, kernels.RUN_PAIRS, kernels.RUN_STRIDE))
        plan = np.stack([mode, k0, n, lo[k0], d[k0], (kind[k0] == ROPE).astype(np.int64)],
                        axis=1).astype(np.int64) if m else np.zeros((0, 6), np.int64)
        rows_per_batch = np.bincount(batch[k0], minlength=len(bs)) if m else np.zeros(0, int)
        offsets = np.concatenate([[0], np.cumsum(rows_per_batch)]).astype(np.int64)
        return (lo, hi, self.rest[order].astype(dtype), self.compliance[order].astype(dtype),
                self.kind[order], np.ascontiguousarray(plan), offsets)

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
        own = np.broadcast_to(np.asarray(compliance, float), (k,))
        if self._own is not None:           # softened: the new links are softened too
            self._own = np.concatenate([self._own, own])
            own = own * self.softness
        self.compliance = np.concatenate([self.compliance, own])
        self.kind = np.concatenate([self.kind, kinds])
        self.colour = np.concatenate([self.colour, new_colour])
        if not colouring_is_valid(self.i, self.j, self.colour):
            self.colour = greedy_colouring(self.i, self.j, x.shape[0])
        self._forget()
        return np.arange(start, start + k)

    def remove(self, mask: np.ndarray) -> int:
        """Drop the constraints where ``mask`` is True; a subset of a colouring stays valid."""
        mask = np.asarray(mask, bool)
        count = int(mask.sum())
        if count:
            keep = ~mask
            for name in ("i", "j", "rest", "compliance", "kind", "colour"):
                setattr(self, name, getattr(self, name)[keep])
            if self._own is not None:
                self._own = self._own[keep]
            self._forget()
        return count

    # --- solving ------------------------------------------------------------------------

    def project(self, x: np.ndarray, w: np.ndarray, h: float, lam: np.ndarray) -> None:
        """One XPBD Gauss-Seidel sweep over the colour batches, in place on ``x (n, 2)``.

        ``w (n,)`` inverse masses (0 = pinned or grabbed), ``h`` the (sub)step in s,
        ``lam (m,)`` the Lagrange multipliers accumulated in this step (in ``x``'s float
        type: a float32 world computes in float32). Runs the compiled
        kernel when ``backend`` says so (``backend.compiled``), else :meth:`project_numpy`.
        """
        if not len(self):
            return
        args = self.kernel_args(x, w)
        if args is not None:
            # ``lam`` is private to a step: the kernel keeps it in flat order.
            links, min_parallel = args
            kernels.project_batches(x, w, links, x.dtype.type(1.0 / (h * h)), lam,
                                    min_parallel)
            return
        self.project_numpy(x, w, h, lam)

    def kernel_args(self, x: np.ndarray, w: np.ndarray, frame: bool = False) -> tuple | None:
        """``(links, min_parallel)`` for the compiled sweep over positions ``x`` and
        inverse masses ``w`` (``links``: ``kernels.LinkTable``'s fields, a tuple kept
        while the links stand), or None when the numpy reference must run
        (``backend``, no numba, arrays it cannot take: ``backend.fits``).
        ``frame``: ``(links, perm, min_parallel)`` for ``kernels.verlet_frame``, in
        the grid layout's slots ``perm`` (:meth:`frame_batches`)."""
        if not (_backend.compiled(self.backend, dtype=x.dtype) and len(self) and x.ndim == 2
                and x.shape[1] == 2 and _backend.fits(x, w)):
            return None
        # Smallest batch spread over the cores: "serial" keeps one thread, "parallel"
        # spreads every batch, "auto" only the big ones (and asks ``cores.POLICY``).
        threads = self.threads
        if threads == "auto":
            min_parallel = PARALLEL_MIN
        elif threads == "serial":
            min_parallel = 2**62
        elif threads == "parallel":
            min_parallel = 1
        else:
            raise ValueError(f"threads must be one of {', '.join(map(repr, cores.MODES))}, "
                             f"not {threads!r}")
        if PARALLEL_CORES == 1:
            min_parallel = 2**62
        if frame:
            links, perm = self.frame_batches(x.dtype, x.shape[0])
            return links, perm, min_parallel
        return self._flat_batches(x.dtype), min_parallel

    def _numpy_terms(self, w: np.ndarray, dtype, inv_h2) -> list[tuple]:
        """Per batch, what :meth:`project_numpy` computes from the links, the inverse
        masses ``w`` and the step alone: the same values, computed once while they hold
        (a sweep repeated them every iteration of every substep: a third of its numpy
        calls; ``w`` is compared on every call, a pin or a grab changes it)."""
        key = (np.dtype(dtype).str, float(inv_h2))
        c = self._numpy
        if c is not None and c[0] == key and c[1].shape == w.shape and np.array_equal(c[1], w):
            return c[2]
        f = np.dtype(dtype).type
        terms = []
        for b in self.batches:
            ci, cj = self.i[b], self.j[b]
            rest = self.rest[b].astype(dtype)
            at = self.compliance[b].astype(dtype) * inv_h2
            wi, wj = w[ci], w[cj]
            denom = wi + wj + at
            # Even split: a rigid link between equal inverse masses moves each end by
            # half the error, ``(1/2 - (rest/2) / L) d`` (see the module docstring).
            even = (at == 0) & (wi == wj) & (wi > 0)
            terms.append((b, ci, cj, rest, self.kind[b] == ROPE, at, at != 0, wi[:, None],
                          wj[:, None], denom, denom > 0, even[:, None], bool(even.any()),
                          rest * f(0.5)))
        self._numpy = (key, w.copy(), terms)
        return terms

    def project_numpy(self, x: np.ndarray, w: np.ndarray, h: float, lam: np.ndarray) -> None:
        """The numpy reference of :meth:`project`: one fancy-indexed update per batch.

        A particle's row ``(x, y)`` is gathered and scattered as one complex number where
        the positions allow it (C order, float64 or float32): the same bits, moved by a
        1-D ``take`` / assignment (0.5 us for a batch of 150 links, against 3.3 us for
        ``x[i]`` on an ``(n, 2)`` array)."""
        # In the positions' float type throughout: a float32 world computes in float32.
        f = x.dtype.type
        inv_h2 = f(1.0 / (h * h))
        half, eps, zero = f(0.5), f(1e-12), f(0.0)
        rows: np.ndarray | None = (
            x.view(_ROW[x.dtype]).reshape(-1) if x.dtype in _ROW and x.ndim == 2
            and x.shape[1] == 2 and x.flags.c_contiguous else None)
        for (b, ci, cj, rest, rope, at, soft, wi, wj, denom, positive, even, any_even,
             half_rest) in self._numpy_terms(w, x.dtype, inv_h2):
            if rows is not None:
                xi = rows.take(ci).view(f).reshape(-1, 2)
                xj = rows.take(cj).view(f).reshape(-1, 2)
            else:
                xi, xj = x[ci], x[cj]
            d = xj - xi
            L = np.sqrt(np.einsum("ij,ij->i", d, d))
            C = L - rest
            ok = positive & (L > 1e-12) & ~(rope & (C < 0))     # a slack rope link: no
            num = -C - np.where(soft, at * lam[b], 0.0)      # rigid links never read lam
            s = np.where(ok, num / np.where(ok, denom * L, 1.0), 0.0)
            lam[b] += s * L
            corr = s[:, None] * d
            # The batch's links share no particle: its ends' rows are still xi and xj.
            if not any_even:
                xi = xi - wi * corr
                xj = xj + wj * corr
            else:
                se = half - half_rest / np.maximum(L, eps)
                se = np.where(rope, np.maximum(se, zero), se)
                xi = xi + np.where(even, se[:, None] * d, -(wi * corr))
                xj = xj + np.where(even, -(se[:, None] * d), wj * corr)
            if rows is not None:
                rows[ci] = xi.view(rows.dtype).reshape(-1)
                rows[cj] = xj.view(rows.dtype).reshape(-1)
            else:
                x[ci] = xi
                x[cj] = xj

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

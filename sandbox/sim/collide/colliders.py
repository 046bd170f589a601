"""What a world keeps of its contacts: :class:`Colliders`, its static shapes by type, the
grid over them, the particles' Verlet list, the compiled kernels' tables, and the one rule
choosing the backend (:meth:`Colliders.compiled`).

The work is done by the rest of this package, split along its concerns as Box2D splits
its own:

``geometry``  distances and sweeps against each shape type (pymunk's conventions)
``shapes``    the shape sets as structures of arrays, parsed from level files
``broad``     broad phase: the shape grid, the particles' Verlet list
``contacts``  one substep's contacts, the numpy reference: the time-of-impact loop,
              the projection with friction in position space, the velocity pass
``begin``, ``project``, ``finish``
              its three stages compiled, one module a stage
``frame``     the compiled stages put together: a substep's contacts held flat, a
              whole frame in one call
``jit``       the compiled path's decorator and scalar helpers

Each numpy reference sits beside its compiled twin (numba), which repeats its operations
in its order, so the two give the same bits (``tests/test_contact_kernels.py``).

One substep of contacts (``World._substep`` drives it; see :mod:`.contacts`)::

    Colliders.begin()      broad phase, continuous detection (a bounded time-of-impact
                           loop: the rest of a path slides along the face it hit and is
                           swept again), the bounds walls, particle pairs
    Contacts.project()     in every constraint iteration: out through the face the path
                           crossed, friction limited to mu times the normal correction
    Contacts.finish()      after the integrator's fold: restitution along each hit's own
                           normal, the rest of the Coulomb friction

Pinned (and grabbed) particles have ``inv_mass == 0``: every correction is scaled by the
inverse mass, so nothing here moves them.
"""

from __future__ import annotations

import math
from typing import NamedTuple, cast

import numpy as np

from .. import backend
from . import begin as begin_stage
from . import frame as frames
from .broad import (
    ShapeGrid,
    _PairList,
    aabb_pairs_brute,
    any_moving,
    moved_less,
    pair_list,
    particle_pairs,
)
from .contacts import BRUTE_PAIRS, MARGIN, SKIN, TOUCH, Contacts, _tolerances
from .frame import FlatContacts
from .geometry import HI_Y, LO_X, MU, WALL, E, _dot, box_polygon
from .project import pair_impacts, pair_scratch
from .records import Bounce, Grid, Moves, Rows, Rules, Shapes
from .shapes import _GEOMETRY, _KIND, SHAPE_SETS, Boxes, Polygons, ShapeSet, Walls

_NO_KEYS = np.zeros(0, np.int64)
_NO_NEAR = np.zeros(0, np.bool_)        # Rows.near: begin's scratch, not the stages'


class _Table(NamedTuple):
    """The compiled kernels' view of the shapes (:class:`.records.Shapes`: the table,
    the counts of shapes and walls) and of their ``ShapeGrid``
    (:class:`.records.Grid`)."""

    shapes: Shapes
    grid: Grid


def rules(config, dtype) -> Rules:
    """The contact rules (:class:`.records.Rules`) of a world's ``config`` for positions
    of ``dtype``: its restitution and friction, the float type's epsilon and the
    contacts' constants."""
    return Rules(float(config.restitution), float(config.friction),
                 float(np.finfo(dtype).eps), SKIN, TOUCH, MARGIN, BRUTE_PAIRS,
                 ShapeGrid.MAX_CELLS)



class Colliders:
    """Every static shape of a world, by type (``sets``), in the order they were added.

    >>> c = Colliders()
    >>> c.add("circle", center=(0, 0), radius=0.5)
    0
    >>> c.specs[0]["type"], len(c)
    ('circle', 1)
    """

    def __init__(self) -> None:
        self.sets: dict[str, ShapeSet] = {name: cls() for name, cls in SHAPE_SETS.items()}
        self.order: list[tuple[str, int]] = []
        self._grid: tuple[ShapeGrid, np.ndarray, np.ndarray] | None = None
        self._specs: list[dict] | None = None
        self._pair_list: _PairList | None = None
        self._table: tuple | None = None
        self._frame_args: tuple | None = None   # what frame_args keeps between frames
        #: The last substep's contact corrections, where they are kept (for
        #: :meth:`last_corrections`): ``(n, dx)``, ``dx`` the ``(n, 2)`` array its
        #: contacts or the compiled frame wrote them into, None when it found no
        #: contact; None before any substep's contacts ran.
        self._corrections: tuple[int, np.ndarray | None] | None = None
        #: One of ``backend.BACKENDS``: "auto" (the compiled twins in ``collide`` when
        #: the contact kernels may run), "compiled" or "numpy" (the reference,
        #: vectorised over the contacts)
        self.backend = "auto"

    def __len__(self) -> int:
        return len(self.order)

    @property
    def kept(self) -> tuple:
        """What the colliders keep between frames, by identity: the compiled frame's
        fixed arguments (:meth:`frame_args`) and the shape tables (:meth:`tables`); each
        is a new object whenever it is made again, so a caller that keeps arguments
        built from them (``pipeline.lane_objects``) can tell that they still stand."""
        return self._frame_args, self._table

    def add(self, kind: str, **fields) -> int:
        """Add a static shape of type ``kind`` with the level file's fields; returns its
        index in :attr:`specs`. ``ValueError`` names the type or the field at fault."""
        if kind not in self.sets:
            raise ValueError(f"unknown shape type {kind!r}; valid types: "
                             f"{', '.join(self.sets)}")
        try:
            row = self.sets[kind].add(**fields)
        except TypeError as e:          # a missing or unknown field
            raise ValueError(f"{kind}: {e}") from None
        self.order.append((kind, row))
        self._grid = self._specs = self._table = None
        return len(self.order) - 1

    @property
    def specs(self) -> list[dict]:
        """The shapes as level-file dicts (``type``, geometry in m, restitution, friction;
        ``None`` means the world's default), in the order added."""
        if self._specs is None:
            self._specs = [self.sets[kind].spec(k) for kind, k in self.order]
        return [dict(s) for s in self._specs]

    @classmethod
    def from_specs(cls, specs) -> Colliders:
        out = cls()
        for s in specs:
            s = dict(s)
            out.add(s.pop("type", None), **s)
        return out

    def _broad(self):
        """The grid over every shape, with each grid entry's type index and row."""
        if self._grid is None:
            boxes = [(self.sets[k].aabb(), t, len(self.sets[k]))
                     for t, k in enumerate(self.sets) if len(self.sets[k])]
            lo = np.concatenate([b[0][0] for b in boxes])
            hi = np.concatenate([b[0][1] for b in boxes])
            tid = np.concatenate([np.full(n, t) for _, t, n in boxes])
            row = np.concatenate([np.arange(n) for _, _, n in boxes])
            self._grid = (ShapeGrid(lo, hi), tid, row)
        return self._grid

    def candidates(self, plo: np.ndarray, phi: np.ndarray, brute: bool = False):
        """``{kind: (particle rows, shape rows)}`` whose boxes overlap (grid or brute)."""
        grid, tid, row = self._broad()
        if brute:
            pi, gi = aabb_pairs_brute(plo, phi, grid.lo, grid.hi)
        else:
            pi, gi = grid.query(plo, phi)
        out = {}
        for t, kind in enumerate(self.sets):
            m = tid[gi] == t
            if m.any():
                out[kind] = (pi[m], row[gi[m]])
        return out

    def begin(self, p, x0: np.ndarray, config, exclude_pairs=None,
              v0: np.ndarray | None = None,
              h: float = 0.0) -> Contacts | FlatContacts | None:
        """Detect this substep's contacts after the integrator moved ``p.x`` from ``x0``.

        With ``v0``, the velocities at the start of the substep of ``h``, a swept hit
        bounces at its time of impact (:meth:`Contacts.sweep`, under ``p.a``).

        Broad phase against the shapes (the particle's box covers its path), continuous
        detection (paths that enter a shape stop at the time of impact), the bounds
        walls, and particle pairs if ``config.collide_particles``. Moves swept particles.
        Runs the compiled kernels when :meth:`compiled` says so.
        """
        if self.compiled(p, x0):
            return self._ran(p, self._begin_compiled(p, x0, config, exclude_pairs, v0, h))
        x1 = p.x
        w, r = p.inv_mass, p.radius
        skin, touch = _tolerances(x1)
        movable = np.flatnonzero(w > 0)
        disp = np.sqrt(_dot(x1 - x0, x1 - x0))
        contacts = Contacts(x0=x0, skin=skin, touch=touch, dx=np.zeros(x1.shape, float))
        e_def, mu_def = float(config.restitution), float(config.friction)
        if len(self) and movable.size:
            pad = (r + 0.5 * disp + MARGIN)[movable, None]
            plo = np.minimum(x0[movable], x1[movable]) - pad
            phi = np.maximum(x0[movable], x1[movable]) + pad
            brute = movable.size * len(self) <= BRUTE_PAIRS
            path = x1 - x0
            for kind, (pr, sr) in self.candidates(plo, phi, brute).items():
                contacts.add_group(self.sets[kind], movable[pr], sr, r, x0, e_def, mu_def,
                                   path, disp)
            if v0 is None:
                contacts.sweep(p, path)
            else:
                contacts.sweep(p, path, v0, p.a, h,
                               2.0 * math.hypot(*config.gravity) * h)
        if config.bounds is not None and movable.size:
            walls = Walls.from_bounds(config.bounds)
            assert walls.n is not None                          # from_bounds sets them
            d = x1[movable] @ walls.n.T - walls.offset            # (m, 4)
            pr, sr = np.nonzero(d < (r[movable] + disp[movable] + MARGIN)[:, None])
            contacts.add_group(walls, movable[pr], sr, r, x0, e_def, mu_def)
        if config.collide_particles:
            pairs = self._neighbours(x1, r, exclude_pairs)
            if pairs is not None:
                contacts.set_pairs(pairs, w, e_def, mu_def)
                contacts.pair_impacts(x1, w)
        return self._ran(p, contacts if contacts else None)

    def _ran(self, p, contacts: Contacts | FlatContacts | None):
        """Keep where this substep's corrections will be (its contacts' ``dx``, which
        their projection adds to in place); returns ``contacts``."""
        self._corrections = (p.x.shape[0], None if contacts is None else contacts.dx)
        return contacts

    def last_corrections(self) -> np.ndarray | None:
        """The position corrections (m, ``(n, 2)`` float64, a copy) the contacts made in
        the last substep that ran them: what the sweep's cuts at a time of impact, the
        projections out of shapes, walls and other particles and static friction moved
        each particle by, summed over the solver's iterations (the links' corrections
        are not in it). Zero rows for particles no contact moved (all zero when the
        substep found no contact); None before any substep's contacts ran.

        The same numbers whichever path ran the substep: the numpy reference's
        ``Contacts.dx``, the compiled substep's ``FlatContacts.dx`` or the compiled
        frame's ``dx`` scratch (:meth:`frame_args`), which it clears at each substep's
        start."""
        if self._corrections is None:
            return None
        n, dx = self._corrections
        return np.zeros((n, 2)) if dx is None else np.array(dx, float, copy=True)

    def grid_cells(self) -> tuple[float, np.ndarray]:
        """The broad phase's shape grid as a drawing reads it: ``(cell, cells)``, the
        cell's side (m) and the ``(k, 2)`` int64 cells that hold a shape, cell ``(i, j)``
        covering ``[i cell, (i + 1) cell] x [j cell, (j + 1) cell]``; ``(0.0, none)``
        without shapes. Read-only: a copy, and the grid is the one the broad phase
        queries (built now if no substep has needed it yet)."""
        if not len(self):
            return 0.0, np.zeros((0, 2), np.int64)
        grid = self._broad()[0]
        keys = np.unique(grid.keys)
        i, j = np.divmod(keys, grid.dims[1])
        return float(grid.cell), np.column_stack([i + grid.origin[0], j + grid.origin[1]])

    def _neighbours(self, x: np.ndarray, r: np.ndarray, exclude,
                    compiled: bool = False) -> _PairList | None:
        """Candidate particle pairs from a Verlet list (as in molecular dynamics): pairs
        closer than ``r_i + r_j + skin`` when the list was built, reused until a particle
        has moved ``skin / 2`` since (two such cannot have closed the gap). The skin is
        the larger radius, so a list lasts many substeps; it is rebuilt when particles,
        radii or the excluded (linked) pairs change. Both backends build the same list."""
        key = (x.shape[0], r, exclude)           # the arrays compared by identity
        L = self._pair_list
        if L is not None and L.key[0] == key[0] and L.key[1] is r and L.key[2] is exclude:
            if compiled:
                holds = bool(moved_less(x, L.x_ref, (0.5 * L.skin) ** 2))
            else:
                moved = x - L.x_ref
                holds = float(np.max(_dot(moved, moved), initial=0.0)) < (0.5 * L.skin) ** 2
            if holds:
                return L if L.i.size else None
        skin = max(float(r.max(initial=0.0)), MARGIN)
        if compiled:
            ex = _NO_KEYS if exclude is None else exclude
            self._pair_list = L = _PairList(key, x.copy(), skin,
                                            *pair_list(x, r, skin, ex))
        else:
            i, j = particle_pairs(x, r, skin, exclude)
            self._pair_list = L = _PairList.build(key, x.copy(), skin, i, j, r)
        return L if L.i.size else None

    # --- the compiled backend -------------------------------------------------------------

    def compiled(self, p, x0: np.ndarray) -> bool:
        """Whether a substep runs the compiled kernels: ``backend.compiled`` of
        :attr:`backend` for the "contacts" part, and the state is what they take: float
        (n, 2) positions, every per-particle array in their float type and contiguous
        (``backend.fits``)."""
        x = p.x
        if not backend.compiled(self.backend, "contacts", x.dtype):
            return False
        return (x.ndim == 2 and x.shape[1] == 2
                and backend.fits(x, x0, p.v, p.x_prev, p.inv_mass, p.radius))

    def tables(self, bounds) -> _Table:
        """The shapes and the ``bounds`` walls as the compiled kernels take them (cached
        until a shape is added or the bounds change)."""
        if self._table is not None and self._table[0] == bounds:
            return self._table[1]
        S = len(self)
        nw = 0 if bounds is None else 4
        kinds = np.full(S + nw, WALL, np.int64)
        rows = np.zeros(S + nw, np.int64)
        geo = np.full((S + nw, 11), np.nan)
        keys = sids = np.zeros(0, np.int64)
        cell, origin, dims = 1.0, np.zeros(2, np.int64), np.ones(2, np.int64)
        if S:
            grid, tid, row = self._broad()
            keys, sids, cell, origin, dims = grid.keys, grid.sids, grid.cell, grid.origin, \
                grid.dims
            geo[:S, LO_X:HI_Y + 1] = np.concatenate([grid.lo, grid.hi], axis=1)
            rows[:S] = row
            for t, (kind, shapes) in enumerate(self.sets.items()):
                m = np.flatnonzero(tid == t)
                if m.size:
                    kinds[m] = _KIND[kind]
                    g = _GEOMETRY[kind](shapes)[row[m]]
                    geo[m, :g.shape[1]] = g
                    geo[m, E], geo[m, MU] = shapes.e[row[m]], shapes.mu[row[m]]
        if nw:
            walls = Walls.from_bounds(bounds)
            assert walls.n is not None and walls.offset is not None  # from_bounds sets them
            geo[S:, :3] = np.column_stack([walls.n, walls.offset])
            rows[S:] = np.arange(nw)
        poly = cast(Polygons, self.sets["polygon"])
        box = cast(Boxes, self.sets["box"])
        bverts, bnorm = box_polygon(*box.inner()[:2])
        bedge = np.roll(bverts, -1, axis=1) - bverts
        # Fresh writable arrays (box_polygon's normals are a read-only broadcast): the
        # kernels' types must not change when a world is copied (numpy's deepcopy makes
        # arrays writable), or a copy's first step loads other versions of them.
        shapes = tuple(np.array(a, dtype=float, order="C")
                       for a in (poly.verts, poly.normals, poly.edges, bverts, bnorm, bedge))
        pverts, pnorm, pedge, bverts, bnorm, bedge = shapes
        t = _Table(shapes=Shapes(kinds, rows, geo, S, nw, pverts, pnorm, pedge, bverts,
                                 bnorm, bedge),
                   grid=Grid(keys, sids, float(cell), origin, dims))
        self._table = (bounds, t)
        return t

    def _begin_compiled(self, p, x0, config, exclude, v0=None,
                        h=0.0) -> FlatContacts | None:
        """:meth:`begin` in the compiled kernels (``collide.begin.begin``,
        ``collide.broad.pair_list``): the same contacts, held flat."""
        x1, w, r = p.x, p.inv_mass, p.radius
        t = self.tables(config.bounds)
        dx = np.zeros(x1.shape)
        rule = rules(config, x1.dtype)
        if v0 is None:
            v0, acc, v_th = np.zeros((0, 2), x1.dtype), np.zeros((0, 2), x1.dtype), math.inf
        else:
            acc = np.ascontiguousarray(np.broadcast_to(p.a, x1.shape), dtype=x1.dtype)
            v0 = np.ascontiguousarray(v0, dtype=x1.dtype)
            v_th = 2.0 * math.hypot(*config.gravity) * h
        # Read-only either way, as the gravity field's view is: one type, one compiled
        # ``begin`` (a writable one made another, compiled inside a frame: the cradle
        # on explicit Euler with Lagrange links, whose step passes no bounce).
        acc.flags.writeable = False
        (cp, cg, ce, cmu, ref, touched, nrm, depth, spent, stuck, vhit, tau, skin,
         touch) = begin_stage.begin(Moves(x0, x1, w, r, dx), t.shapes, t.grid, rule,
                                    Bounce(v0, acc, float(h), v_th))
        pairs = None
        if config.collide_particles:
            L = self._neighbours(x1, r, exclude, compiled=True)
            if L is not None and any_moving(L.i, L.j, w):
                pairs = L
        if not cp.size and pairs is None:
            return None
        rows = Rows(cp, cg, ref, depth, touched, stuck, nrm, spent, vhit, tau, ce, cmu,
                    _NO_NEAR)
        flat = FlatContacts(x0, r, skin, touch, dx, t.shapes, rows, pairs, rule)
        if pairs is not None:
            flat.scratch = pair_scratch(x1, pairs.i.size, pairs.nodes.size)
            pair_impacts(Moves(x0, x1, w, r, dx), skin, touch, flat.pair_rows,
                         flat.pstate.ptouched, flat.scratch)
        return flat


    def frame_args(self, p, config, exclude, links, lam, zero_lam: bool, coefficients,
                   h: float, fold) -> tuple | None:
        """What :meth:`run_frame` passes to the compiled frame (``collide.frame.frame``)
        besides the state, or None when the state is not one the kernels take (nothing
        done): for ``len(coefficients[0])`` substeps of ``h`` of a Verlet-family world
        with contacts, the integrator's per-substep ``(r, ca, c1, c2)``
        (``compiled_frame``) and its ``contact_fold`` (a position-based one: the frame's
        velocity pass), the links' ``kernel_args`` without their thread setting
        (``links``, or None) and their multipliers ``lam``. A world keeps the result
        while nothing it was made from changes (``pipeline.lane_holds``).

        Everything that stays from frame to frame (the tables, the materials, the
        scratch) is assembled once: a frame of a small scene costs less than the
        Python around it would otherwise."""
        x, r = p.x, p.radius
        if not self.compiled(p, p.x_prev):
            return None
        dtype = x.dtype
        fixed = self._frame_args
        table = self._table[1] if self._table is not None else None
        if fixed is None or not ((fixed[0][0] is config or fixed[0][0] == config)
                                 and fixed[0][1] == x.shape
                                 and fixed[0][2] == dtype and fixed[0][3] is r
                                 and fixed[0][4] is exclude and fixed[0][5] is table):
            t = self.tables(config.bounds)
            scratch = (np.empty_like(x), np.zeros(x.shape),
                       begin_stage.begin_space(x, t.shapes.nshapes, t.shapes.nwalls, True))
            sweeps = int(config.iterations)
            # The frame's one flat entry takes the records' fields, in order.
            fixed = self._frame_args = ((config, x.shape, dtype, r, exclude, t), scratch, (
                max(sweeps, 1), sweeps), (*t.shapes, *t.grid, *rules(config, dtype),
                bool(config.collide_particles), _NO_KEYS if exclude is None else exclude),
                max(float(r.max(initial=0.0)), MARGIN),
                2.0 * math.hypot(*config.gravity))
        _, scratch, passes, shapes, new_skin, g = fixed
        rc, ca, c1s, c2s = coefficients
        if links is None:
            z = np.zeros(0, np.int64)
            links = (z, z, np.zeros(0, dtype), np.zeros(0, dtype), np.zeros(0, np.int8),
                     np.zeros((0, 6), np.int64), np.zeros(1, np.int64))
            lam = np.zeros(0, dtype)
        mid = (*scratch, rc, ca, c1s, c2s, float(fold.velocity_time), h, g * h, *passes,
               bool(links[0].size), *links, dtype.type(1.0 / (h * h)), lam, bool(zero_lam),
               *shapes)
        z = np.zeros(0, np.int64)               # no Verlet list (the frame reads it only)
        empty = (z, z, z, z, z, np.zeros(0, r.dtype), np.zeros((0, 2), dtype), 0.0)
        return mid, (bool(config.collide_particles), exclude, empty), new_skin

    def run_frame(self, p, a, args: tuple) -> bool:
        """The compiled frame on the particles ``p`` under the gravity field ``a``,
        with ``args`` from :meth:`frame_args`. Returns whether the new positions ended
        up in ``p.x_prev``'s array (the caller swaps the two). The Verlet list carries
        over both ways."""
        mid, (collide, exclude, state), new_skin = args
        x, r = p.x, p.radius
        L = self._pair_list
        valid = (collide and L is not None and L.key[0] == x.shape[0]
                 and L.key[1] is r and L.key[2] is exclude)
        if valid:
            assert L is not None
            state = (L.i, L.j, L.a, L.b, L.nodes, L.reach, L.x_ref, L.skin)
        frames.launch_threads()
        swapped, valid, *lst, x_ref, skin = frames.frame(
            x, p.x_prev, p.v, a, p.inv_mass, r, *mid, valid, *state, new_skin)
        self._corrections = (x.shape[0], mid[1])     # the frame's dx scratch
        if valid:
            i, j, a_, b_, nodes, reach = lst
            self._pair_list = _PairList((x.shape[0], r, exclude), x_ref, float(skin), i, j,
                                        a_, b_, nodes, reach)
        return bool(swapped)


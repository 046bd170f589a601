"""The records the contact stages take: the state and tables a stage reads, grouped
and named, used alike by the numpy side (``Colliders.tables``, ``frame_args``) and the
compiled stages.

Each record is a ``typing.NamedTuple``: numba types it as a ``NamedTuple`` (one type
for each combination of its fields' types), and a compiled function can take one,
build one and return one. Built inside a compiled function a record costs nothing
(its fields stay in registers or are passed as they are); passed in from Python it
costs ~2 us a call (numba types every field), so the compiled frame's one entry from
Python, ``frame.frame``, keeps its arguments flat, in the records' field order
(``tests/test_contact_kernels.py`` checks it), and builds the records itself.

A kernel that counts references (plain ``jit``, not ``jit_borrow``) reads a record's
arrays into locals once, at its top: a field read in a loop is a reference counted at
every pass (the rules in :mod:`.frame`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Shapes(NamedTuple):
    """The static shapes and the walls as one table, a row a shape (the walls last),
    as ``Colliders.tables`` builds it and every distance and sweep reads it
    (``geometry._distance``, ``geometry._sweep``).

    ``kinds``    int64 (S + W,): each row's shape type (``geometry.CIRCLE`` ..
                 ``WALL``)
    ``rows``     int64 (S + W,): its row within its type's set (a polygon's, a box's
                 row of ``pverts``, ``bverts``; a wall's number)
    ``geo``      float64 (S + W, 11): its numbers as ``geometry`` names the columns
                 (centre, ends, thickness, box ``LO_X .. HI_Y``, ``E``, ``MU``: NaN
                 for the world's default); a wall's ``n_x, n_y, offset``
    ``nshapes``  int: ``S``, the shapes (rows ``0 .. S``)
    ``nwalls``   int: ``W``, the walls (rows ``S .. S + W``; 4 with ``bounds``, or 0)
    ``pverts``, ``pnorm``, ``pedge``
                 float64 (k, K, 2): the polygons' vertices, outward face normals and
                 edges (padded to the most vertices)
    ``bverts``, ``bnorm``, ``bedge``
                 float64 (k, 4, 2): the boxes' inner boxes as polygons (the same)
    """

    kinds: np.ndarray
    rows: np.ndarray
    geo: np.ndarray
    nshapes: int
    nwalls: int
    pverts: np.ndarray
    pnorm: np.ndarray
    pedge: np.ndarray
    bverts: np.ndarray
    bnorm: np.ndarray
    bedge: np.ndarray


class Grid(NamedTuple):
    """The shapes' grid (``broad.ShapeGrid``) as the compiled broad phase reads it.

    ``keys``    int64 (E,): the cell key of every (cell, shape) entry, sorted
    ``sids``    int64 (E,): the shape (row of :class:`Shapes`) of each entry
    ``cell``    float: the cell's side, m (float64; the broad phase rounds it to the
                positions' type, as numpy divides them)
    ``origin``  int64 (2,): the lowest cell's coordinates
    ``dims``    int64 (2,): the grid's size in cells
    """

    keys: np.ndarray
    sids: np.ndarray
    cell: float
    origin: np.ndarray
    dims: np.ndarray


class Rules(NamedTuple):
    """The contacts' materials and tolerances (a world's settings and ``contacts``'
    constants), all numbers.

    ``e_def``, ``mu_def``  float: the world's restitution and friction (a shape with
                           NaN in its ``E``, ``MU`` column takes them)
    ``eps``                float: the positions' float type's machine epsilon
                           (``_tolerances``)
    ``skin_min``           float: ``contacts.SKIN``, the least push-out skin, m
    ``touch_min``          float: ``contacts.TOUCH``, the least touching distance, m
    ``margin``             float: ``contacts.MARGIN``, the broad phase's margin, m
    ``brute_pairs``        int: ``contacts.BRUTE_PAIRS``, the most (particle, shape)
                           pairs the brute-force broad phase takes
    ``max_cells``          int: ``ShapeGrid.MAX_CELLS``, the most cells a particle's
                           box looks up before it takes every shape
    """

    e_def: float
    mu_def: float
    eps: float
    skin_min: float
    touch_min: float
    margin: float
    brute_pairs: int
    max_cells: int


class Moves(NamedTuple):
    """A substep's particles as the contact stages see them.

    ``x0``  float (n, 2): where they started the substep (the world's float type)
    ``x1``  float (n, 2): where the integrator moved them; the stages move them on
    ``w``   float (n,): inverse masses (0: pinned or held, never moved)
    ``r``   float (n,): radii (0: no contacts)
    ``dx``  float64 (n, 2): how far the contacts moved them this substep (the sweep's
            stops, the projection's pushes), for the velocity pass
    """

    x0: np.ndarray
    x1: np.ndarray
    w: np.ndarray
    r: np.ndarray
    dx: np.ndarray


class Bounce(NamedTuple):
    """What a swept hit needs to bounce at its time of impact (``begin``).

    ``v0``    float (n, 2): the velocities at the start of the substep; no rows: the
              sweep stops hits without bouncing
    ``acc``   float (n, 2): the acceleration over the substep
    ``h``     float: the substep, s
    ``v_th``  float: the least approach speed that bounces, m/s
    """

    v0: np.ndarray
    acc: np.ndarray
    h: float
    v_th: float


class Rows(NamedTuple):
    """The contacts of a substep with the shapes and walls, a row a contact in the
    reference's order (shape type by shape type, then the walls), and their state;
    ``begin_space`` makes them with room to spare, the first ``C`` are the contacts.

    ``cp``       int64 (C,): the contact's particle
    ``cg``       int64 (C,): its row of :class:`Shapes`
    ``ref``      float64 (C,): a segment's side at the start of the substep
    ``depth``    float64 (C,): the normal correction so far (the friction budget)
    ``touched``  bool (C,): hit by the sweep or pushed by the projection
    ``stuck``    bool (C,): friction held it at its last correction
    ``nrm``      float64 (C, 2): the normal of its last hit or push
    ``spent``    float64 (C,): the friction budget used so far
    ``vhit``     float64 (C,): the normal velocity a swept bounce left with (< 0), or 0
    ``tau``      float64 (C,): that bounce's time, a fraction of the substep
    ``ce``       float64 (C,): its restitution
    ``cmu``      float64 (C,): its friction
    ``near``     bool (n,): which particles may be near the four walls (scratch of
                 ``begin``; a particle a row, not a contact)
    """

    cp: np.ndarray
    cg: np.ndarray
    ref: np.ndarray
    depth: np.ndarray
    touched: np.ndarray
    stuck: np.ndarray
    nrm: np.ndarray
    spent: np.ndarray
    vhit: np.ndarray
    tau: np.ndarray
    ce: np.ndarray
    cmu: np.ndarray
    near: np.ndarray


class Pairs(NamedTuple):
    """The particle pairs of a Verlet list (``broad.pair_list``, ``_PairList``), in
    the reference's order.

    ``pi``, ``pj``  int64 (P,): the pair's particles, ``pi < pj``
    ``pa``, ``pb``  int64 (P,): their rows of ``nodes``
    ``nodes``       int64 (M,): every particle in a pair, once, ascending
    ``reach``       float (P,): ``r_i + r_j`` (the radii's float type)
    """

    pi: np.ndarray
    pj: np.ndarray
    pa: np.ndarray
    pb: np.ndarray
    nodes: np.ndarray
    reach: np.ndarray


class PairState(NamedTuple):
    """The particle pairs' state over a substep, a row a pair of :class:`Pairs`.

    ``pdepth``    float64 (P,): the normal correction so far (the friction budget)
    ``ptouched``  bool (P,): pushed apart by the projection
    ``pstuck``    bool (P,): friction held it at its last correction
    """

    pdepth: np.ndarray
    ptouched: np.ndarray
    pstuck: np.ndarray


class Fold(NamedTuple):
    """How the velocity pass (``finish``) reads and writes a substep's velocities: the
    integrator's ``contact_fold`` and what the substep knows.

    ``v_start``         float (n, 2): the velocities at the start of the substep
    ``a``               float (n, 2): the acceleration
    ``at``              float: its ``velocity_time`` (when within the substep the
                        velocity is taken, a fraction)
    ``position_based``  bool: the velocities are the positions' (``(x - x0) / h``),
                        and ``x_prev`` is written back from them
    ``gain``            float: the fold's ``gain`` (a velocity integrator's share of
                        the pushes ``dx``)
    ``h``               float: the substep, s
    ``v_th``            float: the least approach speed that bounces, m/s
    ``touch``           float: the touching distance of this substep (``begin``'s)
    ``sweeps``          int: the velocity sweeps (at least 2, 4 bouncing)
    """

    v_start: np.ndarray
    a: np.ndarray
    at: float
    position_based: bool
    gain: float
    h: float
    v_th: float
    touch: float
    sweeps: int


class Bodies(NamedTuple):
    """The particles as the compiled frame steps them.

    ``x``, ``x_prev``  float (n, 2): the positions now and a step ago (the frame swaps
                       the two arrays' roles every substep)
    ``v``              float (n, 2): the velocities
    ``a``              float (n, 2): the acceleration (the gravity field)
    ``w``              float (n,): inverse masses (0: pinned or held)
    ``r``              float (n,): radii (0: no contacts)
    """

    x: np.ndarray
    x_prev: np.ndarray
    v: np.ndarray
    a: np.ndarray
    w: np.ndarray
    r: np.ndarray


class Steps(NamedTuple):
    """A frame's substeps as the integrator gives them (``compiled_frame``,
    ``contact_fold``), float64 unless said.

    ``rc``, ``ca``, ``c1s``, ``c2s``  (steps,): each substep's position step
                                      coefficients (``step_kernels.verlet_step``) and
                                      its velocity's ``c1``
    ``at``                            its fold's ``velocity_time``
    ``h``                             the substep, s
    ``v_th``                          the least approach speed that bounces, m/s
    """

    rc: np.ndarray
    ca: np.ndarray
    c1s: np.ndarray
    c2s: np.ndarray
    at: float
    h: float
    v_th: float

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

"""Compile (or load from numba's disk cache) every kernel before the first frame needs it.

The kernel modules warm themselves on bare arrays (``kernels.warm_up``); the contact
pipeline is warmed by running tiny worlds through it, which is why this sits above
:mod:`world` instead of inside :mod:`contact_kernels`. From the cache everything loads
in about a second; the very first time it compiles: ~10 s a float type for the
constraint and Verlet kernels and ~25 s a float type for the contact stages, on a
2-core machine.
"""

from __future__ import annotations

import numpy as np

from . import contact_kernels, kernels
from .world import World, WorldConfig


def warm_up(dtypes=("float64", "float32"), contact_dtypes=None) -> None:
    """Every kernel for worlds of the float types ``dtypes``; the contact stages for
    ``contact_dtypes`` (default: ``dtypes``; ``()`` skips them)."""
    kernels.warm_up(dtypes)
    if contact_kernels.AVAILABLE:
        _contacts(dtypes if contact_dtypes is None else contact_dtypes)


def _contacts(dtypes) -> None:
    """Compile (or load from the disk cache) every contact kernel on a tiny scene: one
    shape of each type, bounds, particle pairs, restitution and friction, for worlds of
    the float types ``dtypes``, through the brute-force and the grid broad phase."""
    for dtype in (np.dtype(d).name for d in dtypes):
        for crowd in (False, True):     # 400 particles x 64 shapes: the grid broad phase
            w = World(WorldConfig(dtype=dtype, substeps=2, iterations=1, restitution=0.5,
                                  friction=0.3, collide_particles=True,
                                  bounds=(-2.0, -2.0, 2.0, 4.0)))
            w.colliders.backend = "numba"
            w.add_particles([[0.0, 0.5], [0.05, 0.62], [1.0, 0.5], [-1.0, 0.1]],
                            v=[[0.0, -3.0]] * 4, radius=0.06)
            w.add_shape("circle", center=(0.0, 0.0), radius=0.3)
            w.add_shape("segment", a=(-2.0, -1.0), b=(2.0, -0.5), thickness=0.02)
            w.add_shape("polygon", points=[(0.8, 0.0), (1.2, 0.0), (1.0, 0.4)])
            w.add_shape("box", min=(-1.3, -0.2), max=(-0.7, 0.0))
            if crowd:
                k = np.arange(400)
                w.add_particles(np.stack([-1.5 + 0.15 * (k % 20), 0.8 + 0.15 * (k // 20)], 1),
                                radius=0.05)
                for c in range(60):
                    w.add_shape("circle", center=(-1.9 + 0.06 * c, -1.8), radius=0.02)
            for _ in range(3):
                w.step(1 / 60)

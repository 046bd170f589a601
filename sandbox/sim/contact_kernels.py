"""The compiled contact kernels by their old names: the package ``collide`` holds them
beside their numpy references (``geometry``, ``broad``, ``solver``). ``AVAILABLE``: the
compiled kernels may run now (``backend.usable("contacts")``, read on every access):
False while the app's background warm-up compiles them, and without numba.
"""

from __future__ import annotations

from . import backend
from .collide.broad import (  # noqa: F401
    _broad_phase,
    _grid_candidates,
    _scan_pairs,
    _stable_order,
    any_moving,
    moved_less,
    pair_list,
)
from .collide.geometry import (  # noqa: F401
    BOX,
    CIRCLE,
    HI_X,
    HI_Y,
    INF,
    LO_X,
    LO_Y,
    MU,
    POLYGON,
    SEGMENT,
    WALL,
    E,
    _box,
    _capsule_k,
    _circle,
    _distance,
    _face_contact_k,
    _polygon,
    _segment_contact,
    _segment_normal_k,
    _side,
    _sweep,
    _sweep_capsule,
    _sweep_circle,
    _sweep_face,
    _sweep_polygon,
    _toi_normal_k,
)
from .collide.jit import _above, _as, _better, _clip, _max, _min, _sign  # noqa: F401
from .collide.solver import (  # noqa: F401
    _RECIP,
    DIR_TOL,
    MAX_HITS,
    _pair_sweep,
    _project_pairs,
    _shape_sweep,
    _share,
    _stop_k,
    _toi_into,
    _velocity_sweep,
    begin,
    finish,
    frame,
    launch_threads,
    project,
)


def __getattr__(name):
    if name == "AVAILABLE":
        return backend.usable("contacts")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

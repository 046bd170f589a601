"""A read-only view of a world: what the renderer, the HUD and the benchmark draw from.

Drawing code used to probe the world with ``getattr`` (``springs``, ``grabbed``) and
computed the links' strain itself. :func:`view` hands it one object instead: arrays
marked read-only (a drawing bug cannot change the physics), the hand's spring, and the
strain computed here in the core, once a frame, for the renderer's colours and the
HUD's error line alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import backend as _backend
from .constraints import ROPE

_njit = _backend.njit


def _ro(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


@dataclass(frozen=True)
class WorldView:
    """What is drawn of a world at one moment (SI units, y up).

    ``x (n, 2)`` true positions, ``radius``/``mass (n,)``, ``pinned (n,)`` bool;
    ``link_i``/``link_j``/``link_rest (m,)``, ``link_kind (m,)`` (1 = rope);
    ``spring_i``/``spring_j (s,)``; ``shapes``: the static shapes as dicts;
    ``held (k,)`` the particles in the hand and ``anchors (k, 2)`` where the mouse
    spring pulls them (both empty when nothing is held); ``t`` s.
    """

    x: np.ndarray
    radius: np.ndarray
    mass: np.ndarray
    pinned: np.ndarray
    link_i: np.ndarray
    link_j: np.ndarray
    link_rest: np.ndarray
    link_kind: np.ndarray
    spring_i: np.ndarray
    spring_j: np.ndarray
    shapes: list
    held: np.ndarray
    anchors: np.ndarray
    t: float
    _strain: list = field(default_factory=list, repr=False)

    @property
    def n(self) -> int:
        return len(self.x)

    def strain(self) -> np.ndarray:
        """Relative stretch ``(L - rest)/rest`` of each link ``(m,)`` (ropes: 0 when slack),
        computed once and kept."""
        if not self._strain:
            self._strain.append(_ro(link_strain(self.x, self.link_i, self.link_j,
                                                self.link_rest, self.link_kind)))
        return self._strain[0]

    def error(self) -> tuple[float, float]:
        """Mean and max ``|strain|`` of the links (0, 0 without links)."""
        s = self.strain()
        if not len(s):
            return 0.0, 0.0
        a = np.abs(s)
        return float(a.mean()), float(a.max())


def link_strain_numpy(x, i, j, rest, kind) -> np.ndarray:
    """``(|x_j - x_i| - rest) / rest`` per link, ropes clamped at 0 when slack (float64);
    links of zero rest length report ``|x_j - x_i|`` in m."""
    if not len(i):
        return np.zeros(0)
    with np.errstate(all="ignore"):              # a blown-up world: inf, not a warning
        d = np.asarray(x[j], np.float64) - np.asarray(x[i], np.float64)
        rest = np.asarray(rest, np.float64)
        r = np.where(rest > 0, rest, 1.0)
        s = (np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]) - rest) / r
    return np.where((kind == ROPE) & (s < 0), 0.0, s)


@_njit(cache=True)
def _strain_kernel(x, i, j, rest, kind, out):  # pragma: no cover - compiled
    # Two loops: the gathers and the squared lengths, then the square roots and the
    # divisions over contiguous arrays, which LLVM vectorises (twice as fast as one
    # scalar loop for the 200x200 shear cloth; the same IEEE operations, so the
    # same numbers).
    m = len(i)
    for k in range(m):
        a, b = i[k], j[k]
        dx = np.float64(x[b, 0]) - np.float64(x[a, 0])
        dy = np.float64(x[b, 1]) - np.float64(x[a, 1])
        out[k] = dx * dx + dy * dy
    for k in range(m):
        r = rest[k] if rest[k] > 0 else 1.0
        s = (math.sqrt(out[k]) - rest[k]) / r
        out[k] = 0.0 if (kind[k] == ROPE and s < 0) else s


def warm_up(dtypes=("float64", "float32")) -> None:
    """Compile (or load from the cache) the strain kernel on a tiny problem, with the
    argument types :meth:`WorldView.strain` passes (a view's read-only arrays), for
    worlds of the float types ``dtypes`` (the warm-up's part "kernels")."""
    if not _backend.runnable():
        return
    i, j = _ro(np.zeros(1, np.int64)), _ro(np.ones(1, np.int64))
    rest, kind = _ro(np.ones(1)), _ro(np.zeros(1, np.int8))
    for dtype in dtypes:
        _strain_kernel(_ro(np.zeros((2, 2), dtype)), i, j, rest, kind, np.empty(1))


def link_strain(x, i, j, rest, kind, backend: str = "auto") -> np.ndarray:
    """:func:`link_strain_numpy`, compiled as ``backend`` (one of ``backend.BACKENDS``)
    says for 256 links and more (one pass over the links: 0.2 ms for the 200x200 cloth's
    158,802, against 20 ms for numpy's gathers). "auto" follows the warm-up (the part
    "kernels" for ``x``'s float type): the numpy reference keeps the first frames from
    waiting for the compiler."""
    x = np.asarray(x)
    if not _backend.compiled(backend, "kernels", x.dtype) or len(i) < 256:
        return link_strain_numpy(x, i, j, rest, kind)
    out = np.empty(len(i))
    _strain_kernel(np.ascontiguousarray(x), np.asarray(i, np.int64),
                   np.asarray(j, np.int64), np.asarray(rest, np.float64),
                   np.asarray(kind, np.int8), out)
    return out


def view(world) -> WorldView:
    """The read-only :class:`WorldView` of ``world`` now (no copies of the big arrays)."""
    p, c, s = world.particles, world.constraints, world.springs
    m = world.mouse
    held = np.zeros(0, np.int64) if m is None else m.idx
    anchors = np.zeros((0, 2)) if m is None else m.anchors()
    return WorldView(x=_ro(p.x), radius=_ro(p.radius), mass=_ro(p.mass),
                     pinned=_ro(p.inv_mass == 0), link_i=_ro(c.i), link_j=_ro(c.j),
                     link_rest=_ro(c.rest), link_kind=_ro(c.kind), spring_i=_ro(s.i),
                     spring_j=_ro(s.j), shapes=list(world.shapes), held=_ro(held),
                     anchors=_ro(anchors), t=float(p.t))

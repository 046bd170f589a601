"""Verlet Sandbox: a 2D particle sandbox that shows why integrators differ.

The scripting API::

    from sandbox import integrate, INTEGRATORS
    tr = integrate(lambda x, v: -x, [1.0], [0.0], [0.01] * 1000, "tcv_corrected")
    tr.t, tr.x, tr.v, tr.nfev

Importing the package itself loads nothing else (``python -m sandbox --help`` and
``--version`` stay instant): the names below load the simulation core on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: The one version number: pyproject.toml reads it from here (hatch's dynamic version).
__version__ = "0.2.0"

_LAZY = {"INTEGRATORS": ".sim.integrators", "Integrator": ".sim.integrators",
         "Trajectory": ".sim.integrators", "integrate": ".sim.integrators",
         "TIMESTEPS": ".sim.timestep"}

__all__ = ["INTEGRATORS", "TIMESTEPS", "Integrator", "Trajectory", "integrate"]

if TYPE_CHECKING:
    from .sim.integrators import INTEGRATORS, Integrator, Trajectory, integrate
    from .sim.timestep import TIMESTEPS


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])

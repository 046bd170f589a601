"""Verlet Sandbox: a 2D particle sandbox that shows why integrators differ.

The scripting API::

    from sandbox import integrate, INTEGRATORS
    tr = integrate(lambda x, v: -x, [1.0], [0.0], [0.01] * 1000, "tcv_corrected")
    tr.t, tr.x, tr.v, tr.nfev
"""

from .sim.integrators import INTEGRATORS, Integrator, Trajectory, integrate
from .sim.timestep import TIMESTEPS

__all__ = ["INTEGRATORS", "TIMESTEPS", "Integrator", "Trajectory", "integrate"]

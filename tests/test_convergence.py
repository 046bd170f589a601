"""Measured orders of every integrator on every problem, against the declared ones.

Fixed steps: every problem, every method, the full step family: within +-0.15.
Random steps (consecutive ratio in [0.5, 2]): every method on the oscillator and the
eccentric orbit, RMS over 64 seeds (see sandbox.lab.convergence for why), on families
trimmed to stay fast; ``verlet`` must not converge, ``tcv`` must be first order.
"""

import numpy as np
import pytest

from sandbox import INTEGRATORS
from sandbox.lab.convergence import convergence_row, fit_order
from sandbox.lab.problems import all_problems

PROBLEMS = all_problems()
TOL = 0.15


@pytest.mark.parametrize("problem", [p for p in PROBLEMS if p != "projectile"])
@pytest.mark.parametrize("method", list(INTEGRATORS))
def test_fixed_step_order(problem, method):
    row = convergence_row(PROBLEMS[problem], method, "fixed")
    assert abs(row.order_x - INTEGRATORS[method].order) < TOL, row.order_x


@pytest.mark.parametrize("method", list(INTEGRATORS))
def test_projectile_exact_or_first_order(method):
    row = convergence_row(PROBLEMS["projectile"], method, "fixed")
    if INTEGRATORS[method].order >= 2:
        assert row.exact                     # polynomial of degree 2: exact to round-off
    else:
        assert not row.exact and abs(row.order_x - 1) < TOL


@pytest.mark.parametrize("problem", ["oscillator", "kepler_eccentric"])
@pytest.mark.parametrize("method", list(INTEGRATORS))
def test_random_step_order(problem, method):
    p = PROBLEMS[problem]
    integ = INTEGRATORS[method]
    declared = integ.order_variable
    counts = p.step_counts(max(declared, 1))[:4]
    row = convergence_row(p, method, "random", seeds=64, counts=counts)
    if declared == 0:
        # Plain Verlet replays the last displacement over a step of another length:
        # an O(h) error every step, O(1) in the end. No convergence at all.
        assert abs(row.order_x) < 0.5 and row.err_x[-1] > 1e-2
    else:
        assert abs(row.order_x - declared) < TOL, row.order_x


def test_projectile_random_steps():
    p = PROBLEMS["projectile"]
    assert convergence_row(p, "tcv_corrected", "random", seeds=4).exact
    tcv = convergence_row(p, "tcv", "random", seeds=64)
    assert not tcv.exact and abs(tcv.order_x - 1) < TOL


def test_fit_order_recovers_a_power_law():
    h = np.array([0.1, 0.05, 0.025])
    assert fit_order(h, 3 * h ** 2) == pytest.approx(2.0)
    assert np.isnan(fit_order(h, np.zeros(3)))


@pytest.mark.parametrize("method", list(INTEGRATORS))
def test_batched_runs_match_single_runs(method):
    from sandbox.lab.convergence import end_error, end_errors_batch, steps_for
    p = PROBLEMS["moon"]
    H = np.stack([steps_for(p, 300, "random", 0, k) for k in range(3)], axis=1)
    ex, ev = end_errors_batch(p, method, H)
    for k in range(3):
        sx, sv = end_error(p, method, H[:, k])
        assert ex[k] == pytest.approx(sx, rel=1e-9, abs=1e-13)
        assert ev[k] == pytest.approx(sv, rel=1e-9, abs=1e-13)

"""The lab's exact solutions, cross-checked against scipy's DOP853 at tight tolerance."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from sandbox.lab.problems import all_problems, kepler_propagate

PROBLEMS = all_problems()


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_exact_solution_matches_a_high_accuracy_solver(name):
    p = PROBLEMS[name]
    shape = p.x0.shape

    def f(t, y):
        x = y[: y.size // 2].reshape(shape)
        v = y[y.size // 2:].reshape(shape)
        return np.concatenate([v.ravel(), p.accel(x, v).ravel()])

    y0 = np.concatenate([p.x0.ravel(), p.v0.ravel()])
    sol = solve_ivp(f, (0, p.T), y0, method="DOP853", rtol=1e-13, atol=1e-13,
                    dense_output=True)
    ts = np.linspace(0, p.T, 9)
    xe, ve = p.exact(ts)
    y = sol.sol(ts).T
    scale = max(np.abs(xe).max(), np.abs(ve).max())
    # DOP853 at rtol 1e-13 over about one orbit keeps ~1e-11 relative accuracy.
    np.testing.assert_allclose(y[:, : y.shape[1] // 2], xe.reshape(9, -1), atol=1e-10 * scale)
    np.testing.assert_allclose(y[:, y.shape[1] // 2:], ve.reshape(9, -1), atol=1e-10 * scale)


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_exact_solution_conserves_energy(name):
    p = PROBLEMS[name]
    x, v = p.exact(np.linspace(0, p.T, 50))
    e = p.energy(x, v)
    np.testing.assert_allclose(e, e[0], rtol=1e-12, atol=1e-12)


def test_kepler_propagator_closes_an_orbit_and_rejects_unbound_ones():
    x0, v0 = np.array([0.5, 0.0]), np.array([0.0, np.sqrt(3.0)])   # e = 0.5, a = 1
    x, v = kepler_propagate(x0, v0, 1.0, np.array([2 * np.pi]))
    np.testing.assert_allclose(x[0], x0, atol=1e-12)
    np.testing.assert_allclose(v[0], v0, atol=1e-12)
    with pytest.raises(ValueError):
        kepler_propagate(x0, np.array([0.0, 3.0]), 1.0, np.array([1.0]))

"""Integrators: the interface, the scripting API, exactness, energy behaviour, switching."""

import numpy as np
import pytest

from sandbox import INTEGRATORS, integrate
from sandbox.lab.problems import oscillator, projectile
from sandbox.sim.integrators import get_integrator, switch
from sandbox.sim.particles import State, state_hash

EPS = np.finfo(float).eps
ALL = list(INTEGRATORS)


def test_registry_is_in_cycle_order_with_declared_properties():
    assert ALL == ["euler", "symplectic_euler", "velocity_verlet", "leapfrog", "verlet",
                   "tcv", "tcv_corrected", "rk4", "forest_ruth"]
    orders = {m: (i.order, i.order_variable, i.symplectic) for m, i in INTEGRATORS.items()}
    assert orders == {
        "euler": (1, 1, False), "symplectic_euler": (1, 1, True),
        "velocity_verlet": (2, 2, True), "leapfrog": (2, 2, True),
        "verlet": (2, 0, True), "tcv": (2, 1, True), "tcv_corrected": (2, 2, True),
        "rk4": (4, 4, False), "forest_ruth": (4, 4, True)}
    assert {m for m, i in INTEGRATORS.items() if i.position_based} == {
        "verlet", "tcv", "tcv_corrected"}


def test_unknown_method_lists_valid_names():
    with pytest.raises(ValueError) as e:
        integrate(lambda x, v: -x, [1.0], [0.0], [0.1], "midpoint")
    for name in ALL:
        assert name in str(e.value)


@pytest.mark.parametrize("bad, index", [([0.1, 0.0, 0.1], 1), ([0.1, 0.1, -1e-3], 2),
                                         ([np.nan], 0), ([0.1, np.inf], 1)])
def test_bad_step_names_its_index_and_nothing_runs(bad, index):
    calls = []

    def accel(x, v):
        calls.append(1)
        return -x

    with pytest.raises(ValueError, match=rf"dts\[{index}\]"):
        integrate(accel, [1.0], [0.0], bad, "tcv")
    assert calls == []          # validated before the first force evaluation


def test_inputs_are_not_modified_and_shapes_follow_x0():
    x0 = np.arange(6.0).reshape(3, 2)
    v0 = np.ones((3, 2))
    keep = x0.copy(), v0.copy()
    for m in ALL:
        tr = integrate(lambda x, v: -x, x0, v0, [0.01] * 7, m)
        assert tr.x.shape == tr.v.shape == (8, 3, 2) and tr.t.shape == (8,)
        np.testing.assert_array_equal(tr.x[0], x0)
    np.testing.assert_array_equal(x0, keep[0])
    np.testing.assert_array_equal(v0, keep[1])


def test_accel_with_wrong_shape_is_a_clear_error():
    with pytest.raises(ValueError, match="accel returned shape"):
        integrate(lambda x, v: np.zeros(3), np.zeros(2), np.zeros(2), [0.1], "euler")


@pytest.mark.parametrize("method, expected", [
    ("euler", 10), ("symplectic_euler", 10), ("velocity_verlet", 11), ("leapfrog", 11),
    ("verlet", 11), ("tcv", 11), ("tcv_corrected", 11), ("rk4", 40), ("forest_ruth", 31)])
def test_nfev_counts_force_evaluations(method, expected):
    # Verlet-family starts need a0 (eq. 2); velocity Verlet evaluates a0 once and then
    # reuses a(t+h) from step to step (Forest-Ruth: three substeps of it); RK4 costs
    # four per step.
    tr = integrate(lambda x, v: -x, [1.0], [0.0], [0.1] * 10, method)
    assert tr.nfev == expected


def test_time_axis_is_the_running_sum_of_steps():
    dts = np.array([0.1, 0.05, 0.2])
    tr = integrate(lambda x, v: -x, [1.0], [0.0], dts, "rk4", t0=1.0)
    np.testing.assert_allclose(tr.t, [1.0, 1.1, 1.15, 1.35], rtol=0, atol=4 * EPS)


# --- projectile: exactness and the initial-condition trap ---------------------------

def _projectile_err(method, dts):
    p = projectile()
    tr = integrate(p.accel, p.x0, p.v0, dts, method)
    xe, ve = p.exact(tr.t)
    return tr, np.abs(tr.x - xe).max(), np.abs(tr.v - ve).max()


def _roundoff(n, scale):
    # Position Verlet sums second differences: round-off grows at most like n^2 eps L.
    return 4 * n * n * EPS * scale


@pytest.mark.parametrize("method", ["verlet", "tcv", "tcv_corrected", "velocity_verlet",
                                    "leapfrog", "rk4"])
def test_second_order_methods_are_exact_on_a_projectile_at_a_fixed_step(method):
    n = 200
    tr, ex, ev = _projectile_err(method, np.full(n, 2.0 / n))
    scale = 20.0    # metres: the size of the trajectory
    assert ex <= _roundoff(n, scale)
    assert ev <= _roundoff(n, scale) / (2.0 / n)


def test_tcv_corrected_is_exact_under_random_steps_and_tcv_is_not():
    rng = np.random.default_rng(7)
    dts = rng.uniform(0.005, 0.02, size=300)
    _, ex_fixed, _ = _projectile_err("tcv_corrected", dts)
    assert ex_fixed <= _roundoff(300, 20.0)
    _, ex_tcv, _ = _projectile_err("tcv", dts)
    # Published TCV errs by a*h*(h - h_prev)/2 at every change of step: far above round-off.
    assert ex_tcv > 1e-4
    _, ex_plain, _ = _projectile_err("verlet", dts)
    assert ex_plain > 1e-2


def test_naive_start_x0_minus_v0_h_is_wrong_by_a_h_t_over_2():
    """Starting with x_prev = x0 - v0 h drops a h^2/2: the error is exactly a h t / 2."""
    p = projectile()
    h, n = 0.01, 200
    s = State.from_xv(p.x0, p.v0)
    verlet = get_integrator("verlet")
    verlet.start(s, h, p.accel)
    s.x_prev = s.x - h * s.v                     # the naive start, on purpose
    xs = [s.x.copy()]
    for _ in range(n):
        verlet.step(s, h, p.accel)
        xs.append(s.x.copy())
    t = h * np.arange(n + 1)
    xe, _ = p.exact(t)
    a = p.accel(p.x0, p.v0)
    np.testing.assert_allclose(np.array(xs) - xe, (a * h / 2) * t[:, None],
                               rtol=0, atol=_roundoff(n, 20.0))


# --- energy over 10^5 steps of the oscillator ---------------------------------------

def _energy_run(method, h, n):
    tr = integrate(lambda x, v: -x, [1.0], [0.0], np.full(n, h), method)
    return 0.5 * (tr.x[:, 0] ** 2 + tr.v[:, 0] ** 2)


@pytest.mark.parametrize("method", [m for m, i in INTEGRATORS.items() if i.symplectic])
def test_symplectic_energy_error_is_bounded_without_trend(method):
    h, n = 0.05, 100_000      # 800 periods
    e = _energy_run(method, h, n)
    err = np.abs(e - e[0]) / e[0]
    first, last = err[: n // 10].max(), err[-n // 10:].max()
    # A fixed-step symplectic method conserves a modified energy H + O(h^p); the error
    # in H oscillates with an amplitude set in the first period. No trend: the last
    # tenth stays within 1% (plus round-off) of the first.
    assert last <= first * 1.01 + 1e-12
    # And its size matches the order: <= (w h)^p with p the method's order (w = 1).
    assert first <= h ** INTEGRATORS[method].order


def test_explicit_euler_energy_grows_by_exactly_1_plus_h2_per_step():
    h, n = 0.01, 100_000
    e = _energy_run("euler", h, n)
    # Forward Euler multiplies x^2 + v^2 by 1 + (w h)^2 each step, exactly.
    np.testing.assert_allclose(e[-1] / e[0], (1 + h * h) ** n, rtol=1e-9)
    assert e[-1] / e[0] > 2e4


def test_rk4_energy_decays_by_its_amplification_factor():
    h, n = 0.2, 100_000
    e = _energy_run("rk4", h, n)
    # |R(ih)|^2 = 1 - h^6/72 + h^8/576 for the classical RK4 stability polynomial.
    g = 1 - h ** 6 / 72 + h ** 8 / 576
    np.testing.assert_allclose(e[-1] / e[0], g ** n, rtol=1e-8)
    assert e[-1] < e[0]


# --- velocity estimates of the position-based integrators ---------------------------

@pytest.mark.parametrize("method", ["verlet", "tcv", "tcv_corrected"])
def test_position_verlet_velocity_estimate_is_second_order(method):
    p = oscillator()
    errs = []
    hs = np.array([0.02, 0.01, 0.005])
    for h in hs:
        n = int(round(p.T / h))
        tr = integrate(p.accel, p.x0, p.v0, np.full(n, h), method)
        _, ve = p.exact(tr.t)
        errs.append(np.abs(tr.v - ve).max())
    order = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert abs(order - 2) < 0.15


def test_leapfrog_and_velocity_verlet_agree_to_roundoff():
    p = oscillator()
    dts = np.random.default_rng(3).uniform(0.01, 0.03, 2000)
    a = integrate(p.accel, p.x0, p.v0, dts, "leapfrog")
    b = integrate(p.accel, p.x0, p.v0, dts, "velocity_verlet")
    np.testing.assert_allclose(a.x, b.x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.v, b.v, rtol=0, atol=1e-12)


def test_velocity_dependent_force_keeps_velocity_verlet_second_order():
    # Damped oscillator x'' = -x - c x': exact solution in closed form.
    c = 0.3
    wd = np.sqrt(1 - c * c / 4)

    def exact(t):
        return np.exp(-c * t / 2) * (np.cos(wd * t) + (c / (2 * wd)) * np.sin(wd * t))

    for method in ("velocity_verlet", "leapfrog", "tcv_corrected", "rk4"):
        errs = []
        hs = np.array([0.04, 0.02, 0.01])
        for h in hs:
            n = int(round(5 / h))
            tr = integrate(lambda x, v: -x - c * v, [1.0], [0.0], np.full(n, h), method)
            errs.append(abs(tr.x[-1, 0] - exact(tr.t[-1])))
        order = np.polyfit(np.log(hs), np.log(errs), 1)[0]
        assert order > INTEGRATORS[method].order - 0.15, (method, order)


# --- switching integrators mid-run --------------------------------------------------

@pytest.mark.parametrize("first", ALL)
@pytest.mark.parametrize("second", ALL)
def test_switching_keeps_positions_and_the_order(first, second):
    p = oscillator()

    def run(h):
        n = int(round(p.T / h))
        s = State.from_xv(p.x0, p.v0)
        integ = get_integrator(first)
        integ.start(s, h, p.accel)
        for _ in range(n // 2):
            integ.step(s, h, p.accel)
        x_before = s.x.copy()
        integ = switch(s, second, h, p.accel)
        np.testing.assert_array_equal(s.x, x_before)       # positions unchanged
        for _ in range(n - n // 2):
            integ.step(s, h, p.accel)
        xe, _ = p.exact(np.array([n * h]))
        return abs(s.x[0] - xe[0, 0])

    hs = np.array([0.02, 0.01])
    if min(INTEGRATORS[first].order, INTEGRATORS[second].order) == 1:
        hs = hs / 10
    errs = np.array([run(h) for h in hs])
    order = np.log(errs[0] / errs[1]) / np.log(2)
    expected = min(INTEGRATORS[first].order, INTEGRATORS[second].order)
    assert order > expected - 0.15


# --- determinism --------------------------------------------------------------------

def test_same_inputs_give_bit_identical_results():
    p = projectile()
    dts = np.random.default_rng(11).uniform(0.001, 0.02, 500)
    hashes = set()
    for _ in range(2):
        for m in ALL:
            tr = integrate(lambda x, v: p.accel(x, v) - 0.1 * v, p.x0, p.v0, dts, m)
            hashes.add((m, state_hash(tr.x, tr.v, tr.t)))
    assert len(hashes) == len(ALL)


# ------------------------------------------------------ one entry carries every face

@pytest.mark.parametrize("method", ALL)
def test_every_integrator_carries_every_face(method):
    """What the lab, the HUD, the panel, the CLI and the report read from an integrator
    is class data on it: an integrator without one of them fails here, not silently
    somewhere down the line (a figure without its colour, a map without its edge)."""
    import matplotlib.colors
    import matplotlib.lines

    integ = INTEGRATORS[method]
    assert integ.name == method and isinstance(integ.label, str) and integ.label
    assert isinstance(integ.order, int) and integ.order >= 1
    assert isinstance(integ.order_variable, int) and 0 <= integ.order_variable <= integ.order
    assert isinstance(integ.symplectic, bool) and isinstance(integ.position_based, bool)
    assert isinstance(integ.fevals, int) and integ.fevals >= 1
    assert isinstance(integ.order_velocity_force, int)
    assert 1 <= integ.order_velocity_force <= integ.order
    assert integ.constrained_form in (None, "RATTLE", "SHAKE")
    assert integ.local_order == integ.order + (2 if integ.position_based else 1)
    color, marker, line = integ.style
    assert matplotlib.colors.is_color_like(color)
    assert marker in matplotlib.lines.Line2D.markers
    assert line in ("-", "--", "-.", ":")
    assert set(integ.stability) == {"oscillator", "damping"}
    assert all(type(v) is float and v >= 0 for v in integ.stability.values())


def test_no_two_integrators_look_alike_in_a_figure():
    assert len({i.style[:2] for i in INTEGRATORS.values()}) == len(INTEGRATORS)
    assert len({i.style[0] for i in INTEGRATORS.values()}) == len(INTEGRATORS)
    assert len({i.label for i in INTEGRATORS.values()}) == len(INTEGRATORS)


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("problem", ["oscillator", "damping"])
def test_declared_stability_edge_is_where_the_one_step_map_turns_unstable(method, problem):
    """The edge an integrator declares against the spectral radius of its own one-step
    map (``lab.stability_map.one_step_matrices``: the step applied to unit states):
    <= 1 just below the edge, > 1 just above it (a 0 edge: > 1 at any step).
    Velocity Verlet's 2 and 1, RK4's 2 sqrt 2, Forest-Ruth's 1.5734 and 0.9130 (the
    latter two from polynomial maps written out, not from the code under test)."""
    from sandbox.lab.stability_map import spectral_radius

    edge = INTEGRATORS[method].stability[problem]
    w, c = (np.array([1.0]), np.array([0.0])) if problem == "oscillator" else (
        np.array([0.0]), np.array([1.0]))
    if edge == 0:
        assert spectral_radius(method, w * 1e-3, c * 1e-3)[0] > 1.0
        return
    below = spectral_radius(method, w * edge * (1 - 1e-6), c * edge * (1 - 1e-6))[0]
    above = spectral_radius(method, w * edge * (1 + 1e-4), c * edge * (1 + 1e-4))[0]
    # Below: on the unit circle up to the eigenvalues' rounding (a double eigenvalue
    # at the edge moves by sqrt(eps)); above: off it by more than that.
    assert below <= 1 + 1e-7 and above > 1 + 1e-7, (below, above)


def test_forest_ruth_is_time_reversible_and_fourth_order_in_one_step():
    """A symmetric composition of a symmetric map: a step of -h undoes a step of h (to
    round-off), and one step's error from exact data on the oscillator is O(h^5)."""
    integ = INTEGRATORS["forest_ruth"]
    accel = lambda x, v: -x                                        # noqa: E731
    s = State.from_xv(np.array([1.0]), np.array([0.3]))
    integ.start(s, 0.1, accel)
    x0, v0 = s.x.copy(), s.v.copy()
    integ.step(s, 0.1, accel)
    integ.step(s, -0.1, accel)
    np.testing.assert_allclose(s.x, x0, rtol=0, atol=8 * EPS)
    np.testing.assert_allclose(s.v, v0, rtol=0, atol=8 * EPS)
    errs = []
    for h in (0.1, 0.05):
        s = State.from_xv(np.array([1.0]), np.array([0.3]))
        integ.start(s, h, accel)
        integ.step(s, h, accel)
        errs.append(abs(s.x[0] - (np.cos(h) + 0.3 * np.sin(h))))
    assert 2 ** 4.8 < errs[0] / errs[1] < 2 ** 5.2      # local order 5


@pytest.mark.parametrize("varying", [False, True])
@pytest.mark.parametrize("method", ALL)
def test_the_contrast_is_another_map_at_these_steps(method, varying):
    """``contrast`` (the ghost G starts) is never the integrator itself nor one taking the
    same positions at these steps: leapfrog and velocity Verlet are one map, and the
    position Verlet family is one map at a fixed step."""
    from sandbox.sim.integrators import contrast

    other = INTEGRATORS[contrast(method, varying)]
    own = INTEGRATORS[method]
    assert other.name != own.name
    assert {own.name, other.name} != {"leapfrog", "velocity_verlet"}
    if not varying:
        assert not (own.position_based and other.position_based)
    else:
        # Under varying steps they differ in how they take them, or in kind.
        assert (other.order_variable != own.order_variable
                or other.symplectic != own.symplectic)

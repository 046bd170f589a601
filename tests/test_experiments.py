"""The experiments' key numbers against theory, and the `experiment` command end to end.

Every test calls a compute function of ``sandbox.lab`` at reduced sizes (never the
plotting); each states the exact answer it checks and why its tolerance is what it is.
The end-to-end test runs ``main.py experiment all --quick`` once, on a local Dask cluster
(about a minute on two cores), and the determinism test reruns experiments serially
against its CSVs: the same bytes whichever backend ran the sweep.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sandbox.lab import energy_drift as ed
from sandbox.lab import escape_map as em
from sandbox.lab import initial_conditions as ic
from sandbox.lab import orbit as ob
from sandbox.lab import phase_space as ps
from sandbox.lab import random_dt as rd
from sandbox.lab import stability as st
from sandbox.lab import stability_map as sm
from sandbox.lab import velocity_estimates as ve
from sandbox.lab.batch import run_batch, window_max
from sandbox.lab.experiments import EXPERIMENTS, Context, run
from sandbox.lab.problems import moon
from sandbox.sim.integrators import INTEGRATORS, integrate

ROOT = Path(__file__).resolve().parent.parent
TOL = 0.15          # measured orders: fits over families in the asymptotic regime


# --- the batch runner ---------------------------------------------------------------

@pytest.mark.parametrize("method", list(INTEGRATORS))
def test_batched_runs_are_single_runs(method):
    # Same arithmetic per column as integrate(): equal to round-off (one step may
    # combine terms in another order when h is an array).
    p = moon(periods=0.5)
    rng = np.random.default_rng(3)
    H = p.T / 100 * rng.uniform(0.7, 1.3, size=(100, 3))
    run = run_batch(p.accel, p.x0, p.v0, H, method, observe=lambda x, v: x)
    for j in range(3):
        tr = integrate(p.accel, p.x0, p.v0, H[:, j], method)
        np.testing.assert_allclose(run.obs[:, j], tr.x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(run.t[:, j], tr.t, rtol=1e-15)


def test_window_max_takes_the_largest_magnitude_per_window():
    t = np.array([[0.0], [0.5], [1.0], [1.5], [2.0]])
    y = np.array([[1.0], [-3.0], [2.0], [0.5], [-4.0]])
    np.testing.assert_array_equal(window_max(t, y, np.array([0.0, 1.0, 2.0]))[:, 0], [3, 4])


# --- velocity estimates (article 004) -----------------------------------------------

def test_velocity_estimate_orders_are_1_1_2_2():
    s = ve.estimate_sweep("oscillator", (100, 200, 400, 800))
    for k, expected in ve.EXPECTED.items():
        assert abs(s.order[k] - expected) < TOL, (k, s.order[k])
    # The central difference of Verlet positions *is* velocity Verlet's velocity, and
    # the two methods' positions agree: both to round-off (n steps of ~1e-16 each).
    assert s.vv_gap < 1e-11 and s.x_gap < 1e-11


def test_local_orders_explain_the_articles_4th_order():
    # One step from exact data: Verlet errs by x'''' h^4/12, velocity Verlet by
    # x''' h^3/6, RK4 by O(h^5), both Eulers by a h^2/2.
    lo = ve.local_sweep("oscillator", (0.1, 0.05, 0.025, 0.0125))
    for m, k in ve.LOCAL_THEORY.items():
        assert abs(lo.order[m] - k) < TOL, (m, lo.order[m])


# --- initial conditions (article 001) ------------------------------------------------

def test_naive_start_is_first_order_and_eq2_second_or_exact():
    naive = ic.start_sweep("oscillator", "naive", (50, 100, 200, 400, 800))
    eq2 = ic.start_sweep("oscillator", "eq2", (50, 100, 200, 400, 800))
    assert abs(naive.order - 1) < TOL and abs(eq2.order - 2) < TOL
    pn = ic.start_sweep("projectile", "naive", (10, 20, 40, 80))
    pe = ic.start_sweep("projectile", "eq2", (10, 20, 40, 80))
    assert abs(pn.order - 1) < TOL
    assert pe.exact                    # a parabola: exact up to n^2 eps L round-off


def test_naive_start_error_is_a_h_t_over_2():
    # e_n = n a h^2/2 exactly for constant acceleration; round-off ~ n^2 eps L.
    p, _ = ic.setup("projectile")
    t, err = ic.run_start(p, "naive", 50)
    np.testing.assert_allclose(err, ic.naive_error_theory(p, t, p.T / 50), atol=1e-11)


# --- energy drift (article 002) ------------------------------------------------------

@pytest.mark.parametrize("method", ["symplectic_euler", "velocity_verlet", "verlet"])
def test_symplectic_energy_is_bounded_without_trend_at_a_fixed_step(method):
    for problem in ("oscillator", "moon"):
        r = ed.drift_run(problem, method, "fixed", quick=True)
        # A bounded oscillation: the last tenth's peak equals the first tenth's to a few
        # per cent, and a straight line explains almost none of the error.
        assert not r.trend and abs(r.ratio - 1) < 0.05 and r.share < 0.1, (problem, r)
        assert 1e-5 < r.max_err < 0.1          # not conserved, but small


def test_explicit_euler_energy_grows_by_exactly_1_plus_h2_per_step():
    # Oscillator, w = 1: E_{n+1} = (1 + h^2) E_n exactly, so d_n = (1 + h^2)^n - 1.
    su = ed.setup("oscillator", quick=True)
    h = su.problem.T / su.n
    r = ed.drift_run("oscillator", "euler", "fixed", quick=True)
    assert r.trend and r.ratio > 1e6
    assert r.max_err == pytest.approx((1 + h * h) ** su.n - 1, rel=1e-9)


def test_rk4_energy_decays_linearly():
    # |R(ih)|^2 = 1 - h^6/72 + h^8/576 a step: a slow straight-line loss (ratio 10).
    su = ed.setup("oscillator", quick=True)
    h = su.problem.T / su.n
    r = ed.drift_run("oscillator", "rk4", "fixed", quick=True)
    assert r.trend and r.share > 0.95 and abs(r.ratio - 10) < 0.5
    assert r.max_err == pytest.approx(1 - (1 - h**6 / 72 + h**8 / 576) ** su.n, rel=1e-6)


def test_random_steps_break_the_bound_of_symplectic_methods():
    fixed = ed.drift_run("oscillator", "symplectic_euler", "fixed", quick=True)
    rand = ed.drift_run("oscillator", "symplectic_euler", "random", seeds=8, quick=True)
    assert rand.trend and rand.max_err > 2 * fixed.max_err


# --- orbit (article 000) -------------------------------------------------------------

def test_moon_at_the_large_step():
    # Backward error analysis: at a fixed step a symplectic method stays near a level
    # set of a modified energy, so at 20 steps per orbit both symplectic Euler and
    # velocity Verlet stay bound (the article's picture does not reproduce here);
    # explicit Euler's energy rises every orbit and the moon leaves.
    spo = [ob.LARGE_STEP_SPO]
    assert ob.sweep("symplectic_euler", spo).bound[0]
    assert ob.sweep("velocity_verlet", spo).bound[0]
    eu = ob.sweep("euler", spo)
    assert not eu.bound[0] and eu.r_max[0] > ob.R_FAR


def test_sweep_thresholds():
    s = ob.sweep("velocity_verlet", np.arange(4, 25), orbits=30)
    assert not s.bound[0]                              # 4 steps per orbit: flung off
    assert s.smallest_always_bound is not None and s.smallest_always_bound <= 12
    assert ob.ranges([9, 10, 11, 14]) == "9-11, 14"


# --- random steps (article 001) ------------------------------------------------------

@pytest.mark.parametrize("problem", rd.PROBLEMS)
def test_random_steps_tcv_corrected_beats_tcv_and_verlet_is_worst(problem):
    runs = {m: rd.random_dt_run(problem, m, seeds=8) for m in rd.METHODS}
    end = {m: r.end_rms for m, r in runs.items()}
    # Corrected TCV is second order under any steps; TCV as published first order.
    assert end["tcv_corrected"] < 0.5 * end["tcv"], end
    # Plain Verlet does not converge under changing steps: the worst at frame-sized h.
    assert max(end, key=end.get) == "verlet", end
    if problem == "projectile":
        assert end["tcv_corrected"] < 1e-11      # exact for constant acceleration


# --- phase space (article 002) -------------------------------------------------------

@pytest.fixture(scope="module")
def cat_reference():
    hs = (0.05, 0.025, 0.0125)
    ref = ps.reference(tuple(int(round(ps.T_END / h)) for h in hs))
    return hs, ref


def test_symplectic_maps_keep_the_cats_area_to_their_order(cat_reference):
    hs, ref = cat_reference
    # Jacobian 1: the region keeps its area exactly; what the polygon measures against
    # the exact flow is the outline's shape error, O(h^p), times the polygon's curvature
    # error (small). It shrinks at the method's order.
    for m, order, bound in (("symplectic_euler", 1, 1e-6), ("velocity_verlet", 2, 1e-7)):
        s = ps.area_sweep(m, hs, ref=ref)
        assert np.all(np.abs(s.rel_error) < bound), (m, s.rel_error)
        assert abs(s.order - order) < 0.2, (m, s.order)


def test_explicit_euler_grows_the_cat_and_rk4_shrinks_it(cat_reference):
    hs, ref = cat_reference
    eu = ps.evolve("euler", 0.05)
    # det = 1 + h^2 cos q > 1 while |q| < pi/2 (true here): growth at every step.
    assert np.all(np.diff(eu.area) > 0) and eu.area[-1] / eu.area[0] > 1.5
    sym = ps.area_sweep("symplectic_euler", hs, ref=ref)
    eus = ps.area_sweep("euler", hs, ref=ref)
    assert np.all(eus.rel_error > 1e4 * np.abs(sym.rel_error))
    grid = ps.on_grid(ref, 400)
    rk = ps.evolve("rk4", 0.05)
    dev = (rk.area - grid.area) / grid.area[0]
    assert dev[-1] < 0 and ps.verdict("rk4", dev) == "shrinks"


def test_position_verlet_area_is_off_by_h2_without_drift(cat_reference):
    # p is a three-point estimate: (q, p) is an O(h^2) change of coordinates of a
    # symplectic map, so the area error is second order and oscillates.
    hs, ref = cat_reference
    s = ps.area_sweep("verlet", hs, ref=ref)
    assert abs(s.order - 2) < TOL
    c = ps.evolve("verlet", 0.05)
    dev = (c.area - ps.on_grid(ref, 400).area) / c.area[0]
    assert ps.verdict("verlet", dev).startswith("keeps")


def test_cat_outline_is_the_polygon():
    pts = ps.cat_outline(400)
    cat = ps.CAT * ps.SIZE + ps.CENTRE
    assert ps.shoelace(pts[:, 0], pts[:, 1]) == pytest.approx(
        ps.shoelace(cat[:, 0], cat[:, 1]), rel=1e-12)
    assert 380 <= len(pts) <= 420


# --- stability -----------------------------------------------------------------------

@pytest.mark.parametrize("method", ["symplectic_euler", "leapfrog", "velocity_verlet",
                                    "verlet", "tcv", "rk4"])
def test_oscillator_stability_limit(method):
    # Theory: 2 for the Verlet family and symplectic Euler, 2 sqrt 2 for RK4 on the
    # imaginary axis. 1% covers the amplitude bound and the bisection bracket.
    lim = st.stable_limit(method, "oscillator", n=3000)
    assert lim.rel_error < 0.01, lim


def test_rk4_real_axis_limit_is_2_785_and_damping_halves_verlet():
    rk = st.stable_limit("rk4", "damping", n=3000)
    assert abs(rk.limit - 2.785) / 2.785 < 0.01
    vv = st.stable_limit("velocity_verlet", "damping", n=3000)
    assert abs(vv.limit - 1.0) < 0.01


def test_explicit_euler_has_no_stable_step():
    # (1 + (w h)^2)^(n/2) = 1000 at w h = sqrt(1000^(2/n) - 1): 0 as n grows.
    a = st.stable_limit("euler", "oscillator", n=1000)
    b = st.stable_limit("euler", "oscillator", n=4000)
    assert a.limit == pytest.approx(st.euler_finite_n(1000), rel=0.01)
    assert b.limit == pytest.approx(st.euler_finite_n(4000), rel=0.01)
    assert b.limit < a.limit


# --- the report's verdicts come from the numbers -------------------------------------

def test_claim_verdicts_follow_the_numbers():
    from sandbox.lab.report import CONFIRMED, MISSING, NOT, claim_moon
    base = {"spo": 20, "orbits": 100, "h": 0.447, "range": (4, 40), "window": [10]}
    side = {"energy_ratio": 1.0, "r_max": 16.0, "largest_escaping": 9, "smallest_bound": 10}
    nums = {"orbit": {**base, "holds": False, "euler": {**side, "bound": False},
                      "symplectic_euler": {**side, "bound": True},
                      "velocity_verlet": {**side, "bound": True}}}
    assert claim_moon(nums).verdict == NOT
    nums["orbit"].update(holds=True, symplectic_euler={**side, "bound": False})
    assert claim_moon(nums).verdict == CONFIRMED
    assert "escapes" in claim_moon(nums).paragraph
    assert claim_moon({}).verdict == MISSING


# --- the command, end to end ---------------------------------------------------------

EXPECTED_FIGURES = {
    "convergence": ["convergence.png"], "constraints": ["constraints.png"],
    "energy-drift": ["energy_drift.png", "energy_drift_series.png"],
    "orbit": ["orbit.png", "orbit_sweep.png"],
    "random-dt": ["random_dt.png", "random_dt_hist.png"],
    "stability-map": ["stability_map.png"] + [f"stability_map_{m}.png" for m in sm.METHODS],
    "escape-map": ["escape_map.png", "escape_map_edges.png"],
    "initial-conditions": ["initial_conditions.png"],
    "phase-space": ["phase_space.png", "phase_space_area.png"],
    "velocity-estimates": ["velocity_estimates.png"], "stability": ["stability.png"],
    "constraints-energy": ["constraints_energy.png"],
}


EXPECTED_CSVS = {
    "convergence": ["convergence.csv", "convergence_orders.csv"],
    "constraints": ["constraints.csv"],
    "energy-drift": ["energy_drift.csv", "energy_drift_envelope.csv"],
    "orbit": ["orbit.csv", "orbit_trajectories.csv"],
    "random-dt": ["random_dt.csv", "random_dt_series.csv", "random_dt_seeds.csv",
                  "random_dt_distribution.csv"],
    "stability-map": ["stability_map.csv", "stability_map_axes.csv"],
    "escape-map": ["escape_map.csv"],
    "initial-conditions": ["initial_conditions.csv", "initial_conditions_series.csv"],
    "phase-space": ["phase_space.csv", "phase_space_area.csv", "phase_space_shapes.csv"],
    "velocity-estimates": ["velocity_estimates.csv", "velocity_estimates_local.csv",
                           "velocity_estimates_orders.csv"],
    "stability": ["stability.csv"],
    "constraints-energy": ["constraints_energy.csv", "constraints_energy_summary.csv"],
}


@pytest.fixture(scope="module")
def all_quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("all")
    proc = subprocess.run([sys.executable, "main.py", "experiment", "all", "--quick",
                           "--out", str(out), "--seed", "0"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout


def test_experiment_all_writes_every_file_and_the_report(all_quick):
    out, stdout = all_quick
    assert set(EXPECTED_FIGURES) == set(EXPERIMENTS)
    for name in EXPERIMENTS:
        for f in EXPECTED_FIGURES[name]:
            assert (out / f).stat().st_size > 10_000, f
        for f in EXPECTED_CSVS[name]:
            assert (out / f).read_text().count("\n") >= 2, f     # header and data
    for f in ("report.md", "report.html"):
        assert (out / f).exists()
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    for figs in EXPECTED_FIGURES.values():
        for f in figs:
            assert f"]({f})" in md and f'src="{f}"' in page
    # Every file the report links exists beside it (relative paths, nothing external).
    import re
    for ref in re.findall(r'(?:src|href)="([^"]+)"', page):
        assert (out / ref).exists(), ref
    for claim in ("4th order", "two orders worse", "conserve energy", "moon",
                  "TCV restores", "eq. (2)", "phase-space area", "RK4 is fourth"):
        assert claim in md
    assert md.count("**Confirmed.**") + md.count("**Not confirmed") \
        + md.count("**Partly confirmed") >= 8
    # Every experiment printed its table.
    for word in ("integrator", "verdict", "measured order", "w h measured"):
        assert word in stdout


def test_same_seed_gives_byte_identical_csvs(all_quick, tmp_path):
    out, _ = all_quick
    ctx = Context(out=tmp_path, seed=0, jobs=1, quick=True, progress=False,
                  echo=lambda s: None)
    for name in ("random-dt", "escape-map"):
        (res,) = run(name, ctx)
        for f in res.files:
            if f.suffix in (".csv", ".npy"):
                assert f.read_bytes() == (out / f.name).read_bytes(), f.name
    assert not (out / ".sweeps").exists() and not (tmp_path / ".sweeps").exists()


def test_stability_map_axis_edges_are_the_closed_forms(all_quick):
    out, stdout = all_quick
    import csv
    rows = list(csv.DictReader((out / "stability_map_axes.csv").open()))
    assert len(rows) == 2 * len(sm.METHODS)
    assert all(r["within_one_step"] == "1" for r in rows), rows
    steps = np.load(out / "stability_map.npy")
    assert steps.shape[0] == len(sm.METHODS) and steps.shape[1] == steps.shape[2]
    assert "Every axis edge lies within one grid step" in stdout


# --- the maps ---------------------------------------------------------------------------

def test_symplectic_euler_map_is_its_closed_form_region():
    # SE on x'' = -w^2 x - c v: det = 1 - c h, trace = 2 - (w h)^2 - c h, so (Jury) it is
    # stable for c h < 2 and (w h)^2 + 2 c h < 4. Every point farther than the finite-run
    # band (growth under 1000x in 2000 steps) from that boundary agrees.
    res = 48
    blocks = [sm.map_rows("symplectic_euler", r, 8, res, 2000) for r in range(0, res, 8)]
    mp = sm.assemble(blocks, res, 2000)["symplectic_euler"]
    w, c = np.meshgrid(mp.z, mp.z, indexing="ij")
    margin = 0.05
    inside = (w * w + 2 * c < 4 - margin) & (c < 2 - margin)
    outside = (w * w + 2 * c > 4 + margin) | (c > 2 + margin)
    assert mp.stable[inside].all() and not mp.stable[outside].any()
    assert np.array_equal(mp.theory[inside | outside], mp.stable[inside | outside])


def test_spectral_radius_of_rk4_and_euler_is_their_amplification_polynomial():
    # A Runge-Kutta step on a linear system is R(h A); the eigenvalues of h A are
    # (-y +- sqrt(y^2 - 4 z^2)) / 2 (z = w h, y = c h).
    rng = np.random.default_rng(1)
    z, y = rng.uniform(0, 3.2, 200), rng.uniform(0, 3.2, 200)
    mu = np.stack([(-y + np.sqrt((y * y - 4 * z * z).astype(complex))) / 2,
                   (-y - np.sqrt((y * y - 4 * z * z).astype(complex))) / 2])
    polys = {"euler": lambda m: 1 + m,
             "rk4": lambda m: 1 + m + m**2 / 2 + m**3 / 6 + m**4 / 24}
    for method, R in polys.items():
        expected = np.abs(R(mu)).max(axis=0)
        np.testing.assert_allclose(sm.spectral_radius(method, z, y), expected, rtol=1e-9)


@pytest.mark.parametrize("method", sm.METHODS)
def test_stability_map_axes_at_full_resolution(method):
    # The map's two axes at 400 points, as the full experiment runs them: the undamped
    # row (c h = 0) and the damping column (w h = 0); the edge (midpoint of the last
    # stable and the first unstable point) within one grid step of the closed form.
    z = sm.grid()
    zero = np.zeros_like(z)
    for axis, (w, c) in (("undamped", (z, zero)), ("damping", (zero, z))):
        stable = sm.blowup_steps(method, w, c) == 0
        k = int(np.argmax(~stable))
        assert k > 0 and stable[:k].all()
        edge = (z[k - 1] + z[k]) / 2
        assert abs(edge - sm.axis_theory(method, axis)) <= z[1], (axis, edge)


def test_random_dt_distribution_uses_the_rms_runs_sequences():
    # Sequence k of the distribution is run k of the RMS curves: the same end error (to
    # the rounding of sum against cumsum in the end time).
    err = rd.end_errors(0, 4, seed=0)
    a, b = rd.PROBLEMS.index("oscillator"), rd.METHODS.index("tcv")
    run = rd.random_dt_run("oscillator", "tcv", seeds=4, seed=0)
    np.testing.assert_allclose(err[a, b], run.err[-1], rtol=1e-9, atol=1e-15)
    assert err.shape == (len(rd.PROBLEMS), len(rd.METHODS), 4)


def test_escape_map_row_at_1_1_is_the_orbit_sweep():
    row = em.escape_row("symplectic_euler", 1.1, 4, 12, 20)
    ref = ob.sweep("symplectic_euler", np.arange(4, 13), 20)
    np.testing.assert_array_equal(row.bound, ref.bound)
    np.testing.assert_array_equal(row.r_max, ref.r_max)
    slow = em.escape_row("velocity_verlet", 0.8, 4, 12, 20)
    assert ob.escape_distance(0.8) == ob.R_FAR and ob.escape_distance(1.3) > ob.R_FAR
    # Not monotone in the step: bound at 4 and 5 steps an orbit, flung off at 6.
    assert slow.bound[-1] and not slow.bound.all()


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_carries_every_face(name):
    """One entry an experiment: its command (a docstring for ``--help``), the report's
    section title and paragraph; its figures and tables are checked above."""
    e = EXPERIMENTS[name]
    assert e.name == name and callable(e.run) and e.run.__doc__.strip()
    assert e.title.strip() and e.blurb.strip().endswith(".")
    assert name in EXPECTED_FIGURES and name in EXPECTED_CSVS

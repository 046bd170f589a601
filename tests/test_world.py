"""The world: constraints, forces, energy, builders, divergence, snapshots, interaction."""

import json

import numpy as np
import pytest

from sandbox import snapshot
from sandbox.sim import builders as B
from sandbox.sim.constraints import colouring_is_valid, greedy_colouring
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.world import SimulationDiverged, World, WorldConfig
from sandbox.snapshot import SnapshotError

ALL = list(INTEGRATORS)
G = 9.81


def settle(world, seconds, h=1 / 60):
    world.start(h)
    for _ in range(int(round(seconds / h))):
        world.step(h)


BUILDS = {
    "cloth": lambda w: B.build_cloth(w, 12, 9, 0.1, shear=True, bend=True),
    "cloth_plain": lambda w: B.build_cloth(w, 5, 4, 0.1, pins="top_row"),
    "rope": lambda w: B.build_rope(w, (0, 0), (2, 0), 15),
    "bridge": lambda w: B.build_bridge(w, (0, 0), (4, 0), 11),
    "soft_ring_even": lambda w: B.build_soft_ring(w, (0, 2), segments=24),
    "soft_ring_odd": lambda w: B.build_soft_ring(w, (0, 2), segments=13),
    "soft_blob": lambda w: B.build_soft_blob(w, (0, 2), 5, 7),
    "pendulum": lambda w: B.build_pendulum(w, (0, 0)),
    "double_pendulum": lambda w: B.build_double_pendulum(w, (0, 0)),
    "cradle": lambda w: B.build_cradle(w, (0, 1)),
}


@pytest.mark.parametrize("name", list(BUILDS))
def test_colour_batches_share_no_particle(name):
    w = World()
    BUILDS[name](w)
    BUILDS["rope"](w)              # a second body: batches merge across bodies
    c = w.constraints
    assert colouring_is_valid(c.i, c.j, c.colour)
    seen = np.concatenate(c.batches)
    assert np.array_equal(np.sort(seen), np.arange(len(c)))     # every constraint once
    for b in c.batches:
        ends = np.concatenate([c.i[b], c.j[b]])
        assert np.unique(ends).size == ends.size


def test_greedy_colouring_handles_a_star_and_a_clique():
    n = 7
    i, j = np.triu_indices(n, 1)
    col = greedy_colouring(i, j, n)
    assert colouring_is_valid(i, j, col)
    assert col.max() + 1 <= 2 * (n - 1) - 1
    w = World()
    w.add_particles(np.random.default_rng(0).normal(size=(n, 2)))
    w.add_constraints(i, j)                          # no colouring given: greedy
    w.add_constraints([0, 1], [2, 3], colour=[0, 0])  # a clash: recoloured
    assert colouring_is_valid(w.constraints.i, w.constraints.j, w.constraints.colour)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_cloth_rests_at_its_grid_lengths(dtype):
    """A cloth's links rest at the grid's own lengths (spacing, its diagonal, twice it
    for bends), one value a family, not at distances measured between rounded
    positions; those agree with them to the positions' rounding (float32: positions
    near 2 m carry ~1e-7 m)."""
    w = World(WorldConfig(dtype=dtype))
    spacing = 0.02
    B.build_cloth(w, 30, 20, spacing, origin=(-1.99, 2.0), shear=True, bend=True)
    c = w.constraints
    d = np.abs(w.particles.x[c.j] - w.particles.x[c.i]).astype(float)
    family = np.where(d.min(axis=1) > spacing / 2, 1,                 # both axes: shear
                      np.where(d.max(axis=1) > 1.5 * spacing, 2, 0))  # two cells: bend
    want = np.array([spacing, spacing * np.sqrt(2.0), 2 * spacing])[family]
    assert np.array_equal(c.rest, want)
    assert [np.unique(c.rest.astype(dtype)[family == k]).size for k in range(3)] == [1, 1, 1]
    rounding = 4e-7 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(c.lengths(w.particles.x), c.rest, rtol=0, atol=rounding)


@pytest.mark.parametrize("method", ALL)
def test_pinned_particles_never_move(method):
    w = World(WorldConfig(integrator=method, iterations=4, substeps=2))
    body = B.build_cloth(w, 8, 6, 0.1, pins="top_points", shear=True)
    pinned = body.particles[w.particles.inv_mass[body.particles] == 0]
    x0 = w.particles.x[pinned].copy()
    settle(w, 1.0)
    assert np.array_equal(w.particles.x[pinned], x0)
    assert np.all(w.particles.v[pinned] == 0)


@pytest.mark.parametrize("method", ALL)
def test_every_integrator_keeps_a_rigid_pendulum_rod_and_loses_no_energy(method):
    w = World(WorldConfig(integrator=method, iterations=1, substeps=20))
    B.build_pendulum(w, (0, 0), 1.0, 1.0)
    e0 = w.energy()["total"]
    settle(w, 5.0)
    L = w.constraints.lengths(w.particles.x)[0]
    assert abs(L - 1.0) < 1e-9          # one constraint to a pin: exact in one pass
    e = w.energy()["total"]
    # Projection onto the rod only removes energy (PBD damping, O(h)); it never adds.
    assert e <= e0 + 1e-3 * abs(e0)
    assert e > e0 - 0.15 * (e0 - (-G))   # and at 20 substeps it keeps most of it


def test_hanging_rope_length_and_cloth_stretch_after_settling():
    # 20 substeps x 2 iterations (XPBD "small steps"): measured max stretch 0.12%.
    w = World(WorldConfig(iterations=2, substeps=20, drag=1.0))
    B.build_rope(w, (0, 0), (2, 0), segments=20, kind="stick")
    settle(w, 10.0)
    total = w.constraints.lengths(w.particles.x).sum()
    assert abs(total - 2.0) / 2.0 < 2e-3
    assert w.particles.x[-1, 1] < -1.99        # hangs straight down
    w = World(WorldConfig(iterations=2, substeps=20, drag=1.0))
    B.build_cloth(w, 20, 20, 0.1, pins="top_row")
    settle(w, 10.0)
    mean, worst = w.constraint_error()
    assert mean < 1e-3 and worst < 5e-3


def test_substeps_beat_iterations_at_equal_cost():
    errs = {}
    for sub, it in ((1, 10), (10, 1)):
        w = World(WorldConfig(iterations=it, substeps=sub, drag=1.0))
        B.build_rope(w, (0, 0), (2, 0), segments=20, kind="stick")
        settle(w, 10.0)
        errs[(sub, it)] = w.constraint_error()[1]
    assert errs[(10, 1)] < errs[(1, 10)] / 5


@pytest.mark.parametrize("h", [1 / 30, 1 / 60, 1 / 240])
def test_compliance_gives_the_same_stiffness_at_any_step(h):
    # A chain of 4 compliant links (alpha = 1e-3 m/N) holding 1 kg masses: at rest the
    # link k from the top carries the weight below it, so its stretch is alpha*(4-k)*m*g,
    # whatever h and the iteration count (XPBD's lambda makes it so).
    alpha, m = 1e-3, 1.0
    w = World(WorldConfig(iterations=20, drag=5.0))
    B.build_rope(w, (0, 0), (0, -4), segments=4, mass=m, kind="stick", compliance=alpha)
    settle(w, 12.0, h)
    stretch = w.constraints.lengths(w.particles.x) - 1.0
    expected = alpha * m * G * np.array([4, 3, 2, 1])
    np.testing.assert_allclose(stretch, expected, rtol=1e-2)


def test_rope_links_allow_slack_and_sticks_do_not():
    for kind, slack_ok in (("rope", True), ("stick", False)):
        w = World(WorldConfig(gravity=(0, 0), iterations=5))
        B.build_rope(w, (0, 0), (1, 0), segments=1, kind=kind, pin="none")
        w.particles.x[1] = [0.5, 0.0]          # pushed together: slack
        w.particles.x_prev[1] = [0.5, 0.0]
        w.started = False
        w.step(1 / 60)
        L = w.constraints.lengths(w.particles.x)[0]
        assert (abs(L - 0.5) < 1e-9) if slack_ok else (abs(L - 1.0) < 1e-9)


def test_tearing_breaks_overstretched_constraints():
    w = World(WorldConfig(tear_ratio=1.5, iterations=1))
    B.build_rope(w, (0, 0), (3, 0), segments=3, kind="stick", pin="start")
    w.particles.x[3] = [10.0, 0.0]
    w.grab(3, [10.0, 0.0])
    w.step(1 / 60)
    assert w.torn >= 1 and len(w.constraints) < 3


def test_cut_removes_exactly_the_crossed_sticks():
    w = World()
    B.build_cloth(w, 10, 10, 0.1, origin=(0, 0), shear=True)
    a, b = (0.33, 0.05), (0.47, -0.95)
    crossed = w.constraints.crossing(w.particles.x, a, b)
    expected = {(int(i), int(j)) for i, j in zip(w.constraints.i[~crossed],
                                                 w.constraints.j[~crossed], strict=True)}
    n = w.cut(a, b)
    assert n == crossed.sum() > 0
    assert {(int(i), int(j)) for i, j in zip(w.constraints.i, w.constraints.j,
                                              strict=True)} == expected


def test_grabbed_particle_follows_and_keeps_the_mouse_velocity():
    """A hand moving steadily at 1 m/s is followed without lag once the spring has
    settled (it is damped relative to the hand; e^(-zeta w t) < 1e-6 after 2 s), and the
    held particle keeps the hand's velocity when released (the slack rope's far end
    swings on as it likes)."""
    w = World(WorldConfig(gravity=(0, 0), iterations=2))
    B.build_rope(w, (0, 0), (1, 0), segments=1, pin="none", kind="rope")
    w.grab(1)
    h = 1 / 60
    for k in range(180):
        w.drag_to([1.0 + h * (k + 1), 0.0])
        w.step(h)
    assert w.particles.x[1] == pytest.approx([1.0 + 180 * h, 0.0], abs=1e-6)
    assert w.particles.inv_mass[1] > 0                # held by a spring, not pinned
    w.release()
    assert w.mouse is None
    assert w.particles.v[1] == pytest.approx([1.0, 0.0], abs=1e-6)


# --- forces and energy --------------------------------------------------------------

@pytest.mark.parametrize("method, order", [("velocity_verlet", 2), ("rk4", 4),
                                           ("leapfrog", 2), ("tcv_corrected", 2)])
def test_springs_conserve_energy_to_the_integrators_order(method, order):
    def run(h):
        w = World(WorldConfig(integrator=method, gravity=(0, 0)))
        w.add_particles([[0.0, 0.0], [1.5, 0.0]], mass=[1.0, 2.0], pinned=[True, False])
        w.add_springs([0], [1], k=50.0, rest=1.0)
        e0 = w.energy()["total"]
        w.start(h)
        worst = 0.0
        for _ in range(int(round(5.0 / h))):
            w.step(h)
            worst = max(worst, abs(w.energy()["total"] - e0))
        return worst / e0

    e1, e2 = run(0.01), run(0.005)
    measured = np.log2(e1 / e2)
    assert measured > order - 0.15, measured
    assert e1 < 0.05


def test_point_gravity_matches_pairwise_sum_and_its_potential():
    from sandbox.sim.forces import nbody_potential, point_gravity
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 2))
    m = rng.uniform(0.5, 2.0, 300)
    d = x[None, :, :] - x[:, None, :]
    r2 = (d ** 2).sum(-1) + 0.01
    ref = 1.5 * np.einsum("j,ijk->ik", m, d / r2[..., None] ** 1.5)
    for backend in ("numpy", "auto"):       # the reference, and the kernel if compiled
        a = point_gravity(x, m, 1.5, 0.1, block=64, backend=backend)
        np.testing.assert_allclose(a, ref, rtol=1e-12, atol=1e-12)
    iu = np.triu_indices(300, 1)
    pot = -1.5 * np.sum(m[iu[0]] * m[iu[1]] / np.sqrt(r2[iu]))
    assert nbody_potential(x, m, 1.5, 0.1, block=64) == pytest.approx(pot, rel=1e-12)
    # Without softening a body's own term is 0 / 0 in the formula: it must count as 0
    # (the kernel selects a zero weight instead of branching). The sums may run in any
    # order: a sum of n terms reordered moves by at most ~n eps times the sum of their
    # sizes (close pairs make terms far larger than the result), plus each term's own
    # few roundings.
    r2 = (d ** 2).sum(-1)
    np.fill_diagonal(r2, np.inf)
    terms = 1.5 * m[None, :, None] * d / r2[..., None] ** 1.5
    ref = terms.sum(axis=1)
    bound = (300 + 8) * np.finfo(float).eps * np.abs(terms).sum(axis=1)
    for backend in ("numpy", "auto"):
        a = point_gravity(x, m, 1.5, 0.0, block=64, backend=backend)
        assert np.isfinite(a).all()
        assert np.all(np.abs(a - ref) <= bound), backend


@pytest.mark.parametrize("method", ["velocity_verlet", "rk4", "tcv_corrected"])
def test_circular_orbit_after_ten_periods(method):
    # Moon (m = 1) around a pinned planet (M = 1000), G = 1, r = 10: omega = 10 rad/s
    # ... sqrt(G (M+m) / r^3) = 1.0005 rad/s, period ~6.28 s; h = T/200 (w h = 0.031).
    w = World(WorldConfig(G=1.0, gravity=(0, 0), softening=0.0, integrator=method))
    B.build_orbit(w, central_mass=1000.0, fixed_center=True,
                  moons=[{"distance": 10.0, "speed_factor": 1.0, "mass": 1.0}])
    # A pinned planet exerts G M / r^2, so the circular speed uses mu = G M.
    w.particles.v[1] = [0.0, np.sqrt(1000.0 / 10.0)]
    omega = np.sqrt(1000.0 / 1000.0)
    T = 2 * np.pi / omega
    h = T / 200
    e0 = w.energy()["total"]
    settle(w, 10 * T, h)
    r = np.linalg.norm(w.particles.x[1] - w.particles.x[0])
    wh = omega * h
    order = INTEGRATORS[method].order
    # The error in r and E of an order-p method is C (w h)^p; the constants for these
    # methods on a circular orbit are below 1 (VV: (w h)^2/8 per orbit, bounded).
    bound = 10 * wh ** order if INTEGRATORS[method].symplectic else 10 * 10 * wh ** order
    assert abs(r - 10.0) / 10.0 < bound
    assert abs(w.energy()["total"] - e0) / abs(e0) < bound


# --- safety -------------------------------------------------------------------------

def test_divergence_raises_and_leaves_the_world_as_before():
    w = World(WorldConfig(integrator="euler", gravity=(0, 0)))
    w.add_particles([[0.0, 0.0], [1.0, 0.0]], pinned=[True, False])
    w.add_springs([0], [1], k=1e9, rest=0.5)
    w.start(0.1)
    with pytest.raises(SimulationDiverged) as e:
        for _ in range(1000):
            before = w.state_hash()
            w.step(0.1)
    assert w.state_hash() == before
    assert e.value.integrator == "euler" and e.value.h == 0.1 and e.value.t >= 0
    assert "euler" in str(e.value)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_world_rejects_bad_steps(bad):
    w = World()
    B.build_pendulum(w, (0, 0))
    with pytest.raises(ValueError):
        w.step(bad)


def _busy_world():
    w = World(WorldConfig(iterations=3, tear_ratio=3.0, bounds=(-5, -5, 5, 5)))
    B.build_cloth(w, 6, 5, 0.1, shear=True)
    B.build_soft_ring(w, (2, 2), pressure=10.0)
    w.add_springs([0], [7], k=10.0)
    settle(w, 0.5)
    return w


def test_snapshot_round_trip_gives_an_identical_state(tmp_path):
    w = _busy_world()
    path = tmp_path / "snap.npz"
    snapshot.save(w, path)
    h = w.state_hash()
    other = World()
    snapshot.load(other, path)
    assert other.state_hash() == h
    assert other.constraints.grids == w.constraints.grids == [(0, 5, 6)]  # the layout
    for _ in range(20):            # and both continue identically
        w.step(1 / 60)
        other.step(1 / 60)
    assert other.state_hash() == w.state_hash()
    assert not list(tmp_path.glob("*.tmp"))


def _pickled_npz(path):
    np.savez(path, meta=np.array([object()], dtype=object))


@pytest.mark.parametrize("corrupt", ["garbage", "truncated", "pickle", "nan", "shape",
                                     "index", "missing", "grids"])
def test_corrupt_snapshots_are_rejected_and_the_world_is_unchanged(tmp_path, corrupt):
    good = tmp_path / "good.npz"
    snapshot.save(_busy_world(), good)
    bad = tmp_path / "bad.npz"
    if corrupt == "garbage":
        bad.write_bytes(b"not a snapshot at all")
    elif corrupt == "truncated":
        bad.write_bytes(good.read_bytes()[:300])
    elif corrupt == "pickle":
        _pickled_npz(bad)
    elif corrupt == "missing":
        bad = tmp_path / "nope.npz"
    else:
        with np.load(good) as z:
            data = {k: z[k] for k in z.files}
        if corrupt == "nan":
            data["p_x"][0, 0] = np.nan
        elif corrupt == "shape":
            data["p_v"] = data["p_v"][:-1]
        elif corrupt == "index":
            data["c_j"][0] = 10_000
        elif corrupt == "grids":
            meta = json.loads(bytes(data["meta"]).decode())
            meta["grids"] = [[0, 5, "6"]]
            data["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        np.savez(bad, **data)
    w = _busy_world()
    h = w.state_hash()
    with pytest.raises(SnapshotError) as e:
        snapshot.load(w, bad)
    assert str(bad) in str(e.value)
    assert w.state_hash() == h


def test_same_build_and_steps_give_bit_identical_state():
    hashes = {_busy_world().state_hash() for _ in range(2)}
    assert len(hashes) == 1


def test_switching_integrator_in_a_world_keeps_positions():
    w = _busy_world()
    for name in ALL:
        x = w.particles.x.copy()
        w.set_integrator(name, 1 / 60)
        assert np.array_equal(w.particles.x, x)
        w.step(1 / 60)
        assert np.isfinite(w.particles.x).all()


def test_constraint_error_falls_like_1_over_iterations_and_1_over_substeps_squared():
    from sandbox.lab.stiffness import settle_error
    it2, it8 = settle_error("rope", 1, 2, 3.0)[1], settle_error("rope", 1, 8, 3.0)[1]
    sb2, sb8 = settle_error("rope", 2, 1, 3.0)[1], settle_error("rope", 8, 1, 3.0)[1]
    # Gauss-Seidel on a chain leaves a residual ~ 1/K after K iterations; a substep
    # divides h, and the residual stretch scales with the per-step load g h^2, so ~1/S^2.
    assert np.log(it2 / it8) / np.log(4) == pytest.approx(1.0, abs=0.2)
    assert np.log(sb2 / sb8) / np.log(4) == pytest.approx(2.0, abs=0.2)


def test_compiled_constraint_kernel_matches_the_numpy_reference():
    from sandbox.sim import backend as _backend
    if not _backend.compiled("auto"):
        pytest.skip("numba is not installed: only the numpy reference runs")
    worlds = []
    for backend, threads in (("numpy", "auto"), ("compiled", "serial"),
                             ("compiled", "parallel")):
        w = World(WorldConfig(iterations=3, substeps=2, tear_ratio=1.3))
        B.build_cloth(w, 15, 12, 0.1, pins="top_points", shear=True, bend=True,
                      compliance=1e-6)
        B.build_rope(w, (3, 0), (5, 0), 12, kind="rope")
        w.constraints.backend, w.constraints.threads = backend, threads
        settle(w, 1.0)
        worlds.append(w)
    a = worlds[0]
    for b in worlds[1:]:
        # Same arithmetic in the same order (any order within a batch, which shares no
        # particle): bit for bit, serial or spread over the cores.
        np.testing.assert_array_equal(a.particles.x, b.particles.x)
        assert len(a.constraints) == len(b.constraints)


@pytest.mark.parametrize("method", ["verlet", "tcv", "tcv_corrected"])
def test_compiled_verlet_step_matches_the_numpy_reference(method, monkeypatch):
    from sandbox.sim import backend as _backend
    if not _backend.compiled("auto"):
        pytest.skip("numba is not installed: only the numpy reference runs")
    runs = []
    for backend in ("numpy", "auto"):
        monkeypatch.setattr(type(INTEGRATORS[method]), "backend", backend)
        w = World(WorldConfig(integrator=method, iterations=2, substeps=3))
        B.build_cloth(w, 12, 9, 0.1, shear=True)
        w.start(1 / 60)
        rng = np.random.default_rng(0)
        for _ in range(100):               # changing steps exercise h / h_prev
            w.step(rng.uniform(0.5, 1.5) / 60)
        runs.append((w.particles.x.copy(), w.particles.v.copy()))
    # The kernel performs the reference's operations in the reference's order.
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])

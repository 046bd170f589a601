"""The compiled fast paths against their numpy references.

The run kernels (constraint links addressed by offsets), the in-place Verlet step and the
deferred velocity must give the numpy reference's numbers: bit for bit where they perform
the same operations in the same order (positions), to round-off where the order differs
(the folded velocity). Timing lives in ``python main.py bench``, not here.
"""

import numpy as np
import pytest

from sandbox.sim import backend as _backend
from sandbox.sim import builders as B
from sandbox.sim import kernels, pipeline, planar, serial_links
from sandbox.sim.constraints import ROPE, Constraints
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.world import World, WorldConfig

needs_numba = pytest.mark.skipif(not _backend.compiled("auto"), reason="numba is not installed")


def _scene(backend: str, dtype: str = "float64", cloth_last: bool = False,
           threads: str = "auto", **config) -> World:
    """Rigid cloth (runs of every kind), a rope of rope links (pairs that go slack), a
    short chain of sticks (rigid links gathered), a compliant bridge (compliant links
    gathered apart), grabbed and torn during the run; ``cloth_last``: the cloth's
    particles after the others' (its grid layout starts past 0)."""
    w = World(WorldConfig(dtype=dtype, **config))
    if not cloth_last:
        B.build_cloth(w, 24, 17, 0.1, origin=(-1.0, 2.0), pins="top_points", shear=True,
                      bend=True)
    B.build_rope(w, (2.0, 2.0), (4.0, 2.0), 40, kind="rope")
    B.build_rope(w, (5.0, 2.0), (5.6, 2.0), 5, kind="stick")   # too short for runs
    B.build_bridge(w, (-3.0, -1.0), (3.0, -1.0), 30, compliance=1e-5)
    if cloth_last:
        B.build_cloth(w, 24, 17, 0.1, origin=(-1.0, 2.0), pins="top_points", shear=True,
                      bend=True)
    w.constraints.backend = backend
    w.constraints.threads = threads
    return w


def _run(w: World, frames: int = 90) -> World:
    w.start(1 / 60)
    rng = np.random.default_rng(3)
    for f in range(frames):
        if f == 20:
            w.grab(5)
        if 20 <= f < 50:
            w.drag_to(w.particles.x[5] + np.array([0.02, 0.03]))
        if f == 50:
            w.release()
        if f == 60:
            w.cut((0.0, 3.0), (0.05, -3.0))          # a vertical cut through the cloth
        w.step(rng.uniform(0.8, 1.2) / 60)
    return w


def _check_plan(c, fi, fj, rest, comp, kind, plan, offsets, perm=None):
    """Every link once, runs that address what they say, batches kept apart; ``perm``
    the slots the plan addresses (``Constraints.frame_batches``)."""
    ci, cj = (c.i, c.j) if perm is None else (perm[c.i], perm[c.j])
    assert plan[:, 2].sum() == len(c)
    covered = np.zeros(len(c), int)
    for mode, k0, n, i0, d, rope in plan:
        covered[k0:k0 + n] += 1
        ks = np.arange(k0, k0 + n)
        if mode == kernels.RUN_PAIRS:
            np.testing.assert_array_equal(fi[ks], i0 + 2 * np.arange(n))
            np.testing.assert_array_equal(fj[ks], fi[ks] + 1)
        elif mode == kernels.RUN_STRIDE:
            np.testing.assert_array_equal(fi[ks], i0 + np.arange(n))
            np.testing.assert_array_equal(fj[ks], fi[ks] + d)
        if mode == kernels.GATHER_SOFT:                    # compliant sticks only
            assert (comp[ks] != 0).all() and (kind[ks] != ROPE).all()
        if mode in (kernels.RUN_STRIDE, kernels.RUN_PAIRS):
            assert n <= kernels.CHUNK
            assert (comp[ks] == 0).all()                   # runs are rigid links only
            assert ((kind[ks] == ROPE) == bool(rope)).all()
    np.testing.assert_array_equal(covered, 1)
    # Each batch's rows hold that batch's links and nothing else.
    for b, batch in enumerate(c.batches):
        rows = plan[offsets[b]:offsets[b + 1]]
        ks = np.concatenate([np.arange(k0, k0 + n) for _, k0, n, *_ in rows])
        got = set(zip(fi[ks].tolist(), fj[ks].tolist(), strict=True))
        want = {tuple(sorted(p)) for p in zip(ci[batch].tolist(), cj[batch].tolist(),
                                               strict=True)}
        assert got == want


def test_plan_covers_every_link_once_with_valid_runs():
    w = _scene("compiled", threads="serial")
    c = w.constraints
    fi, fj, rest, comp, kind, plan, offsets = c._flat_batches()
    _check_plan(c, fi, fj, rest, comp, kind, plan, offsets)
    modes = set(plan[:, 0].tolist())
    assert modes == {kernels.GATHER, kernels.RUN_STRIDE, kernels.RUN_PAIRS,
                     kernels.GATHER_SOFT}


@pytest.mark.parametrize("rows, cols", [(17, 22), (6, 8), (3, 2)])
def test_grid_order_splits_the_grid_by_row_and_column_parity(rows, cols):
    w = World(WorldConfig())
    B.build_rope(w, (2.0, 2.0), (4.0, 2.0), 5)                  # 6 particles before it
    B.build_cloth(w, cols, rows, 0.1)
    c = w.constraints
    assert c.grids == [(6, rows, cols)]
    perm = c.grid_order(w.n)
    np.testing.assert_array_equal(np.sort(perm), np.arange(w.n))    # a permutation
    np.testing.assert_array_equal(perm[:6], np.arange(6))           # the rope stays
    slot = (perm[6:] - 6).reshape(rows, cols)
    # Blocks (even row, even col), (even, odd), (odd, even), (odd, odd), each row-major.
    blocks = [slot[0::2, 0::2], slot[0::2, 1::2], slot[1::2, 0::2], slot[1::2, 1::2]]
    start = 0
    for b in blocks:
        np.testing.assert_array_equal(b.ravel(), start + np.arange(b.size))
        start += b.size
    # Grids that overlap, do not fit or have odd columns are left in place.
    c.add_grid(6, 2, 2)
    c.add_grid(w.n - 1, 2, 2)
    np.testing.assert_array_equal(c.grid_order(w.n), perm)
    c.grids[:] = [(6, rows, cols - 1)]
    assert c.grid_order(w.n).size == 0
    assert World(WorldConfig()).constraints.grid_order(0).size == 0



def _perm_of_runs(runs, n):
    """The slots that ``planar.copy_runs``' runs put particles ``0 .. n`` in."""
    perm = np.full(n, -1)
    for k0, m, qa, qb in runs.tolist():
        if m > 0:
            assert (perm[k0:k0 + m] == -1).all()
            perm[k0:k0 + m] = qa + np.arange(m)
        else:
            assert m <= -2 and (perm[k0:k0 - 2 * m] == -1).all()
            perm[k0:k0 - 2 * m:2] = qa + np.arange(-m)
            perm[k0 + 1:k0 - 2 * m:2] = qb + np.arange(-m)
    return perm


@needs_numba
def test_copy_runs_describe_any_permutation():
    """The compiled frame copies the particles into its slots run by run: the runs
    give back the permutation (grids in parity order before, after and between other
    particles, odd rows, two grids, a shuffle, the identity), each particle once, and
    a grid row in parity order is one run of pairs."""
    rng = np.random.default_rng(3)
    perms = []
    for before, grids in ((6, [(7, 4)]), (0, [(5, 6), (3, 2)]), (3, [(2, 2)])):
        w = World(WorldConfig())
        if before:
            B.build_rope(w, (2.0, 2.0), (4.0, 2.0), before - 1)
        for rows, cols in grids:
            B.build_cloth(w, cols, rows, 0.1)
        B.build_rope(w, (2.0, -2.0), (4.0, -2.0), 3)
        perms.append((w.constraints.grid_order(w.n), w.n))
    perms += [(rng.permutation(50), 50), (np.arange(9), 9), (np.zeros(0, np.int64), 7),
              (np.zeros(0, np.int64), 0), (np.array([1, 0]), 2), (np.array([0]), 1),
              (np.array([0, 5, 1, 6, 2, 9, 3, 7, 4, 8]), 10),   # pairs end on one side,
              (np.array([0, 5, 1, 6, 9, 7, 2, 3, 4, 8]), 10)]   # on the other
    for perm, n in perms:
        runs = planar.copy_runs(np.asarray(perm, np.int64), n)
        want = perm if len(perm) else np.arange(n)
        np.testing.assert_array_equal(_perm_of_runs(runs, n), want)
    grid_perm, n = perms[0]
    runs = planar.copy_runs(grid_perm, n)
    pairs = runs[runs[:, 1] < 0]
    assert len(pairs) == 7 and (pairs[:, 1] == -2).all()    # a run a row of 4
    assert (runs[:, 1] > 0).sum() == 2                      # the ropes, one run each


def test_frame_plan_runs_over_the_grid_layout():
    """The compiled frame's plan addresses the slots of the grid layout: the cloth's
    horizontal links become unit-stride runs (no pairs left: the rope is rope links,
    gathered or paired), and the plan still covers every link once."""
    w = _scene("compiled", threads="serial")
    c = w.constraints
    (fi, fj, rest, comp, kind, plan, offsets), perm = c.frame_batches(np.float64, w.n)
    assert perm.size == w.n
    _check_plan(c, fi, fj, rest, comp, kind, plan, offsets, perm)
    cloth = int(np.prod(c.grids[0][1:]))
    pairs = plan[plan[:, 0] == kernels.RUN_PAIRS]
    assert (pairs[:, 3] >= cloth).all()             # only the rope's links pair up
    flat = c._flat_batches()[5]
    assert (plan[:, 0] == kernels.RUN_STRIDE).sum() > 0
    runs = (kernels.RUN_STRIDE, kernels.RUN_PAIRS)
    assert (plan[np.isin(plan[:, 0], runs), 2].sum()
            >= flat[np.isin(flat[:, 0], runs), 2].sum())
    # Cached per float type and size, and dropped when the links change.
    assert c.frame_batches(np.float64, w.n)[0][5] is plan
    c.remove(np.arange(len(c)) < 3)
    assert c.frame_batches(np.float64, w.n)[0][5] is not plan


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("config", [dict(substeps=4, iterations=2),
                                    dict(substeps=1, iterations=5, tear_ratio=1.05)])
def test_run_kernels_match_the_numpy_reference_bit_for_bit(config, dtype):
    initial = len(_scene("numpy", dtype, **config).constraints)
    ref = _run(_scene("numpy", dtype, **config))
    assert len(ref.constraints) < initial                 # the cut (and tears) happened
    assert ref.particles.x.dtype == dtype
    for threads in ("serial", "parallel"):
        got = _run(_scene("compiled", dtype, threads=threads, **config))
        # Same operations in the same order (swapping a link's ends and any order
        # within a batch change no bit): serial or over the cores, runs or gathers.
        np.testing.assert_array_equal(got.particles.x, ref.particles.x)
        np.testing.assert_array_equal(got.particles.v, ref.particles.v)
        assert len(got.constraints) == len(ref.constraints)


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_serial_sweep_matches_the_numpy_reference_bit_for_bit(dtype):
    """``serial_links.sweep_serial`` (the contact frame's links: runs, and gathered rows link
    after link) gives the numpy reference's positions and multipliers, bit for bit, on
    rigid runs of every kind, slack rope links, compliant links and pinned ends."""
    w = _scene("numpy", dtype)
    c, p = w.constraints, w.particles
    rng = np.random.default_rng(7)
    x0 = (p.x + rng.normal(0.0, 0.02, p.x.shape)).astype(dtype)
    fi, fj, rest, comp, kind, plan, offsets = c._flat_batches(x0.dtype)
    assert set(plan[:, 0].tolist()) == {kernels.GATHER, kernels.RUN_STRIDE,
                                        kernels.RUN_PAIRS, kernels.GATHER_SOFT}
    h = 1 / 600
    ref, got = x0.copy(), x0.copy()
    lam_ref = np.zeros(len(c), dtype)
    lam_got = np.zeros(len(c), dtype)
    # The reference keeps its multipliers in constraint order, the kernel in flat order.
    ends = zip(c.i.tolist(), c.j.tolist(), strict=True)
    where = {(min(a, b), max(a, b)): k for k, (a, b) in enumerate(ends)}
    flat = np.array([where[a, b] for a, b in zip(fi.tolist(), fj.tolist(), strict=True)])
    for _ in range(4):
        c.project_numpy(ref, p.inv_mass, h, lam_ref)
        serial_links.sweep_serial(got, p.inv_mass, fi, fj, rest, comp, kind, plan,
                             x0.dtype.type(1.0 / (h * h)), lam_got)
    np.testing.assert_array_equal(got, ref)
    soft = comp != 0
    np.testing.assert_array_equal(lam_got[soft], lam_ref[flat][soft])


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_long_rows_of_compliant_sticks_match_the_numpy_reference_bit_for_bit(dtype):
    """``serial_links._gather_soft`` takes a row of compliant sticks in blocks of
    ``soft_scratch``'s width, each in three passes (gather, vector projection,
    scatter). On rows several blocks long, with coincident ends (skipped), pinned ends
    and one row holding a compliance too small for ``1 / h**2`` (``alpha~`` 0: the
    row falls back to the general loop), positions and multipliers are the numpy
    reference's, bit for bit."""
    w = World(WorldConfig(dtype=dtype))
    B.build_soft_blob(w, (0.0, 0.0), cols=40, rows=40, spacing=0.05, compliance=1e-6)
    c, p = w.constraints, w.particles
    c.compliance[7] = 5e-324        # times 1 / h**2 below: 0 in both float types
    rng = np.random.default_rng(11)
    x0 = (p.x + rng.normal(0.0, 0.01, p.x.shape)).astype(dtype)
    x0[1] = x0[0]                   # the link 0-1 has no length: moves nothing
    p.inv_mass[[5, 300, 1234]] = 0.0
    fi, fj, rest, comp, kind, plan, offsets = c._flat_batches(x0.dtype)
    block = serial_links.soft_scratch(x0).shape[1]
    soft_rows = plan[plan[:, 0] == kernels.GATHER_SOFT]
    assert soft_rows[:, 2].max() > 2 * block           # rows of several blocks
    where = {(min(a, b), max(a, b)): k for k, (a, b) in
             enumerate(zip(c.i.tolist(), c.j.tolist(), strict=True))}
    flat = np.array([where[a, b] for a, b in zip(fi.tolist(), fj.tolist(), strict=True)])
    assert any(r[1] <= np.flatnonzero(flat == 7)[0] < r[1] + r[2] for r in soft_rows)
    h = 20.0
    inv_h2 = x0.dtype.type(1.0 / (h * h))
    assert comp[flat == 7][0] * inv_h2 == 0                 # the fallback is taken
    ref, got = x0.copy(), x0.copy()
    lam_ref = np.zeros(len(c), dtype)
    lam_got = np.zeros(len(c), dtype)
    for _ in range(3):
        c.project_numpy(ref, p.inv_mass, h, lam_ref)
        serial_links.sweep_serial(got, p.inv_mass, fi, fj, rest, comp, kind, plan, inv_h2,
                             lam_got)
    assert np.isfinite(got).all() and not np.array_equal(got, x0)
    np.testing.assert_array_equal(got, ref)
    soft = comp * inv_h2 != 0       # rigid links' multipliers are never read
    assert soft.sum() == len(c) - 1
    np.testing.assert_array_equal(lam_got[soft], lam_ref[flat][soft])


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_link_factors_say_when_a_compliance_is_lost(dtype):
    """``link_factors`` returns whether some compliant link's ``alpha~ = c / h**2`` is
    0 in the positions' type: only then does ``sweep_factored`` check each row of
    compliant sticks for one (``_soft_holds``) before ``_gather_soft`` takes it. A
    rigid link (compliance 0) is not a lost one; a compliance that underflows is."""
    f = np.dtype(dtype).type
    w = np.array([1.0, 2.0, 0.0, 1.0], dtype)
    ci, cj = np.array([0, 1, 2]), np.array([1, 2, 3])
    inv_h2 = f(1.0 / (20.0 * 20.0))    # a long step: the tiniest compliance underflows
    tiny = np.finfo(dtype).smallest_subnormal
    for comp, lost in (([1e-6, 0.0, 1e-6], False), ([1e-6, tiny, 1e-6], True),
                       ([0.0, 0.0, 0.0], False), ([tiny, 1e-6, 0.0], True)):
        c = np.array(comp, dtype)
        den, even = np.empty(3, dtype), np.empty(3, np.bool_)
        assert serial_links.link_factors(w, ci, cj, c, inv_h2, den, even) is lost
        at = c * inv_h2
        np.testing.assert_array_equal(den, w[ci] + w[cj] + at)
        np.testing.assert_array_equal(even, (at == 0) & (w[ci] == w[cj]) & (w[ci] > 0))
        rows_hold = [serial_links._soft_holds(c, inv_h2, k, 1) for k in range(3)]
        assert rows_hold == [bool(a != 0) for a in at]
    assert not serial_links._soft_holds(np.array([1e-6, tiny], dtype), inv_h2, 0, 2)
    assert serial_links._soft_holds(np.array([1e-6, tiny], dtype), inv_h2, 0, 1)


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_all_finite_is_the_states_is_finite(dtype):
    """``kernels.all_finite`` (the world's check after every step) says what
    ``State.is_finite`` says: False for a NaN or an infinity in any of the three
    arrays, True for every finite number up to the type's largest."""
    from sandbox.sim.particles import State

    big = np.finfo(dtype).max
    base = np.array([[0.0, -big], [big, 1e-30]], dtype)
    s = State(base.copy(), base.copy(), base.copy(), np.zeros_like(base))
    assert s.is_finite() and kernels.all_finite(s.x, s.v, s.x_prev)
    for name in ("x", "v", "x_prev"):
        for bad in (np.nan, np.inf, -np.inf):
            t = State(base.copy(), base.copy(), base.copy(), np.zeros_like(base))
            getattr(t, name)[1, 1] = bad
            assert not t.is_finite()
            assert not kernels.all_finite(t.x, t.v, t.x_prev), (name, bad)


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_back_up_copies_every_bit_and_compares_the_movable_rows(dtype):
    """``kernels.back_up`` (a world's backup before every step): the four arrays copied
    bit for bit (NaN payloads, -0.0, infinities, subnormals), and True exactly when
    ``w > 0`` row by row is the given mask (numpy's rule; a NaN mass is not movable;
    a mask of another length, as before any gravity field, is never the same)."""
    rng = np.random.default_rng(7)
    n = 37
    f = np.dtype(dtype)
    odd = np.array([np.nan, -0.0, np.inf, -np.inf, np.finfo(f).tiny / 4, 1.0], f)
    bits = odd.view(np.uint32 if f.itemsize == 4 else np.uint64)
    bits[0] |= 0x5                                    # a NaN with a payload
    x, v, xp = (rng.standard_normal((n, 2)).astype(f) for _ in range(3))
    x[:3, 0], v[3:6, 1], xp[-6:, 0] = odd[:3], odd[3:], odd
    w = np.abs(rng.standard_normal(n)).astype(f)
    w[::5] = 0.0
    w[7] = np.nan
    w[8] = -1.0
    backups = [np.full_like(a, 9.0) for a in (x, v, xp, w)]
    movable = w > 0
    assert kernels.back_up(x, v, xp, w, *backups, movable)
    for a, b in zip((x, v, xp, w), backups, strict=True):
        assert a.tobytes() == b.tobytes()
    for k in (0, 7, 8, n - 1):                        # one row flipped: not the same
        other = movable.copy()
        other[k] = not other[k]
        assert not kernels.back_up(x, v, xp, w, *backups, other), k
    assert not kernels.back_up(x, v, xp, w, *backups, np.zeros(0, np.bool_))
    assert not kernels.back_up(x, v, xp, w, *backups, np.ones(n - 1, np.bool_))


@needs_numba
def test_a_world_rolls_back_to_its_backup_when_a_frame_diverges():
    """The backup a compiled frame starts from (``pipeline.back_up``) is what a diverged
    frame restores: positions, velocities and the previous positions as they were
    before it, bit for bit, and an error saying so."""
    from sandbox.sim.world import SimulationDiverged

    w = World(WorldConfig(bounds=(-2.0, -1.0, 2.0, 3.0), substeps=4))
    B.build_soft_blob(w, center=(0.0, 0.0), cols=4, rows=4, spacing=0.1, mass=0.05,
                            radius=0.04, compliance=1e-5)
    for _ in range(5):
        w.step(1 / 60)
    p = w.particles
    before = [a.copy() for a in (p.x, p.v, p.x_prev)]
    p.x[3, 0] = np.inf      # as a blow-up would leave it
    before[0][3, 0] = np.inf
    with pytest.raises(SimulationDiverged):
        w.step(1 / 60)
    for a, b in zip((p.x, p.v, p.x_prev), before, strict=True):
        np.testing.assert_array_equal(a, b)


@needs_numba
def test_float32_world_runs_in_float32_and_tracks_float64():
    ref = _run(_scene("auto", substeps=8, iterations=1), frames=30)
    got = _run(_scene("auto", dtype="float32", substeps=8, iterations=1), frames=30)
    assert got.particles.x.dtype == np.float32
    # Rigid links hold lengths to float32 resolution: float32 round-off, not a drift.
    mean32, _ = got.constraint_error()
    mean64, _ = ref.constraint_error()
    assert mean32 == pytest.approx(mean64, abs=1e-4)


def test_rigid_links_never_read_their_multiplier():
    """A stale or non-finite multiplier must not leak into a rigid link's projection."""
    x = np.array([[0.0, 0.0], [1.2, 0.0]])
    c = Constraints()
    c.add([0], [1], x, rest=1.0)
    c.backend = "numpy"
    out = x.copy()
    c.project(out, np.ones(2), 1 / 60, np.array([np.nan]))
    np.testing.assert_allclose(out, [[0.1, 0.0], [1.1, 0.0]], rtol=0, atol=1e-15)
    if _backend.compiled("auto"):
        c.backend, c.threads = "compiled", "serial"
        out = x.copy()
        c.project(out, np.ones(2), 1 / 60, np.array([np.nan]))
        np.testing.assert_allclose(out, [[0.1, 0.0], [1.1, 0.0]], rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ["verlet", "tcv", "tcv_corrected"])
def test_deferred_velocity_equals_the_fold(name, monkeypatch):
    """World substeps that skip or defer the velocity give the fold's path: the same
    positions bit for bit and the same velocity to round-off."""
    runs = []
    for defer in (True, False):
        monkeypatch.setattr(type(INTEGRATORS[name]), "defers_velocity", defer)
        w = World(WorldConfig(integrator=name, substeps=5, iterations=2))
        B.build_cloth(w, 12, 9, 0.1, shear=True)
        w.start(1 / 60)
        rng = np.random.default_rng(1)
        for f in range(60):
            if f == 10:
                w.grab(30)
            if 10 <= f < 30:
                w.drag_to(w.particles.x[30] + 0.01)
            if f == 30:
                w.release()
            w.step(rng.uniform(0.5, 1.5) / 60)
        runs.append(w)
    a, b = runs
    np.testing.assert_array_equal(a.particles.x, b.particles.x)
    # v = (x+ - x) c1 - back c2 with c1 ~ 2/h: round-off of x (|x| < 2 m) times c1.
    h = 1 / (1.5 * 60 * 5)
    tol = 8 * np.finfo(float).eps * 2.0 * (2 / h + 1 / h)
    np.testing.assert_allclose(a.particles.v, b.particles.v, rtol=0, atol=tol)


@pytest.mark.parametrize("name", ["verlet", "tcv", "tcv_corrected"])
def test_later_plus_finish_is_now_without_corrections(name):
    from sandbox.sim.particles import State
    integ = INTEGRATORS[name]
    rng = np.random.default_rng(2)
    x0, v0 = rng.standard_normal((50, 2)), rng.standard_normal((50, 2))

    def accel(x, v):
        return -x

    now, later = State.from_xv(x0, v0), State.from_xv(x0, v0)
    integ.start(now, 0.01, accel)
    integ.start(later, 0.01, accel)
    for h in (0.01, 0.013, 0.008):
        h_old = later.h_prev
        integ.step(now, h, accel)
        integ.step(later, h, accel, velocity="later")
        integ.finish_velocity(later, h, h_old)
        np.testing.assert_array_equal(later.x, now.x)
        np.testing.assert_array_equal(later.v, now.v)
    with pytest.raises(ValueError, match="velocity"):
        integ.step(now, 0.01, accel, velocity="sometimes")


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("config", [dict(substeps=4, iterations=2),
                                    dict(substeps=3, iterations=1, tear_ratio=1.05),
                                    dict(substeps=1, iterations=3)])
@pytest.mark.parametrize("layout", ["grid", "grid_last", "plain", "mixed_rests"])
def test_compiled_frame_equals_the_substep_path(config, dtype, layout, monkeypatch):
    """``kernels.verlet_frame`` runs a frame in one call; the Python path substep by
    substep must give the same bits (grabs, a cut, tearing, compliant links), with the
    cloth in the grid layout (``perm``) or in its own order, its runs of links of one
    rest length (``run_rests``) or of several."""
    runs, calls, real = [], [], kernels.verlet_frame

    def counted(*args):
        calls.append(args[-1].size)
        return real(*args)

    monkeypatch.setattr(kernels, "verlet_frame", counted)
    for compiled in (True, False):
        monkeypatch.setattr(pipeline.Scratch, "compile_frames", compiled)
        calls.clear()
        w = _scene("auto", dtype=dtype, cloth_last=layout == "grid_last", **config)
        if layout == "plain":
            w.constraints.grids.clear()
        if layout == "mixed_rests":
            w.constraints.rest[::7] *= 1.01
        runs.append(_run(w))
        assert bool(calls) == compiled                    # the path under test ran
        assert all(bool(k) == (layout != "plain") for k in calls)
    a, b = runs
    np.testing.assert_array_equal(a.particles.x, b.particles.x)
    np.testing.assert_array_equal(a.particles.x_prev, b.particles.x_prev)
    np.testing.assert_array_equal(a.particles.v, b.particles.v)
    assert a.particles.t == b.particles.t and a.particles.h_prev == b.particles.h_prev
    assert len(a.constraints) == len(b.constraints)


def test_frames_with_contacts_or_velocity_forces_take_the_substep_path(monkeypatch):
    calls = []
    monkeypatch.setattr(kernels, "verlet_frame", lambda *a: calls.append(1))
    for extra in (dict(bounds=(-9.0, -9.0, 9.0, 9.0)), dict(drag=0.1)):
        w = World(WorldConfig(substeps=2, **extra))
        B.build_rope(w, (0.0, 0.0), (1.0, 0.0), 10)
        w.step(1 / 60)
    assert not calls


def test_a_diverging_compiled_frame_leaves_the_state_before_it(monkeypatch):
    """The backup is copied into reused buffers every frame; a frame that goes
    non-finite (here: a particle dragged to NaN) must still leave the state exactly as
    before that frame, and a later frame must back up afresh."""
    from sandbox.sim.world import SimulationDiverged
    calls, real = [], kernels.verlet_frame

    def counted(*args):
        calls.append(1)
        return real(*args) if real is not None else None

    monkeypatch.setattr(kernels, "verlet_frame", counted)
    w = _scene("auto", substeps=3)
    w.start(1 / 60)
    for _ in range(5):
        w.step(1 / 60)
    w.grab(5, target=(np.nan, 0.0))
    before = w.state_hash()
    with pytest.raises(SimulationDiverged):
        w.step(1 / 60)
    assert w.state_hash() == before
    w.release()
    after_release = w.state_hash()
    w.step(1 / 60)                                   # steps on from the restored state
    assert np.isfinite(w.particles.x).all() and w.state_hash() != after_release
    assert calls or not _backend.compiled("auto")



@needs_numba
def test_the_compiled_frame_runs_in_parallel_only_its_sweeps():
    """In a ``parallel=True`` kernel numba turns array expressions (``lam[:] = 0``, a
    slice copied into a slice) into parallel regions of their own, each waiting for a
    second thread: with one busy process beside it, the 1,000-link rope's frame took
    1.2-2.5 ms instead of 0.2 on one thread. So the links' frame is not a parallel
    kernel (its loops run on the calling thread), and the parallel kernels it and the
    substep path call (``_sweep_planar``, ``_project_batches``) each have one parallel
    loop: the ``prange`` over a batch's chunks (taken or not by ``min_parallel``)."""
    import numba

    assert not kernels._verlet_frame.targetoptions.get("parallel")
    assert kernels._sweep_planar.targetoptions.get("parallel")
    f = np.float64
    x = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    plan = np.array([[kernels.GATHER, 0, 1, 0, 1, 0], [kernels.RUN_PAIRS, 1, 1, 2, 1, 1],
                     [kernels.RUN_STRIDE, 2, 1, 1, 1, 0]], np.int64)
    links = (np.array([0, 2, 1]), np.array([1, 3, 2]), np.full(3, 0.5), np.zeros(3),
             np.zeros(3, np.int8), plan, np.array([0, 2, 3]))
    planar_sweep = numba.njit(parallel=True, error_model="numpy")(
        kernels._sweep_planar.py_func)
    planar_sweep(x[:, 0].copy(), x[:, 1].copy(), np.ones(4), kernels.LinkTable(*links),
                 f(3600.0), np.zeros(3), np.ones(3), kernels.run_rests(plan, links[2]), 1)
    sweep = numba.njit(parallel=True, error_model="numpy")(
        kernels._project_batches.py_func)
    sweep(x, np.ones(4), links, f(3600.0), np.zeros(3), 1)
    for kernel in (planar_sweep, sweep):
        diagnostics = next(iter(kernel.overloads.values())).metadata["parfor_diagnostics"]
        loops = diagnostics.initial_parfors
        assert len(loops) == 1
    # _project_batches's one loop is its inlined _sweep's (a variable named from it)
    assert "_sweep_" in str(loops[0].loop_nests[0].start)


@needs_numba
def test_run_rests_give_half_the_rest_of_runs_of_one_length():
    """A run of one rest length takes it once (half of it, as the kernels compute it);
    runs of several lengths, with a NaN one, and the other kinds of row read theirs."""
    f = np.float32
    rest = np.array([0.3, 0.3, 0.3, 0.3, 0.2, 0.3, 0.5, np.nan, 0.5, 0.7, 0.7], f)
    plan = np.array([[kernels.RUN_STRIDE, 0, 4, 0, 1, 0],      # one length
                     [kernels.RUN_STRIDE, 3, 3, 0, 1, 0],      # 0.3, 0.2, 0.3
                     [kernels.RUN_STRIDE, 6, 3, 0, 1, 0],      # a NaN among them
                     [kernels.RUN_PAIRS, 9, 2, 0, 1, 0],
                     [kernels.GATHER, 9, 2, 0, 0, 0],
                     [kernels.RUN_STRIDE, 9, 0, 0, 1, 0]], np.int64)
    got = kernels.run_rests(plan, rest)
    assert got.dtype == f and got[0] == f(0.3) * f(0.5)
    assert np.isnan(got[1:]).all()


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_compiled_frame_that_overflows_writes_nothing(dtype, monkeypatch):
    """A world of links steps without a backup: its compiled frame works on copies and
    writes the state back only when all of it is finite. A particle with a huge
    finite speed overflows within the frame: ``SimulationDiverged``, every bit of the
    state as before (positions, velocities, the time), the compiled frame having run;
    after the speed is mended, the world steps on."""
    from sandbox.sim.world import SimulationDiverged
    calls, real = [], kernels.verlet_frame

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(kernels, "verlet_frame", counted)
    monkeypatch.setattr(pipeline, "back_up", lambda *a: pytest.fail("backed up"))
    w = World(WorldConfig(dtype=dtype, substeps=4))
    B.build_cloth(w, 8, 6, 0.1, pins="top_points")
    free = int(w.add_particles([[3.0, 0.0]])[0])      # no links: one axis overflows alone
    w.step(1 / 60)
    big = np.finfo(dtype).max / 4
    for k, axis in ((20, 0), (free, 0), (free, 1)):
        steps, t = w.steps, w.particles.t
        w.particles.x_prev[k, axis] = w.particles.x[k, axis] - big    # finite; doubles
        before = w.state_hash()
        calls.clear()
        with pytest.raises(SimulationDiverged):
            w.step(1 / 60)
        assert calls == [1]
        assert w.state_hash() == before and w.steps == steps and w.particles.t == t
        w.particles.x_prev[k] = w.particles.x[k]
        w.step(1 / 60)
        assert np.isfinite(w.particles.x).all() and w.steps == steps + 1 and calls == [1, 1]


@pytest.mark.parametrize("name", ["verlet", "tcv", "tcv_corrected"])
def test_a_bare_state_gets_new_arrays_from_each_step(name):
    """Scripts keep ``s.x`` from earlier steps (``xs.append(s.x)``); only a world's
    particles, which it owns, are stepped in place."""
    from sandbox.sim.particles import State
    integ = INTEGRATORS[name]
    s = State.from_xv(np.zeros((4, 2)), np.ones((4, 2)))

    def accel(x, v):
        return np.full_like(x, -1.0)

    integ.start(s, 0.1, accel)
    kept = []
    for _ in range(5):
        integ.step(s, 0.1, accel)
        kept.append(s.x)
    t = 0.1 * np.arange(1, 6)
    # x(t) = t - t^2/2 exactly (constant acceleration, second-order start).
    np.testing.assert_allclose([k[0, 0] for k in kept], t - t * t / 2, rtol=0, atol=1e-12)


def test_a_world_steps_its_particles_in_place():
    w = World(WorldConfig(substeps=1))
    B.build_rope(w, (0.0, 0.0), (1.0, 0.0), 10)
    w.step(1 / 60)
    buffers = {id(w.particles.x), id(w.particles.x_prev)}
    for _ in range(3):
        w.step(1 / 60)
    if _backend.compiled("auto"):
        assert {id(w.particles.x), id(w.particles.x_prev)} == buffers


@needs_numba
def test_uniform_runs_flag_only_runs_of_one_positive_inverse_mass():
    """The even kernels run only where every particle at both ends of the run (stride
    or pairs) has the same positive inverse mass (bit for bit the same numbers then)."""
    W = np.full(12, 2.0)
    W[9] = 0.0                      # pinned
    W[11] = 3.0                     # heavier
    S, P = kernels.RUN_STRIDE, kernels.RUN_PAIRS
    plan = np.array([[S, 0, 3, 0, 4, 0],        # 0..2 with 4..6: all 2.0
                     [S, 3, 2, 6, 3, 0],        # 6..7 with 9..10: a pin
                     [S, 5, 1, 3, 8, 0],        # 3 with 11: 2.0 and 3.0
                     [P, 6, 1, 0, 1, 0],        # 0, 1: all 2.0
                     [P, 7, 2, 8, 1, 0],        # 8..11: a pin and 3.0
                     [kernels.GATHER, 9, 1, 0, 1, 0]], np.int64)
    out = np.full(6, -1.0)
    kernels._uniform_runs(W, plan, out)
    np.testing.assert_array_equal(out, [2.0, 0.0, 0.0, 2.0, 0.0, 0.0])
    # Against the definition, on runs over slots whose values change and change back
    # (2, 2, 3, 2), pins and NaNs.
    rng = np.random.default_rng(4)
    for _ in range(200):
        W = rng.choice([2.0, 2.0, 2.0, 3.0, 0.0, np.nan], 40)
        rows = []
        for _ in range(6):
            m, d = int(rng.integers(1, 8)), int(rng.integers(1, 12))
            rows.append([S, 0, m, int(rng.integers(0, 40 - m - d + 1)), d, 0])
            rows.append([P, 0, m, int(rng.integers(0, 40 - 2 * m + 1)), 1, 0])
        plan = np.array(rows, np.int64)
        out = np.full(len(rows), -1.0)
        kernels._uniform_runs(W, plan, out)
        for r, (mode, _, m, i0, d, _) in enumerate(rows):
            ends = (W[i0:i0 + 2 * m] if mode == P else
                    np.r_[W[i0:i0 + m], W[i0 + d:i0 + d + m]])
            want = ends[0] if ends[0] > 0 and (ends == ends[0]).all() else 0.0
            assert out[r] == want


def _project(x, w, c, backend, threads="serial"):
    c.backend, c.threads = backend, threads
    out = x.copy()
    c.project(out, w, 1 / 60, np.zeros(len(c), x.dtype))
    return out


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_even_split_moves_each_end_by_half_the_error(dtype):
    """A rigid link between equal inverse masses: each end moves (L - rest) / 2 along
    the link (the general form's answer, w_i / (w_i + w_j) = 1/2); a slack rope link
    and a link of zero length (ends on top of each other) move nothing and make no
    NaN."""
    x = np.array([[0.0, 0.0], [0.6, 0.8],           # stick, L = 1, rest 0.5
                  [2.0, 0.0], [2.3, 0.4],           # rope, L = 0.5 < rest 0.7: slack
                  [5.0, 5.0], [5.0, 5.0]], dtype)   # stick of zero length, rest 0.1
    c = Constraints()
    c.add([0], [1], x, rest=0.5)
    c.add([2], [3], x, rest=0.7, kind="rope")
    c.add([4], [5], x, rest=0.1)
    w = np.full(6, 3.0, dtype)
    tol = 4 * np.finfo(dtype).eps
    for backend in ("numpy", "compiled") if _backend.compiled("auto") else ("numpy",):
        out = _project(x, w, c, backend)
        assert np.isfinite(out).all()
        np.testing.assert_allclose(out[0], [0.15, 0.2], rtol=0, atol=tol)
        np.testing.assert_allclose(out[1], [0.45, 0.6], rtol=0, atol=tol)
        np.testing.assert_array_equal(out[2:], x[2:])


def _mixed_masses(w: World, seed: int = 11) -> None:
    """A third of the free particles get inverse masses from a short list (so some
    neighbours are equal, some not) and five more are pinned."""
    p = w.particles
    rng = np.random.default_rng(seed)
    free = np.flatnonzero(p.inv_mass > 0)
    pick = rng.choice(free, free.size // 3, replace=False)
    p.inv_mass[pick] = rng.choice([0.5, 2.0, 7.0], pick.size)
    p.mass[pick] = 1.0 / p.inv_mass[pick]
    p.inv_mass[rng.choice(free, 5, replace=False)] = 0.0


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_mixed_inverse_masses_take_the_same_form_in_kernels_and_reference(dtype):
    """Runs whose ends have different inverse masses pick the even split link by link
    (equal and positive) or the general form (unequal, pinned): the parallel sweep, the
    contact frame's serial sweep and the whole compiled frame agree with the numpy
    reference bit for bit."""
    w = _scene("numpy", dtype)
    _mixed_masses(w)
    c, p = w.constraints, w.particles
    rng = np.random.default_rng(5)
    x0 = (p.x + rng.normal(0.0, 0.02, p.x.shape)).astype(dtype)
    h = 1 / 600
    ref = x0.copy()
    c.project_numpy(ref, p.inv_mass, h, np.zeros(len(c), dtype))
    for threads in ("serial", "parallel"):
        c.backend, c.threads = "compiled", threads
        got = x0.copy()
        c.project(got, p.inv_mass, h, np.zeros(len(c), dtype))
        np.testing.assert_array_equal(got, ref)
    fi, fj, rest, comp, kind, plan, offsets = c._flat_batches(x0.dtype)
    got = x0.copy()
    serial_links.sweep_serial(got, p.inv_mass, fi, fj, rest, comp, kind, plan,
                         x0.dtype.type(1.0 / (h * h)), np.zeros(len(c), dtype))
    np.testing.assert_array_equal(got, ref)
    # Whole frames (the planar kernels), the reference stepping the same world.
    worlds = []
    for backend in ("numpy", "auto"):
        wb = _scene(backend, dtype, substeps=4)
        _mixed_masses(wb)
        wb.start(1 / 60)
        for _ in range(20):
            wb.step(1 / 60)
        worlds.append(wb)
    np.testing.assert_array_equal(worlds[1].particles.x, worlds[0].particles.x)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_even_split_is_the_general_form_to_round_off(dtype):
    """On equal inverse masses the even split and the general form
    ``x_i -= w (-C / (2 w L)) d`` are the same correction: they differ by round-off
    of the positions' size (a few ulps of the coordinates), not more."""
    rng = np.random.default_rng(2)
    n = 400
    x = rng.uniform(-3.0, 3.0, (2 * n, 2)).astype(dtype)
    c = Constraints()
    i, j = np.arange(0, 2 * n, 2), np.arange(1, 2 * n, 2)
    L = np.linalg.norm(x[j] - x[i], axis=1)
    c.add(i, j, x, rest=L * rng.uniform(0.7, 1.3, n))
    w = np.full(2 * n, 4.0, dtype)
    got = _project(x, w, c, "numpy")
    d = (x[j] - x[i]).astype(np.float64)
    Ld = np.linalg.norm(d, axis=1)
    corr = ((Ld - c.rest) / (2.0 * Ld))[:, None] * d          # in float64
    want = x.astype(np.float64)
    want[i] += corr
    want[j] -= corr
    ulp = np.finfo(dtype).eps * 8.0                            # |x| <= ~8
    assert np.abs(got - want).max() <= 4 * ulp


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_numpy_sweep_moves_rows_as_complex_numbers_with_the_same_bits(dtype):
    """``project_numpy`` gathers and scatters a C-order ``(n, 2)`` array's rows as
    complex numbers, and other arrays through ``x[i]``: the same bits. Its per-batch
    terms are kept while the inverse masses stay: a pin between sweeps is seen (a fresh
    sweep without the kept terms gives the same bits)."""
    import copy
    w = _scene("numpy", dtype)
    c, p = w.constraints, w.particles
    rng = np.random.default_rng(5)
    x0 = (p.x + rng.normal(0.0, 0.02, p.x.shape)).astype(dtype)
    wm = p.inv_mass.copy()
    a = x0.copy()
    wide = np.zeros((x0.shape[0], 3), dtype)
    b = wide[:, :2]                 # not C order: the x[i] path
    b[:] = x0
    assert a.flags.c_contiguous and not b.flags.c_contiguous
    la, lb = np.zeros(len(c), dtype), np.zeros(len(c), dtype)
    h = 1 / 600
    for sweep in range(4):
        if sweep == 2:
            wm[[3, 50, 450]] = 0.0                      # pinned between sweeps
            fresh, xf, lf = copy.deepcopy(c), a.copy(), la.copy()
            fresh._numpy = None
            for _ in range(2):
                fresh.project_numpy(xf, wm, h, lf)
        c.project_numpy(a, wm, h, la)
        c.project_numpy(b, wm, h, lb)
    assert not np.array_equal(a, x0)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(a, xf)
    np.testing.assert_array_equal(la, lf)

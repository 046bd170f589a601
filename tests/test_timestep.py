"""Timestep policies: time accounting, the cap, replay bit for bit, bad frame times."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox import steptrace
from sandbox.sim.timestep import (
    TIMESTEPS,
    FixedStep,
    RandomStep,
    ReplayStep,
    StepTrace,
    VariableStep,
    make_policy,
)

frame_times = st.lists(st.floats(min_value=1e-5, max_value=0.5), min_size=1, max_size=200)


def _check_book(pol, tol=1e-12):
    b = pol.book
    assert math.isclose(b.real, b.simulated + pol.pending + b.dropped, rel_tol=tol,
                        abs_tol=tol)


def test_registry_order_and_unknown_names():
    assert list(TIMESTEPS) == ["fixed", "variable", "random", "replay"]
    with pytest.raises(ValueError, match="fixed, variable, random, replay"):
        make_policy("adaptive")


@settings(max_examples=200, deadline=None)
@given(frame_times, st.integers(1, 10))
def test_fixed_accumulator_conserves_time_and_caps_steps(dts, max_steps):
    pol = FixedStep(h=1 / 60, max_steps=max_steps)
    for dt in dts:
        plan = pol.plan(dt)
        assert len(plan) <= max_steps
        assert all(h == 1 / 60 for h in plan)
        assert 0.0 <= pol.alpha < 1.0
        assert 0.0 <= pol.acc < 1 / 60 * (1 + 1e-9)
        _check_book(pol)


def test_sixty_frames_of_a_sixtieth_give_sixty_steps():
    pol = FixedStep(h=1 / 60)
    assert sum(len(pol.plan(1 / 60)) for _ in range(60)) == 60
    assert pol.book.dropped == 0.0


def test_a_five_second_frame_is_capped_and_the_rest_dropped():
    pol = FixedStep(h=1 / 60, max_steps=5)
    plan = pol.plan(5.0)
    assert plan == [1 / 60] * 5
    # 5 s holds 300 steps: 5 taken, 295 dropped, nothing left over (5 s = 300 h).
    assert pol.book.dropped == pytest.approx(295 / 60, rel=1e-12)
    assert pol.acc == pytest.approx(0.0, abs=1e-12)
    assert len(pol.plan(1 / 60)) == 1        # and the next frame is normal again
    _check_book(pol)


@pytest.mark.parametrize("bad", [0.0, -0.016, math.nan, math.inf, -math.inf, "x", None])
@pytest.mark.parametrize("name", list(TIMESTEPS))
def test_bad_frame_times_are_rejected_and_change_nothing(name, bad):
    pol = make_policy(name)
    if name == "replay":
        pol = ReplayStep(StepTrace([[0.01], [0.02]]))
    pol.plan(0.01)
    before = (pol.book.real, pol.book.simulated, pol.book.dropped, pol.pending)
    assert pol.plan(bad) == []
    assert pol.book.rejected == 1
    assert (pol.book.real, pol.book.simulated, pol.book.dropped, pol.pending) == before


@settings(max_examples=100, deadline=None)
@given(frame_times, st.integers(1, 4))
def test_variable_steps_are_positive_bounded_and_account_for_time(dts, substeps):
    pol = VariableStep(substeps=substeps, max_frame=0.1, max_step=1 / 30, min_step=1e-3)
    for dt in dts:
        plan = pol.plan(dt)
        assert all(0 < h <= 1 / 30 * (1 + 1e-12) for h in plan)
        assert all(h >= 1e-3 / substeps for h in plan)
        assert not plan or len(plan) >= substeps
        _check_book(pol)


def test_variable_clamps_a_stall_and_splits_frames():
    pol = VariableStep(substeps=2, max_frame=0.1, max_step=1 / 30)
    plan = pol.plan(2.0)                     # the window was dragged for 2 s
    assert sum(plan) == pytest.approx(0.1) and len(plan) == 3
    assert pol.book.dropped == pytest.approx(1.9)
    assert pol.plan(0.016) == [0.008, 0.008]


def test_random_steps_are_seeded_and_in_range():
    a = [RandomStep(h=0.01, spread=1 / 3, seed=5).plan(0.016) for _ in range(1)]
    pa, pb = RandomStep(h=0.01, seed=5), RandomStep(h=0.01, seed=5)
    sa = [pa.plan(0.016)[0] for _ in range(500)]
    sb = [pb.plan(0.016)[0] for _ in range(500)]
    assert sa == sb and a[0][0] == sa[0]
    assert all(0.01 * 2 / 3 <= h <= 0.01 * 4 / 3 for h in sa)
    r = np.array(sa[1:]) / np.array(sa[:-1])
    assert r.min() >= 0.5 - 1e-12 and r.max() <= 2 + 1e-12
    _check_book(pa)


def test_replay_reproduces_a_recorded_trace_bit_for_bit(tmp_path):
    rng = np.random.default_rng(1)
    live = VariableStep(substeps=3)
    trace = StepTrace()
    for dt in rng.uniform(0.001, 0.2, 300):
        trace.record(live.plan(dt))
    path = tmp_path / "session.trace"
    steptrace.save(trace, path)
    loaded = steptrace.load(path)
    replay = ReplayStep(loaded)
    replayed = [replay.plan(0.016) for _ in range(len(trace.frames))]
    assert [[h.hex() for h in f] for f in replayed] == [[h.hex() for h in f]
                                                       for f in trace.frames]
    assert replay.finished and replay.plan(0.016) == []
    looping = ReplayStep(loaded, loop=True)
    for _ in range(len(trace.frames)):
        looping.plan(0.016)
    assert looping.plan(0.016) == trace.frames[0]


@pytest.mark.parametrize("content, where", [
    ("garbage\n", "line 1"),
    ("# verlet-sandbox step trace v1\n0x1.0p-6 zz\n", "line 2"),
    ("# verlet-sandbox step trace v1\n0x1.0p-6\n-0x1.0p-6\n", "line 3"),
    ("# verlet-sandbox step trace v1\n0x0.0p+0\n", "line 2"),
])
def test_bad_trace_files_name_file_and_line(tmp_path, content, where):
    path = tmp_path / "bad.trace"
    path.write_text(content)
    with pytest.raises(ValueError) as e:
        steptrace.load(path)
    assert str(path) in str(e.value) and where in str(e.value)


def test_invalid_trace_bytes_are_a_clean_error(tmp_path):
    path = tmp_path / "bin.trace"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match="cannot read step trace"):
        steptrace.load(path)


@settings(max_examples=100, deadline=None)
@given(frame_times, st.floats(min_value=1e-3, max_value=0.1), st.sampled_from(list(TIMESTEPS)))
def test_a_limited_frame_simulates_at_most_the_limit_and_drops_the_rest(dts, limit, name):
    """``plan(dt, limit)``: the physics cannot keep up, so at most ``limit`` of the frame
    is simulated; the rest is dropped and the book still balances."""
    pol = make_policy(name)
    for dt in dts:
        dropped = pol.book.dropped
        plan = pol.plan(dt, limit)
        _check_book(pol, tol=1e-9)
        if name in ("fixed", "variable"):
            assert math.fsum(plan) <= limit + pol.nominal_h * (1 + 1e-9)
            assert pol.book.dropped >= dropped + max(dt - limit, 0.0) - 1e-12


def test_a_limit_above_the_frame_changes_nothing():
    a, b = VariableStep(substeps=2), VariableStep(substeps=2)
    for dt in (0.016, 0.033, 0.07, 0.2):
        assert a.plan(dt) == b.plan(dt, limit=0.5)
    assert a.book == b.book


def test_a_long_replays_nominal_step_is_read_without_building_every_step(monkeypatch):
    """The panel reads ``nominal_h`` twice a frame: at 100,000 recorded frames (the
    session's trace limit) building the array of every step (``StepTrace.steps``) took
    31 ms a call. It is the first non-empty frame's first step, as before, read
    without that array."""
    from sandbox.sim.timestep import ReplayStep
    from sandbox.steptrace import StepTrace

    def no_array(self):
        raise AssertionError("nominal_h built the array of every step")

    monkeypatch.setattr(StepTrace, "steps", property(no_array))
    frames = [[]] * 3 + [[0.01, 0.01]] + [[1 / 60]] * 100_000
    assert ReplayStep(StepTrace(frames)).nominal_h == 0.01
    assert ReplayStep(StepTrace([])).nominal_h == 1 / 60

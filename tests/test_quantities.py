"""The graph's quantities (sandbox/quantities.py), headless: each against a value worked
out by hand on a two-particle world, which curves each has, the log scale's mapping, the
graph's ring buffers and segments, and a graph choice kept in a replay file."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from sandbox import quantities as Q
from sandbox.app.graph import Curve, log_scale, log_tick_label, nice_ticks
from sandbox.ensemble import Ensemble
from sandbox.replay import OPS, ReplayError
from sandbox.sim.world import World, WorldConfig

G = 9.81


def two_particles() -> World:
    """2 kg at (0, 1) moving (3, 4) m/s and 3 kg at (1.2, 1) moving (0, -1) m/s, joined
    by a rigid link of rest 1.0 m (stretched 20 %) and a spring of rest 2.0 m
    (compressed 40 %, k = 5 N/m), under gravity 9.81 m/s^2 down."""
    w = World(WorldConfig(gravity=(0.0, -G), substeps=1, iterations=1))
    w.add_particles([[0.0, 1.0], [1.2, 1.0]], v=[[3.0, 4.0], [0.0, -1.0]], mass=[2.0, 3.0])
    w.add_constraints([0], [1], rest=[1.0])
    w.add_springs([0], [1], k=5.0, rest=[2.0])
    return w


def value(name: str, fr: Q.Frame) -> float:
    q = Q.QUANTITIES[name]
    assert q.problem(fr) is None, name
    (src,) = [s for s in fr.sources(q.scope) if s.key in ("world", "frame")]
    return q.value(src, fr)


def test_each_quantity_against_the_hand_computed_value():
    w = two_particles()
    fr = Q.Frame(w, particle=0, dt=0.020)
    spring = 0.5 * 5.0 * (1.2 - 2.0) ** 2                 # a spring's energy is potential
    assert value("kinetic", fr) == pytest.approx(0.5 * 2 * 25 + 0.5 * 3 * 1)       # 26.5 J
    assert value("potential", fr) == pytest.approx(2 * G * 1 + 3 * G * 1 + spring)
    assert value("total", fr) == pytest.approx(26.5 + 5 * G + spring)
    assert (value("x", fr), value("y", fr)) == (0.0, 1.0)
    assert (value("vx", fr), value("vy", fr), value("speed", fr)) == (3.0, 4.0, 5.0)
    assert value("strain", fr) == pytest.approx(40.0)       # the spring: |1.2 - 2| / 2
    assert value("link_error", fr) == pytest.approx(20.0)   # the rigid link: 0.2 / 1
    assert value("frame_dt", fr) == pytest.approx(20.0)     # ms
    assert value("vx", Q.Frame(w, particle=1)) == 0.0


def test_a_quantity_that_does_not_apply_says_why():
    w = two_particles()
    fr = Q.Frame(w)                                     # nobody followed yet
    assert "click a particle" in Q.QUANTITIES["vx"].problem(fr)
    assert "A" in Q.QUANTITIES["truth_error"].problem(fr)
    assert "not measured" in Q.QUANTITIES["ledger_solver"].problem(fr)
    w.track_energy()
    assert Q.QUANTITIES["ledger_solver"].problem(fr) is None
    assert value("ledger_solver", fr) == 0.0
    bare = World(WorldConfig())
    bare.add_particles([[0.0, 0.0]])
    fr = Q.Frame(bare, particle=0)
    assert Q.QUANTITIES["strain"].problem(fr) == "no links or springs here"
    assert Q.QUANTITIES["link_error"].problem(fr) == "no rigid links here"
    assert Q.problem(Q.Choice("strain", "x"), fr).startswith("max strain: ")
    assert Q.sample(Q.Choice("strain", "x"), fr) == []      # nothing sampled, not NaNs


def test_curves_of_the_world_the_ghost_the_ensemble_and_the_truth():
    w = two_particles()
    ghost = copy.deepcopy(w)
    fr = Q.Frame(w, ghost, particle=0)
    assert [s.key for s in Q.curves(Q.Choice("vx", "x"), fr)] == ["world", "ghost"]
    assert [s.key for s in Q.curves(Q.Choice("ledger_drag", Q.TIME), fr)] == ["world"]
    assert [s.key for s in Q.curves(Q.Choice("frame_dt", Q.TIME), fr)] == ["frame"]
    # A frame quantity goes with any: the frame's dt against each world's vx.
    assert [s.key for s in Q.curves(Q.Choice("frame_dt", "vx"), fr)] == ["world", "ghost"]
    ens = Ensemble(w, names=["euler", "verlet"])
    for m in ens.live():
        m.world.start(0.01)
    for _ in range(5):
        ens.step(0.01)
    fr = Q.Frame(w, ensemble=ens, particle=1)
    keys = [s.key for s in Q.curves(Q.Choice("speed", Q.TIME), fr)]
    assert keys == ["world", "euler", "verlet", "truth"]
    rows = Q.sample(Q.Choice("truth_error", Q.TIME), fr)
    assert [r[0] for r in rows] == ["euler", "verlet"]
    for (_, t, x, y, _), m in zip(rows, ens.members, strict=True):
        assert y == ens.error(m) > 0 and t == x == m.world.t
    # Energy drift (relative) against the error: the curves both have.
    assert [s.key for s in Q.curves(Q.Choice("drift", "truth_error"), fr)] == \
        ["euler", "verlet"]
    ens.members[0].stopped = "blew up"                  # a stopped member: no curve
    assert [s.key for s in Q.curves(Q.Choice("truth_error", Q.TIME), fr)] == ["verlet"]


def test_choose_and_cycle():
    c = Q.choose(Q.DEFAULT, y="truth_error")
    assert (c.y, c.x, c.log, c.auto) == ("truth_error", "x", True, False)   # log: it suits
    assert not Q.choose(c, y="kinetic").log
    assert Q.choose(c, log=False).log is False and Q.choose(c, x=Q.TIME).x == Q.TIME
    with pytest.raises(ValueError, match="unknown quantity 'nope'; valid: kinetic"):
        Q.choose(c, y="nope")
    with pytest.raises(ValueError, match="unknown axis"):
        Q.choose(c, x="nope")
    names = list(Q.QUANTITIES)
    assert Q.cycle(names, "vx", +1, lambda n: True) == "vy"
    assert Q.cycle(names, "kinetic", -1, lambda n: True) == "frame_dt"
    assert Q.cycle(names, "speed", +1, lambda n: n in ("kinetic", "speed")) == "kinetic"
    assert Q.cycle(names, "speed", +1, lambda n: False) == "speed"
    assert Q.Choice("vy", "y").phase_axis() == 1 and Q.Choice("vy", "x").phase_axis() is None


def test_the_log_scale_leaves_zeros_out_and_counts_them():
    y, skipped = log_scale(np.array([0.0, -1e-3, 10.0, np.nan, np.inf, 0.0, 2.0]))
    assert skipped == 2                                  # the zeros, not the NaN or inf
    assert np.isnan(y[[0, 3, 4, 5]]).all()
    assert y[1] == pytest.approx(-3.0) and y[2] == pytest.approx(1.0)
    assert y[6] == pytest.approx(math.log10(2.0))
    assert [log_tick_label(k) for k in (-5, -2, 0, 3, 4)] == ["1e-5", "0.01", "1", "1000",
                                                            "1e4"]
    values, step = nice_ticks(3.2, 4.9, want=1.0)        # a short plot: still two ticks
    assert len(values) >= 2 and step == 0.5


def test_a_curve_breaks_at_a_segment_and_starts_again_when_time_goes_back():
    c = Curve(5)
    for k in range(3):
        c.add(k * 0.1, k, 10.0 + k, source=1, relative=(False, True))
    t, x, y, brk = c.ordered()
    assert y.tolist() == [0.0, 1.0, 2.0] and brk.tolist() == [True, False, False]
    c.new_segment()                                     # E - E0 from the marker again
    c.add(0.3, 3, 20.0, source=1, relative=(False, True))
    c.add(0.4, 4, 21.0, source=2, relative=(False, True))   # another world: a new run
    t, x, y, brk = c.ordered()
    assert y.tolist() == [0.0, 1.0, 2.0, 0.0, 0.0] and brk.tolist()[3:] == [True, True]
    for k in range(4):                                  # a ring of 5: the newest kept
        c.add(0.5 + k * 0.1, 5 + k, 0.0, source=2)
    t, *_ = c.ordered()
    assert t == pytest.approx([0.4, 0.5, 0.6, 0.7, 0.8])
    c.add(0.1, 0, 0.0, source=2)                        # time went back: a new curve
    assert c.count == 1 and c.ordered()[3].tolist() == [True]


def test_a_replay_file_holds_the_graph_choice_and_refuses_a_wrong_one():
    plot, follow = OPS["plot"], OPS["follow"]
    assert plot.problem(["drift", "time", 1]) is None
    assert plot.problem(list(Q.Choice("vx", "x", False).args())) is None
    assert "a quantity of kinetic" in plot.problem(["nope", "time", 0])
    assert "an axis of time" in plot.problem(["vx", 3, 0])
    assert "log 0 or 1" in plot.problem(["vx", "x", 0.5])
    assert follow.problem([3]) is None and "index" in follow.problem([-1])
    w = two_particles()
    assert plot.apply(w, None, ["vx", "x", 0]) is w     # the world is left as it is
    from sandbox.replay import ReplayFile
    with pytest.raises(ValueError, match="takes \\[quantity, axis, log\\]"):
        ReplayFile.model_validate({"format": "verlet-sandbox replay", "version": 1,
                                   "level": {"name": "x", "text": ""}, "frames": [],
                                   "events": [[0, "plot", "energy", "time", 0]]})
    assert issubclass(ReplayError, ValueError)


def test_a_particle_quantity_names_its_particle_or_says_none_is_followed():
    # Seen in the window: with no particle followed the axis read "vx of particle ?".
    assert Q.QUANTITIES["vx"].axis(3) == "vx of particle 3 (m/s)"
    assert Q.QUANTITIES["vx"].axis(None) == "vx of a particle (m/s)"
    assert Q.QUANTITIES["speed"].words(None) == "speed of a particle"
    assert "?" not in "".join(q.axis(None) for q in Q.QUANTITIES.values())

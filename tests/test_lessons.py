"""Every shipped level teaches one idea within 10 s (issue 14); a test here checks each.

The worlds run headless as the window runs them: ``find_level -> load_level ->
build_world``, ``make_policy_for(level)``, and ``world.step(h)`` for every step the
policy plans for a frame of 1/60 s (the window at 60 Hz; the random mode's plan comes
from the level's seed, so every run takes the same steps). A ghost is seeded as the
session seeds it: a copy of the world at t = 0, switched to the level's ``ghost``
integrator, stepped with the same ``h`` after the world.

The thresholds sit between the measured number (quoted in each docstring, on this
code at the time of writing) and the number that would mean the lesson is gone, so a
change of the physics that spoils a lesson fails here. Particle counts are the levels'
own; the whole file takes ~20 s on one core.
"""

from __future__ import annotations

import copy
import functools
import math

import numpy as np
import pytest

from sandbox.ensemble import BLOWUP_FACTOR, BLOWUP_SPEED
from sandbox.levels import (
    Level,
    LevelError,
    build_world,
    find_level,
    level_names,
    load_level,
    make_policy_for,
    parse_level,
    with_world,
)
from sandbox.sim.integrators import INTEGRATORS

H = 1 / 60          # s: the frame time each window frame hands the timestep policy
T = 10.0            # s: every lesson shows within this


def level(name: str, **world) -> Level:
    lv = load_level(find_level(name))
    return with_world(lv, f"levels/{name}.toml", **world) if world else lv


def with_body(lv: Level, k: int, **fields) -> Level:
    """``lv`` with fields of its ``k``-th body changed, validated like a file."""
    table = lv.model_dump(mode="json", exclude_none=True)
    table["bodies"][k].update(fields)
    return Level.model_validate(table)


def play(lv: Level, seconds: float = T, ghost: str | None = None, watch=None):
    """Run ``lv`` for ``seconds`` of 60 Hz frames as the window does; ``watch(world,
    ghost)`` after every frame. Returns the world and the ghost (or None)."""
    world = build_world(lv)
    policy = make_policy_for(lv)
    twin = None
    if ghost is not None:                       # as Session._seed_ghost, at t = 0
        twin = copy.deepcopy(world)
        twin.set_integrator(ghost)
    if watch is not None:
        watch(world, twin)
    for _ in range(round(seconds / H)):
        for h in policy.plan(H):
            world.step(h)
            if twin is not None:
                twin.step(h)
        if watch is not None:
            watch(world, twin)
    return world, twin


def trace(lv: Level, seconds: float = T, **world):
    """Times, positions ``(frames + 1, n, 2)`` and total energies of a run."""
    if world:
        lv = with_world(lv, **world)
    t, x, e = [], [], []

    def watch(w, _):
        t.append(w.t)
        x.append(w.particles.x.copy())
        e.append(w.energy()["total"])

    play(lv, seconds, watch=watch)
    return np.array(t), np.array(x), np.array(e)


def link_ratios(world, body) -> np.ndarray:
    """Length over rest length of each of ``body``'s links."""
    c, x = world.constraints, world.particles.x
    k = body.constraints
    return np.linalg.norm(x[c.j[k]] - x[c.i[k]], axis=1) / c.rest[k]


# --------------------------------------------------------------------------- every level

#: The levels whose lessons this file checks (the shipped levels of issue 14).
LESSONS = {"orbit", "springs", "jitter", "pendulums", "cloth", "bridge", "cradle", "drape",
           "pile", "playground", "rope", "soft_body", "cloth_200"}


def test_the_lesson_levels_ship():
    assert LESSONS <= set(level_names())


@pytest.mark.parametrize("name", sorted(LESSONS))
def test_every_level_says_its_idea_and_what_to_try(name):
    """A description (the one idea) and a one-line hint short enough for the caption
    (the window shows ``name: description`` and ``try: hint`` on one line each); a
    ghost, where given, is another integrator than the world's own."""
    lv = level(name)
    assert lv.name and lv.description and lv.hint
    assert len(lv.name) + len(lv.description) <= 110 and len(lv.hint) <= 110
    if lv.ghost is not None:
        assert lv.ghost in INTEGRATORS and lv.ghost != lv.world.integrator


def test_hint_is_one_line_and_ghost_an_integrator():
    assert parse_level('hint = "G: a ghost"\nghost = "rk4"').ghost == "rk4"
    with pytest.raises(LevelError, match=r"hint: expected one line \(no line breaks\)"):
        parse_level('hint = "one\\ntwo"')
    with pytest.raises(LevelError, match="ghost: expected one of: euler, symplectic_euler"):
        parse_level('ghost = "rk5"')


# --------------------------------------------------------------------------- the ghost

@functools.cache
def ghost_gaps(name: str, other: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """The level run with a ghost run by ``other``: the times, each particle's distance
    from its ghost at every frame ``(frames + 1, n)``, and whether the ghost survived
    (the window drops a ghost whose energy jumps by more than BLOWUP_FACTOR times what
    the level holds: its energy plus the kinetic energy of its mass at BLOWUP_SPEED)."""
    t, gaps, ok, ref = [], [], [True], {}

    def watch(w, g):
        if not ref:
            e = w.energy()
            mass = float(w.particles.mass[w.particles.inv_mass > 0].sum())
            ref["e"] = e["total"]
            ref["scale"] = abs(e["total"]) + max(e["kinetic"], 0.5 * mass * BLOWUP_SPEED ** 2) + 1
        t.append(w.t)
        gaps.append(np.linalg.norm(w.particles.x - g.particles.x, axis=1))
        ok[0] &= abs(g.energy()["total"] - ref["e"]) <= BLOWUP_FACTOR * ref["scale"]

    play(level(name), ghost=other, watch=watch)
    return np.array(t), np.array(gaps), ok[0]


#: Level -> the time (s) by which its ghost must be 5% of the view's width away.
GHOSTS = {"orbit": 1.5, "springs": 4.0, "jitter": 4.0, "pendulums": 6.0}


@pytest.mark.parametrize("name", sorted(GHOSTS))
def test_the_ghost_is_visibly_elsewhere_within_10_s(name):
    """G seeds the level's ghost integrator. Within 10 s some particle of the ghost is
    5% of the view's width away from the world's (45 px in a 900 px view), then more
    than 10%, and the ghost is still there. Measured, time to 5%: orbit (explicit
    Euler) 0.57 s, springs (explicit Euler) 2.5 s, jitter (position Verlet) 2.2 s,
    pendulums (RK4) 3.7 s; the largest gap: 75 m (the Euler moon flung away), 3.8 m,
    0.96 m and 2.2 m."""
    lv = level(name)
    t, gaps, survived = ghost_gaps(name, lv.ghost)
    far = gaps.max(axis=1) > 0.05 * lv.view.width
    assert far.any() and t[np.argmax(far)] < GHOSTS[name], t[np.argmax(far)]
    assert gaps.max() > 0.1 * lv.view.width
    assert survived


# --------------------------------------------------------------------------- orbit

MU = 1000.0         # G (M + m) of the orbit level, G = 1, M = 1000 kg (m = 0.1 kg ignored)


def _orbit_run(integrator: str):
    """Per frame: total energy, the outer moon's distance from the planet, the inner
    moon's specific orbital energy and the direction of its eccentricity vector."""
    out = {"E": [], "r_out": [], "eps_in": [], "peri": [], "t": []}

    def watch(w, _):
        x, v = w.particles.x, w.particles.v
        r, u = x[1] - x[0], v[1] - v[0]
        rn = float(np.hypot(*r))
        ecc = ((u @ u) - MU / rn) * r / MU - (r @ u) * u / MU
        out["E"].append(w.energy()["total"])
        out["r_out"].append(float(np.hypot(*(x[2] - x[0]))))
        out["eps_in"].append(0.5 * (u @ u) - MU / rn)
        out["peri"].append(math.atan2(ecc[1], ecc[0]))
        out["t"].append(w.t)

    play(level("orbit", integrator=integrator), watch=watch)
    out = {k: np.array(v) for k, v in out.items()}
    out["peri"] = np.degrees(np.unwrap(out["peri"]))
    return out


def _precession(run) -> float:
    """Degrees the inner ellipse turned: the eccentricity vector's direction averaged
    over the last orbit (1.33 s) against the first (the average removes its wobble
    within an orbit)."""
    n = int(1.33 / H)
    return float(run["peri"][-n:].mean() - run["peri"][:n].mean())


def test_orbit_explicit_euler_spirals_out():
    """Explicit Euler adds energy every step: the outer moon is 6.6 m from the planet
    at the start, 11.4 m after 5 s (measured), 14.5 m after 10 s; the inner moon, on a
    coarse close pass, is flung away: its orbital energy goes from -141 J/kg to +5.5
    J/kg (unbound) within 10 s."""
    run = _orbit_run("euler")
    k5 = np.searchsorted(run["t"], 5.0)
    assert run["r_out"][0] == pytest.approx(6.6, abs=0.01)
    assert run["r_out"][k5] > 1.5 * run["r_out"][0]
    assert run["r_out"][-1] > 2.0 * run["r_out"][0]
    assert run["eps_in"][0] < -100 and run["eps_in"].max() > 0


def test_orbit_velocity_verlet_stays_on_its_orbits_and_its_ellipse_turns():
    """The level's own integrator, velocity Verlet, is symplectic: its total energy stays
    within 3.7% of the start over 10 s (measured), no more in the second 5 s than in
    the first (bounded, not drifting), and the outer moon stays within 0.4% of its
    6.6 m. At 40 steps an orbit the inner ellipse turns, 34 degrees in 10 s (measured);
    symplectic Euler turns it the same 34 degrees (its energy swings 16% and stays
    bounded too); RK4 does not turn it (0.8 degrees) but is not symplectic: its energy
    error doubles from the first 5 s to the second (0.7% -> 1.4%)."""
    runs = {name: _orbit_run(name) for name in ("velocity_verlet", "symplectic_euler", "rk4")}
    for name, run in runs.items():
        k5 = np.searchsorted(run["t"], 5.0)
        rel = np.abs(run["E"] - run["E"][0]) / abs(run["E"][0])
        first, second = rel[:k5].max(), rel[k5:].max()
        if name == "rk4":
            assert second > 1.5 * first and second < 0.05
        else:
            assert second < 1.05 * first
            assert second < (0.05 if name == "velocity_verlet" else 0.20)
    vv = runs["velocity_verlet"]
    assert np.abs(vv["r_out"] / vv["r_out"][0] - 1).max() < 0.005
    assert _precession(vv) < -25 and _precession(runs["symplectic_euler"]) < -25
    assert abs(_precession(runs["rk4"])) < 3


# --------------------------------------------------------------------------- springs

def test_springs_explicit_euler_gains_energy_the_symplectic_ones_do_not():
    """A spring's force changes within a step. Over 10 s (measured, total 18.7 J):
    velocity Verlet (the level's) stays within 0.004 J; symplectic Euler, as cheap as
    explicit Euler, within 0.21 J; explicit Euler gains 16 J by 5 s and 211 J by 10 s,
    its swing growing with every bounce. RK4 keeps it below 1e-4 J, at four times the
    cost."""
    gain = {}
    for name in ("velocity_verlet", "symplectic_euler", "euler", "rk4"):
        t, _, e = trace(level("springs"), integrator=name)
        k5 = np.searchsorted(t, 5.0)
        gain[name] = (np.abs(e[:k5] - e[0]).max(), np.abs(e[k5:] - e[0]).max(), e[-1] - e[0])
    assert gain["velocity_verlet"][1] < 0.02
    assert gain["rk4"][1] < 0.01
    assert gain["symplectic_euler"][1] < 0.5
    assert gain["euler"][0] > 8.0 and gain["euler"][2] > 100.0


# --------------------------------------------------------------------------- jitter

def _jitter_errors(lv: Level) -> dict:
    """Per integrator: each weight's height against the exact bounce ``y_eq - A cos(w
    t)`` at every frame (the springs hang straight down, so the motion is exactly the
    1-D harmonic oscillator)."""
    w = np.array([math.sqrt(b.stiffness / b.mass) for b in lv.bodies])
    y_eq = np.array([b.pivot[1] - b.length - 9.81 * b.mass / b.stiffness for b in lv.bodies])
    amp = np.array([b.stretch for b in lv.bodies])
    out = {}
    for name in ("verlet", "tcv", "tcv_corrected"):
        t, x, e = trace(lv, integrator=name)
        y = x[:, 1::2, 1]                                 # the bobs (pivots are 0, 2, ...)
        exact = y_eq - amp * np.cos(np.outer(t, w))
        out[name] = (np.abs(y - exact), y - y_eq, e, t)
    return out


def test_jitter_plain_verlet_goes_wrong_under_random_steps_and_tcv_does_not():
    """Random steps (1/60 s +-33%, seed 1). Against the exact bounce, mean over the 8
    weights and 10 s (measured): TCV (corrected) 8.2 mm, TCV as published 11.8 mm,
    plain position Verlet 184 mm, 22.5 times TCV (corrected)'s; the largest error 47 mm,
    77 mm and 0.98 m. Plain Verlet also gains energy, 41 J on top of the weights' 27 J of
    bouncing, while TCV (corrected) keeps it within 0.1 J. At t = 10 s the exact weights
    are all at the bottom again: TCV (corrected)'s are within 8 mm of it, plain Verlet's
    spread over 0.97 m."""
    lv = level("jitter")
    err = _jitter_errors(lv)
    mean = {k: v[0].mean() for k, v in err.items()}
    worst = {k: v[0].max() for k, v in err.items()}
    assert mean["verlet"] > 10 * mean["tcv_corrected"]
    assert worst["tcv_corrected"] < 0.06 and worst["tcv"] < 0.1 and worst["verlet"] > 0.5
    gain = {k: v[2][-1] - v[2][0] for k, v in err.items()}
    assert abs(gain["tcv_corrected"]) < 0.5 and gain["verlet"] > 5.0
    for name, limit in (("tcv_corrected", 0.05), ("verlet", None)):
        off, t = err[name][1], err[name][3]
        k = int(np.argmin(np.abs(t - 10.0)))               # the frame nearest 10 s
        low = off[k] + np.array([b.stretch for b in lv.bodies])  # 0: at the bottom
        if limit is None:
            assert np.ptp(off[k]) > 0.5
        else:
            assert np.abs(low).max() < limit


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_jitter_lesson_holds_for_other_seeds(seed):
    """The level's seed is not a lucky one: over seeds 0-9 plain Verlet's mean error is
    14 to 27 times TCV (corrected)'s (measured)."""
    err = _jitter_errors(level("jitter", seed=seed))
    assert err["verlet"][0].mean() > 10 * err["tcv_corrected"][0].mean()


# --------------------------------------------------------------------------- pendulums

def test_pendulums_the_double_pendulum_parts_from_its_ghost_the_simple_one_does_not():
    """Chaos. Against RK4 on the same steps (measured): the double pendulum's lower bob
    is 0.25 mm away at 1 s, 10 mm at 2 s, 0.3 m at 3.7 s and 1.9 m at 5 s (about tenfold
    a second); the simple pendulum's bob never gets 1 mm away (0.83 mm). Velocity Verlet
    takes TCV (corrected)'s positions up to round-off (3e-12 m at 1 s) and is still
    1.6 m away within 10 s."""
    t, g, _ = ghost_gaps("pendulums", "rk4")      # simple bob: particle 1; lower bob: 4
    at = {s: g[np.searchsorted(t, s), 4] for s in (1.0, 2.0, 5.0)}
    assert at[1.0] < 1e-3
    assert at[5.0] > 0.5 and at[5.0] > 100 * at[1.0]
    assert g[:, 1].max() < 2e-3
    t, g, _ = ghost_gaps("pendulums", "velocity_verlet")
    assert g[np.searchsorted(t, 1.0), 4] < 1e-9
    assert g[:, 4].max() > 0.3


def test_pendulums_rods_are_springs_so_the_energy_stays():
    """The rods are stiff springs: over 10 s the total energy (51 J) moves by at most
    0.84 J (measured; TCV's energy reads its velocity from positions). The same level
    with rigid rods (XPBD constraints) loses 30 J to the solver in 10 s (measured), and
    its double pendulum calms down out of its chaos."""
    _, _, e = trace(level("pendulums"))
    assert np.abs(e - e[0]).max() < 2.0
    rigid = with_body(with_body(level("pendulums"), 0, stiffness=0.0), 1, stiffness=0.0)
    _, _, e = trace(rigid)
    assert e[0] - e[-1] > 10.0


# --------------------------------------------------------------------------- cloth

def _cloth_shape(lv: Level, seconds: float = 3.0):
    world, _ = play(lv, seconds)
    x0 = build_world(lv).particles.x
    cols = lv.bodies[0].cols
    x = world.particles.x
    width = np.ptp(x[:, 0]) / np.ptp(x0[:, 0])
    drop = x0[[0, cols - 1], 1].mean() - x[[0, cols - 1], 1].mean()
    return width, drop, world


def test_the_curtain_hangs_from_its_rings_and_folds_when_held_at_two_points():
    """The level: a curtain on five rings hangs full width, its top edge sagging 7 cm
    between the rings (measured); its rigid links keep their length (mean stretch
    under 1%: it swags, it does not stretch). Held at the two middle particles of its
    top edge instead, it folds: by 3 s its top corners have dropped 0.78 m and it is
    52% as wide (measured). With shear links (both diagonals of every square: a rigid
    truss in 2D) that same cloth hangs as a plate: 100% as wide, corners 0.01 m lower."""
    world, _ = play(level("cloth"), 3.0)
    x0 = build_world(level("cloth")).particles.x
    cols = level("cloth").bodies[0].cols
    assert np.ptp(world.particles.x[:, 0]) / np.ptp(x0[:, 0]) > 0.98
    sag = x0[0, 1] - world.particles.x[:cols, 1].min()
    assert 0.03 < sag < 0.12, sag
    structural = world.constraints.compliance[world.bodies[0].constraints] == 0
    assert (link_ratios(world, world.bodies[0])[structural] - 1).mean() < 0.01
    width, drop, world = _cloth_shape(with_body(level("cloth"), 0, pins="top_middle"))
    assert drop > 0.5 and width < 0.7
    structural = world.constraints.compliance[world.bodies[0].constraints] == 0
    assert (link_ratios(world, world.bodies[0])[structural] - 1).mean() < 0.01
    width, drop, _ = _cloth_shape(with_body(level("cloth"), 0, pins="top_middle",
                                            shear=True))
    assert width > 0.98 and drop < 0.05


# --------------------------------------------------------------------------- bridge

def test_bridge_substeps_straighten_a_rigid_link_iterations_hardly():
    """A rigid link should not stretch: what it shows is the solver falling short. After
    10 s (measured, mean over the taut bridge's links): 0.75% with the level's 4
    substeps x 4 iterations; at the same 16 passes 0.21% with 16 x 1 and 2.3% with
    1 x 16, eleven times more. The compliant bridge stretches 0.7-1.5% whatever the
    passes (0.79%, 0.71%, 1.47%): its springs', physics rather than error."""
    stretch = {}
    for sub, it in ((4, 4), (16, 1), (1, 16)):
        world, _ = play(level("bridge", substeps=sub, iterations=it))
        stretch[sub, it] = [(link_ratios(world, b) - 1).mean() for b in world.bodies]
    taut = {k: v[0] for k, v in stretch.items()}
    assert taut[1, 16] > 5 * taut[16, 1]
    assert taut[16, 1] < taut[4, 4] < taut[1, 16]
    assert all(v[1] > 0.004 for v in stretch.values())


# --------------------------------------------------------------------------- cradle

def test_cradle_the_last_ball_flies_out_as_high_as_the_first_fell():
    """Released from 0.175 m above its lowest point, the first ball stops at the row
    and the last one rises 0.170 m within 1 s (97%, measured); the three between rise
    0.13 mm at most. In the last 2 s of 10 the swing still reaches 0.161 m (92%)."""
    rise = []
    world, _ = play(level("cradle"), watch=lambda w, _: rise.append(w.particles.x[5:, 1].copy()))
    lowest = 1.6 - 1.0                                      # pivot y - string length
    rise = np.array(rise) - lowest
    first_second = rise[: int(1 / H)]
    assert first_second[:, 4].max() > 0.9 * rise[0, 0]
    assert rise[:, 1:4].max() < 1e-3
    assert rise[-int(2 / H):].max() > 0.85 * rise[0, 0]


# --------------------------------------------------------------------------- drape

def test_drape_friction_holds_the_middle_on_the_ball():
    """After 10 s with the level's friction (0.6): 30 particles lie on top of the ball
    and 18 on the floor, both ends down (measured). Frictionless, the whole cloth slides
    off the ball: none left on it."""
    def on_ball(world):
        x = world.particles.x
        return int(((np.abs(x[:, 0]) < 0.4) & (x[:, 1] > -0.2)).sum())

    world, _ = play(level("drape"))
    floor = int((world.particles.x[:, 1] < -1.1).sum())
    assert on_ball(world) >= 20 and floor >= 8
    world, _ = play(level("drape", friction=0.0))
    assert on_ball(world) == 0


# --------------------------------------------------------------------------- pile

def test_pile_friction_keeps_a_slope():
    """After 10 s (measured; at rest from 9 s on): with the level's friction (0.4) the
    240 balls stand in a heap around the wedge (their x spread, one standard deviation,
    1.00 m) and 4 reach the shelf at x > 1.6 m; frictionless, they spread like a liquid
    (1.62 m) and 23 end up on the shelf. (Before balls met at their time of impact, an
    overlap pushed apart after the fact gave every impact energy: 47 reached the shelf.)"""
    world, _ = play(level("pile"))
    x = world.particles.x
    assert x[:, 0].std() < 1.3 and (x[:, 0] > 1.6).sum() <= 6
    world, _ = play(level("pile", friction=0.0))
    x = world.particles.x
    assert x[:, 0].std() > 1.5 and (x[:, 0] > 1.6).sum() >= 15


# --------------------------------------------------------------------------- playground

def test_playground_a_cut_rope_falls_to_the_floor():
    """Shift+drag cuts every link it crosses (World.cut). A cut across the rope's 13th
    link after 1 s frees its lower half, which reaches the floor (y = -1.5 m) 1.1 s
    later (measured), while the upper half still hangs from its pin."""
    lv = level("playground")
    world, _ = play(lv, 1.0)
    rope = world.bodies[1].particles
    x = world.particles.x
    a, b = x[rope[12]], x[rope[13]]
    mid, d = (a + b) / 2, (b - a) / np.linalg.norm(b - a)
    normal = np.array([-d[1], d[0]])
    assert world.cut(mid - 0.05 * normal, mid + 0.05 * normal) == 1
    policy = make_policy_for(lv)
    lowest = []
    for _ in range(int(2 / H)):
        for h in policy.plan(H):
            world.step(h)
        lowest.append(world.particles.x[rope[-1], 1])
    assert min(lowest) < -1.45
    hanging = np.linalg.norm(world.particles.x[rope[12]] - world.particles.x[rope[0]])
    assert hanging <= 12 * (2.0 / 25) * 1.05                # 12 links from the pin


# --------------------------------------------------------------------------- rope

def test_rope_links_go_slack_stick_links_do_not():
    """A rope link only resists stretching: as the rope whips round its peg some link
    is pushed to 11% of its length (measured; its ends pass each other). A stick link
    also pushes: no link of the chain is ever shorter than 99.2% of its length."""
    shortest = {0: 1.0, 1: 1.0}

    def watch(w, _):
        for k in shortest:
            shortest[k] = min(shortest[k], float(link_ratios(w, w.bodies[k]).min()))

    play(level("rope"), watch=watch)
    assert shortest[0] < 0.5 and shortest[1] > 0.98


# --------------------------------------------------------------------------- soft bodies

def test_soft_body_gas_pressure_keeps_the_ring_round():
    """With the level's pressure (15 N/m) the ring's area never falls below 63% of its
    rest area as it lands and is back at 97% after 10 s (measured). At 1 N/m, too little
    to hold its 11.8 N weight, it collapses: 31% after 10 s."""
    def areas(lv):
        a = []
        play(lv, watch=lambda w, _: a.append(w.pressure[0].area(w.particles.x)
                                             / w.pressure[0].area0))
        return np.array(a)

    a = areas(level("soft_body"))
    assert a.min() > 0.5 and a[-1] > 0.9
    a = areas(with_body(level("soft_body"), 0, pressure=1.0))
    assert a[-1] < 0.5


# --------------------------------------------------------------------------- cloth 200

def test_cloth_200_substeps_hold_what_iterations_cannot():
    """The benchmark scene's 20 solver passes a frame: after 30 frames (0.5 s) 20
    substeps x 1 iteration leave its 158,802 links 1.1% long on average (measured);
    the same passes as 1 substep x 20 iterations leave them 11% long, the cloth
    stretched a metre further down."""
    errors = {}
    for sub, it in ((20, 1), (1, 20)):
        world, _ = play(level("cloth_200", substeps=sub, iterations=it), 30 * H)
        errors[sub] = world.constraint_error()[0]
    assert errors[20] < 0.02 and errors[1] > 5 * errors[20]

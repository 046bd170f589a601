"""The world settings table (``sandbox.settings.SETTINGS``): every row carries every face.

Its keys, its slider and its replay form are checked where they act (``test_app``,
``test_panel``, ``test_replay``, ``test_world_settings``); here, that a row lacks none of
them, and that gravity's strength and the wind drive the one vector of the world's
config as the module says.
"""

import dataclasses
import math

import numpy as np
import pytest

from sandbox import replay
from sandbox.levels import (
    Level,
    LevelError,
    WorldSettings,
    build_world,
    parse_level,
)
from sandbox.settings import SETTINGS, Uniform, apply, read, value
from sandbox.sim.world import World, WorldConfig

PENDULUM = '[[bodies]]\ntype = "pendulum"\npivot = [0.0, 0.0]\n'


@pytest.mark.parametrize("name", list(SETTINGS))
def test_every_setting_carries_every_face(name):
    st = SETTINGS[name]
    numbers = {f.name for f in dataclasses.fields(WorldConfig)
               if isinstance(getattr(WorldConfig(), f.name), int | float)}
    assert name in WorldSettings.model_fields                        # the level file
    # A number of the world's config, a face of its uniform field, or the world's own.
    assert (name in numbers) + st.uniform + st.on_world == 1
    assert st.uniform == hasattr(Uniform(), name)
    assert st.on_world == (hasattr(World, name) and hasattr(World, f"set_{name}"))
    lo, hi = st.limits
    assert math.isfinite(lo) and math.isfinite(hi) and lo < hi       # a slider's range
    assert 0 < st.step <= hi - lo and st.label and st.more and st.less
    assert st.section in ("solver", "world") and st.help(+1) and st.help(-1)
    assert all(lo <= r <= hi for r in st.ladder) and list(st.ladder) == sorted(st.ladder)
    level = Level()
    default = read(build_world(parse_level(PENDULUM, "p.toml")),
                   Uniform.of_level(level.world), name)
    assert lo <= default <= hi and st.clip(default) == default
    assert st.problem(default) is None and st.problem(hi + st.step) is not None
    assert st.clip(hi * 2 + 1) == hi and st.clip(lo - 1) == lo
    rep = {"format": replay.FORMAT, "version": 1, "level": {"name": "t", "text": ""},
           "frames": [[0.01]], "events": [[0, "set", name, default]]}
    assert replay.ReplayFile.model_validate(rep).events[0][2] == name


def test_the_link_softness_steps_along_its_ladder_and_is_the_worlds():
    """Its keys go rung by rung (from between two rungs to the next one that way, the
    ends stay), its slider stands on the nearest rung (log scale), it shows as a
    factor; neither the config nor the uniform field holds it: the world does."""
    st = SETTINGS["link_softness"]
    assert st.ladder == (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
    assert [st.stepped(v, +1) for v in (0.0, 0.1, 1.0, 2.0, 100.0)] == [0.1, 0.3, 3.0,
                                                                          3.0, 100.0]
    assert [st.stepped(v, -1) for v in (0.0, 0.1, 1.0, 2.0, 100.0)] == [0.0, 0.0, 0.3,
                                                                          1.0, 30.0]
    assert [st.rung(v) for v in (0.0, 0.04, 1.0, 1.6, 2.0, 100.0)] == [0, 1, 3, 3, 4, 7]
    assert st.show(3.0) == "×3" and st.show(0.1) == "×0.1" and st.show(1.0) == "×1"
    config, field = WorldConfig(), Uniform()
    assert apply(config, field, "link_softness", 3.0) == (config, field)
    with pytest.raises(ValueError, match="held by the world"):
        value(config, field, "link_softness")


def test_a_levels_link_softness_softens_its_soft_links_only():
    text = ('[[bodies]]\ntype = "rope"\nstart = [0.0, 0.0]\nend = [1.0, 0.0]\n'
            'segments = 4\ncompliance = 1e-4\n'
            '[[bodies]]\ntype = "rope"\nstart = [0.0, 1.0]\nend = [1.0, 1.0]\n'
            'segments = 4\n')
    plain = build_world(parse_level(text, "r.toml"))
    soft = build_world(parse_level("[world]\nlink_softness = 3.0\n" + text, "r.toml"))
    assert plain.link_softness == 1.0 and soft.link_softness == 3.0
    assert np.array_equal(soft.constraints.compliance, plain.constraints.compliance * 3.0)
    assert (soft.constraints.compliance == 0).sum() == 4          # the rigid rope's links
    with pytest.raises(LevelError, match=r"world.link_softness: expected a number <= 100"):
        parse_level("[world]\nlink_softness = 101.0\n" + text, "r.toml")


def test_the_limits_are_the_level_schemas():
    assert SETTINGS["iterations"].limits == (1, 200)
    assert SETTINGS["substeps"].limits == (1, 64)
    assert SETTINGS["drag"].limits == (0.0, 10.0)
    assert SETTINGS["gravity"].limits == (0.0, 50.0)        # |g|: the schema's Magnitude
    assert SETTINGS["wind"].limits == (-20.0, 20.0)
    assert SETTINGS["restitution"].limits == (0.0, 1.0)
    assert SETTINGS["friction"].limits == (0.0, 2.0)
    assert SETTINGS["link_softness"].limits == (0.0, 100.0)


@pytest.mark.parametrize("text, fragment", [
    ("[world]\ngravity = [0.0, -60.0]\n", "world.gravity: expected [gx, gy] at most 50 m/s^2"),
    ("[world]\ngravity = [40.0, -40.0]\n", "(this one: 56.57)"),
    ("[world]\nfriction = 2.5\n", "world.friction: expected a number <= 2"),
    ("[world]\nwind = -20.5\n", "world.wind: expected a number >= -20"),
])
def test_a_level_beyond_the_settings_limits_is_refused_in_one_line(text, fragment):
    with pytest.raises(LevelError) as e:
        parse_level(text + PENDULUM, "x.toml")
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_gravity_is_a_strength_along_the_levels_own_direction():
    config = WorldConfig(gravity=(3.0, -4.0))
    field = Uniform.of((3.0, -4.0))
    assert field.gravity == 5.0
    config, field = apply(config, field, "gravity", 10.0)
    assert config.gravity == (6.0, -8.0) and field.own == (3.0, -4.0)
    config, field = apply(config, field, "gravity", 0.0)
    assert config.gravity == (0.0, -0.0) or config.gravity == (0.0, 0.0)
    config, field = apply(config, field, "gravity", 2.5)
    assert config.gravity == (1.5, -2.0)                   # the direction came back
    # A level without gravity (the orbit) gets it straight down.
    config, field = apply(WorldConfig(gravity=(0.0, 0.0)), Uniform.of((0.0, 0.0)),
                          "gravity", 9.81)
    assert config.gravity == (0.0, -9.81)


@pytest.mark.parametrize("own", [(0.0, -9.81), (0.1, -9.7), (-3.3, 1.7), (0.0, 0.0),
                                 (1e-3, -49.9)])
def test_at_the_levels_own_strength_and_no_wind_the_vector_is_the_levels_bit_for_bit(own):
    field = Uniform.of(own)
    assert field.vector(0.0) == own and field.vector(0.7) == own
    config, _ = apply(WorldConfig(gravity=own, drag=0.3), field, "gravity",
                      math.hypot(*own))
    assert config.gravity == own


def test_the_wind_acts_through_the_air_drag():
    """a = k (w - v) = -k v + k w: the wind adds k w along +x; no drag, no wind."""
    config, field = WorldConfig(gravity=(0.0, -9.81)), Uniform.of((0.0, -9.81))
    config, field = apply(config, field, "wind", 5.0)
    assert config.gravity == (0.0, -9.81) and field.wind == 5.0     # drag 0: nothing
    config, field = apply(config, field, "drag", 0.4)
    assert config.gravity == pytest.approx((2.0, -9.81)) and config.drag == 0.4
    config, field = apply(config, field, "gravity", 20.0)
    assert config.gravity == pytest.approx((2.0, -20.0))           # the wind's share stays
    config, field = apply(config, field, "wind", -10.0)
    assert config.gravity == pytest.approx((-4.0, -20.0))
    config, field = apply(config, field, "drag", 0.0)
    assert config.gravity == (0.0, -20.0)


def test_a_levels_wind_is_a_share_of_its_worlds_gravity():
    level = parse_level("[world]\ngravity = [0.0, -9.81]\ndrag = 0.5\nwind = 4.0\n"
                        + PENDULUM, "windy.toml")
    assert build_world(level).config.gravity == (2.0, -9.81)
    field = Uniform.of_level(level.world)
    assert (field.own, field.wind) == ((0.0, -9.81), 4.0)
    still = parse_level(PENDULUM, "still.toml")
    assert build_world(still).config.gravity == (0.0, -9.81)

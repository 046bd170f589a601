"""The world settings table (``sandbox.settings.SETTINGS``): every row carries every face.

Its keys, its slider and its replay form are checked where they act (``test_app``,
``test_panel``, ``test_replay``); here, that a row lacks none of them.
"""

import dataclasses
import math

import pytest

from sandbox import replay
from sandbox.levels import WorldSettings
from sandbox.settings import SETTINGS
from sandbox.sim.world import WorldConfig


@pytest.mark.parametrize("name", list(SETTINGS))
def test_every_setting_carries_every_face(name):
    st = SETTINGS[name]
    fields = {f.name for f in dataclasses.fields(WorldConfig)}
    assert name in fields and name in WorldSettings.model_fields     # world and level file
    lo, hi = st.limits
    assert math.isfinite(lo) and math.isfinite(hi) and lo < hi       # a slider's range
    assert 0 < st.step <= hi - lo and st.label and st.more and st.less
    default = WorldSettings.model_fields[name].default
    assert lo <= default <= hi and st.clip(default) == default
    assert st.problem(default) is None and st.problem(hi + st.step) is not None
    assert st.clip(hi * 2 + 1) == hi and st.clip(lo - 1) == lo
    rep = {"format": replay.FORMAT, "version": 1, "level": {"name": "t", "text": ""},
           "frames": [[0.01]], "events": [[0, "set", name, default]]}
    assert replay.ReplayFile.model_validate(rep).events[0][2] == name


def test_the_limits_are_the_level_schemas():
    assert SETTINGS["iterations"].limits == (1, 200)
    assert SETTINGS["substeps"].limits == (1, 64)
    assert SETTINGS["drag"].limits == (0.0, 10.0)

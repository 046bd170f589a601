"""The world settings a person changes while a level runs, one row each.

A row (:class:`Setting`) is every face of one setting: the world's field it sets
(``WorldConfig.<name>``, the level file's ``[world] <name>``), its label, its limits
(read from the level schema, so a key, a slider and a level file can never disagree),
how much one key press changes it, its keys, and its replay form ``["set", name,
value]``. The keymap and the help screen, the panel's sliders, the session's commands
(``set_setting``, ``change_setting``), replay recording, replay validation and replay
playback all read :data:`SETTINGS`: a new setting is one row here (its field on
``WorldConfig`` and in the level schema given).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from .levels import WorldSettings


@dataclass(frozen=True)
class Setting:
    """One setting (see the module docstring).

    ``step``: what one press of a key of ``more`` adds, of ``less`` takes away; a key
    is a pygame key name (``"d"``, ``"="``, ``"[+]"`` the keypad's) after any of
    "shift+", "ctrl+", "alt+"; ``unit``: shown after the value; ``digits``: decimals shown (0: an
    integer setting)."""

    name: str
    label: str
    step: float
    more: tuple[str, ...]
    less: tuple[str, ...]
    unit: str = ""
    digits: int = 0

    @cached_property
    def limits(self) -> tuple[float, float]:
        """``(lo, hi)``: the level schema's bounds of ``[world] <name>``."""
        meta = WorldSettings.model_fields[self.name].metadata
        lo = max(m.ge for m in meta if getattr(m, "ge", None) is not None)
        hi = min(m.le for m in meta if getattr(m, "le", None) is not None)
        return lo, hi

    @property
    def integer(self) -> bool:
        return self.digits == 0

    def clip(self, value: float) -> int | float:
        """``value`` inside the limits, an int for an integer setting (NaN: the low end)."""
        lo, hi = self.limits
        v = lo if value != value else min(max(float(value), lo), hi)
        return int(round(v)) if self.integer else round(v, 12)

    def problem(self, value) -> str | None:
        """Why ``value`` cannot be this setting's (a replay's check), or None."""
        lo, hi = self.limits
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value) and lo <= value <= hi
              and (not self.integer or float(value).is_integer()))
        if ok:
            return None
        kind = "an integer" if self.integer else "a number"
        return f"'{self.name}' takes {kind} in {lo:g}..{hi:g}"

    def show(self, value: float) -> str:
        """``"12"``, ``"0.30 1/s"``: the value as the panel and messages show it."""
        text = f"{value:.{self.digits}f}"
        return f"{text} {self.unit}" if self.unit else text


#: Every setting, in the panel's order.
SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("substeps", "substeps", 1, ("shift+=",), ("shift+-",)),
    Setting("iterations", "constraint iterations", 1, ("=", "[+]"), ("-", "[-]")),
    Setting("drag", "air drag", 0.05, ("d",), ("shift+d",), unit="1/s", digits=2),
)}

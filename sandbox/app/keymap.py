"""The one hotkey table: dispatch, the on-screen help and the tests all read ``KEYMAP``.

Each :class:`Binding` is ``(key, mods, action, arg, help)``. The app looks a key event up
with :func:`lookup` and calls its command ``action`` with ``arg``; there is no if-chain
over keys anywhere. Modifiers come from the event's ``mod`` (posted events never change
``pygame.key.get_pressed()``) and are reduced to shift / ctrl / alt, so Caps Lock or Num
Lock never make a key miss. The integrator keys are generated from the ``INTEGRATORS``
registry, so a new integrator gets a number key and a help line by itself; the keys of
the world settings (iterations, substeps, gravity, wind, air drag, bounce, friction, link
softness) from ``settings.SETTINGS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pygame

from ..settings import SETTINGS
from ..sim.integrators import INTEGRATORS

NONE = 0
SHIFT = pygame.KMOD_SHIFT
CTRL = pygame.KMOD_CTRL
ALT = pygame.KMOD_ALT


@dataclass(frozen=True)
class Binding:
    """``key`` with exactly ``mods`` (NONE, SHIFT, ...) runs ``action(arg)``.

    ``repeat``: also act on auto-repeat while the key is held (panning, stepping).
    """

    key: int
    mods: int
    action: str
    help: str
    arg: Any = None
    repeat: bool = False


def _integrator_keys() -> list[Binding]:
    digits = [pygame.K_1, pygame.K_2, pygame.K_3, pygame.K_4, pygame.K_5, pygame.K_6,
              pygame.K_7, pygame.K_8, pygame.K_9]
    return [Binding(key, NONE, "set_integrator", f"integrator: {integ.label}", arg=name)
            for key, (name, integ) in zip(digits, INTEGRATORS.items(), strict=False)]


def _key(spec: str) -> tuple[int, int]:
    """``"shift+="`` as ``(pygame key, mods)``."""
    mods = NONE
    for prefix, flag in (("shift+", SHIFT), ("ctrl+", CTRL), ("alt+", ALT)):
        if spec.startswith(prefix):
            spec, mods = spec[len(prefix):], mods | flag
    return _SYMBOLS.get(spec) or getattr(pygame, f"K_{spec}"), mods


#: Key names that are no ``pygame.K_<name>`` (``pygame.key.key_code`` would need
#: ``pygame.init()`` before the table is made).
_SYMBOLS = {"=": pygame.K_EQUALS, "-": pygame.K_MINUS, "[+]": pygame.K_KP_PLUS,
            "[-]": pygame.K_KP_MINUS}


def _setting_keys() -> list[Binding]:
    """The keys of every row of ``settings.SETTINGS``: ``change_setting`` by one step."""
    out = []
    for st in SETTINGS.values():
        for specs, sign in ((st.more, +1), (st.less, -1)):
            for spec in specs:
                key, mods = _key(spec)
                out.append(Binding(key, mods, "change_setting", st.help(sign),
                                   arg=(st.name, sign), repeat=True))
    return out


K = pygame
KEYMAP: list[Binding] = [
    Binding(K.K_i, NONE, "cycle_integrator", "next integrator", arg=+1),
    Binding(K.K_i, SHIFT, "cycle_integrator", "previous integrator", arg=-1),
    *_integrator_keys(),
    Binding(K.K_t, NONE, "cycle_timestep", "next timestep mode (fixed, variable, random, "
            "replay)", arg=+1),
    Binding(K.K_t, SHIFT, "cycle_timestep", "previous timestep mode", arg=-1),
    Binding(K.K_m, NONE, "cycle_constraints", "rigid links by XPBD, Lagrange multipliers or "
            "RATTLE / SHAKE", arg=+1),
    Binding(K.K_m, SHIFT, "cycle_constraints", "previous constraint method", arg=-1),
    Binding(K.K_SPACE, NONE, "pause", "pause / resume"),
    Binding(K.K_PERIOD, NONE, "step", "single step (one plan; pauses)", repeat=True),
    Binding(K.K_s, NONE, "step", "single step (one plan; pauses)", repeat=True),
    Binding(K.K_LEFTBRACKET, NONE, "speed", "slow motion: frame dt x0.5 (down to x0.25)",
            arg=0.5),
    Binding(K.K_RIGHTBRACKET, NONE, "speed", "fast forward: frame dt x2 (up to x4)", arg=2.0),
    *_setting_keys(),
    Binding(K.K_r, NONE, "reset", "reset the level (keeps integrator, timestep and the settings)"),
    Binding(K.K_n, NONE, "level", "next level", arg=+1),
    Binding(K.K_p, NONE, "level", "previous level", arg=-1),
    Binding(K.K_e, NONE, "toggle_graph", "energy graph on / off"),
    Binding(K.K_TAB, NONE, "toggle_panel", "control panel on / off"),
    Binding(K.K_l, NONE, "toggle_trails", "trails on / off (Ctrl+click a particle: its "
            "trail)"),
    Binding(K.K_l, SHIFT, "trail_length", "trails' length: 1, 3 or 10 s", arg=1),
    Binding(K.K_x, NONE, "toggle_debug", "debug draw: all off / the layers last chosen "
            "on"),
    Binding(K.K_1, ALT, "toggle_debug_layer", "debug draw: contact points and normals on "
            "/ off", arg="contacts"),
    Binding(K.K_2, ALT, "toggle_debug_layer", "debug draw: contacts' corrections (arrows) "
            "on / off", arg="corrections"),
    Binding(K.K_3, ALT, "toggle_debug_layer", "debug draw: bounding boxes and grid on / "
            "off", arg="boxes"),
    Binding(K.K_4, ALT, "toggle_debug_layer", "debug draw: link forces (N) and strains (%) "
            "on / off", arg="link forces"),
    Binding(K.K_f, NONE, "phase_axis", "graph: the phase portrait, vx against x (again: vy "
            "against y)"),
    Binding(K.K_f, SHIFT, "toggle_plot", "graph under the panel on / off"),
    Binding(K.K_u, NONE, "cycle_plot", "graph: next quantity (energies, the particle's "
            "motion, strain, errors, frame dt)", arg=+1),
    Binding(K.K_u, SHIFT, "cycle_plot", "graph: previous quantity", arg=-1),
    Binding(K.K_j, NONE, "cycle_plot_x", "graph: against time or the next quantity",
            arg=+1),
    Binding(K.K_j, SHIFT, "cycle_plot_x", "graph: against the previous one", arg=-1),
    Binding(K.K_u, ALT, "plot_log", "graph: log scale of |y| on / off"),
    Binding(K.K_v, NONE, "toggle_hud", "HUD: every number / the short one"),
    Binding(K.K_h, SHIFT, "caption", "show the level's caption again"),
    Binding(K.K_c, NONE, "record", "record a clip (MP4) / stop", arg="mp4"),
    Binding(K.K_c, SHIFT, "record", "record a clip (animated GIF) / stop", arg="gif"),
    Binding(K.K_EQUALS, ALT, "hz", "more steps per second (h smaller)", arg=1.25,
            repeat=True),
    Binding(K.K_MINUS, ALT, "hz", "fewer steps per second (h larger)", arg=0.8,
            repeat=True),
    Binding(K.K_EQUALS, CTRL, "hz", "halve the step (twice the steps per second)", arg=2.0),
    Binding(K.K_MINUS, CTRL, "hz", "double the step (half the steps per second)", arg=0.5),
    Binding(K.K_a, NONE, "toggle_ensemble", "all integrators side by side, the truth in "
            "grey rings (small levels)"),
    Binding(K.K_h, NONE, "toggle_help", "this help"),
    Binding(K.K_F1, NONE, "toggle_help", "this help"),
    Binding(K.K_g, NONE, "toggle_ghost", "ghost: a copy run by another integrator"),
    Binding(K.K_g, SHIFT, "cycle_ghost", "ghost: next integrator (restarts it from here)",
            arg=+1),
    Binding(K.K_g, CTRL, "cycle_ghost", "ghost: previous integrator (restarts it)", arg=-1),
    Binding(K.K_LEFT, NONE, "pan", "pan left", arg=(-0.1, 0.0), repeat=True),
    Binding(K.K_RIGHT, NONE, "pan", "pan right", arg=(0.1, 0.0), repeat=True),
    Binding(K.K_UP, NONE, "pan", "pan up", arg=(0.0, 0.1), repeat=True),
    Binding(K.K_DOWN, NONE, "pan", "pan down", arg=(0.0, -0.1), repeat=True),
    Binding(K.K_PAGEUP, NONE, "zoom", "zoom in", arg=1.25, repeat=True),
    Binding(K.K_PAGEDOWN, NONE, "zoom", "zoom out", arg=0.8, repeat=True),
    Binding(K.K_HOME, NONE, "reset_view", "back to the level's view"),
    Binding(K.K_F12, NONE, "screenshot", "screenshot (PNG)"),
    Binding(K.K_F5, NONE, "save_snapshot", "save a snapshot of the world"),
    Binding(K.K_F9, NONE, "load_snapshot", "load the latest snapshot"),
    Binding(K.K_F6, NONE, "save_replay", "save a replay of this session (main.py replay)"),
    Binding(K.K_b, NONE, "toggle_build", "build mode on / off (the mouse places things)"),
    Binding(K.K_b, CTRL, "cycle_tool", "build: next tool"),
    Binding(K.K_z, CTRL, "undo", "build: undo"),
    Binding(K.K_y, CTRL, "redo", "build: redo"),
    Binding(K.K_DELETE, NONE, "build_delete", "build: delete the selection"),
    Binding(K.K_BACKSPACE, NONE, "build_delete", "build: delete the selection"),
    Binding(K.K_n, CTRL, "new_level", "build: a new, empty level (this level's world "
            "settings)"),
    Binding(K.K_RETURN, NONE, "close_polygon", "build: close the polygon"),
    Binding(K.K_s, CTRL, "save_level", "build: save as a level file"),
    Binding(K.K_ESCAPE, NONE, "cancel", "cancel the polygon or drag under way; build: clear "
            "the selection; else quit"),
    Binding(K.K_q, NONE, "quit", "quit"),
]
del K

#: Mouse gestures, for the help overlay (handled by the app's mouse handlers).
MOUSE_HELP: list[tuple[str, str]] = [
    ("Left drag", "hold the nearest particle on a spring (a flick throws it);"
                  " a click selects it for the graph"),
    ("Shift+Left drag", "cut every link the path crosses"),
    ("Ctrl+Left click", "a trail for the nearest particle, or none (L: all on / off)"),
    ("Right click", "pin / unpin the nearest particle"),
    ("Middle drag", "pan"),
    ("Wheel", "zoom about the cursor"),
    ("Build: Right click", "select a body or shape (Shift+click adds or takes out; the "
                           "select tool: left)"),
    ("Build: Right drag", "from the selection: move it; from empty space: select what "
                          "the box holds"),
]


#: While the help shows, these keys turn its pages (+1 next, -1 back), as the wheel does;
#: H, F1 or Esc close it. They are the help's own: the scene's meaning of them (zoom,
#: pan) waits until it is closed. The help's last line lists them.
HELP_PAGING: dict[int, int] = {pygame.K_PAGEDOWN: +1, pygame.K_DOWN: +1,
                               pygame.K_PAGEUP: -1, pygame.K_UP: -1}


def normalise_mods(mod: int) -> int:
    """An event's ``mod`` reduced to SHIFT | CTRL | ALT (either side; locks ignored)."""
    out = NONE
    for m in (SHIFT, CTRL, ALT):
        if mod & m:
            out |= m
    return out


_TABLE: dict[tuple[int, int], Binding] = {}
for _b in KEYMAP:
    if (_b.key, _b.mods) in _TABLE:                  # pragma: no cover - a table typo
        raise RuntimeError(f"key bound twice: {pygame.key.name(_b.key)} mods {_b.mods}")
    _TABLE[(_b.key, _b.mods)] = _b


def lookup(key: int, mod: int = 0) -> Binding | None:
    """The binding for ``key`` with the event's modifiers, or None."""
    return _TABLE.get((key, normalise_mods(mod)))


_NAMES = {"escape": "Esc", "page up": "PgUp", "page down": "PgDn", "[+]": "Keypad +",
          "[-]": "Keypad -", "left": "Left", "right": "Right", "up": "Up", "down": "Down"}


def key_name(key: int) -> str:
    """``"I"``, ``"F12"``, ``"PgDn"``: a key as the help shows it."""
    name = pygame.key.name(key)
    if name in _NAMES:
        return _NAMES[name]
    if len(name) == 1:
        return name.upper()
    return name[:1].upper() + name[1:]


def key_label(b: Binding) -> str:
    """``"Shift+I"``, ``"F12"``, ``"Space"``: a binding as the help shows it."""
    name = key_name(b.key)
    prefix = "".join(p for m, p in ((CTRL, "Ctrl+"), (ALT, "Alt+"), (SHIFT, "Shift+"))
                     if b.mods & m)
    return prefix + name


def spec_label(spec: str) -> str:
    """A key written as the settings table writes it (``"shift+d"``) as the help shows
    it (``"Shift+D"``)."""
    key, mods = _key(spec)
    return key_label(Binding(key, mods, "", ""))


def help_lines() -> list[tuple[str, str]]:
    """``(keys, text)`` in table order; bindings with the same help share one line."""
    lines: dict[str, list[str]] = {}
    for b in KEYMAP:
        lines.setdefault(b.help, []).append(key_label(b))
    return [(" / ".join(keys), text) for text, keys in lines.items()]

"""Input: pygame events -> commands, through the keymap and the mouse gestures.

Real pygame-ce events carry only some attributes (a dump of real X11 events is kept in
``tests/data/real_events.json``): ``MOUSEBUTTONDOWN``/``UP`` have ``pos``, ``button``,
``clicks``, ``touch`` and ``window`` but **no** ``mod``; ``MOUSEWHEEL`` has ``x``, ``y``,
``precise_x``, ``precise_y``, ``flipped`` (and ``pos`` in recent pygame-ce);
``KEYDOWN``/``KEYUP`` have ``key``, ``mod``, ``scancode``, ``unicode``. So the modifiers
of a mouse gesture are read from the keyboard state (``pygame.key.get_mods()``), or'ed
with the modifier keys seen going down in the event stream (events posted by tests do
not change ``get_mods()``; real ones do both), and every optional attribute is read with
a fallback. The mouse position comes from the events' ``pos`` (posted events do not
move ``pygame.mouse.get_pos()``).

Gestures (also listed in the help, from ``keymap.MOUSE_HELP``): left drag holds the
nearest particle with the mouse spring, Shift+left drag cuts, right click pins, middle
drag pans, the wheel zooms about the cursor, Ctrl+left click gives the nearest
particle a trail or takes it away (it used to grab, as a plain click).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pygame

from .keymap import HELP_PAGING, lookup, normalise_mods

PICK_RADIUS_PX = 20.0
#: A selecting press that moves less than this (px) is a click, not a drag.
MIN_DRAG_PX = 4.0

#: Modifier keys and the modifier bit each holds down.
_MOD_KEYS = {pygame.K_LSHIFT: pygame.KMOD_LSHIFT, pygame.K_RSHIFT: pygame.KMOD_RSHIFT,
             pygame.K_LCTRL: pygame.KMOD_LCTRL, pygame.K_RCTRL: pygame.KMOD_RCTRL,
             pygame.K_LALT: pygame.KMOD_LALT, pygame.K_RALT: pygame.KMOD_RALT}


class Input:
    """Turns events into calls on ``app`` (an ``App``: its session, camera, commands).

    State: ``mouse`` (px, from events only), ``held`` keys, the modifiers held
    (``mods``), and the gesture under way: ``grabbed`` particle, ``cut_path`` (m),
    ``panning``.
    """

    def __init__(self, app) -> None:
        self.app = app
        self.mouse = (app.size[0] / 2, app.size[1] / 2)
        self.held: set[int] = set()
        self._mods = 0
        self.grabbed: int | None = None
        self.cut_path: list[np.ndarray] | None = None
        self.cut_count = 0
        self.panning = False
        self.gesture: list[np.ndarray] | None = None   # build mode: the drag's points (m)
        self.polygon: list[np.ndarray] = []             # build mode: polygon corners (m)
        #: Build mode's selecting press under way (right button, or left with the select
        #: tool): ``{"at": m, "px": press px, "button", "add": Shift, "mode": None (a
        #: click so far) | "move" | "box"}``.
        self.pick: dict | None = None
        self.handlers: dict[int, Callable] = {
            pygame.QUIT: lambda e: app.quit(),
            pygame.KEYDOWN: self.key_down, pygame.KEYUP: self.key_up,
            pygame.MOUSEBUTTONDOWN: self.mouse_down, pygame.MOUSEBUTTONUP: self.mouse_up,
            pygame.MOUSEMOTION: self.mouse_motion, pygame.MOUSEWHEEL: self.mouse_wheel,
            pygame.VIDEORESIZE: lambda e: app.resized(),
            pygame.WINDOWSIZECHANGED: lambda e: app.resized(),
            pygame.WINDOWFOCUSLOST: lambda e: self.focus_lost(),
        }

    # --- modifiers ------------------------------------------------------------------

    def mods(self) -> int:
        """SHIFT | CTRL | ALT held now: the keyboard state or'ed with the modifier keys
        seen going down in the event stream (see the module docstring)."""
        try:
            state = pygame.key.get_mods()
        except pygame.error:                       # no display: the event stream only
            state = 0
        return normalise_mods(state | self._mods)

    def focus_lost(self) -> None:
        self.held.clear()
        self._mods = 0
        if self.grabbed is not None:               # the button-up goes to another window
            self.app.session.release()
            self.grabbed = None
        self.cut_path = None
        self.panning = False
        self.pick = None                           # a selection drag is not finished

    # --- dispatch -------------------------------------------------------------------

    def handle(self, event) -> None:
        """Turn one event into commands; nothing raised here ever leaves the app."""
        handler = self.handlers.get(event.type)
        if handler is None:
            return
        try:
            handler(event)
        except Exception as e:   # shown in the window, never a traceback
            self.app.report(f"event {pygame.event.event_name(event.type)}", e)

    def key_down(self, event) -> None:
        key = event.key
        if key in _MOD_KEYS:
            self._mods |= _MOD_KEYS[key]
        repeat = key in self.held                  # auto-repeat: the key is still down
        self.held.add(key)
        if self.app.show_help and (key in HELP_PAGING or key == pygame.K_ESCAPE):
            # The help's own keys while it shows: its pages, and Esc closes it (it
            # quit the window from under the help).
            if key == pygame.K_ESCAPE:
                self.app.do("toggle_help")
            else:
                self.app.do("help_page", HELP_PAGING[key])
            return
        # KEYDOWN carries `mod` in real pygame-ce; the keyboard state is the fallback.
        mod = getattr(event, "mod", None)
        b = lookup(key, self.mods() if mod is None else (mod | self._mods))
        if b is not None and (b.repeat or not repeat):
            self.app.do(b.action, b.arg)

    def key_up(self, event) -> None:
        self.held.discard(event.key)
        if event.key in _MOD_KEYS:
            self._mods &= ~_MOD_KEYS[event.key]

    # --- the mouse ------------------------------------------------------------------

    def _pick_radius(self) -> float:
        return self.app.camera.pixels_to_metres(PICK_RADIUS_PX)

    def mouse_down(self, event) -> None:
        self.mouse = tuple(event.pos)
        app = self.app
        p = app.camera.to_world(event.pos)
        button = event.button
        if app.editor is not None and button in (1, 3):
            self.build_down(p, button)
            return
        if button == 1 and self.mods() & pygame.KMOD_CTRL:
            # A trail on or off: only the view changes, so a replay allows it too.
            app.do("toggle_trail", app.world.nearest(p, self._pick_radius()))
            return
        if app.session.player is not None and button in (1, 3):
            app.message("playing a replay: the mouse pans (middle) and zooms (wheel)")
            return
        if button == 1 and self.mods() & pygame.KMOD_SHIFT:
            self.cut_path = [p]
            self.cut_count = 0
        elif button == 1:
            self.grabbed = app.session.grab(p, self._pick_radius())
            if self.grabbed is not None:
                app.do("select", self.grabbed)       # a click selects it, too
        elif button == 3:
            app.session.toggle_pin(p, self._pick_radius())
        elif button == 2:
            self.panning = True

    def mouse_motion(self, event) -> None:
        old = self.mouse
        self.mouse = tuple(event.pos)
        app = self.app
        if self.panning:
            app.camera.pan_pixels(self.mouse[0] - old[0], self.mouse[1] - old[1])
        if self.pick is not None:
            self.pick_motion()
        if self.gesture is not None:
            q = app.camera.to_world(self.mouse)
            if np.hypot(*(app.camera.to_screen(q) - app.camera.to_screen(self.gesture[-1]))) \
                    >= 3.0:
                self.gesture.append(q)
        if self.cut_path is not None:
            a, b = self.cut_path[-1], app.camera.to_world(self.mouse)
            self.cut_count += app.session.cut(a, b)
            self.cut_path.append(b)
        self.follow()

    def mouse_up(self, event) -> None:
        self.mouse = tuple(event.pos)
        if self.pick is not None and event.button == self.pick["button"]:
            self.pick_up()
            return
        if event.button == 1 and self.gesture is not None:
            points = self.gesture + [self.app.camera.to_world(self.mouse)]
            self.gesture = None
            self.app.do("build_gesture", [[float(q[0]), float(q[1])] for q in points])
            return
        if event.button == 1:
            if self.grabbed is not None:
                self.follow()
                self.app.session.release()
                self.grabbed = None
            if self.cut_path is not None:
                if self.cut_count:
                    n = self.cut_count
                    self.app.message(f"cut {n} link{'s' * (n != 1)}")
                self.cut_path = None
        elif event.button == 2:
            self.panning = False

    def mouse_wheel(self, event) -> None:
        steps = getattr(event, "precise_y", None)
        if not steps:
            steps = getattr(event, "y", 0)
        if getattr(event, "flipped", False):
            steps = -steps
        if self.app.show_help:                     # the help's pages, not the zoom
            if steps:
                self.app.do("help_page", -1 if steps > 0 else +1)
            return
        at = getattr(event, "pos", None) or self.mouse
        self.app.camera.zoom_at(at, 1.15 ** float(np.clip(steps, -10, 10)))

    # --- build mode -------------------------------------------------------------------

    def build_down(self, p: np.ndarray, button: int) -> None:
        """A press in build mode: right (or left with the select tool) selects, moves
        or draws a box (see :meth:`pick_up`); left starts the tool's gesture (the
        polygon tool collects corners instead: a click near the first one closes it)."""
        app = self.app
        if button == 3 or app.tool == "select":
            self.pick = {"at": p, "px": self.mouse, "button": button, "mode": None,
                         "add": bool(self.mods() & pygame.KMOD_SHIFT)}
            return
        if app.tool == "polygon":
            if len(self.polygon) >= 3 and np.hypot(*(p - self.polygon[0])) <= \
                    self._pick_radius():
                app.do("close_polygon")
            else:
                self.polygon.append(p)
            return
        self.gesture = [p]

    def pick_motion(self) -> None:
        """A selecting press moved: past ``MIN_DRAG_PX`` it is a drag, which moves the
        selection if it began on a selected body or shape (or on one, which is selected
        first), else draws a box."""
        pick, app = self.pick, self.app
        if pick["mode"] is not None or app.editor is None:
            return
        if np.hypot(self.mouse[0] - pick["px"][0], self.mouse[1] - pick["px"][1]) < \
                MIN_DRAG_PX:
            return
        from .editor import nearest_item
        ed = app.editor
        item = nearest_item(ed.table, app.world, pick["at"], self._pick_radius())
        if item is None:
            pick["mode"] = "box"
            return
        if item not in ed.selection:
            app.do("build_select", self._select_arg(pick["at"], pick["add"]))
        pick["mode"] = "move" if item in ed.selection else "box"

    def _select_arg(self, p, add: bool) -> tuple:
        return (float(p[0]), float(p[1]), float(self._pick_radius()), bool(add))

    def pick_up(self) -> None:
        """A selecting press let go: a click selects (Shift adds or takes out), a drag
        from the selection moves it by the drag, a drag from empty space selects what
        lies inside its box."""
        pick, app = self.pick, self.app
        self.pick = None
        if app.editor is None:
            return
        q = app.camera.to_world(self.mouse)
        a = pick["at"]
        if pick["mode"] is None:
            app.do("build_select", self._select_arg(a, pick["add"]))
        elif pick["mode"] == "move":
            app.do("build_move", (float(q[0] - a[0]), float(q[1] - a[1])))
        else:
            app.do("build_select_box", (float(a[0]), float(a[1]), float(q[0]),
                                        float(q[1]), pick["add"]))

    def follow(self) -> None:
        """The hand's spring pulls towards the cursor (world and ghost)."""
        if self.grabbed is not None:
            self.app.session.drag_to(self.app.camera.to_world(self.mouse))

"""The control panel: every setting of the window operable with the mouse alone.

Built with pygame_gui (a maintained widget library made for pygame-ce: themed from
``assets/theme.json``, 0.3 ms a frame for this panel) rather than by hand: drop-down
lists, sliders with click increments and buttons with hover states are what it is for,
and writing them again would add code without teaching anything. Every control is
also a hotkey (the panel shows them), so the keyboard reaches everything too; Tab
hides the panel and the scene's view grows into the space.

The column is only as tall as the window leaves it: where the rows do not fit (below
~1280 x 800) they sit in a scrolling container, the wheel or the scroll bar reaching
the ghost and level pickers at the bottom, and a drop-down list never opens past the
part of the panel that is shown.

The world's physical parameters (gravity, wind, air drag, bounce, friction, link
softness: the "world" rows of ``settings.SETTINGS``) are a section of their own, closed
at first behind one button ("▸ world"): open, its sliders come under the button and the
panel scrolls to show them (at 1280 x 800 it then scrolls); closed, the panel is no
taller than the solver's rows need. The debug draw's section ("▸ debug draw", beside it
on the same row) opens the same way on one checkbox a layer of the debug overlay
(:mod:`.debug`), each with its key.

The panel never changes the simulation itself: each widget event becomes one of the
app's commands (``App.do(action, arg)``), the same that the keys run, and
:meth:`ControlPanel.sync` shows the state the commands left, whichever way they came.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pygame
import pygame_gui
from pygame_gui.elements import (
    UIButton,
    UICheckBox,
    UIDropDownMenu,
    UIHorizontalSlider,
    UILabel,
    UIPanel,
    UIScrollingContainer,
)

from ..settings import SETTINGS
from ..sim.integrators import INTEGRATORS
from ..sim.timestep import TIMESTEPS
from . import debug
from .hud import ASSETS, FONT_FILES
from .keymap import spec_label

WIDTH = 300
ROW = 30
SCROLL_BAR = 20                        # px: pygame_gui's vertical scroll bar
HZ = (10, 240)
SPEED_EXP = (-2, 2)                    # speed = 2 ** value: 0.25 .. 4
GHOST_OFF = "ghost off"


def integrator_option(name: str) -> str:
    """``"Velocity Verlet · 2 · sympl."``: the name, its order and whether symplectic."""
    integ = INTEGRATORS[name]
    return f"{integ.label} · {integ.order}{' · sympl.' if integ.symplectic else ''}"


class _Manager(pygame_gui.UIManager):
    """A UIManager that takes the mouse position from the event stream (the app's
    ``pointer``) instead of ``pygame.mouse.get_pos()``: the same position at a real
    mouse, and the one posted events carry in tests (posted events do not move the
    system pointer)."""

    def __init__(self, size, pointer, **kw) -> None:
        self._pointer = pointer
        super().__init__(size, **kw)

    def _update_mouse_position(self) -> None:
        x, y = self._pointer()
        self.mouse_position = self.calculate_scaled_mouse_position((int(x), int(y)))


class ControlPanel:
    """The right-hand column's widgets; ``rect`` is where it may sit (px): the panel
    takes its rows' height, at most ``rect.h``, and scrolls when they need more."""

    def __init__(self, app, rect: pygame.Rect) -> None:
        self.app = app
        self.rect = pygame.Rect(rect)
        self.scroller: UIScrollingContainer | None = None
        self._label_of: tuple | None = None        # (scene source, its picker label)
        self.world_open = False                    # the world section's sliders shown
        self.debug_open = False                    # the debug draw's checkboxes shown
        self.checks: dict[str, UICheckBox] = {}    # the debug layers' checkboxes
        # The font first (the theme names it), then the theme.
        self.manager = _Manager(app.size, lambda: app.pointer,
                                enable_live_theme_updates=False)
        self.manager.add_font_paths("dejavumono", str(FONT_FILES[False]),
                                    str(FONT_FILES[True]))
        self.manager.get_theme().load_theme(str(ASSETS / "theme.json"))
        self._shown: dict[str, object] = {}
        self.actions: dict[object, Callable] = {}
        self.build()

    # --- building -------------------------------------------------------------------

    def build(self) -> None:
        """(Re)create the widgets inside ``rect``: the controls, or in build mode the
        build tools; scrolled as far as before (a level picked at the bottom of a
        scrolled panel left it scrolled back to the top)."""
        scrolled = self.scrolled()
        self.manager.clear_and_reset()
        self.manager.set_window_resolution(self.app.size)
        self.actions = {}
        self._menus: dict[str, tuple] = {}
        self._shown = {}
        self.dialog = None
        self.save_to = None
        self.plot_picker: pygame.Rect | None = None       # the graph's top row, if there
        if self.app.editor is not None:
            self._build_tools()
        else:
            self._build_controls()
        if scrolled:
            self.scroll_to(scrolled)

    def _frame(self, height: int) -> tuple[UIPanel, int]:
        """The panel at ``rect``: ``height`` px of rows, or as much as ``rect.h`` allows
        with the rows in a scrolling container. Returns the container the rows go in
        and the width they have."""
        r = self.rect
        shown = min(height, r.h) if r.h > 0 else height
        self.container = UIPanel(pygame.Rect(r.x, r.y, r.w, shown), manager=self.manager,
                                 starting_height=1)
        self.scroller = None
        if shown >= height:
            self.content = self.container
            return self.container, r.w
        inner = self.container.get_container().get_rect()
        sc = UIScrollingContainer(pygame.Rect(0, 0, inner.w, inner.h), manager=self.manager,
                                  container=self.container, allow_scroll_x=False)
        sc.set_scrollable_area_dimensions((inner.w - SCROLL_BAR, height))
        self.scroller = sc
        self.content = sc
        return sc, inner.w - SCROLL_BAR

    def _build_controls(self) -> None:
        self.mode = "controls"
        m = self.manager
        c, width = self._frame(self.rows_height())
        w = width - 16
        y = 4
        s = self.app.session

        def label(text, x=8, width=w, obj="#label", h=20):
            return self._label(text, pygame.Rect(x, y, width, h), obj)

        label("controls  Tab hides · H: keys", obj="@title")
        y += 20
        label(f"integrator I 1-{min(len(INTEGRATORS), 9)} (order, sympl.)")
        y += 20
        names = list(INTEGRATORS)
        options = [integrator_option(n) for n in names]
        self._menu("integrator", options, integrator_option(s.integrator),
                   pygame.Rect(8, y, w, 24), lambda text: self.app.do(
                       "set_integrator", names[options.index(text)]))
        y += 28
        from ..sim.lagrange import CONSTRAINT_METHODS
        methods = list(CONSTRAINT_METHODS)
        labels = [CONSTRAINT_METHODS[k].label for k in methods]
        label("links  M", width=100, h=24)
        self._menu("constraints", labels,
                   CONSTRAINT_METHODS[s.world.config.constraint_method].label,
                   pygame.Rect(108, y, w - 100, 24), lambda text: self.app.do(
                       "set_constraints", methods[labels.index(text)]))
        y += 28
        label("timestep  T", width=100, h=24)
        self._menu("timestep", list(TIMESTEPS), s.timestep, pygame.Rect(108, y, w - 100, 24),
                   lambda text: self.app.do("set_timestep", text))
        y += 28
        bw = (w - 12) // 3
        self.pause = UIButton(pygame.Rect(8, y, bw, 24), "Pause", manager=m, container=c,
                              tool_tip_text="Space")
        self.step = UIButton(pygame.Rect(14 + bw, y, bw, 24), "Step", manager=m,
                             container=c, tool_tip_text=". or S")
        self.reset = UIButton(pygame.Rect(20 + 2 * bw, y, bw, 24), "Reset", manager=m,
                              container=c, tool_tip_text="R")
        self.actions[self.pause] = lambda: self.app.do("pause")
        self.actions[self.step] = lambda: self.app.do("step")
        self.actions[self.reset] = lambda: self.app.do("reset")
        y += 28
        self.sliders: dict[str, tuple[UIHorizontalSlider, UILabel, Callable]] = {}
        rows = self._slider_rows()
        for row in rows["solver"]:
            y = self._slider(row, y, w, width)
        # The world's and the debug draw's sections share their buttons' row (another
        # row would make the panel scroll at 1280 x 800); each opens under it, the
        # world's sliders first.
        self.world_top = y
        half = (w - 6) // 2
        self.world = UIButton(pygame.Rect(8, y, half, 24), self._world_text(), manager=m,
                              container=c, tool_tip_text="the world's physical parameters: "
                              "gravity Y, wind W, air drag D, bounce O, friction K, link "
                              "softness Z")
        self.actions[self.world] = self.toggle_world
        self.debug = UIButton(pygame.Rect(14 + half, y, w - half - 6, 24), self._debug_text(),
                              manager=m, container=c, tool_tip_text="debug draw: contacts, "
                              "the contacts' corrections, bounding boxes and the broad "
                              "phase's grid, link forces; any of them at once (X: all off "
                              "/ back on)")
        self.actions[self.debug] = self.toggle_debug
        y += 28
        if self.world_open:
            for row in rows["world"]:
                y = self._slider(row, y, w, width)
        self.debug_top = y
        self.checks = {}
        if self.debug_open:
            y = self._checkboxes(y, width)
        # The ghost's row shares its label line with the ensemble's button (another row
        # would make the panel scroll at 1280 x 800): both are an overlay on the world.
        label("ghost  G, Shift+G", width=w - 116)
        self.ensemble = UIButton(pygame.Rect(8 + w - 112, y - 2, 112, 22), "",
                                 manager=m, container=c,
                                 tool_tip_text="A: every integrator on the same steps and "
                                 "hand, the truth in grey rings")
        self.actions[self.ensemble] = lambda: self.app.do("toggle_ensemble")
        y += 20
        ghosts = [GHOST_OFF] + options
        up = pygame_gui.core.ObjectID(class_id="@up_menu")   # opens upwards: near the bottom
        self._menu("ghost", ghosts, self._ghost_option(), pygame.Rect(8, y, w, 24),
                   lambda text: (self.app.do("ghost_off") if text == GHOST_OFF
                                 else self.app.do("set_ghost", names[ghosts.index(text) - 1])),
                   object_id=up)
        y += 28
        from ..levels import level_names

        levels = level_names()
        current = self._level_name()
        if current and current not in levels:   # a benchmark scene or a file elsewhere
            levels = [current, *levels]
        # On a row of its own: beside its label the picker cut double_pendulum_lagrange
        # to "double_pendulum_lagr".
        label("level  N P")
        y += 20
        self.level = UIDropDownMenu(levels, current if current in levels else levels[0],
                                    pygame.Rect(8, y, w, 24), manager=m, container=c,
                                    expand_on_option_click=True, object_id=up)
        self.actions[self.level] = lambda text: (
            None if text.startswith("(") else self.app.do("set_level", text))
        self.content_height = y + 28 + 4
        self._build_plot_picker()
        self.sync(force=True)

    def _menu(self, attr: str, options: list[str], selected: str, rect: pygame.Rect,
              action: Callable, **kw) -> None:
        """A drop-down ``self.<attr>`` with ``action(text)``, kept so that a new selection
        (a hotkey changed the integrator, G started a ghost) replaces this one widget
        (~2 ms) instead of rebuilding the panel (45 ms: the frame G was pressed in)."""
        kw = {"container": self.content, **kw}
        menu = UIDropDownMenu(options, selected, rect, manager=self.manager, **kw)
        setattr(self, attr, menu)
        self.actions[menu] = action
        self._menus[attr] = (options, rect, action, kw)

    #: px of the graph's pickers' row: the log button, the gaps. Each list is as wide as
    #: its drop-down: two of 118 px show a 12-character option whole ("E→soft links").
    PICK_LOG, PICK_GAP = 40, 4

    def _build_plot_picker(self) -> None:
        """The graph's pickers, in its top row under the panel (the panel has no row to
        spare at 1280 x 800): the quantity (U, Shift+U), what it is plotted against (J,
        time first) and the scale of |y| (Alt+U). Drop-downs of the window, not of the
        panel's rows: they do not scroll with them. Their keys are written under them,
        at the end of the graph's legend row."""
        from ..quantities import AXES, QUANTITIES, TIME
        self.plot_picker = rect = self.app.plot_header()
        if rect is None:
            return
        lw, gap = self.PICK_LOG, self.PICK_GAP
        yw = (rect.w - lw - 2 * gap) // 2
        xw = rect.w - lw - 2 * gap - yw
        names = list(QUANTITIES)
        ys = [QUANTITIES[n].label for n in names]
        xs = [TIME, *ys]
        up = pygame_gui.core.ObjectID(class_id="@up_menu")
        # Built showing the choice: a pick of the option shown is no change, no command
        # (built on their first options, "time" could not be picked on a cloth).
        shown = self._plot_state()
        x = rect.x
        self._menu("plot_y", ys, shown["plot_y"], pygame.Rect(x, rect.y, yw, rect.h),
                   lambda text: self.app.do("plot_y", names[ys.index(text)]),
                   container=None, object_id=up)
        x += yw + gap
        self._menu("plot_x", xs, shown["plot_x"], pygame.Rect(x, rect.y, xw, rect.h),
                   lambda text: self.app.do("plot_x", AXES[xs.index(text)]),
                   container=None, object_id=up)
        x += xw + gap
        self.plot_log = UIButton(pygame.Rect(x, rect.y, rect.right - x, rect.h), "lin",
                                 manager=self.manager, tool_tip_text="Alt+U: a log scale "
                                 "of |y| (zeros left out) or a linear one")
        self.actions[self.plot_log] = lambda: self.app.do("plot_log")

    def _plot_state(self) -> dict[str, str]:
        """The pickers' texts for the session's graph choice."""
        from ..quantities import QUANTITIES, TIME
        c = self.app.session.plot
        return {"plot_y": QUANTITIES[c.y].label,
                "plot_x": QUANTITIES[c.x].label if c.x in QUANTITIES else TIME}

    def _show_choice(self, attr: str, text: str) -> None:
        """``self.<attr>`` showing ``text`` selected (a new widget in the old one's place)."""
        options, rect, action, kw = self._menus[attr]
        old = getattr(self, attr)
        self.actions.pop(old, None)
        old.kill()
        self._menu(attr, options, text, rect, action, **kw)

    #: The panel's rows' height in px with the world section closed (the rows above,
    #: with their gaps): 2 sliders of the session's own, the solver's settings, the
    #: world section's button; open, its sliders add ``WORLD_HEIGHT``.
    HEIGHT = (4 + 20 + 20 + 28 + 28 + 28 + 28
              + (2 + sum(st.section == "solver" for st in SETTINGS.values())) * 42
              + 28 + 20 + 28 + 20 + 28 + 4)
    WORLD_HEIGHT = sum(st.section == "world" for st in SETTINGS.values()) * 42
    #: ... and the debug draw's checkboxes, one row of ``CHECK_ROW`` px a layer.
    CHECK_ROW = 22
    DEBUG_HEIGHT = len(debug.LAYERS) * CHECK_ROW + 4

    def rows_height(self) -> int:
        """The controls' rows' height in px as they are built now (the layout reserves
        it): :attr:`HEIGHT`, :attr:`WORLD_HEIGHT` more while the world section is open
        and :attr:`DEBUG_HEIGHT` while the debug draw's is."""
        return (self.HEIGHT + (self.WORLD_HEIGHT if self.world_open else 0)
                + (self.DEBUG_HEIGHT if self.debug_open else 0))

    def _world_text(self) -> str:
        return f"{'▾' if self.world_open else '▸'} world physics"

    def _debug_text(self) -> str:
        return f"{'▾' if self.debug_open else '▸'} debug draw  X"

    def toggle_debug(self) -> None:
        """Open or close the debug draw's section (its checkboxes); opened, the panel
        scrolls to show them where the column is too short for every row."""
        self.debug_open = not self.debug_open
        self.build()
        if self.debug_open and self.scroller is not None:
            self.scroll_to(self.world_top if not self.world_open else self.debug_top)

    def _checkboxes(self, y: int, width: int) -> int:
        """One checkbox a debug layer at ``y``, its key at the row's right end; each
        click is the ``set_debug_layer`` command. Returns the next row's ``y``."""
        keys = debug.layer_keys()
        on = self.app.debug_layers
        for name in debug.LAYERS:
            box = UICheckBox(pygame.Rect(8, y + 1, 18, 18), debug.CHECKBOX_TEXT[name],
                             manager=self.manager, container=self.content,
                             initial_state=name in on,
                             tool_tip_text=f"{keys[name]}: debug draw: {name} on / off")
            self._label(keys[name], pygame.Rect(width - 8 - 60, y, 60, 20), "@value")
            self.checks[name] = box
            self.actions[box] = (lambda checked, n=name:
                                 self.app.do("set_debug_layer", (n, checked)))
            y += self.CHECK_ROW
        return y + 4

    def _check_label(self, pos) -> str | None:
        """The layer whose checkbox's text is at ``pos`` (px, in sight), or None: a click
        there ticks the box too, as a checkbox's label does."""
        if not self.checks or not self.view_rect().collidepoint(pos):
            return None
        return next((n for n, box in self.checks.items()
                     if box.text_label.get_abs_rect().collidepoint(pos)), None)

    def toggle_world(self) -> None:
        """Open or close the world section; opened, the panel scrolls to show it under
        its button where the column is too short for every row."""
        self.world_open = not self.world_open
        self.build()
        if self.world_open and self.scroller is not None:
            self.scroll_to(self.world_top)

    def _slider(self, row: tuple, y: int, w: int, width: int) -> int:
        """One slider row at ``y`` (its label line, then the slider); returns the next
        row's ``y``. The label spans the row and the value sits over its right end: a
        scrolled panel is 20 px narrower, and "constraint iterations  = -" was cut. A
        setting that needs another has room for "needs air drag" there (its label is
        short): while the other is 0, its value does nothing and that is what it says."""
        key, text, lo_hi, get, act, step = row
        m, c = self.manager, self.content
        self._label(text, pygame.Rect(8, y, w, 20))
        room = 124 if key in SETTINGS and (SETTINGS[key].needs is not None
                                           or SETTINGS[key].ladder) else 84
        value = UILabel(pygame.Rect(width - 8 - room, y, room, 20), "", manager=m,
                        container=c, object_id=pygame_gui.core.ObjectID(object_id="@value"))
        y += 20
        lo, hi = lo_hi
        slider = UIHorizontalSlider(pygame.Rect(8, y, w, 18),
                                    type(lo)(min(max(get(), lo), hi)), lo_hi, manager=m,
                                    container=c, click_increment=step)
        self.sliders[key] = (slider, value, get)
        self.actions[slider] = act
        return y + 22

    def _slider_rows(self) -> dict[str, list[tuple]]:
        """``{"solver": rows, "world": rows}``, each row ``(key, label, (lo, hi), get,
        act(value), click step)``: the solver's are the steps a second, the solver's
        rows of ``settings.SETTINGS`` and the speed; the world's are its world rows (each
        row's label, keys and limits from the one table)."""
        s = self.app.session
        rows: dict[str, list[tuple]] = {
            "solver": [("hz", "steps/s  Alt+= Alt+-", HZ,
                        lambda: round(1.0 / s.policy.nominal_h),
                        lambda v: self.app.do("set_hz", int(v)), 1)],
            "world": []}
        for st in SETTINGS.values():
            rows[st.section].append(self._setting_row(st))
        rows["solver"].append(("speed", "speed  [ ]", SPEED_EXP,
                               lambda: round(math.log2(s.speed)),
                               lambda v: self.app.do("set_speed", 2.0 ** v), 1))
        return rows

    def _setting_row(self, st) -> tuple:
        """A row of ``settings.SETTINGS`` as :meth:`_slider_rows` gives it; a setting
        with a ladder (the link softness) has its slider on the rungs, one a click."""
        s = self.app.session
        keys = " ".join(spec_label(k) for k in (*st.more[:1], *st.less[:1]))
        label = f"{st.label}  {keys}"
        if st.ladder:
            return (st.name, label, (0, len(st.ladder) - 1),
                    lambda: st.rung(s.setting(st.name)),
                    lambda v: self.app.do("set_setting", (st.name, st.ladder[int(v)])), 1)
        lo, hi = st.limits
        lo_hi = (int(lo), int(hi)) if st.integer else (float(lo), float(hi))
        return (st.name, label, lo_hi, lambda: s.setting(st.name),
                lambda v: self.app.do("set_setting", (st.name, v)),
                1 if st.integer else st.step)

    def _value_text(self, st) -> str:
        """A setting's value as its row shows it: "needs air drag" while a setting it
        needs is 0 (the wind without air drag), "no soft links" for the link softness
        of a world without any (``compliant`` is cached: no sweep of a cloth's links
        a frame, but while they are all made rigid)."""
        s = self.app.session
        if st.needs is not None and s.setting(st.needs) == 0:
            return f"needs {SETTINGS[st.needs].label}"
        c = s.world.constraints
        if st.name == "link_softness" and not (
                c.compliant or (c.softness == 0 and c.own_compliance.any())):
            return "no soft links"
        return st.show(s.setting(st.name))

    def _label(self, text: str, rect: pygame.Rect, obj: str = "#label") -> UILabel:
        """A themed label in the panel (``obj``: "#label", "@title" or "@value")."""
        return UILabel(rect, text, manager=self.manager, container=self.content,
                       object_id=pygame_gui.core.ObjectID(object_id=obj))

    def _ghost_option(self) -> str:
        g = self.app.session.ghost
        return GHOST_OFF if g is None else integrator_option(g.integrator.name)

    def _level_name(self) -> str:
        """The open level's name in the picker (:func:`levels.level_label`), worked out
        once per level: ``sync`` asks every frame, the label resolves the file's path."""
        session = self.app.session
        if session.player is not None:
            return "(a replay)"         # the picker said "bridge", the list's first level
        source = session.scene.source
        if self._label_of is None or self._label_of[0] != source:
            from ..levels import level_label
            self._label_of = (source, level_label(source) or "(not a level file)")
        return self._label_of[1]

    def place(self, rect: pygame.Rect) -> None:
        """Move the panel (a resize, or the graph's height changed)."""
        if pygame.Rect(rect) != self.rect or self.manager.window_resolution != self.app.size \
                or (self.mode == "controls" and self.plot_picker != self.app.plot_header()):
            self.rect = pygame.Rect(rect)
            self.build()

    # --- scrolling ------------------------------------------------------------------

    def view_rect(self) -> pygame.Rect:
        """Where the rows are seen (absolute px): the panel less its scroll bar."""
        if self.scroller is None:
            return self.container.get_abs_rect()
        r = self.scroller.get_abs_rect()
        return pygame.Rect(r.x, r.y, r.w - SCROLL_BAR, r.h)

    def scrolled(self) -> int:
        """How far (px) the rows are scrolled up: 0 at the top or when nothing scrolls."""
        if self.scroller is None:
            return 0
        return self.scroller.get_abs_rect().y - \
            self.scroller.get_container().get_abs_rect().y

    def scroll_to(self, offset: int) -> None:
        """Scroll the rows up by ``offset`` px (clamped), as the scroll bar would."""
        sc = self.scroller
        if sc is None or sc.vert_scroll_bar is None:
            return
        total = sc.get_container().get_relative_rect().h
        view = sc.get_abs_rect().h
        offset = max(0, min(int(offset), total - view))
        sc.vert_scroll_bar.set_scroll_from_start_percentage(offset / total)
        sc.update(0.0)
        sc.vert_scroll_bar.has_moved_recently = True
        sc.update(0.0)

    # --- each frame -----------------------------------------------------------------

    def sync(self, force: bool = False) -> None:
        """Show the state the commands left (a hotkey may have changed it)."""
        if (self.app.editor is not None) != (self.mode == "build"):
            self.build()
            return
        if self.mode == "build":
            self._sync_tools(force)
            return
        s = self.app.session
        state = {"integrator": integrator_option(s.integrator), "timestep": s.timestep,
                 "constraints": s.world.config.constraint_method,
                 "ghost": self._ghost_option(), "level": self._level_name()}
        if self.plot_picker is not None:
            state.update(self._plot_state())
            log = "log" if s.plot.log else "lin"
            if self.plot_log.text != log:
                self.plot_log.set_text(log)
        from ..sim.lagrange import CONSTRAINT_METHODS
        texts = {"constraints": lambda m: CONSTRAINT_METHODS[m].label}
        for key, want in state.items():
            if self._shown.get(key) != want and not force:
                if key == "level":
                    self.build()                 # another level: everything anew
                    return
                self._show_choice(key, texts.get(key, lambda v: v)(want))
        self._shown.update(state)
        self.pause.set_text("Run" if s.paused else "Pause")
        ens = "all: on (A)" if s.ensemble is not None else "all (A)"
        if self.ensemble.text != ens:
            self.ensemble.set_text(ens)
        for slider, _, get in self.sliders.values():
            v = get()
            v = int(v) if slider.use_integers_for_value else float(v)
            lo, hi = sorted(slider.value_range)     # past its range (Ctrl+= halving the
            v = min(max(v, lo), hi)                 # step to 480 Hz): shown at its end
            if slider.get_current_value() != v:
                slider.set_current_value(v)
        hz = 1.0 / s.policy.nominal_h
        texts = {"hz": f"{hz:.0f} Hz", "speed": f"x{s.speed:g}",
                 **{n: self._value_text(st) for n, st in SETTINGS.items()}}
        for key, (_, value, _) in self.sliders.items():
            if value.text != texts[key]:
                value.set_text(texts[key])
        for name, box in self.checks.items():
            on = name in self.app.debug_layers
            if box.is_checked != on:
                # Not set_state: it posts a "checked" event, which would be a command.
                box.is_checked = on
                box._update_visual_state()

    def typing(self) -> bool:
        """True while a text field has the keyboard (keys are text, not hotkeys)."""
        from pygame_gui.elements import UITextEntryLine
        return any(isinstance(e, UITextEntryLine) for e in self.manager.get_focus_set()
                   or ())

    def process(self, event) -> bool:
        """Feed one event to the widgets; True if the panel took it (a click on it, or
        one of its own events, which becomes a command)."""
        kind = event.type
        if kind == pygame_gui.UI_CONFIRMATION_DIALOG_CONFIRMED and event.ui_element in \
                self.actions:
            self.actions[event.ui_element]()
            return True
        if kind in (pygame.KEYDOWN, pygame.KEYUP, pygame.TEXTINPUT) and self.typing():
            if self._typed_key(event):
                return True
            self.manager.process_events(event)
            return True
        if kind == pygame_gui.UI_BUTTON_PRESSED and event.ui_element in self.actions:
            self.actions[event.ui_element]()
            return True
        if kind == pygame_gui.UI_DROP_DOWN_MENU_CHANGED and event.ui_element in self.actions:
            self.actions[event.ui_element](event.text)
            return True
        if (kind == pygame_gui.UI_HORIZONTAL_SLIDER_MOVED
                and event.ui_element in self.actions):
            self.actions[event.ui_element](event.value)
            return True
        if kind in (pygame_gui.UI_CHECK_BOX_CHECKED, pygame_gui.UI_CHECK_BOX_UNCHECKED) \
                and event.ui_element in self.actions:
            self.actions[event.ui_element](kind == pygame_gui.UI_CHECK_BOX_CHECKED)
            return True
        if kind == pygame.MOUSEBUTTONDOWN and getattr(event, "button", 0) == 1 and \
                (name := self._check_label(getattr(event, "pos", (-1, -1)))) is not None:
            self.actions[self.checks[name]](not self.checks[name].is_checked)
            return True
        consumed = self.manager.process_events(event)
        if kind in (pygame.MOUSEBUTTONDOWN, pygame.MOUSEBUTTONUP, pygame.MOUSEWHEEL):
            pos = getattr(event, "pos", None)
            if pos is not None and self.covers(pos):
                return True
        return bool(consumed) and kind not in (pygame.KEYDOWN, pygame.KEYUP)

    def covers(self, pos) -> bool:
        """True if ``pos`` (px) is on the panel, a dialog or an open drop-down list."""
        if self.container.get_abs_rect().collidepoint(pos):
            return True
        if self.dialog is not None and self.dialog.alive() and \
                self.dialog.get_abs_rect().collidepoint(pos):
            return True
        return self.manager.get_hovering_any_element()

    def update(self, dt: float) -> None:
        self.sync()
        self._limit_lists()
        self.manager.update(max(dt, 0.0))

    def _limit_lists(self) -> None:
        """In a scrolled panel each closed drop-down's list may open only as far as the
        panel shows (the rest of it would be cut off by the panel's edge); a list
        longer than that scrolls."""
        if self.scroller is None:
            return
        view = self.view_rect()
        menus = [getattr(self, attr) for attr, made in self._menus.items()
                 if made[3]["container"] is self.content]      # not the graph's pickers
        if self.mode == "controls":
            menus.append(self.level)
        for menu in menus:
            if menu.current_state is not menu.menu_states["closed"]:
                continue
            r = menu.get_abs_rect()
            room = r.top - view.top if menu.expand_direction == "up" else \
                view.bottom - r.bottom
            menu.expansion_height_limit = max(room, 24)

    def draw(self, surface: pygame.Surface) -> None:
        self.manager.draw_ui(surface)

    # --- build mode -----------------------------------------------------------------

    #: (key, label, slider range, value -> slider position, position -> value)
    PROPS = (
        ("mass", "mass kg", (-30, 20), lambda v: round(10 * math.log10(v)),
         lambda t: round(10.0 ** (t / 10.0), 6)),
        ("radius", "radius m", (0, 100), lambda v: round(100 * v), lambda t: t / 100.0),
        ("compliance", "compliance m/N", (0, 60),
         lambda v: 0 if v <= 0 else round(10 * (math.log10(v) + 8)) + 1,
         lambda t: 0.0 if t <= 0 else round(10.0 ** ((t - 1) / 10.0 - 8), 12)),
        ("spacing", "spacing m", (2, 50), lambda v: round(100 * v), lambda t: t / 100.0),
        ("thickness", "capsule half-width m", (1, 50), lambda v: round(100 * v),
         lambda t: t / 100.0),
    )
    BUILD_HEIGHT = 4 + 20 + 20 + 28 + 5 * 42 + 28 + 28 + 28 + 4

    def _build_tools(self) -> None:
        from .editor import TOOLS

        self.mode = "build"
        m = self.manager
        c, width = self._frame(self.BUILD_HEIGHT)
        w = width - 16
        y = 4
        ed = self.app.editor
        self.prop_sliders = {}
        self.fields: dict = {}                    # the selection's text fields by key
        self.pinned = self.shear = None

        def label(text, x=8, width=w, obj="#label", h=20):
            return self._label(text, pygame.Rect(x, y, width, h), obj)

        label("build  B: run it · Ctrl+S saves", obj="@title")
        y += 20
        label("tool  Ctrl+B")
        y += 20
        self._menu("tool", list(TOOLS), self.app.tool, pygame.Rect(8, y, w, 24),
                   lambda text: self.app.do("set_tool", text))
        self._shown["tool"] = self.app.tool
        y += 28
        top = y
        self._shown["selection"] = self._selection_key()
        if ed.selection:
            self._build_selection(y, w, width)
        else:
            for key, text, lo_hi, to_pos, _ in self.PROPS:
                label(text, width=w - 84)
                value = UILabel(pygame.Rect(width - 92, y, 84, 20), "", manager=m,
                                container=c,
                                object_id=pygame_gui.core.ObjectID(object_id="@value"))
                y += 20
                lo, hi = lo_hi
                pos = int(min(max(to_pos(getattr(ed.props, key)), lo), hi))
                slider = UIHorizontalSlider(pygame.Rect(8, y, w, 18), pos, lo_hi, manager=m,
                                            container=c, click_increment=1)
                self.prop_sliders[key] = (slider, value)
                self.actions[slider] = (lambda t, k=key: self.app.do("set_prop", (k, t)))
                y += 22
            bw = (w - 6) // 2
            self.pinned = UIButton(pygame.Rect(8, y, bw, 24), "", manager=m, container=c)
            self.shear = UIButton(pygame.Rect(14 + bw, y, bw, 24), "", manager=m,
                                  container=c)
            self.actions[self.pinned] = lambda: self.app.do("toggle_prop", "pinned")
            self.actions[self.shear] = lambda: self.app.do("toggle_prop", "shear")
        y = top + len(self.PROPS) * 42 + 28
        bw3 = (w - 12) // 3
        for k, (text, action, tip) in enumerate((("Undo", "undo", "Ctrl+Z"),
                                                 ("Redo", "redo", "Ctrl+Y"),
                                                 ("Delete", "build_delete", "Del"))):
            b = UIButton(pygame.Rect(8 + k * (bw3 + 6), y, bw3, 24), text, manager=m,
                         container=c, tool_tip_text=tip)
            self.actions[b] = (lambda a=action: self.app.do(a))
        y += 28
        nw = 96
        self.new = UIButton(pygame.Rect(8, y, nw, 24), "New  Ctrl+N", manager=m,
                            container=c, tool_tip_text="an empty level with this level's "
                            "world settings (Ctrl+Z brings this one back)")
        self.actions[self.new] = lambda: self.app.do("new_level")
        save = UIButton(pygame.Rect(14 + nw, y, w - nw - 6, 24), "Save as level...",
                        manager=m, container=c, tool_tip_text="Ctrl+S")
        self.actions[save] = lambda: self.app.do("save_level")
        self.save = save
        self.content_height = y + 28 + 4
        self._sync_tools(True)

    def _selection_key(self) -> tuple:
        """What the selection part of the build panel shows: rebuilt when it changes
        (another selection, or a property of it changed by an edit or an undo)."""
        ed = self.app.editor
        if ed is None or not ed.selection:
            return ()
        return (tuple(ed.selection), repr(ed.spec(ed.selection[-1])))

    def _build_selection(self, y: int, w: int, width: int) -> None:
        """The selection's properties: a text field each (Enter applies it; the level
        schema's limits refuse a value with a message), and its pinned / shear switch."""
        from pygame_gui.elements import UITextEntryLine

        from .editor import properties_of, property_value, show_value

        ed = self.app.editor
        primary = ed.spec(ed.selection[-1])
        many = len(ed.selection)

        def label(text, width=w, obj="#label", h=20):
            return self._label(text, pygame.Rect(8, y, width, h), obj)

        what = primary.get("type", "item")
        head = f"selected: {what}" + (f" +{many - 1} more" if many > 1 else "")
        label(f"{head}  Esc clears", obj="@title")
        y += 22
        rows = properties_of(primary)
        if not rows:
            label("(nothing to set: drag it to move it)")
            y += 22
        for key, text, unit in rows:
            label(f"{text} {unit}".strip(), width=w - 132, h=24)
            entry = UITextEntryLine(pygame.Rect(width - 140, y, 132, 24),
                                    manager=self.manager, container=self.content,
                                    placeholder_text="world's" if key in
                                    ("restitution", "friction") else None)
            entry.set_text(show_value(property_value(primary, key)))
            self.fields[key] = entry
            self.actions[entry] = (lambda k=key, e=entry: self._apply_field(k, e))
            y += 28
        label("Enter applies a value" + (" to all" if many > 1 else ""), h=20)
        y += 22
        from .editor import model_fields
        fields = model_fields(primary)
        bw = (w - 6) // 2
        for k, key in enumerate(("pinned", "shear")):
            if key in fields:
                b = UIButton(pygame.Rect(8 + k * (bw + 6), y, bw, 24), "",
                             manager=self.manager, container=self.content)
                setattr(self, key, b)
                self.actions[b] = (lambda kk=key: self.app.do("toggle_prop", kk))

    def _apply_field(self, key: str, entry) -> None:
        """Enter in a property's field: the value set on the selection; one refused
        (said in the message) leaves the field showing the value it still has."""
        from .editor import property_value, show_value

        self.app.do("build_set", (key, entry.get_text()))
        ed = self.app.editor
        if entry.alive() and ed is not None and ed.selection:
            entry.set_text(show_value(property_value(ed.spec(ed.selection[-1]), key)))

    def _sync_tools(self, force: bool = False) -> None:
        ed = self.app.editor
        if self._shown.get("selection") != self._selection_key():
            self.build()                     # another selection: its own fields
            return
        # Compared with the tool last shown, not with the widget: a click on an option
        # changes the widget a frame before its event sets the tool, and rebuilding on
        # that difference threw the choice away (the drop-down never applied one).
        if self._shown.get("tool") != self.app.tool:
            self._show_choice("tool", self.app.tool)
            self._shown["tool"] = self.app.tool
        for key, _, _, to_pos, _ in self.PROPS:
            if key not in self.prop_sliders:
                continue
            slider, value = self.prop_sliders[key]
            v = getattr(ed.props, key)
            text = f"{v:.3g}"
            if value.text != text:
                value.set_text(text)
            lo, hi = slider.value_range
            pos = int(min(max(to_pos(v), lo), hi))
            if slider.get_current_value() != pos:
                slider.set_current_value(pos)
        primary = ed.spec(ed.selection[-1]) if ed.selection else None
        for button, key in ((self.pinned, "pinned"), (self.shear, "shear")):
            if button is None:
                continue
            on = bool(primary.get(key, False)) if primary is not None else \
                getattr(ed.props, key)
            text = f"{key}: {'on' if on else 'off'}"
            if button.text != text:
                button.set_text(text)
        if self.dialog is not None and self.save_to is not None:
            from .editor import file_stem
            stem = file_stem(self.entry.get_text())
            text = (f"file: {self.app.out_dir / 'levels' / stem}.toml" if stem else
                    "file: (a title names it)")
            if self.save_to.text != text:
                self.save_to.set_text(text)

    def prop_value(self, key: str, position: int) -> float:
        """A property slider's position as the property's value."""
        for k, _, _, _, from_pos in self.PROPS:
            if k == key:
                return from_pos(position)
        raise KeyError(key)

    def open_save_dialog(self, fields: dict | str) -> None:
        """A small window asking for the level's title (which names the file), its
        description and its hint, prefilled with ``fields``."""
        from pygame_gui.elements import UITextEntryLine, UIWindow

        from .editor import TEXT_MAX, TITLE_MAX

        if isinstance(fields, str):
            fields = {"title": fields}
        if (self.app.editor is not None) != (self.mode == "build"):
            self.build()                                  # the mode changed this frame
        W, H = self.app.size
        rect = pygame.Rect(W // 2 - 260, H // 2 - 130, 520, 260)
        win = UIWindow(rect, self.manager, window_display_title="Save as level",
                       resizable=False)
        entries = []
        y = 6
        for key, text, limit in (("title", "title (shown in the window; names the file):",
                                  TITLE_MAX),
                                 ("description", "description (what to look at):", TEXT_MAX),
                                 ("hint", "hint (one line on what to try):", TEXT_MAX)):
            UILabel(pygame.Rect(10, y, 480, 20), text, manager=self.manager, container=win)
            entry = UITextEntryLine(pygame.Rect(10, y + 20, 480, 26), manager=self.manager,
                                    container=win)
            entry.set_text_length_limit(limit)
            entry.set_text(str(fields.get(key, ""))[:limit])
            entries.append(entry)
            y += 50
        self.save_to = UILabel(pygame.Rect(10, y, 480, 20), "", manager=self.manager,
                               container=win)
        y += 24
        ok = UIButton(pygame.Rect(300, y, 90, 28), "Save", manager=self.manager,
                      container=win, tool_tip_text="Enter")
        cancel = UIButton(pygame.Rect(400, y, 90, 28), "Cancel", manager=self.manager,
                          container=win, tool_tip_text="Esc")
        self.actions[ok] = self.dialog_save
        self.actions[cancel] = self.close_dialog
        self.dialog, self.entry = win, entries[0]
        self.dialog_entries = entries
        name = entries[0].get_text()
        self.manager.set_focus_set(entries[0])          # the keyboard types the title
        # The suggestion selected, as a save dialog does: typing replaces it (in the
        # real window "xvfb ramp" typed after Ctrl+S was saved as my_levelxvfb_ramp).
        entries[0].select_range = [0, len(name)]
        entries[0].edit_position = len(name)

    def close_dialog(self) -> None:
        if self.dialog is not None:
            self.dialog.kill()
        self.dialog = None
        self.save_to = None
        self.manager.set_focus_set(None)

    def dialog_save(self) -> None:
        title, description, hint = (e.get_text() for e in self.dialog_entries)
        self.close_dialog()
        self.app.do("save_level", {"title": title, "description": description,
                                   "hint": hint})

    def _typed_key(self, event) -> bool:
        """Enter, Esc and Tab while a text field has the keyboard: save or close the
        dialog, or apply a property; Tab goes to the dialog's next field. True if
        handled."""
        if event.type != pygame.KEYDOWN:
            return False
        focus = [e for e in (self.manager.get_focus_set() or ()) if e in self.actions]
        if event.key in (pygame.K_RETURN, pygame.K_KP_ENTER):
            if self.dialog is not None:
                self.dialog_save()
                return True
            if focus:
                self.manager.set_focus_set(None)
                self.actions[focus[0]]()
                return True
        if event.key == pygame.K_ESCAPE:
            if self.dialog is not None:
                self.close_dialog()
            else:
                self.manager.set_focus_set(None)
            return True
        if event.key == pygame.K_TAB and self.dialog is not None:
            entries = self.dialog_entries
            now = next((k for k, e in enumerate(entries) if e.is_focused), -1)
            self.manager.set_focus_set(entries[(now + 1) % len(entries)])
            return True
        return False

    def confirm_replace(self, path, on_yes) -> None:
        from pygame_gui.windows import UIConfirmationDialog

        if (self.app.editor is not None) != (self.mode == "build"):
            self.build()
        W, H = self.app.size
        d = UIConfirmationDialog(pygame.Rect(W // 2 - 200, H // 2 - 90, 400, 180),
                                 f"{path} exists. Replace it?", manager=self.manager,
                                 window_title="Replace the level?",
                                 action_short_name="Replace")
        self.actions[d] = on_yes
        self.dialog = d

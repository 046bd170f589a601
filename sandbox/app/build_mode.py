"""Build mode's commands: what B, the build tools and the build panel do to the app.

The editing itself (a level table, its history, its selection, the tools' geometry) is
``editor.py``; this is the glue to the window: rebuilding the session's world from the
edited level, explaining refused edits, the save dialog. :class:`BuildMode` methods are
the app's commands of the same names (``App.commands``): the mouse and the panel reach
them through ``App.do`` only, with world coordinates (m), never pixels.

Every edit rebuilds the world from the edited table and is one input of the session's
replay (``["level", TOML]``, see ``sandbox/replay.py``): a replay of a build session
rebuilds the same levels at the same frames and ends bit for bit where the window did.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .editor import (
    TEXT_MAX,
    TITLE_MAX,
    TOOLS,
    Editor,
    file_stem,
    model_fields,
    new_level_table,
    parse_value,
    spec_for,
)


class BuildMode:
    """Build mode's commands, acting on ``app`` (its session, camera, input, panel)."""

    def __init__(self, app) -> None:
        self.app = app

    def _need_editor(self) -> Editor:
        if self.app.editor is None:
            raise RuntimeError("only in build mode (B)")
        return self.app.editor

    def _source_table(self) -> dict | None:
        """The open level as a table (None: the world was not built from a level)."""
        from ..levels import parse_level
        s = self.app.session
        if s.scene.level_text is None:
            return None
        level = parse_level(s.scene.level_text, s.scene.title)
        return level.model_dump(mode="json", exclude_none=True)

    def toggle_build(self) -> None:
        """B: build on this level (paused, at its start), or leave and run what was
        built (R brings it back to how it was built)."""
        if self.app.editor is not None:
            self.app.editor = None
            self.app.input.polygon = []
            self.app.input.pick = None
            self.app.session.paused = False
            self.app.message("build mode off: running what was built (B builds on)")
            return
        self._start(Editor(new_level_table(self._source_table())))
        self.app.message("build mode: pick a tool in the panel (Ctrl+B), left drag places; "
                         "right click selects, right drag moves it or draws a box; Ctrl+Z "
                         "undoes; B runs it", seconds=8.0)

    def _start(self, editor: Editor) -> None:
        self.app.editor = editor
        self.app.input.grabbed = None
        self._rebuild(keep_view=True)

    def new_level(self) -> None:
        """Ctrl+N: an empty level with this level's world settings (gravity, bounds,
        integrator, step...), in build mode; undoable there."""
        ed = self.app.editor
        if ed is not None:
            world = ed.table.get("world")
            self._edit(lambda: ed.new_level(world))
            if not ed.table.get("bodies") and not ed.table.get("shapes"):
                self.app.reset_view()
        else:
            source = self._source_table()
            self._start(Editor(new_level_table(world=source["world"] if source else None)))
            self.app.reset_view()
        self.app.message("a new, empty level: pick a tool in the panel (Ctrl+B) and place "
                         "things; Ctrl+Z brings the old one back", seconds=6.0)

    def _rebuild(self, keep_view: bool = True) -> None:
        """The world built again from the editor's level, paused at its start; the
        session's replay goes on, with the new level as its input."""
        from ..levels import dump_level
        from .session import scene_from_spec
        level = self.app.editor.level()
        s = self.app.session
        ghost = s.ghost
        s.ghost = None
        log = s.log
        s.load_scene(scene_from_spec(level, None, level.name or "new level"))
        if log.broken is None:
            s.log = log                       # one replay: the edit is one of its inputs
            log.record("level", dump_level(level))
        s.scene.source = None
        s.paused = True
        if ghost is not None:
            s.set_ghost(ghost.integrator.name)
        self.app._track_energy()
        if not keep_view:
            self.app.reset_view()

    def _edit(self, fn, what: str = "not built") -> bool:
        """Run an edit of the level; a refused one (LevelError, ValueError) is explained
        (``what``: how the message starts) and changes nothing. True if it was made."""
        from ..levels import LevelError
        try:
            fn()
        except (LevelError, ValueError) as e:
            first = str(e).splitlines()
            said = " ".join(first[1:] or first).removeprefix("the built level: ")
            self.app.message(f"{what}: {said}"[:200], True)
            return False
        self._rebuild()
        return True

    def build_gesture(self, points) -> None:
        """A drag of the current tool finished (``points``: its world points, m): make
        its body or shape."""
        ed = self._need_editor()
        points = [np.asarray(p, float) for p in points]
        a, b = (self.app.camera.to_screen(points[0]), self.app.camera.to_screen(points[-1]))
        tool = self.app.tool
        if tool not in ("particle", "ball", "link") and np.hypot(*(b - a)) < 6.0 and \
                tool not in ("rope",):
            self.app.message(f"{tool}: drag to size it", True)
            return
        radius = self.app.camera.pixels_to_metres(20.0)

        def pick(p):
            return self.app.world.nearest(p, radius)

        def make():
            kind, spec = spec_for(tool, ed.props, points, pick)
            ed.add(kind, spec)
        self._edit(make)

    def close_polygon(self) -> None:
        ed = self._need_editor()
        corners = self.app.input.polygon
        self.app.input.polygon = []
        if len(corners) < 3:
            self.app.message("a polygon needs three corners or more", True)
            return
        self._edit(lambda: ed.add(*spec_for("polygon", ed.props, corners)))

    def cancel(self) -> None:
        """Esc: drop the polygon or drag under way, else clear the selection (build
        mode), else quit."""
        ed = self.app.editor
        inp = self.app.input
        panel = self.app.panel
        if panel is not None and panel.dialog is not None and panel.dialog.alive():
            panel.close_dialog()
            return
        if ed is not None and (inp.polygon or inp.gesture or inp.pick):
            inp.polygon = []
            inp.gesture = None
            inp.pick = None
            return
        if ed is not None and ed.clear_selection():
            self.app.message("selection cleared")
            return
        self.app.quit()

    # --- the selection --------------------------------------------------------------

    def _said_selection(self) -> None:
        ed = self._need_editor()
        if ed.selection:
            self.app.message(f"selected {ed.describe()}: drag to move, Del deletes, the "
                             "panel edits; Esc clears")

    def build_select(self, arg) -> None:
        """``(x, y, radius, add)``: select what is nearest the point (m) within
        ``radius`` m; ``add`` (Shift) adds it or takes it out of the selection."""
        x, y, radius, *rest = arg
        add = bool(rest[0]) if rest else False
        ed = self._need_editor()
        item = ed.select_at(self.app.world, np.array([x, y], float), float(radius), add)
        if item is None and not add:
            self.app.message("nothing there to select (drag on empty space for a box)")
        elif add and item is not None and item not in ed.selection:
            self.app.message(f"took the {ed.spec(item).get('type')} out of the selection")
        else:
            self._said_selection()

    def build_select_box(self, arg) -> None:
        """``(x0, y0, x1, y1, add)``: select every body and shape wholly inside the
        rectangle (m); ``add`` (Shift) keeps what was selected."""
        x0, y0, x1, y1, *rest = arg
        add = bool(rest[0]) if rest else False
        ed = self._need_editor()
        inside = ed.select_box(self.app.world, (x0, y0), (x1, y1), add)
        if not inside and not ed.selection:
            self.app.message("nothing wholly inside the box")
        else:
            self._said_selection()

    def build_move(self, d) -> None:
        """``(dx, dy)``: move the selection by that much (m); undoable."""
        ed = self._need_editor()
        dx, dy = float(d[0]), float(d[1])
        if self._edit(lambda: ed.move((dx, dy)), "not moved"):
            self.app.message(f"moved {ed.describe()} by ({dx:+.2f}, {dy:+.2f}) m")

    def build_set(self, arg) -> None:
        """``(field, text)``: a property of the selection as typed in the panel (mass,
        stiffness, restitution...), checked against the level schema's limits."""
        from ..levels import LevelError
        from .editor import PROPERTIES
        key, text = arg
        ed = self._need_editor()
        label = key.replace("_", " ")

        def change():
            try:
                ed.set_field(key, parse_value(key, text))
            except LevelError as e:      # the schema's sentence on the field, unnamed
                lines = str(e).splitlines()
                said = re.sub(r"^(the built level: )?(bodies|shapes)\[\d+\]\.\w+: ", "",
                              " ".join(lines[1:] or lines))
                raise ValueError(said) from None
        before = ed.table
        if self._edit(change, f"{label} not changed") and ed.table is not before:
            unit = next((u for k, _, u in PROPERTIES if k == key), "")
            shown = f"{str(text).strip()} {unit}".strip() if str(text).strip() else \
                "the world's default"
            self.app.message(f"{label} of {ed.describe()}: {shown}")

    def set_tool(self, name: str) -> None:
        if name not in TOOLS:
            raise ValueError(f"unknown tool {name!r}")
        self.app.tool = name
        self.app.input.polygon = []
        if self.app.editor is None:
            self.toggle_build()

    def cycle_tool(self) -> None:
        self.set_tool(TOOLS[(TOOLS.index(self.app.tool) + 1) % len(TOOLS)])
        self.app.message(f"tool: {self.app.tool}")

    def set_prop(self, arg) -> None:
        """A slider of what the tools make next moved (the selection has its own
        fields in the panel)."""
        key, position = arg
        ed = self._need_editor()
        setattr(ed.props, key, self.app.panel.prop_value(key, position))

    def toggle_prop(self, key: str) -> None:
        """Pinned / shear: of the selection when one has it, else of what is made next."""
        ed = self._need_editor()
        has = [item for item in ed.selection if key in model_fields(ed.spec(item))]
        if has:
            value = not bool(ed.spec(has[-1]).get(key, False))
            self._edit(lambda: ed.set_field(key, value), f"{key} not changed")
            return
        setattr(ed.props, key, not getattr(ed.props, key))

    def undo(self) -> None:
        if self._need_editor().undo():
            self._rebuild()
        else:
            self.app.message("nothing to undo")

    def redo(self) -> None:
        if self._need_editor().redo():
            self._rebuild()
        else:
            self.app.message("nothing to redo")

    def build_delete(self) -> None:
        ed = self._need_editor()
        holder = {}
        self._edit(lambda: holder.setdefault("what", ed.delete()), "nothing deleted")
        if "what" in holder:
            self.app.message(f"deleted {holder['what']} (Ctrl+Z brings it back)")

    # --- saving ---------------------------------------------------------------------

    def save_fields(self) -> dict:
        """What the save dialog starts with: what was saved last in this build, else
        the source level's title, description and hint when editing one (an empty,
        new level has none)."""
        ed = self._need_editor()
        if ed.saved is not None:
            return dict(ed.saved)
        t = ed.table
        return {"title": t.get("name", ""), "description": t.get("description", ""),
                "hint": t.get("hint", "")}

    def save_level(self, fields=None, replace: bool = False) -> Path | None:
        """Ctrl+S: the built level as a TOML file in ``out/levels/``. ``fields``: None
        opens the dialog (title, description, hint); a title alone, or a dict of the
        three. The file is named after the title, never replaces a file without asking,
        is written atomically, and is checked by loading it back: it must build the same
        world, bit for bit."""
        from ..atomic import atomic_write_text
        from ..levels import LevelError, build_world, dump_level, load_level, parse_level
        ed = self._need_editor()
        if fields is None:
            self.app.panel.open_save_dialog(self.save_fields())
            return None
        if isinstance(fields, str):
            fields = {"title": fields}
        title = " ".join(str(fields.get("title", "")).split())[:TITLE_MAX]
        description = " ".join(str(fields.get("description", "")).split())[:TEXT_MAX]
        hint = " ".join(str(fields.get("hint", "")).split())[:TEXT_MAX]
        clean = file_stem(title)
        if not clean:
            raise ValueError("a level's title needs a letter or a digit (the file is "
                             "named after it)")
        path = self.app.out_dir / "levels" / f"{clean}.toml"
        said = {"title": title, "description": description, "hint": hint}
        if path.exists() and not replace:
            self.app.panel.confirm_replace(path, lambda: self.save_level(said, True))
            return None
        # The saved level is the person's, named and described as they wrote it in the
        # dialog (it kept the source level's description and hint, which described
        # another level); the edited table itself is not changed by saving.
        table = dict(ed.table)
        table["name"] = title
        table["description"] = description
        table.pop("hint", None)
        if hint:
            table["hint"] = hint
        w = self.app.camera.view_width
        sx, sy, sw, sh = self.app.safe_area()
        centre = self.app.camera.to_world((sx + sw / 2, sy + sh / 2))
        table["view"] = {"center": [float(centre[0]), float(centre[1])],
                         "width": float(w * sw / self.app.size[0])}
        from ..levels import _validate
        level = _validate(table, str(path))
        if not level.bodies and not level.shapes:
            raise LevelError(path, ["the level is empty: place something before saving it"])
        text = dump_level(level)
        parse_level(text, str(path))         # the loader's every check, before writing
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        ed.saved = said
        # The window now shows the level by the name it was saved under (its title
        # said "new level", or the source level's, after saving).
        scene = self.app.session.scene
        scene.title, scene.description, scene.hint = title, description, hint
        self.app.show_title()
        again = build_world(load_level(path)).state_hash()
        same = again == build_world(level).state_hash()
        from ..program import command_line  # python main.py, or the installed command
        self.app.message(f"saved {title!r} as {path}" + (
            f" (it reopens to the same world, bit for bit; {command_line()} play {path})"
            if same else " - but it does NOT reopen to the same world"), not same, seconds=8)
        return path


# --------------------------------------------------------------------------- drawing

#: Most particles and links the selection's outline and a move's preview draw one by
#: one (a cloth of 40,000 is outlined by its box alone).
DRAW_MAX = 3000
#: Particles up to which each selected one gets a ring (more: the body's box alone).
RINGS_MAX = 40


def draw(app, surf) -> None:
    """Build mode's marks over the scene: the selection (a box around each item, rings
    on a small body's particles, a links body's links), the selection where a drag
    would put it, the box being drawn, the tool's gesture under way."""
    import pygame

    from .editor import shape_box, translated
    from .hud import KEY

    cam, ed, inp = app.camera, app.editor, app.input
    world = app.world
    x = world.particles.x
    pick = inp.pick
    moving = pick is not None and pick["mode"] == "move"
    d = cam.to_world(inp.mouse) - pick["at"] if moving else np.zeros(2)

    def rect_around(lo, hi, pad=4):
        a, b = cam.to_screen(np.asarray(lo, float)), cam.to_screen(np.asarray(hi, float))
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            return
        r = pygame.Rect(int(min(a[0], b[0])) - pad, int(min(a[1], b[1])) - pad,
                        int(abs(b[0] - a[0])) + 2 * pad, int(abs(b[1] - a[1])) + 2 * pad)
        pygame.draw.rect(surf, KEY, r, 1)

    for kind, k in ed.selection:
        if kind == "shapes":
            if k >= len(ed.table.get("shapes", [])):
                continue
            spec = ed.table["shapes"][k]
            if moving:
                spec = translated(spec, d)
                app.renderer.shapes(surf, cam, [spec])
            box = shape_box(spec)
            if box is not None:
                rect_around(*box)
            continue
        if k >= len(world.bodies):
            continue
        body = world.bodies[k]
        cons = body.constraints
        if ed.table["bodies"][k].get("type") == "links":
            c = world.constraints
            for i, j in zip(c.i[cons[:DRAW_MAX]], c.j[cons[:DRAW_MAX]], strict=True):
                a, b = cam.to_screen(x[i] + d), cam.to_screen(x[j] + d)
                if np.isfinite(a).all() and np.isfinite(b).all():
                    pygame.draw.line(surf, KEY, a.astype(int), b.astype(int), 3)
            continue
        idx = body.particles
        if not len(idx):
            continue
        pts = x[idx] + d
        rect_around(pts.min(axis=0), pts.max(axis=0), 6)
        if moving and len(idx) <= DRAW_MAX:
            c = world.constraints
            for i, j in zip(c.i[cons[:DRAW_MAX]], c.j[cons[:DRAW_MAX]], strict=True):
                a, b = cam.to_screen(x[i] + d), cam.to_screen(x[j] + d)
                if np.isfinite(a).all() and np.isfinite(b).all():
                    pygame.draw.line(surf, KEY, a.astype(int), b.astype(int), 1)
        if len(idx) <= RINGS_MAX or (moving and len(idx) <= DRAW_MAX):
            radius = world.particles.radius[idx]
            for q, r in zip(cam.to_screen(pts), radius, strict=True):
                if np.isfinite(q).all():
                    pygame.draw.circle(surf, KEY, (int(q[0]), int(q[1])),
                                       max(int(r * cam.scale) + 3, 5), 1)
    if pick is not None and pick["mode"] == "box":
        rect_around(pick["at"], cam.to_world(inp.mouse), 0)

    pts = list(inp.polygon)
    if inp.gesture is not None:
        pts = inp.gesture + [cam.to_world(inp.mouse)]
    if not pts:
        return
    s = cam.to_screen(np.asarray(pts, float))
    a, b = s[0], s[-1]
    if app.tool in ("box", "cloth"):
        pygame.draw.rect(surf, KEY, pygame.Rect(int(min(a[0], b[0])), int(min(a[1], b[1])),
                                                int(abs(b[0] - a[0])) + 1,
                                                int(abs(b[1] - a[1])) + 1), 1)
    elif app.tool in ("circle", "ball"):
        pygame.draw.circle(surf, KEY, (int(a[0]), int(a[1])),
                           max(int(np.hypot(*(b - a))), 1), 1)
    elif len(s) >= 2:
        closed = app.tool == "polygon" and inp.gesture is None and len(s) >= 3
        pts_i = [(int(q[0]), int(q[1])) for q in s]
        if app.tool == "polygon":
            pts_i.append((int(inp.mouse[0]), int(inp.mouse[1])))
        pygame.draw.lines(surf, KEY, closed, pts_i, 2)
    for q in s[:1]:
        pygame.draw.circle(surf, KEY, (int(q[0]), int(q[1])), 4)

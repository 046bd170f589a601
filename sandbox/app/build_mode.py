"""Build mode's commands: what B, the build tools and the build panel do to the app.

The editing itself (a level table, its history, the tools' geometry) is ``editor.py``;
this is the glue to the window: rebuilding the session's world from the edited level,
explaining refused edits, the save dialog. :class:`BuildMode` methods are the app's
commands of the same names (``App.commands``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .editor import TOOLS, Editor, nearest_item, new_level_table, spec_for


class BuildMode:
    """Build mode's commands, acting on ``app`` (its session, camera, input, panel)."""

    def __init__(self, app) -> None:
        self.app = app

    def _need_editor(self) -> Editor:
        if self.app.editor is None:
            raise RuntimeError("only in build mode (B)")
        return self.app.editor

    def toggle_build(self) -> None:
        """B: build on this level (paused, at its start), or leave and run what was
        built (R brings it back to how it was built)."""
        if self.app.editor is not None:
            self.app.editor = None
            self.app.input.polygon = []
            self.app.session.paused = False
            self.app.message("build mode off: running what was built (B builds on)")
            return
        from ..levels import parse_level
        s = self.app.session
        table = None
        if s.scene.level_text is not None:
            level = parse_level(s.scene.level_text, s.scene.title)
            table = level.model_dump(mode="json", exclude_none=True)
        self.app.editor = Editor(new_level_table(table))
        self.app.input.grabbed = None
        self._rebuild(keep_view=True)
        self.app.message("build mode: pick a tool in the panel (Ctrl+B), left drag places, "
                         "right click selects; Ctrl+Z undoes; B runs it", seconds=8.0)

    def _rebuild(self, keep_view: bool = True) -> None:
        """The world built again from the editor's level, paused at its start."""
        from .session import scene_from_spec
        level = self.app.editor.level()
        ghost = self.app.session.ghost
        self.app.session.ghost = None
        self.app.session.load_scene(scene_from_spec(level, None, "built"))
        self.app.session.scene.source = None
        self.app.session.paused = True
        if ghost is not None:
            self.app.session.set_ghost(ghost.integrator.name)
        self.app._track_energy()
        if not keep_view:
            self.app.reset_view()

    def _edit(self, fn) -> None:
        """Run an edit of the level; a refused one (LevelError) is explained."""
        from ..levels import LevelError
        try:
            fn()
        except (LevelError, ValueError) as e:
            first = str(e).splitlines()
            self.app.message("not built: " + " ".join(first[1:] or first)[:160], True)
            return
        self._rebuild()

    def build_gesture(self, points: list) -> None:
        """A drag of the current tool finished: make its body or shape."""
        ed = self._need_editor()
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
        """Esc: drop the polygon or drag under way (build mode), else quit."""
        if self.app.editor is not None and (self.app.input.polygon or self.app.input.gesture):
            self.app.input.polygon = []
            self.app.input.gesture = None
            return
        self.app.quit()

    def build_select(self, p, radius: float) -> None:
        ed = self._need_editor()
        ed.selected = nearest_item(ed.table, self.app.world, p, radius)
        if ed.selected is None:
            self.app.message("nothing there to select")
        else:
            kind, k = ed.selected
            self.app.message(f"selected {ed.table[kind][k].get('type')} "
                             "(Del removes it; the panel's sliders change it)")

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
        key, position = arg
        ed = self._need_editor()
        value = self.app.panel.prop_value(key, position)
        setattr(ed.props, key, value)
        if ed.selected is not None:
            self._edit(lambda: ed.set_props(**{key: value}))

    def toggle_prop(self, key: str) -> None:
        ed = self._need_editor()
        value = not getattr(ed.props, key)
        setattr(ed.props, key, value)
        if ed.selected is not None:
            field = {"pinned": "pinned", "shear": "shear"}[key]
            self._edit(lambda: ed.set_props(**{field: value}))

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
        self._edit(lambda: holder.setdefault("what", ed.delete()))
        if "what" in holder:
            self.app.message(f"deleted the {holder['what']}")

    def save_level(self, name: str | None = None, replace: bool = False) -> Path | None:
        """Ctrl+S: the built level as a TOML file in ``out/levels/`` (asks for a name;
        never replaces a file without asking). The file is checked by loading it back:
        it must build the same world, bit for bit."""
        import re

        from ..atomic import atomic_write_text
        from ..levels import build_world, dump_level, load_level
        ed = self._need_editor()
        if name is None:
            self.app.panel.open_save_dialog("my_level")
            return None
        clean = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:60]
        if not clean:
            raise ValueError("a level's name needs a letter or a digit")
        path = self.app.out_dir / "levels" / f"{clean}.toml"
        if path.exists() and not replace:
            self.app.panel.confirm_replace(path, lambda: self.save_level(clean, True))
            return None
        table = dict(ed.table)
        # The saved level is the person's, named as they named it; the source level's
        # description and hint described another level.
        source = table.get("name")
        table["name"] = name.strip()[:200] or clean
        table["description"] = (f"Built in the sandbox from {source}." if source
                                else "Built in the sandbox.")
        table.pop("hint", None)
        w = self.app.camera.view_width
        sx, sy, sw, sh = self.app.safe_area()
        centre = self.app.camera.to_world((sx + sw / 2, sy + sh / 2))
        table["view"] = {"center": [float(centre[0]), float(centre[1])],
                         "width": float(w * sw / self.app.size[0])}
        ed.table = table
        level = ed.level()
        text = dump_level(level)
        from ..levels import LevelError, parse_level
        parse_level(text, str(path))         # the loader's every check, before writing
        if not level.bodies and not level.shapes:
            raise LevelError(path, ["the level is empty: place something before saving it"])
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        again = build_world(load_level(path)).state_hash()
        same = again == build_world(level).state_hash()
        from ..cli import command_line  # python main.py, or the installed command
        self.app.message(f"saved {path}" + (" (it reopens to the same world, bit for bit; "
                         f"{command_line()} play {path})" if same else
                     " - but it does NOT reopen to the same world"), not same, seconds=8)
        return path


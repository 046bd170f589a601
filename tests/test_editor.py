"""Build mode's editor, headless (issue 37, "an editor that edits"): selecting by box,
moving, deleting and undoing, properties within the level schema's limits, a new empty
level. No window: the Editor works on level tables and the worlds built from them."""

from __future__ import annotations

import copy
import typing

import numpy as np
import pytest

from sandbox.app.editor import (
    POINT_FIELDS,
    POINT_LIST_FIELDS,
    Editor,
    item_model,
    items_in_box,
    new_level_table,
    parse_value,
    properties_of,
)
from sandbox.levels import (
    BODY_TYPES,
    SHAPE_TYPES,
    LevelError,
    Vec2,
    build_world,
    find_level,
    level_names,
    load_level,
)


def table_of(name: str) -> dict:
    return load_level(find_level(name)).model_dump(mode="json", exclude_none=True)


def scene() -> dict:
    """Three free particles, a link between the first two, a rope, a box and a circle."""
    t = new_level_table()
    t["bodies"] = [
        {"type": "particles", "points": [[-2.0, 1.0]], "mass": 0.1, "radius": 0.1},
        {"type": "particles", "points": [[-1.0, 1.0]], "mass": 0.2, "radius": 0.1},
        {"type": "links", "pairs": [[0, 1]], "compliance": 0.0, "kind": "stick"},
        {"type": "chain", "points": [[1.0, 2.0], [1.5, 2.0], [2.0, 2.0]], "pin": "start"},
        {"type": "particles", "points": [[3.0, 0.5]], "pinned": True},
    ]
    t["shapes"] = [{"type": "box", "min": [-1.0, -2.0], "max": [1.0, -1.5]},
                   {"type": "circle", "center": [3.0, -1.0], "radius": 0.5}]
    return t


def world_of(ed: Editor):
    return build_world(ed.level())


# ------------------------------------------------------------------------- selecting

def test_a_box_selects_exactly_the_items_wholly_inside_it():
    ed = Editor(scene())
    w = world_of(ed)
    # Around both free particles (and so the link between them), not the rope.
    assert items_in_box(ed.table, w, (-2.5, 0.5), (-0.5, 1.5)) == [
        ("bodies", 0), ("bodies", 1), ("bodies", 2)]
    # One particle only: the link is half outside, so not selected.
    assert items_in_box(ed.table, w, (-2.5, 0.5), (-1.5, 1.5)) == [("bodies", 0)]
    # Half the rope is not the rope; all of it is.
    assert items_in_box(ed.table, w, (0.5, 1.5), (1.7, 2.5)) == []
    assert items_in_box(ed.table, w, (2.1, 2.5), (0.9, 1.5)) == [("bodies", 3)]  # any corners
    # A shape by its bounding box: the circle's reaches 2.5..3.5.
    assert items_in_box(ed.table, w, (2.4, -1.6), (3.6, -0.4)) == [("shapes", 1)]
    assert items_in_box(ed.table, w, (2.6, -1.6), (3.6, -0.4)) == []
    # Everything.
    assert len(items_in_box(ed.table, w, (-10, -10), (10, 10))) == 7


def test_shift_adds_to_and_takes_out_of_the_selection():
    ed = Editor(scene())
    w = world_of(ed)
    assert ed.select_at(w, np.array([-2.0, 1.0]), 0.2) == ("bodies", 0)
    assert ed.selection == [("bodies", 0)]
    ed.select_at(w, np.array([3.0, -1.0]), 0.2, add=True)
    assert ed.selection == [("bodies", 0), ("shapes", 1)] and ed.selected == ("shapes", 1)
    ed.select_at(w, np.array([-2.0, 1.0]), 0.2, add=True)        # again: taken out
    assert ed.selection == [("shapes", 1)]
    ed.select_box(w, (-2.5, 0.5), (-1.5, 1.5), add=True)
    assert ed.selection == [("shapes", 1), ("bodies", 0)]
    assert ed.select_at(w, np.array([9.0, 9.0]), 0.2) is None and ed.selection == []
    ed.select_box(w, (-10, -10), (10, 10))
    assert ed.clear_selection() and ed.selection == [] and not ed.clear_selection()


# ---------------------------------------------------------------------------- moving

def test_a_move_shifts_every_point_of_a_body_by_the_drag_pinned_ones_too():
    ed = Editor(scene())
    before = world_of(ed).particles.x.copy()
    ed.select_box(world_of(ed), (0.9, 1.9), (2.1, 2.1))             # the rope
    d = np.array([0.75, -0.5])
    ed.move(d)
    after = world_of(ed)
    rope = after.bodies[3].particles
    assert np.allclose(after.particles.x[rope] - before[rope], d, atol=1e-12)
    assert after.particles.inv_mass[rope[0]] == 0                    # still pinned
    others = np.setdiff1d(np.arange(after.n), rope)
    assert np.array_equal(after.particles.x[others], before[others])  # nothing else moved
    assert ed.selection == [("bodies", 3)]                           # still selected


def test_moving_a_link_moves_the_particles_it_joins_and_shapes_move_too():
    ed = Editor(scene())
    before = world_of(ed).particles.x.copy()
    ed.selection = [("bodies", 2), ("shapes", 0)]
    ed.move((1.0, 0.25))
    w = world_of(ed)
    assert np.allclose(w.particles.x[:2] - before[:2], [1.0, 0.25])
    assert np.array_equal(w.particles.x[2:], before[2:])
    assert ed.table["shapes"][0] == {"type": "box", "min": [0.0, -1.75],
                                     "max": [2.0, -1.25]}
    c = w.constraints
    assert c.rest[0] == pytest.approx(1.0)                            # the link kept its length


@pytest.mark.parametrize("name", level_names())
def test_every_body_of_every_level_moves_as_a_whole(name):
    """Each body of each shipped level, moved alone, moves every particle it builds by
    the move and no other; each shape's bounding box moves by it."""
    from sandbox.app.editor import shape_box

    ed = Editor(table_of(name))
    w0 = build_world(ed.level())
    d = np.array([0.5, -0.25])
    for k, body in enumerate(ed.table["bodies"]):
        if body["type"] == "links":
            continue
        moved = copy.deepcopy(ed)
        moved.selection = [("bodies", k)]
        moved.move(d)
        w = build_world(moved.level())
        idx = w0.bodies[k].particles
        assert np.allclose(w.particles.x[idx] - w0.particles.x[idx], d, atol=1e-9), body
        rest = np.setdiff1d(np.arange(w0.n), idx)
        assert np.array_equal(w.particles.x[rest], w0.particles.x[rest])
    for k, shape in enumerate(ed.table.get("shapes", [])):
        moved = copy.deepcopy(ed)
        moved.selection = [("shapes", k)]
        moved.move(d)
        lo0, hi0 = shape_box(shape)
        lo, hi = shape_box(moved.table["shapes"][k])
        assert np.allclose(lo - lo0, d) and np.allclose(hi - hi0, d)


def _holds(ann, target) -> bool:
    """``ann`` is ``target`` or has it inside (Optional, Annotated, ...)."""
    if ann == target:
        return True
    inner = typing.get_args(ann)
    if typing.get_origin(ann) is typing.Annotated:
        inner = inner[:1]
    return any(_holds(a, target) for a in inner if not isinstance(a, (int, float, str)))


def test_every_position_field_of_the_schema_moves():
    """A body or shape type with a position field the move does not know would stay
    behind when moved: every ``Vec2`` field (or list of them) is in POINT_FIELDS."""
    point = typing.get_args(Vec2)[0]               # tuple[Coordinate, Coordinate]
    found = set()
    for registry in (BODY_TYPES, SHAPE_TYPES):
        for name, model in registry.items():
            for key, f in model.model_fields.items():
                if not _holds(f.annotation, point):
                    continue
                found.add(key)
                listed = typing.get_origin(f.annotation) is list
                assert key in (POINT_LIST_FIELDS if listed else POINT_FIELDS), \
                    f"{name}.{key}"
    assert {"pivot", "points", "center", "min"} <= found     # the check sees them


# -------------------------------------------------------------------------- deleting

def test_delete_and_undo_round_trip_the_table_exactly():
    ed = Editor(scene())
    original = copy.deepcopy(ed.table)
    ed.selection = [("bodies", 0), ("shapes", 1), ("bodies", 3)]
    said = ed.delete()
    assert said == "3 items"
    # The link used particle 0: gone with it.
    assert [b["type"] for b in ed.table["bodies"]] == ["particles", "particles"]
    assert ed.table["shapes"] == [original["shapes"][0]]
    assert ed.selection == []
    ed.undo()
    assert ed.table == original
    ed.redo()
    assert len(ed.table["bodies"]) == 2
    ed.undo()
    assert ed.table == original


def test_deleting_renumbers_the_links_of_the_bodies_left():
    t = scene()
    t["bodies"].append({"type": "links", "pairs": [[1, 5], [3, 4]]})   # particle -> pin
    ed = Editor(t)
    w0 = world_of(ed)
    ed.selection = [("bodies", 0)]                  # particle 0: every index after it -1
    ed.delete()
    links = [b for b in ed.table["bodies"] if b["type"] == "links"]
    assert links == [{"type": "links", "pairs": [[0, 4], [2, 3]]}]
    w = world_of(ed)
    # The same particles are still joined: by position.
    for (i0, j0), (i, j) in zip([[1, 5], [3, 4]], links[0]["pairs"], strict=True):
        assert np.array_equal(w.particles.x[[i, j]], w0.particles.x[[i0, j0]])


def test_delete_with_nothing_selected_says_so():
    ed = Editor(scene())
    with pytest.raises(ValueError, match="nothing selected"):
        ed.delete()
    with pytest.raises(ValueError, match="nothing selected"):
        ed.move((1.0, 0.0))


# ------------------------------------------------------------------------ properties

def test_properties_are_set_within_the_schemas_limits_or_refused_with_a_message():
    ed = Editor(scene())
    ed.selection = [("bodies", 1)]
    ed.set_field("mass", parse_value("mass", " 0.5 "))
    assert ed.table["bodies"][1]["mass"] == 0.5
    assert world_of(ed).particles.mass[1] == 0.5
    table = copy.deepcopy(ed.table)
    with pytest.raises(LevelError, match=r"bodies\[1\]\.mass: expected a number >= 1e-06, "
                                         "got -1"):
        ed.set_field("mass", parse_value("mass", "-1"))
    with pytest.raises(ValueError, match="mass: expected a number, got 'heavy'"):
        parse_value("mass", "heavy")
    with pytest.raises(LevelError, match="finite"):
        ed.set_field("mass", parse_value("mass", "nan"))
    assert ed.table == table                          # nothing changed by the refusals
    ed.selection = [("shapes", 0)]
    with pytest.raises(LevelError, match=r"restitution: expected a number <= 1, got 1\.5"):
        ed.set_field("restitution", 1.5)
    ed.set_field("restitution", 0.9)
    ed.set_field("friction", 0.0)
    assert build_world(ed.level()).shapes[0]["restitution"] == 0.9
    ed.set_field("restitution", parse_value("restitution", ""))   # the world's again
    assert "restitution" not in ed.table["shapes"][0]
    with pytest.raises(ValueError, match="has no mass"):
        ed.set_field("mass", 1.0)
    ed.undo()
    assert ed.table["shapes"][0]["restitution"] == 0.9


def test_a_spring_takes_its_stiffness_and_a_many_selection_takes_it_all():
    t = new_level_table()
    t["bodies"] = [{"type": "spring_chain", "start": [0, 2], "end": [1, 2], "segments": 3},
                   {"type": "spring_pendulum", "pivot": [2, 2]},
                   {"type": "double_pendulum", "pivot": [-2, 2]}]
    ed = Editor(t)
    assert [k for k, _, _ in properties_of(t["bodies"][0])] == [
        "mass", "stiffness", "damping", "radius"]
    ed.selection = [("bodies", 0), ("bodies", 1)]
    assert ed.set_field("stiffness", 250.0) == [("bodies", 0), ("bodies", 1)]
    w = world_of(ed)
    assert np.all(w.springs.k == 250.0)
    with pytest.raises(LevelError, match="stiffness"):
        ed.set_field("stiffness", 0.0)                 # a spring needs k > 0
    ed.selection = [("bodies", 2)]
    ed.set_field("masses", parse_value("masses", "1, 3"))
    assert list(world_of(ed).particles.mass[-2:]) == [1.0, 3.0]
    with pytest.raises(ValueError, match="two numbers"):
        parse_value("masses", "1")


def test_every_property_row_is_a_field_of_its_type():
    for registry in (BODY_TYPES, SHAPE_TYPES):
        for name in registry:
            for key, _, _ in properties_of({"type": name}):
                assert key in item_model({"type": name}).model_fields


# ------------------------------------------------------------------------- new level

def test_a_new_level_is_empty_with_the_worlds_settings_and_undoable():
    t = table_of("playground")
    ed = Editor(t)
    ed.new_level(t["world"])
    assert ed.table["bodies"] == [] and ed.table["shapes"] == []
    assert ed.table["world"] == t["world"] and ed.table["name"] == ""
    assert ed.level().world.bounds == (-6.0, -1.5, 6.0, 8.0)
    assert build_world(ed.level()).n == 0
    ed.undo()
    assert ed.table == t
    fresh = new_level_table()                      # no level to take them from: defaults
    assert fresh["world"]["bounds"] == [-6.0, -3.0, 6.0, 6.0] and fresh["bodies"] == []

"""The live energy graph: geometry of its layout, the drift's unit, the time axis."""

import itertools
import math

import numpy as np
import pygame
import pytest

from sandbox.app.graph import GAP, EnergyGraph, nice_step, tick_values
from sandbox.app.hud import Fonts

SENTINEL = (1, 2, 3)
SIZES = [(262, 150), (300, 158), (480, 150), (560, 220), (700, 260)]


@pytest.fixture(scope="module")
def fonts():
    pygame.font.init()
    return Fonts()


def busy_graph(n=900, every=7, ghost=True) -> EnergyGraph:
    """A full buffer, a marker every ``every`` samples near the end, a ghost line."""
    g = EnergyGraph(600)
    t = 2.5
    for k in range(n):
        t += (1 + 0.6 * math.sin(k / 40)) / 60          # uneven sample times
        if k > n - 300 and k % every == 0:
            g.new_segment(f"ghost: Time-Corrected Verlet {k}" if k % 2 else f"fixed h {k}")
        kin = 10 + 8 * math.sin(3 * t)
        g.add(t, kin, -kin + 0.01 * k, 0.01 * k, 0.02 * k if ghost else math.nan)
    return g


class RecordingSurface(pygame.Surface):
    """A Surface that records the rectangles its ``blit`` writes to."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.blits: list[pygame.Rect] = []

    def blit(self, source, dest, area=None, special_flags=0):
        w, h = source.get_size()
        if area is not None:
            area = pygame.Rect(area)
            w, h = min(w, area.w), min(h, area.h)
        self.blits.append(pygame.Rect(dest[0], dest[1], w, h))
        return super().blit(source, dest, area, special_flags)


def _plots(lay):
    return [lay.plot, lay.dplot]


def _assert_rows_disjoint(lay):
    rows = [r for r, _, _ in lay.legend] + [lay.plot, lay.dplot]
    rows += [r for r in (lay.strip, lay.axis) if r is not None]
    rows += [r for r, _, _ in lay.caption]
    for r in rows:
        assert lay.rect.contains(r), (r, lay.rect)
    for a, b in itertools.combinations(rows, 2):
        assert not a.colliderect(b), (a, b)


@pytest.mark.parametrize("size", SIZES)
def test_draw_changes_no_pixel_outside_its_rect_and_restores_the_clip(fonts, size):
    surf = pygame.Surface((900, 500))
    surf.fill(SENTINEL)
    before_clip = pygame.Rect(5, 5, 880, 480)
    surf.set_clip(before_clip)
    rect = pygame.Rect(40, 30, *size)
    busy_graph().draw(surf, rect, fonts)
    assert surf.get_clip() == before_clip
    px = pygame.surfarray.array3d(surf)
    outside = np.ones(px.shape[:2], bool)
    outside[rect.left:rect.right, rect.top:rect.bottom] = False
    changed = np.any(px != SENTINEL, axis=2)
    assert not changed[outside].any(), np.argwhere(changed & outside)[:5]
    assert changed[~outside].mean() > 0.5                 # the panel itself was drawn


def test_draw_at_the_surface_edge_and_when_empty(fonts):
    surf = pygame.Surface((300, 120))
    surf.fill(SENTINEL)
    rect = pygame.Rect(200, 60, 262, 150)                 # runs off the surface
    lay = EnergyGraph().draw(surf, rect, fonts)            # no samples yet
    assert [t for _, t, _ in lay.legend] == ["energy: no samples yet"]
    px = pygame.surfarray.array3d(surf)
    assert not np.any(px[:200] != SENTINEL) and not np.any(px[:, :60] != SENTINEL)


@pytest.mark.parametrize("size", SIZES)
def test_every_text_blit_is_inside_the_rect_and_off_the_plots(fonts, size):
    g = busy_graph()
    surf = RecordingSurface((900, 500))
    rect = pygame.Rect(30, 20, *size)
    lay = g.draw(surf, rect, fonts)
    panel, *texts = surf.blits
    assert panel == rect
    assert len(texts) >= 5                       # legend, caption, a label, time labels
    allowed = lay.text_rects()
    for r in texts:
        assert rect.contains(r), (r, rect)
        assert not any(r.colliderect(p) for p in _plots(lay)), (r, lay.plot, lay.dplot)
        assert r in allowed
    _assert_rows_disjoint(lay)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("every", [1, 3, 20])
def test_marker_labels_never_overlap_each_other_nor_the_plots(fonts, size, every):
    g = busy_graph(every=every)
    lay = g.layout(pygame.Rect(0, 0, *size), fonts)
    n_markers = len(g.markers)
    assert n_markers >= 10 and len(lay.marker_xs) == n_markers
    assert lay.labels, "the newest marker is always labelled"
    newest = g.markers[-1][1]
    text = lay.labels[0][1]
    assert text == newest or (text.endswith("…") and newest.startswith(text[:-1]))
    rects = [r for r, _, _ in lay.labels] + ([lay.more[0]] if lay.more else [])
    for r in rects:
        assert lay.strip.contains(r)
        assert not any(r.colliderect(p) for p in _plots(lay))
    for a, b in itertools.combinations(rects, 2):
        assert not a.inflate(2 * GAP - 2, 0).colliderect(b), (a, b)
    # The labelled markers are the newest ones, in order; the note counts the rest.
    assert [x for _, _, x in lay.labels] == lay.marker_xs[::-1][:len(lay.labels)]
    if lay.more:
        assert lay.more[1].startswith(f"+{n_markers - len(lay.labels)}")


def test_labels_of_far_apart_markers_are_all_shown(fonts):
    g = EnergyGraph(600)
    for k in range(600):
        if k in (100, 300, 500):
            g.new_segment(f"m{k}")
        g.add(k / 60, 1.0, -2.0, -1.0)
    lay = g.layout(pygame.Rect(0, 0, 560, 220), fonts)
    assert [t for _, t, _ in lay.labels] == ["m500", "m300", "m100"] and lay.more is None


@pytest.mark.parametrize("size", SIZES)
def test_time_ticks_are_nice_numbers_inside_the_visible_time(fonts, size):
    g = busy_graph()
    lay = g.layout(pygame.Rect(0, 0, *size), fonts)
    t = g.times()
    step = lay.step
    mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-9, step
    values = [v for v, _, _, _ in lay.ticks]
    assert len(values) >= 2
    assert all(t[0] <= v <= t[-1] for v in values)
    assert all(abs(v / step - round(v / step)) < 1e-6 for v in values)
    xs = [x for _, x, _, _ in lay.ticks]
    assert xs == sorted(xs) and all(lay.plot.left <= x <= lay.plot.right for x in xs)
    labelled = [(v, r, s) for v, _, r, s in lay.ticks if r is not None]
    assert len(labelled) >= 2
    for v, r, s in labelled:
        assert lay.axis.contains(r) and s.endswith(" s") and math.isclose(float(s[:-2]), v)
    rects = [r for _, r, _ in labelled]
    for a, b in itertools.combinations(rects, 2):
        assert not a.colliderect(b)
    # The tick at value v sits where the samples reach time v.
    for v, x, _, _ in lay.ticks:
        k = int(np.searchsorted(t, v))
        assert abs(x - lay.xs[k]) <= lay.plot.w / g.capacity + 1


def test_time_ticks_only_over_the_newest_run_when_time_goes_back(fonts):
    g = EnergyGraph(600)
    for k in range(300):
        g.add(50 + k / 60, 1, -2, -1)
    g.new_segment("loaded")
    for k in range(200):
        g.add(10 + k / 60, 1, -2, -1)
    lay = g.layout(pygame.Rect(0, 0, 560, 220), fonts)
    values = [v for v, _, _, _ in lay.ticks]
    assert values and all(10 <= v <= 10 + 199 / 60 for v in values)


def test_nice_step_and_tick_values():
    assert [nice_step(x) for x in (0.3, 0.7, 1.0, 1.01, 3e-4, 12, 50)] == \
        pytest.approx([0.5, 1, 1, 2, 5e-4, 20, 50])
    assert math.isnan(nice_step(0)) and math.isnan(nice_step(math.inf))
    assert tick_values(0.15, 1.02, 0.2) == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert tick_values(2.0, 2.0, 0.5) == pytest.approx([2.0])


def test_drift_is_in_joules_when_the_total_is_near_zero():
    g = EnergyGraph()
    g.add(0.0, 5.0, -4.999, 0.001)          # |E0| = 0.001 << K0 + |U0| ~ 10: a bridge
    g.add(0.1, 5.0, -4.9867, 0.0133)
    assert g.relative is False
    assert g.drift() == pytest.approx(0.0123)
    assert g.drift_text() == "+0.0123 J"
    g.add(0.2, 5.0, -5.2, -0.2)
    assert g.drift_text() == "-0.201 J"
    g.add(0.3, 9e4, -3e4, 6e4)
    assert g.drift_text() == "+60 kJ"


def test_drift_is_relative_for_a_pendulum_and_re_referenced_by_a_segment():
    g = EnergyGraph()
    g.add(0.0, 0.0, -10.0, -10.0)           # at rest at the top of its swing
    g.add(1.0, 2.0, -12.1, -10.1)
    assert g.relative is True
    assert g.drift() == pytest.approx(-0.01)
    assert g.drift_text() == "-1%"
    g.new_segment("Runge-Kutta 4")
    assert math.isnan(g.drift()) and g.drift_text() == "—"
    g.add(2.0, 1.0, -21.0, -20.0)
    g.add(2.1, 1.0, -20.5, -19.5)
    assert g.drift() == pytest.approx(0.025) and g.drift_text() == "+2.5%"


def test_the_rule_threshold_and_the_switch_to_joules():
    g = EnergyGraph()
    g.add(0.0, 10.0, -9.0, 1.0)             # |E0| / (K0 + |U0|) = 1/19 > 0.05
    assert g.relative is True
    g.new_segment("x")
    g.add(0.1, 10.0, -9.1, 0.9)             # 0.9 / 19.1 < 0.05
    assert g.relative is False
    g.allow_percent = False
    g.new_segment("y")
    g.add(0.2, 0.0, -10.0, -10.0)
    assert g.relative is False and g.drift_text() == "+0 J"


def test_caption_shows_the_drift_text(fonts):
    g = EnergyGraph()
    g.add(0.0, 5.0, -4.999, 0.001)
    g.add(0.1, 5.0, -4.9867, 0.0133)
    lay = g.layout(pygame.Rect(0, 0, 560, 220), fonts)
    assert "+0.0123 J" in lay.caption[0][1] and "start" in lay.caption[0][1]


def test_ring_buffer_keeps_the_newest_in_order_and_prunes_markers():
    g = EnergyGraph(capacity=10)
    g.new_segment("old")
    for k in range(25):
        g.add(k * 0.5, k, -k, 0.0, float(k))
        if k == 20:
            g.new_segment("new")
    assert g.times() == pytest.approx(np.arange(15, 25) * 0.5)
    assert g.ordered()[:, 3] == pytest.approx(np.arange(15, 25))
    assert [s for _, s in g.markers] == ["new"]


def test_a_slider_dragged_through_many_values_leaves_one_marker():
    """Dragging the steps/s slider set a new rate every frame: 40 markers, "+40 more".
    Changes within MERGE samples of the last marker replace it; a later one adds one."""
    g = EnergyGraph()
    g.add(0.0, 1.0, 0.0, 1.0)
    for k in range(40):
        g.new_segment(f"{60 + k} Hz", merge=True)
        g.add(0.01 * (k + 1), 1.0, 0.0, 1.0)
    assert [label for _, label in g.markers][-1] == "99 Hz"
    assert len(g.markers) <= 40 // EnergyGraph.MERGE + 1
    for k in range(EnergyGraph.MERGE):
        g.add(1.0 + 0.01 * k, 1.0, 0.0, 1.0)
    g.new_segment("Velocity Verlet")
    assert [label for _, label in g.markers][-2:] == ["99 Hz", "Velocity Verlet"]


# --------------------------------------------------------------------------- any quantity

PLOT_SIZES = [(300, 120), (300, 158), (300, 260), (552, 180)]


def busy_plot(log: bool = False, time: bool = True):
    """A quantity graph with the world's and the ghost's curves, a segment, zeros."""
    from sandbox.app.graph import PlotSpec, QuantityGraph
    g = QuantityGraph(600)
    for k in range(700):
        if k == 500:
            g.new_segment("RK4")
        t = k / 60
        for key, phase in (("world", 0.0), ("ghost", 0.3)):
            y = 0.0 if k % 50 == 0 else 1e-3 * math.exp(k / 200) * (1 + math.sin(t + phase))
            g.add_sample(key, t, math.cos(t + phase), y, source=1)
    spec = PlotSpec("E drift against time (U, J)", "E - E0, since the marker",
                    "time (s)" if time else "x (m)", log=log, time=time,
                    colours={"world": (255, 205, 90), "ghost": (255, 80, 220)},
                    names={"world": "world", "ghost": "ghost RK4"}, unit="J")
    return g, spec


@pytest.mark.parametrize("size", PLOT_SIZES)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("time", [True, False])
@pytest.mark.parametrize("picker", [False, True])
def test_the_quantity_graph_writes_only_inside_its_rect_and_no_text_on_the_plot(
        fonts, size, log, time, picker):
    g, spec = busy_plot(log, time)
    surf = RecordingSurface((900, 500))
    surf.fill(SENTINEL)
    rect = pygame.Rect(40, 30, *size)
    lay = g.draw(surf, rect, fonts, spec, picker)
    panel, *texts = surf.blits
    assert panel == rect
    allowed = lay.text_rects()
    for r in texts:
        assert rect.contains(r), (r, rect)
        assert not r.colliderect(lay.plot), (r, lay.plot)
        assert r in allowed
    if picker:                                # the top row is left to the pickers
        assert lay.title is None and not any(r.colliderect(lay.header) for r in texts)
    else:
        assert lay.title[1] == spec.title
    assert len([r for *_, r, _ in lay.yticks if r is not None]) >= 2
    assert len([r for *_, r, _ in lay.xticks if r is not None]) >= 1
    assert lay.plot.h >= 40 and lay.xlabel[1] == spec.xlabel
    words = lay.ylabel[1]
    assert words.startswith(spec.ylabel + " (J)") or words.startswith("E - E0… (J)")
    if log:                                   # said whole, however narrow the graph
        assert lay.skipped > 0 and words.endswith(f" (J) · log |y|, {lay.skipped} zeros out")
        assert all(float(v).is_integer() for v, *_ in lay.yticks)
    else:
        assert "log" not in words and lay.skipped == 0
    px = pygame.surfarray.array3d(surf)
    outside = np.ones(px.shape[:2], bool)
    outside[rect.left:rect.right, rect.top:rect.bottom] = False
    assert not np.any(px != SENTINEL, axis=2)[outside].any()


def test_the_quantity_graph_scales_to_the_current_segment_and_draws_its_curves(fonts):
    g, spec = busy_plot()
    lay = g.layout(pygame.Rect(0, 0, 300, 260), fonts, spec)
    seg = np.concatenate([s[2][s[4]] for s in lay.series.values()])
    lo, hi = lay.yrange
    assert lo <= seg.min() and seg.max() <= hi < 1.5 * seg.max()
    t = np.concatenate([s[0] for s in lay.series.values()])
    assert lay.xrange == (t.min(), t.max())
    assert [text for _, text, _ in lay.legend][0].startswith("world ")
    surf = pygame.Surface((300, 260))
    surf.fill((0, 0, 0))
    g.draw(surf, pygame.Rect(0, 0, 300, 260), fonts, spec)
    inside = pygame.surfarray.array3d(surf)[lay.plot.left + 1:lay.plot.right - 1,
                                            lay.plot.top + 1:lay.plot.bottom - 1]
    for colour in spec.colours.values():         # each curve is on the plot
        assert np.all(inside == colour, axis=2).sum() > 100


def test_a_note_instead_of_curves_when_the_quantity_does_not_apply(fonts):
    g, spec = busy_plot()
    spec.note = "truth error: needs every integrator side by side (A)"
    lay = g.layout(pygame.Rect(0, 0, 300, 140), fonts, spec)
    words = " ".join(t for _, t, _ in lay.note)
    assert words == spec.note and all(lay.plot.contains(r) for r, _, _ in lay.note)
    assert lay.yticks == [] and lay.xticks == []              # no scale with no curve


def test_the_legend_names_each_curve_by_its_newest_value_or_says_how_many_are_left_out(
        fonts):
    from sandbox.app.graph import PlotSpec, QuantityGraph
    g = QuantityGraph(600)
    names = {f"k{i}": f"integrator number {i}" for i in range(9)}
    for k in range(20):
        for i, key in enumerate(names):
            g.add_sample(key, k / 60, 0.0, -(i + 1) * 1e-3 * (k + 1), source=1)
    spec = PlotSpec("t", "E - E0", "time (s)", log=True, names=names, unit="J",
                    colours={key: (200, 10 * i, 0) for i, key in enumerate(names)},
                    keys="U J Alt+U")
    lay = g.layout(pygame.Rect(0, 0, 300, 260), fonts, spec, picker=True)
    texts = [t for _, t, _ in lay.legend]
    assert texts[0] == "integrator number 0 -0.02 J"            # signed, on a log scale
    assert texts[-1] == f"+{len(names) - len(texts) + 1}"      # the rest counted
    assert "U J Alt+U" not in texts                           # no room for the keys
    few = PlotSpec("t", "E - E0", "time (s)", names={"k0": "world"}, unit="J",
                   colours={"k0": (255, 205, 90)}, keys="U J Alt+U")
    texts = [t for _, t, _ in g.layout(pygame.Rect(0, 0, 300, 260), fonts, few, True).legend]
    assert texts == ["world -0.02 J", "U J Alt+U"]

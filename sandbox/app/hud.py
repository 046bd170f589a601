"""On-screen text: the HUD panel, the fonts (shipped in ``assets/``), the help overlay
generated from the keymap, the divergence banner and transient messages. The live
energy graph is ``graph.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pygame

from ..resources import assets_dir
from ..sim.integrators import INTEGRATORS
from .keymap import HELP_PAGING, MOUSE_HELP, help_lines
from .keymap import key_name as key_label_of
from .render import STRAIN_LABELS, STRAIN_RGB

TEXT = (222, 226, 235)
DIM = (150, 156, 172)
KEY = (255, 214, 90)
WARN = (255, 120, 90)
PANEL = (8, 10, 14, 185)
K_COLOUR = (110, 215, 140)
U_COLOUR = (110, 160, 255)
E_COLOUR = (240, 240, 245)
DRIFT_COLOUR = (255, 170, 60)
TRAIL_COLOUR = (255, 205, 90)
GHOST_COLOUR = (255, 80, 220)       # the ghost: hot pink, far from the strain colours
MARKER = (180, 140, 255)

_MONO = "dejavusansmono,notosansmono,liberationmono,menlo,consolas,couriernew,monospace"
#: The shipped font (``assets/fonts``, with its licence): the HUD looks and lines up the
#: same on every machine instead of taking whatever system font is there. The folder:
#: the checkout's ``assets/`` or the installed package's copy (:mod:`sandbox.resources`).
ASSETS = assets_dir()
FONT_FILES = {False: ASSETS / "fonts" / "DejaVuSansMono.ttf",
              True: ASSETS / "fonts" / "DejaVuSansMono-Bold.ttf"}


class Fonts:
    """The three fonts of the window: the shipped DejaVu Sans Mono (a monospaced system
    font if the file is missing)."""

    def __init__(self) -> None:
        if not pygame.font.get_init():
            pygame.font.init()
        self.text = _font(14)
        self.small = _font(13)
        self.big = _font(22, bold=True)
        self.line = self.text.get_linesize()


def _font(size: int, bold: bool = False) -> pygame.font.Font:
    try:
        return pygame.font.Font(str(FONT_FILES[bold]), size)
    except (OSError, FileNotFoundError, pygame.error):   # pragma: no cover - no assets
        pass
    try:
        return pygame.font.SysFont(_MONO, size, bold=bold)
    except Exception:                  # pragma: no cover - no fontconfig: pygame's default
        return pygame.font.Font(None, int(size * 1.3))


def panel(surface: pygame.Surface, rect: pygame.Rect) -> None:
    """A translucent dark rectangle behind text."""
    bg = pygame.Surface(rect.size, pygame.SRCALPHA)
    bg.fill(PANEL)
    surface.blit(bg, rect.topleft)


def text_block(surface: pygame.Surface, font: pygame.font.Font, lines, topleft,
               pad: int = 8) -> pygame.Rect:
    """Lines of ``(text, colour)`` (or plain strings) on a panel; returns its rect."""
    items = [(ln, TEXT) if isinstance(ln, str) else ln for ln in lines]
    rendered = [font.render(t, True, c) for t, c in items]
    step = font.get_linesize()
    width = max((r.get_width() for r in rendered), default=0) + 2 * pad
    rect = pygame.Rect(topleft[0], topleft[1], width, step * len(rendered) + 2 * pad)
    panel(surface, rect)
    for k, r in enumerate(rendered):
        surface.blit(r, (rect.x + pad, rect.y + pad + k * step))
    return rect


def wrap_text(font: pygame.font.Font, text: str, width: int) -> list[str]:
    """``text`` as lines no wider than ``width`` px in ``font``, broken between words
    (a single word wider than that is cut between characters); at least one line."""
    width = max(int(width), 1)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            trial = f"{line} {word}" if line else word
            if font.size(trial)[0] <= width:
                line = trial
                continue
            if line:
                lines.append(line)
            while font.size(word)[0] > width and len(word) > 1:
                k = len(word)
                while k > 1 and font.size(word[:k])[0] > width:
                    k -= 1
                lines.append(word[:k])
                word = word[k:]
            line = word
        lines.append(line)
    return lines


def _text_colour(line) -> tuple[str, tuple]:
    return (line, TEXT) if isinstance(line, str) else line


def columns_block(surface: pygame.Surface, font: pygame.font.Font, columns, topleft,
                  pad: int = 8, gap: int = 28, min_widths: list[int] | None = None
                  ) -> pygame.Rect:
    """Several columns of lines (see :func:`text_block`) side by side on one panel.

    ``min_widths`` (px per column, updated in place to the widest seen) keeps the
    columns from jumping sideways when a name or a number changes length."""
    cols = [[font.render(t, True, c) for t, c in map(_text_colour, col)] for col in columns]
    step = font.get_linesize()
    widths = [max((r.get_width() for r in col), default=0) for col in cols]
    if min_widths is not None:
        if len(min_widths) != len(widths):
            min_widths[:] = [0] * len(widths)
        widths = [max(w, m) for w, m in zip(widths, min_widths, strict=True)]
        min_widths[:] = widths
    rect = pygame.Rect(topleft[0], topleft[1], sum(widths) + gap * (len(cols) - 1) + 2 * pad,
                       step * max(len(c) for c in cols) + 2 * pad)
    panel(surface, rect)
    x = rect.x + pad
    for col, w in zip(cols, widths, strict=True):
        for k, r in enumerate(col):
            surface.blit(r, (x, rect.y + pad + k * step))
        x += w + gap
    return rect


def _legend_places(font: pygame.font.Font, width: int | None):
    """Where the strain legend's swatches go: ``(x, row)`` of each bin after the word
    "strain", rows starting again under it when ``width`` px is reached; and the
    legend's ``(w, h)``."""
    first = font.size("strain")[0] + 16
    line = font.get_linesize()
    x, row, right, places = first, 0, first, []
    for text in STRAIN_LABELS:
        w = font.size(text)[0] + 20
        if width is not None and x > first and x + w > width:
            x, row = first, row + 1
        places.append((x, row))
        x += w
        right = max(right, x)
    return places, (right, line * (row + 1) + 10)


def strain_legend_size(font: pygame.font.Font, width: int | None = None) -> tuple[int, int]:
    """``(w, h)`` px of :func:`strain_legend` in ``width`` px (None: one row)."""
    return _legend_places(font, width)[1]


def strain_legend(surface: pygame.Surface, font: pygame.font.Font, topleft,
                  width: int | None = None) -> pygame.Rect:
    """Colour swatches of the strain bins (sticks), in rows no wider than ``width`` px
    (at 800 px one row ran under the control panel)."""
    x, y = topleft
    places, size = _legend_places(font, width)
    rect = pygame.Rect((x, y), size)
    panel(surface, rect)
    surface.blit(font.render("strain", True, DIM), (x + 8, y + 5))
    line = font.get_linesize()
    for (dx, row), text, c in zip(places, STRAIN_LABELS, STRAIN_RGB[0], strict=True):
        top = y + 5 + row * line
        pygame.draw.rect(surface, c, (x + dx, top + (line - 10) // 2, 10, 10))
        surface.blit(font.render(text, True, DIM), (x + dx + 13, top))
    return rect


def fit_line(line, n: int) -> list:
    """A HUD line (``str`` or ``(str, colour)``) as lines of at most ``n`` characters:
    broken at its " · " (then between words), the lines after the first indented under
    its value (past a label such as ``"energy      "``); a word longer than a line is
    cut with an ellipsis. The energy row "integrator ... · solver ... · drag ..." was
    cut at 1280 px ("solver +0…"); level titles such as "soft blob 16x16 on a floor
    (bounds), 20x1" too."""
    text, colour = (line, None) if isinstance(line, str) else line
    n = max(int(n), 4)
    if len(text) <= n:
        return [line]
    indent = 12 if len(text) > 12 and text[10:12] == "  " and text[0] != " " else 0
    if n - indent < 12:
        indent = 0
    head, body, room = text[:indent], text[indent:], n - indent
    out: list[str] = []
    current = ""
    for piece in body.split(" · "):
        trial = f"{current} · {piece}" if current else piece
        if len(trial) <= room:
            current = trial
            continue
        if current:
            out.append(current)
        while len(piece) > room:                   # between words, else cut
            k = piece.rfind(" ", 0, room + 1)
            if k <= 0:
                piece = piece[:room - 1] + "…"
                break
            out.append(piece[:k].rstrip())
            piece = piece[k + 1:].lstrip()
        current = piece
    if current:
        out.append(current)
    lines = [head + out[0]] + [" " * indent + t for t in out[1:]]
    return lines if colour is None else [(t, colour) for t in lines]


def fmt(v: float, unit: str = "") -> str:
    """A number in 3 significant digits with an SI prefix beyond 1e4 (``-23.4 kJ``), or
    '—' if not finite."""
    if v is None or not math.isfinite(v):
        return "—"
    prefix = ""
    for p, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= 10 * scale:
            v, prefix = v / scale, p
            break
    return f"{v:.3g}{(' ' + prefix + unit) if unit or prefix else ''}"


#: px: the least width of a column of the help (a key, and 30-odd characters of what it
#: does beside it); a window wide enough for two gets two, for three three.
HELP_COLUMN = 440
HELP_MARGIN = 8                 # px around the help's panel
HELP_PAD = 16                   # px inside it
HELP_GAP = 28                   # px between its columns


@dataclass
class HelpPage:
    """One page of the help: its panel's ``rect`` and its ``items``, each ``(rect, text,
    colour, big)`` in window pixels (``big``: the title's font, else the HUD's)."""

    rect: pygame.Rect
    items: list[tuple[pygame.Rect, str, tuple, bool]] = field(default_factory=list)
    columns: int = 1


def _help_pages(fonts: Fonts, size: tuple[int, int], title: str, description: str
                ) -> list[HelpPage]:
    """The help's pages for a window of ``size`` (see :meth:`Overlay.help_pages`)."""
    f, big = fonts.text, fonts.big
    line = f.get_linesize()
    W, H = int(size[0]), int(size[1])
    inner_w = max(W - 2 * HELP_MARGIN - 2 * HELP_PAD, 160)
    rows = [*help_lines(), ("", ""), *MOUSE_HELP]
    key_w = max(f.size(k)[0] for k, _ in rows) + 14
    columns = max(1, min(3, (inner_w + HELP_GAP) // (HELP_COLUMN + HELP_GAP)))
    col_w = (inner_w - HELP_GAP * (columns - 1)) // columns
    key_w = min(key_w, col_w // 2)
    text_w = col_w - key_w
    blocks = [(k, wrap_text(f, t, text_w) if t else []) for k, t in rows]
    heading = "Keys and mouse"
    first_head = [(heading, TEXT, True)]
    if title:
        first_head.append((title, KEY, False))
    if description:
        first_head += [(t, TEXT, False) for t in wrap_text(f, description, inner_w)]
    head_h = {True: big.get_linesize() + 6, False: line}

    def height(head) -> int:
        return sum(head_h[b] for _, _, b in head) + 10

    # Rows into columns, columns into pages: page 1 under the level's description.
    foot_h = line * len(wrap_text(f, help_footer(2), inner_w))
    room = max(H - 2 * HELP_MARGIN - 2 * HELP_PAD - foot_h - 10, 4 * line)
    laid: list[list[list[tuple[str, list[str]]]]] = []
    page: list[list[tuple[str, list[str]]]] = [[]]
    used = 0
    for k, lines in blocks:
        head = first_head if not laid else [(heading, TEXT, True)]
        limit = room - height(head)
        need = max(len(lines), 1) * line
        if not lines and used == 0:
            continue                                # a spacer at a column's top
        if used + need > limit and used > 0:
            if len(page) < columns:
                page.append([])
            else:
                laid.append(page)
                page = [[]]
            used = 0
            if not lines:
                continue
        page[-1].append((k, lines))
        used += need
    laid.append(page)

    n = len(laid)
    rows_h = max((sum(max(len(ls), 1) * line for _, ls in c) for page in laid for c in page),
                 default=0)
    foot = wrap_text(f, help_footer(n), inner_w)
    tallest = max(height(first_head), height([(heading, TEXT, True)]))
    h = min(tallest + rows_h + 10 + line * len(foot) + 2 * HELP_PAD, H - 2 * HELP_MARGIN)
    rect = pygame.Rect(0, 0, inner_w + 2 * HELP_PAD, h)
    rect.center = (W // 2, H // 2)
    pages = []
    for p, cols in enumerate(laid):
        head = list(first_head) if p == 0 else [(heading, TEXT, True)]
        if n > 1:
            head[0] = (f"{heading} ({p + 1} of {n})", TEXT, True)
        items: list[tuple[pygame.Rect, str, tuple, bool]] = []
        y = rect.y + HELP_PAD
        for text, colour, is_big in head:
            font = big if is_big else f
            items.append((pygame.Rect((rect.x + HELP_PAD, y), font.size(text)), text, colour,
                          is_big))
            y += head_h[is_big]
        y += 10
        for c, col in enumerate(cols):
            x = rect.x + HELP_PAD + c * (col_w + HELP_GAP)
            yy = y
            for k, lines in col:
                if k:
                    items.append((pygame.Rect((x, yy), f.size(k)), k, KEY, False))
                for t in lines:
                    items.append((pygame.Rect((x + key_w, yy), f.size(t)), t, TEXT, False))
                    yy += line
                if not lines:
                    yy += line
        yy = rect.bottom - HELP_PAD - line * len(foot)
        for t in foot:
            items.append((pygame.Rect((rect.x + HELP_PAD, yy), f.size(t)), t, DIM, False))
            yy += line
        pages.append(HelpPage(rect.copy(), items, columns))
    return pages


def help_footer(pages: int) -> str:
    """The help's last line: how to close it, and with more than one page how to turn
    them (the keys of :data:`keymap.HELP_PAGING` and the wheel)."""
    close = "H, F1 or Esc: close"
    if pages < 2:
        return close
    nxt = " or ".join(key_label_of(k) for k, step in HELP_PAGING.items() if step > 0)
    back = " or ".join(key_label_of(k) for k, step in HELP_PAGING.items() if step < 0)
    return f"{nxt} or the wheel: next page · {back}: back · {close}"


class Overlay:
    """Help overlay (laid out per window size from the keymap, in pages), banner and
    messages."""

    def __init__(self, fonts: Fonts) -> None:
        self.fonts = fonts
        self._pages: list[HelpPage] = []
        self._pages_key: tuple | None = None
        self._page_surfaces: dict[int, pygame.Surface] = {}
        self._wrapped: dict[tuple[str, int], list[str]] = {}   # (message, width) -> lines

    def help_pages(self, size: tuple[int, int], title: str = "",
                   description: str = "") -> list[HelpPage]:
        """The help laid out for a window of ``size``: every keymap line and the mouse
        gestures in the HUD's own font (never scaled down: at 800 x 600 the two columns
        shrunk to 45 % were unreadable), in as many columns as fit at least
        ``HELP_COLUMN`` px wide (a line's text wrapped under itself), and on as many
        pages as the rows need; the level's name and description head the first page,
        the keys that turn pages (:data:`keymap.HELP_PAGING`) close every page. Kept per
        size and level."""
        key = (tuple(size), title, description)
        if self._pages_key != key:
            self._pages = _help_pages(self.fonts, size, title, description)
            self._pages_key = key
            self._page_surfaces = {}
        return self._pages

    def draw_help(self, surface: pygame.Surface, title: str = "", description: str = "",
                  page: int = 0) -> int:
        """Page ``page`` of the help (clamped to the pages there are) over ``surface``;
        returns the page drawn."""
        pages = self.help_pages(surface.get_size(), title, description)
        page = min(max(int(page), 0), len(pages) - 1)
        made = self._page_surfaces.get(page)
        if made is None:
            p = pages[page]
            made = pygame.Surface(p.rect.size, pygame.SRCALPHA)
            made.fill((8, 10, 14, 250))         # the scene behind it barely shows
            pygame.draw.rect(made, (80, 86, 104), made.get_rect(), 1)
            for r, text, colour, big in p.items:
                font = self.fonts.big if big else self.fonts.text
                made.blit(font.render(text, True, colour), (r.x - p.rect.x, r.y - p.rect.y))
            self._page_surfaces[page] = made
        surface.blit(made, pages[page].rect.topleft)
        return page

    def banner(self, surface: pygame.Surface, title: str, detail: str, top: int = 14,
               width: int | None = None) -> pygame.Rect:
        """A red banner (a divergence) centred in the window's first ``width`` px (the
        part no panel covers; default: all of it), its detail wrapped to fit there: at
        1280 x 800 it lay under the control panel. Returns where it was drawn."""
        big, small = self.fonts.big, self.fonts.text
        width = surface.get_width() if width is None else max(min(width, surface.get_width()),
                                                              120)
        t = big.render(title, True, (255, 255, 255))
        lines = [small.render(line, True, (255, 225, 220))
                 for line in self.wrap(detail, width - 56)]
        w = min(max(t.get_width(), *(d.get_width() for d in lines)) + 40, width - 16)
        step = small.get_linesize()
        rect = pygame.Rect(0, 0, w, t.get_height() + step * len(lines) + 26)
        rect.midtop = (width // 2, top)
        bg = pygame.Surface(rect.size, pygame.SRCALPHA)
        bg.fill((150, 24, 30, 230))
        surface.blit(bg, rect)
        pygame.draw.rect(surface, (255, 120, 110), rect, 2)
        surface.blit(t, (rect.centerx - t.get_width() // 2, rect.y + 9))
        for k, d in enumerate(lines):
            surface.blit(d, (rect.centerx - d.get_width() // 2,
                             rect.y + 13 + t.get_height() + k * step))
        return rect

    def wrap(self, text: str, width: int) -> list[str]:
        """:func:`wrap_text` in the text font, kept: a message is drawn every frame for
        seconds, and wrapping measures it word by word (~0.15 ms for a caption)."""
        key = (text, width)
        lines = self._wrapped.get(key)
        if lines is None:
            if len(self._wrapped) > 64:
                self._wrapped.clear()
            lines = self._wrapped[key] = wrap_text(self.fonts.text, text, width)
        return lines

    def messages(self, surface: pygame.Surface, messages: list[tuple[str, bool]],
                 bottom: int | None = None, width: int | None = None) -> pygame.Rect | None:
        """Transient messages, newest lowest, above ``bottom`` at the left; errors red.
        Each is wrapped at word boundaries to fit a panel ``width`` px wide (default: the
        surface), so a level's long description never runs under the control panel."""
        lines, rect = self.messages_layout(surface.get_size(), messages, bottom, width)
        if rect is None:
            return None
        return text_block(surface, self.fonts.text, lines, rect.topleft)

    def messages_layout(self, size: tuple[int, int], messages: list[tuple[str, bool]],
                        bottom: int | None = None, width: int | None = None):
        """``(lines, rect)`` of :meth:`messages` on a surface of ``size`` (rect None when
        there are none): where they will be, for what must not go under them."""
        if not messages:
            return [], None
        f = self.fonts.text
        width = size[0] - 16 if width is None else width
        lines = [(part, WARN if err else TEXT) for m, err in messages
                 for part in self.wrap(m, width - 16)]
        h = f.get_linesize() * len(lines) + 16
        bottom = size[1] - 8 if bottom is None else bottom
        w = max(f.size(t)[0] for t, _ in lines) + 16
        return lines, pygame.Rect(8, bottom - h, w, h)


def ensemble_colour(name: str) -> tuple[int, int, int]:
    """The integrator's plot colour (its ``style``), a quarter of the way to white: the
    dark ones (brown, grey) stand out on the dark background."""
    c = pygame.Color(INTEGRATORS[name].style[0])
    return tuple(int(v + (255 - v) * 0.25) for v in (c.r, c.g, c.b))

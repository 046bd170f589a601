"""The camera: world coordinates (m, y up) to screen pixels (y down) and back.

A point ``w`` maps to ``s = (W/2, H/2) + (w - center) * scale * (1, -1)``: ``center``
(m) sits in the middle of the window, ``scale`` is pixels per metre, and the sign flips
y because the world is y-up and the screen y-down. Every transform takes ``(..., 2)``
arrays so a whole cloth is mapped in one numpy expression.
"""

from __future__ import annotations

import numpy as np

_FLIP = np.array([1.0, -1.0])


class Camera:
    """Pan and zoom over the world; ``size`` is the window in pixels."""

    MIN_SCALE, MAX_SCALE = 1e-3, 1e6       # px/m: keeps the transform invertible

    def __init__(self, size: tuple[int, int], center=(0.0, 0.0), width: float = 10.0) -> None:
        self.size = (int(size[0]), int(size[1]))
        self.center = np.array(center, float)
        self.scale = self.size[0] / float(width)

    def frame(self, center, width: float, safe=None) -> None:
        """Show a level's view: ``width`` metres across the window around ``center``.

        ``safe`` ``(x, y, w, h)`` px is the part of the window not covered by panels;
        the view (``width`` by ``width * H / W`` m) is then fitted inside it, centred.
        """
        w, h = self.size
        sx, sy, sw, sh = safe if safe is not None else (0, 0, w, h)
        sw, sh = max(sw, 1), max(sh, 1)
        scale = min(sw / float(width), sh / (float(width) * h / w))
        self.scale = float(np.clip(scale, self.MIN_SCALE, self.MAX_SCALE))
        # Put `center` at the middle of the safe area.
        offset = np.array([sx + sw / 2, sy + sh / 2]) - self.half
        self.center = np.asarray(center, float) - offset * (_FLIP / self.scale)

    def resize(self, size: tuple[int, int]) -> None:
        """A resized window keeps its centre and its pixels per metre."""
        self.size = (max(int(size[0]), 1), max(int(size[1]), 1))

    @property
    def half(self) -> np.ndarray:
        return 0.5 * np.array(self.size, float)

    def to_screen(self, w) -> np.ndarray:
        """World points ``(..., 2)`` m -> screen points ``(..., 2)`` px (floats)."""
        return self.half + (np.asarray(w, float) - self.center) * (self.scale * _FLIP)

    def to_world(self, s) -> np.ndarray:
        """Screen points ``(..., 2)`` px -> world points ``(..., 2)`` m."""
        return self.center + (np.asarray(s, float) - self.half) * (_FLIP / self.scale)

    def pixels_to_metres(self, px: float) -> float:
        return float(px) / self.scale

    def pan_pixels(self, dx: float, dy: float) -> None:
        """Move the view as if the picture were dragged by ``(dx, dy)`` pixels."""
        self.center = self.center - np.array([dx, -dy], float) / self.scale

    def zoom_at(self, screen_point, factor: float) -> None:
        """Zoom by ``factor`` keeping the world point under ``screen_point`` in place."""
        anchor = self.to_world(screen_point)
        self.scale = float(np.clip(self.scale * factor, self.MIN_SCALE, self.MAX_SCALE))
        # Solve to_screen(anchor) == screen_point for the new centre.
        self.center = anchor - (np.asarray(screen_point, float) - self.half) * (_FLIP / self.scale)

    @property
    def view_width(self) -> float:
        """Metres visible across the window."""
        return self.size[0] / self.scale

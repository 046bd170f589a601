"""Clips of the window: the canvas written to an MP4 (ffmpeg, shipped inside the
imageio-ffmpeg wheel) or an animated GIF (Pillow), off the frame loop.

The frame loop only copies the canvas (``pygame.image.tobytes``: 1-3 ms for a
1280 x 800 window on a busy 2-core machine) at the clip's frame rate and hands it to a
queue; a writer thread
feeds the encoder, which scales the frames (ffmpeg's scaler in its own process for MP4,
Pillow, which releases the GIL, for GIFs), so neither scaling nor encoding runs on the
frame loop (scaling there cost another 3-5 ms a captured frame). The encoder's own CPU
time (ffmpeg's "ultrafast" preset) is what a recording costs on a machine with no idle
core. If the encoder falls behind
by more than a couple of seconds, frames are dropped and counted rather than slowing
the window. A clip is written under a temporary name and moved into place when it is
complete: a half-written clip is never seen under its real name.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from pathlib import Path

import numpy as np
import pygame

from . import files

FORMATS = {"mp4": ".mp4", "gif": ".gif"}
#: What each format's writer imports (the ``clips`` extra: ``sandbox.extras``).
MODULES = {"mp4": ("imageio", "imageio_ffmpeg"), "gif": ("imageio", "PIL")}
DEFAULT_FPS = 30
DEFAULT_WIDTH = 960
QUEUE_SECONDS = 2.0


def clip_size(window: tuple[int, int], width: int) -> tuple[int, int]:
    """The clip's size for a window: ``width`` px wide at most (never upscaled), the
    window's aspect kept, both sides even (H.264 needs it)."""
    w, h = window
    width = min(int(width), w)
    height = max(int(round(h * width / w)), 2)
    return max(width - width % 2, 2), max(height - height % 2, 2)


class ClipRecorder:
    """Records the canvas; ``start``, ``capture`` every frame, ``stop``; ``status()``
    for the HUD, ``poll()`` for what finished (path or error) since the last call."""

    def __init__(self, folder: Path, fps: int = DEFAULT_FPS, width: int = DEFAULT_WIDTH):
        self.folder = Path(folder)
        self.fps = int(fps)
        self.width = int(width)
        self.recording = False
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._done: list[tuple[str, str, bool]] = []     # (kind, text, error)
        self._lock = threading.Lock()
        self.frames = 0
        self.dropped = 0
        self._t = 0.0
        self._attempts = 0
        self.size = (0, 0)
        self.path: Path | None = None

    def start(self, window: tuple[int, int], fmt: str = "mp4") -> Path:
        if self.recording or self.finishing:
            raise RuntimeError("a clip is still being written")
        if fmt not in FORMATS:
            raise ValueError(f"clip format {fmt!r}: expected one of {', '.join(FORMATS)}")
        self.size = clip_size(window, self.width)
        self.source = tuple(window)
        self.path = files.unique_path(self.folder / "clips", "clip", FORMATS[fmt])
        tmp = self.path.with_name(f".{self.path.stem}.part{FORMATS[fmt]}")
        self._queue = queue.Queue(maxsize=max(int(QUEUE_SECONDS * self.fps), 2))
        self.frames = self.dropped = 0
        self._t = 0.0
        self._attempts = 0
        self.recording = True
        self._thread = threading.Thread(target=self._write, args=(tmp, self.path, fmt),
                                        name="clip-writer", daemon=True)
        self._thread.start()
        return self.path

    def capture(self, surface: pygame.Surface, dt: float) -> None:
        """Take a frame if one is due at the clip's rate (``dt`` s since the last call)."""
        if not self.recording:
            return
        # Frame k is due at k / fps s of recording (the real frame times summed).
        t = self._t
        self._t += max(dt, 0.0)
        if self._attempts > t * self.fps + 1e-6:
            return
        self._attempts = int(t * self.fps + 1e-6) + 1    # after a stall: no catching up
        if surface.get_size() != self.source:             # resized while recording
            surface = pygame.transform.scale(surface, self.source)
        data = pygame.image.tobytes(surface, "RGB")
        try:
            self._queue.put_nowait(data)
            self.frames += 1
        except queue.Full:
            self.dropped += 1

    def stop(self) -> None:
        """Stop taking frames; the writer finishes the clip in the background."""
        if self.recording:
            self.recording = False
            self._queue.put(None)

    @property
    def finishing(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self.recording

    def status(self) -> str | None:
        """A line for the HUD while recording or finishing, else None."""
        if self.recording:
            return (f"REC {self.path.name}: {self.frames} frames "
                    f"({self.frames / self.fps:.1f} s at {self.fps} fps)"
                    + (f", {self.dropped} dropped" if self.dropped else ""))
        if self.finishing:
            left = self._queue.qsize() if self._queue is not None else 0
            return f"finishing {self.path.name}: {left} frames left to encode"
        return None

    def poll(self) -> list[tuple[str, str, bool]]:
        with self._lock:
            out, self._done = self._done, []
        return out

    def wait(self, timeout: float = 60.0) -> None:
        """Block until the clip is written (tests, and quitting the window)."""
        if self._thread is not None:
            self._thread.join(timeout)

    # --- the writer thread ----------------------------------------------------------

    def _write(self, tmp: Path, final: Path, fmt: str) -> None:
        import imageio.v2 as imageio

        w, h = self.size
        sw, sh = self.source
        n = 0
        t0 = time.perf_counter()
        writer = None
        try:
            if fmt == "mp4":
                writer = imageio.get_writer(tmp, format="FFMPEG", fps=self.fps,
                                            codec="libx264", quality=7,
                                            macro_block_size=2, pixelformat="yuv420p",
                                            ffmpeg_log_level="error",
                                            output_params=["-vf", f"scale={w}:{h}",
                                                           "-preset", "ultrafast"])
            else:
                writer = imageio.get_writer(tmp, format="GIF", mode="I",
                                            duration=1000.0 / self.fps, loop=0)
            from PIL import Image
            while True:
                data = self._queue.get()
                if data is None:
                    break
                frame = np.frombuffer(data, np.uint8).reshape(sh, sw, 3)
                if fmt == "gif" and (sw, sh) != (w, h):
                    frame = np.asarray(Image.fromarray(frame).resize((w, h),
                                                                     Image.LANCZOS))
                writer.append_data(frame)
                n += 1
            writer.close()
            writer = None
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, final)
            text = (f"clip saved: {final} ({n} frames, {n / self.fps:.1f} s; encoded in "
                    f"{time.perf_counter() - t0:.1f} s"
                    + (f"; {self.dropped} frames dropped" if self.dropped else "") + ")")
            result = ("done", text, False)
        except Exception as e:                       # never a traceback in the window
            result = ("error", f"clip failed: {type(e).__name__}: {e}", True)
            with contextlib.suppress(Exception):
                if writer is not None:
                    writer.close()
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            while True:                              # let capture() never block
                with contextlib.suppress(queue.Empty):
                    if self._queue.get_nowait() is None:
                        break
                    continue
                if not self.recording:
                    break
                time.sleep(0.01)
            self.recording = False
        with self._lock:
            self._done.append(result)

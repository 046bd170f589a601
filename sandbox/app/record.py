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
the window. A clip is written under a temporary name (an MP4, by ffmpeg) or in memory
(a GIF) and takes its name only when complete and on disk: a half-written clip is never
seen under its real name. A clip that cannot be written (a full disk, a failing encoder)
is one message, ``clip not written: NAME: why``, and no file; the window goes on.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import subprocess
import threading
import time
from collections import deque
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
MP4_CRF = 15          # H.264 quality (imageio's quality=7 of 10, which was used before)
FFMPEG_WAIT = 120.0   # s for ffmpeg to finish the clip after its last frame
#: A GIF is held in memory until it ends (imageio keeps every frame: ~1.7 MB one at
#: 960 x 600), so it stops by itself after this many seconds (~1.5 GB at 30 fps):
#: a two-minute GIF took 6 GB and could take the window down with it. An MP4 streams
#: to ffmpeg and has no limit.
GIF_MAX_SECONDS = 30.0


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
        self.fmt = "mp4"
        self.limited = False            # stopped by GIF_MAX_SECONDS

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
        self.fmt, self.limited = fmt, False
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
        if self.fmt == "gif" and self.frames >= GIF_MAX_SECONDS * self.fps:
            self.limited = True
            self.stop()
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
            return (f"finishing {self.path.name}: {left} frames left to encode"
                    + (_LIMIT if self.limited else ""))
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
        n = 0
        t0 = time.perf_counter()
        try:
            n = (self._write_mp4 if fmt == "mp4" else self._write_gif)(tmp, final)
            text = (f"clip saved: {final} ({n} frames, {n / self.fps:.1f} s; encoded in "
                    f"{time.perf_counter() - t0:.1f} s"
                    + (f"; {self.dropped} frames dropped" if self.dropped else "") + ")")
            if self.limited:
                text += _LIMIT
            result = ("done", text, False)
        except Exception as e:                       # never a traceback in the window
            result = ("error", f"clip not written: {final.name}: {_reason(e)}", True)
            with contextlib.suppress(OSError):
                tmp.unlink()
            self._drain()
        with self._lock:
            self._done.append(result)

    def _frames(self):
        """The captured frames (RGB bytes of the source size) until :meth:`stop`."""
        while True:
            data = self._queue.get()
            if data is None:
                return
            yield data

    def _drain(self) -> None:
        """After a failure: take what is still queued until :meth:`stop`, so that
        :meth:`capture` never blocks, then stop recording."""
        while True:
            with contextlib.suppress(queue.Empty):
                if self._queue.get_nowait() is None:
                    break
                continue
            if not self.recording:
                break
            time.sleep(0.01)
        self.recording = False

    def _write_gif(self, tmp: Path, final: Path) -> int:
        """Encoded in memory (Pillow through imageio, which keeps every frame until the
        end anyway), then written atomically: a full disk is one ``OSError`` naming the
        clip, and no file. (Encoding to the file itself printed imageio's "Exception
        ignored ... Traceback" blocks on a full disk.)"""
        import imageio.v2 as imageio
        from PIL import Image

        from ..atomic import atomic_write_bytes
        w, h = self.size
        sw, sh = self.source
        buf = io.BytesIO()
        writer = imageio.get_writer(buf, format="GIF", mode="I",
                                    duration=1000.0 / self.fps, loop=0)
        n = 0
        try:
            for data in self._frames():
                frame = np.frombuffer(data, np.uint8).reshape(sh, sw, 3)
                if (sw, sh) != (w, h):
                    frame = np.asarray(Image.fromarray(frame).resize((w, h), Image.LANCZOS))
                writer.append_data(frame)
                n += 1
        finally:
            writer.close()
        atomic_write_bytes(final, buf.getvalue(), replace=False)
        return n

    def _write_mp4(self, tmp: Path, final: Path) -> int:
        """ffmpeg (the imageio-ffmpeg wheel's) run by us, not through imageio's writer,
        which never read ffmpeg's exit status: on a full disk it printed ffmpeg's errors
        on the terminal and a truncated clip was put in place and reported saved. Here
        ffmpeg's messages are kept, a non-zero exit is an error naming its last line, and
        the finished file is flushed to disk before it takes its name."""
        from imageio_ffmpeg import get_ffmpeg_exe

        w, h = self.size
        sw, sh = self.source
        cmd = [get_ffmpeg_exe(), "-y", "-v", "error", "-f", "rawvideo", "-vcodec", "rawvideo",
               "-s", f"{sw}x{sh}", "-pix_fmt", "rgb24", "-r", str(self.fps), "-i", "-",
               "-an", "-vcodec", "libx264", "-pix_fmt", "yuv420p", "-crf", str(MP4_CRF),
               "-vf", f"scale={w}:{h}", "-preset", "ultrafast", "-f", "mp4", str(tmp)]
        quiet = ({"start_new_session": True} if os.name == "posix" else
                 {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)})
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, **quiet)   # Ctrl+C is the window's
        said: deque[str] = deque(maxlen=20)
        reader = threading.Thread(target=_collect, args=(proc.stderr, said),
                                  name="clip-ffmpeg-log", daemon=True)
        reader.start()
        n = 0
        try:
            try:
                for data in self._frames():
                    proc.stdin.write(data)
                    n += 1
            except OSError:                          # ffmpeg has gone: its log says why
                pass
            with contextlib.suppress(OSError):
                proc.stdin.close()
            code = proc.wait(FFMPEG_WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(5)
        if code != 0:
            raise ClipError(_last(said) or f"ffmpeg exited with status {code}")
        _flush_to_disk(tmp)
        from ..atomic import place_new
        place_new(tmp, final)
        return n


#: Said when a GIF stopped at its limit.
_LIMIT = " - a GIF stops at its limit; C records an MP4 of any length"


class ClipError(RuntimeError):
    """The encoder failed; the message is its own (ffmpeg's last line)."""


def _collect(stream, lines: deque) -> None:
    """Keep the last lines of ``stream`` (ffmpeg's stderr) until it closes."""
    with contextlib.suppress(Exception):
        for raw in stream:
            line = raw.decode("utf-8", "replace").strip()
            if line:
                lines.append(line)
    with contextlib.suppress(Exception):
        stream.close()


def _last(lines) -> str:
    """ffmpeg's last line without its ``[out#0/mp4 @ 0x55d8...]`` prefix."""
    if not lines:
        return ""
    line = lines[-1]
    if line.startswith("[") and "] " in line:
        line = line.split("] ", 1)[1]
    return line


def _reason(e: Exception) -> str:
    """Why a clip was not written, in a few words: ``No space left on device``."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


def _flush_to_disk(path: Path) -> None:
    """fsync a file another process wrote, so that a crash after it takes its name
    cannot leave a clip of zeros there (what :mod:`sandbox.atomic` does for ours)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""Clips of the window (C): written off the frame loop, complete or not at all."""

from __future__ import annotations

import os

import pygame
import pytest

from sandbox.app.main import App
from sandbox.app.record import ClipRecorder, clip_size

H = 1 / 60


def test_clip_size_keeps_the_aspect_never_upscales_and_is_even():
    assert clip_size((1280, 800), 960) == (960, 600)
    assert clip_size((640, 481), 960) == (640, 480)      # not upscaled; even sides
    assert clip_size((1001, 333), 500) == (500, 166)


@pytest.mark.parametrize("fmt, frames", [("mp4", 30), ("gif", 12)])
def test_a_clip_has_the_frames_taken_at_its_rate_and_size(tmp_path, fmt, frames):
    """Frames are taken at the clip's rate from the real frame times: 1 s of 60 Hz
    frames at 30 fps is 30 frames (a 12 fps GIF: 12); the file holds exactly those, at
    the clip's size, and appears only when complete."""
    import imageio.v3 as iio

    pygame.display.init()
    pygame.display.set_mode((640, 400))
    app = App("pendulums", size=(640, 400), out_dir=tmp_path,
              clip_fps=30 if fmt == "mp4" else 12, clip_width=320)
    app.do("record", fmt)
    path = app.recorder.path
    for _ in range(60):
        app.frame(H)
    app.do("record")                                   # stop: finished in the background
    app.recorder.wait(60)
    app.frame(H)
    assert path.exists() and "clip saved" in app.messages[-1][0]
    data = iio.imread(path, index=None)
    assert data.shape[0] == frames and data.shape[1:3] == (200, 320)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]


@pytest.mark.skipif(os.name != "posix", reason="the failing ffmpeg is a shell script")
def test_a_failing_encoder_is_a_message_and_leaves_no_file(tmp_path, monkeypatch, capfd):
    """An ffmpeg that fails (here a real program that says why and exits 1): one message
    with its reason, no file, nothing on the terminal."""
    fake = tmp_path / "ffmpeg"
    fake.write_text("#!/bin/sh\ncat > /dev/null\necho '[libx264 @ 0x1] no encoder' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", str(fake))
    rec = ClipRecorder(tmp_path / "out", fps=10, width=64)
    surf = pygame.Surface((64, 40))
    path = rec.start((64, 40), "mp4")
    for _ in range(5):
        rec.capture(surf, 0.1)
    rec.stop()
    rec.wait(10)
    done = rec.poll()
    assert done == [("error", f"clip not written: {path.name}: no encoder", True)]
    assert not path.exists() and not list(path.parent.iterdir())
    assert capfd.readouterr().err == ""


def test_a_gif_stops_by_itself_at_its_limit_and_says_why(tmp_path, monkeypatch):
    """A GIF is held in memory until it ends (~1.7 MB a frame at 960 x 600): it stops
    after ``GIF_MAX_SECONDS`` (here 0.5 s of a 12 fps clip: 6 frames) and is written
    whole, the HUD saying why it stopped; an MP4 streams and runs on."""
    import imageio.v3 as iio

    from sandbox.app import record

    monkeypatch.setattr(record, "GIF_MAX_SECONDS", 0.5)
    pygame.display.init()
    pygame.display.set_mode((640, 400))
    app = App("pendulums", size=(640, 400), out_dir=tmp_path, clip_fps=12, clip_width=320)
    app.do("record", "gif")
    path = app.recorder.path
    for _ in range(60):                                # 1 s: twice the limit
        app.frame(H)
    assert not app.recorder.recording and app.recorder.limited
    app.recorder.wait(60)
    app.frame(H)
    assert path.exists() and iio.imread(path, index=None).shape[0] == 6
    assert "clip saved" in app.messages[-1][0] and "a GIF stops at its limit" in \
        app.messages[-1][0]

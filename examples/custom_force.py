"""A custom force: gusts of wind on a curtain, changed every frame from your own code.

    python -m examples.custom_force            (from the checkout; installed: anywhere)

A world's forces are its ``WorldConfig``'s (gravity, air drag, n-body gravity) and the
springs and gas pressure its builders add; there is no hook for a force function of
your own. Wind is still exact with the public API: air drag pulls every particle
towards the air's velocity, ``a = k (w - v)`` for a wind ``w`` and a drag ``k`` (per
second), which is ``-k v`` (the config's ``drag``) plus a uniform ``k w`` that adds to
gravity. So each frame sets ``gravity = g + k w(t)`` with ``world.configure``, which
swaps the settings without restarting the integrator. Up and Down change the wind.
"""
import argparse
import dataclasses
import math

import pygame

import sandbox

G = (0.0, -9.81)        # m/s^2
DRAG = 0.5              # 1/s: how strongly the air carries the cloth along


def wind(t: float, strength: float) -> tuple[float, float]:
    """The wind at time ``t`` (m/s): ``strength`` with gusts, blowing to the right."""
    gust = 0.5 + 0.5 * math.sin(0.9 * t) * math.sin(0.23 * t + 1.0)
    return strength * (0.4 + gust), 0.0


def set_wind(world: sandbox.World, w: tuple[float, float]) -> None:
    """Air drag towards the wind ``w``: gravity ``g + k w`` and drag ``k``."""
    gravity = (G[0] + DRAG * w[0], G[1] + DRAG * w[1])
    world.configure(dataclasses.replace(world.config, gravity=gravity, drag=DRAG))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Gusts of wind on a curtain.")
    ap.add_argument("--frames", type=int, help="quit after this many frames")
    frames = ap.parse_args(argv).frames

    warm = sandbox.start_background()     # fast kernels behind the first frames
    world = sandbox.World(sandbox.WorldConfig(iterations=10, substeps=2))
    curtain = sandbox.build_cloth(world, cols=30, rows=22, spacing=0.1, origin=(-1.45, 2.0),
                                  pins="top_row")   # no shear links: it sways
    rest = world.particles.x[curtain.particles].copy()
    pygame.init()
    screen = pygame.display.set_mode((800, 600))
    draw = sandbox.DrawOptions(screen, scale=150, offset=(400, 380))
    clock, frame, strength, running = pygame.time.Clock(), 0, 4.0, True
    while running and frame != frames:
        for event in pygame.event.get():
            if event.type == pygame.QUIT:
                running = False
            elif event.type == pygame.KEYDOWN and event.key in (pygame.K_UP, pygame.K_DOWN):
                strength = max(0.0, strength + (2.0 if event.key == pygame.K_UP else -2.0))
        w = wind(world.t, strength)
        set_wind(world, w)                  # this frame's wind, then the frame's step
        world.step(1 / 60)
        screen.fill(draw.background)
        draw.draw(world)
        start = draw.to_screen((-2.5, 2.4))        # the wind, as a bar 12 px a m/s
        pygame.draw.line(screen, draw.spring, start, start + (12 * w[0], 0), 3)
        pygame.display.set_caption(f"wind {w[0]:.1f} m/s (Up/Down) | {warm.status()}")
        pygame.display.flip()
        clock.tick(60)
        frame += 1
    warm.close()                          # stops the compiler if it is still at work
    pygame.quit()
    sway = world.particles.x[curtain.particles, 0] - rest[:, 0]
    print(f"custom_force: after {world.t:.2f} s the curtain's mean sway is {sway.mean():+.3f} m")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

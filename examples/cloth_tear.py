"""A cloth you can tear: pull it with the left mouse button until its links give, or
slice it with the right button. Space resets it, Esc quits.

    python -m examples.cloth_tear        (from the checkout; installed: from anywhere)

The links tear at 120 % of their rest length (``WorldConfig.tear_ratio``); the mouse
spring pulls at most three times the weight of what it holds, so a slow pull stretches
the cloth and a quick one tears it. The steps follow the real frame time through a
fixed-step policy (``sandbox.TIMESTEPS["fixed"]``), as a game's loop would.
"""
import argparse
import time

import pygame

import sandbox


def make_world() -> sandbox.World:
    world = sandbox.World(sandbox.WorldConfig(iterations=10, substeps=2, tear_ratio=1.2))
    sandbox.build_cloth(world, cols=40, rows=25, spacing=0.1, origin=(-1.95, 2.0),
                        pins="top_row")
    return world


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="A cloth you can tear with the mouse.")
    ap.add_argument("--frames", type=int, help="quit after this many frames")
    frames = ap.parse_args(argv).frames

    warm = sandbox.start_background()     # fast kernels behind the first frames
    pygame.init()
    screen = pygame.display.set_mode((900, 700))
    draw = sandbox.DrawOptions(screen, scale=150, offset=(450, 400))
    world, torn_before, sliced = make_world(), 0, 0
    policy = sandbox.TIMESTEPS["fixed"](h=1 / 60, max_steps=4)
    cutting = None                        # the last point of a slice, in metres
    clock, last, frame, running = pygame.time.Clock(), time.perf_counter(), 0, True
    while running and frame != frames:
        for event in pygame.event.get():
            if event.type == pygame.QUIT or (event.type == pygame.KEYDOWN
                                             and event.key == pygame.K_ESCAPE):
                running = False
            elif event.type == pygame.KEYDOWN and event.key == pygame.K_SPACE:
                torn_before += world.torn
                world = make_world()
            elif event.type == pygame.MOUSEBUTTONDOWN and event.button == 1:
                at = draw.to_world(event.pos)
                k = world.nearest_movable(at, radius=0.15)
                if k is not None:
                    world.grab(k, at, radius=0.12)     # a patch of cloth, not one thread
            elif event.type == pygame.MOUSEBUTTONDOWN and event.button == 3:
                cutting = draw.to_world(event.pos)
            elif event.type == pygame.MOUSEMOTION:
                at = draw.to_world(event.pos)
                world.drag_to(at)
                if cutting is not None:
                    sliced += world.cut(cutting, at)     # links the path crosses
                    cutting = at
            elif event.type == pygame.MOUSEBUTTONUP and event.button == 1:
                world.release()
            elif event.type == pygame.MOUSEBUTTONUP and event.button == 3:
                cutting = None
        now = time.perf_counter()
        for h in policy.plan(now - last):       # the real frame time, in steps of 1/60 s
            world.step(h)
        last = now
        screen.fill(draw.background)
        draw.draw(world)
        pygame.display.set_caption(f"cloth: {torn_before + world.torn + sliced} links torn"
                                   f" | {warm.status()}")
        pygame.display.flip()
        clock.tick(60)
        frame += 1
    warm.close()                          # stops the compiler if it is still at work
    pygame.quit()
    print(f"cloth_tear: {torn_before + world.torn} links torn by pulling, {sliced} sliced")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

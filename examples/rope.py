"""A rope in your own pygame loop; drag it with the mouse. python -m examples.rope"""
import argparse

import pygame

import sandbox

ap = argparse.ArgumentParser(description="A rope in your own pygame loop.")
ap.add_argument("--frames", type=int, help="quit after this many frames")
frames = ap.parse_args().frames

warm = sandbox.start_background()     # compiles the fast kernels; numpy meanwhile
world = sandbox.World(sandbox.WorldConfig(iterations=20))
sandbox.build_rope(world, start=(-2.0, 2.0), end=(2.0, 2.0), segments=40, radius=0.03)
pygame.init()
screen = pygame.display.set_mode((800, 600))
draw = sandbox.DrawOptions(screen, scale=100)   # 100 px a metre, (0, 0) mid-screen
clock, frame, running = pygame.time.Clock(), 0, True
while running and frame != frames:
    for event in pygame.event.get():
        if event.type == pygame.QUIT:
            running = False
        elif event.type == pygame.MOUSEBUTTONDOWN and event.button == 1:
            k = world.nearest_movable(draw.to_world(event.pos), radius=0.3)
            if k is not None:
                world.grab(k, draw.to_world(event.pos))
        elif event.type == pygame.MOUSEMOTION:
            world.drag_to(draw.to_world(event.pos))
        elif event.type == pygame.MOUSEBUTTONUP and event.button == 1:
            world.release()
    world.step(1 / 60)
    screen.fill(draw.background)
    draw.draw(world)
    pygame.display.set_caption(f"rope: {warm.status()}")
    pygame.display.flip()
    clock.tick(60)
    frame += 1
warm.close()                          # stops the compiler if it is still at work

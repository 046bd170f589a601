"""The same orbit run by two integrators, headless: how far each one's energy drifts.

    python -m examples.orbit_compare                       (euler against velocity_verlet)
    python -m examples.orbit_compare rk4 forest_ruth --orbits 1000

Article 000's moon: a planet of 1000 kg and a moon of 1 kg at 10 m, with 1.1 times the
circular speed, G = 1 (a period of 8.94 s), stepped at 20 steps an orbit. Explicit
Euler gains energy every step and the moon escapes; a symplectic integrator's energy
wanders within a band and comes back. Each world is a plain ``sandbox.World`` stepped
in a loop; ``sandbox.build_orbit`` makes the two bodies.
"""
import argparse
import math

import sandbox

PERIOD = 8.94           # s: the moon's orbit at these masses and speed


def run(integrator: str, orbits: float, steps_per_orbit: int) -> dict:
    """The relative energy drift ``(E - E0) / |E0|`` of one integrator: at the end and
    the largest on the way, and the moon's distance at the end."""
    world = sandbox.World(sandbox.WorldConfig(gravity=(0.0, 0.0), G=1.0,
                                              integrator=integrator))
    body = sandbox.build_orbit(world, central_mass=1000.0,
                               moons=[{"distance": 10.0, "speed_factor": 1.1, "mass": 1.0}])
    h = PERIOD / steps_per_orbit
    e0 = world.energy()["total"]
    worst = 0.0
    for _ in range(round(orbits * steps_per_orbit)):
        world.step(h)
        drift = (world.energy()["total"] - e0) / abs(e0)
        worst = max(worst, abs(drift))
    planet, moon = world.particles.x[body.particles]
    return {"end": drift, "worst": worst, "distance": math.dist(planet, moon)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="One orbit, two integrators: the energy drift.")
    ap.add_argument("integrators", nargs="*", default=["euler", "velocity_verlet"],
                    help=f"two of: {', '.join(sandbox.INTEGRATORS)}")
    ap.add_argument("--orbits", type=float, default=20.0, help="how long (default 20)")
    ap.add_argument("--steps-per-orbit", type=int, default=20, help="the step (default 20)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.integrators if n not in sandbox.INTEGRATORS]
    if len(args.integrators) != 2 or unknown:
        ap.error(f"name two integrators of: {', '.join(sandbox.INTEGRATORS)}")
    warm = sandbox.start_background()   # never a silent wait: numpy until compiled
    try:
        print(f"{args.orbits:g} orbits at {args.steps_per_orbit} steps an orbit "
              f"(h = {PERIOD / args.steps_per_orbit:.3f} s)")
        print(f"{'integrator':<18}{'drift at the end':>18}{'largest drift':>16}"
              f"{'moon at':>10}")
        for name in args.integrators:
            r = run(name, args.orbits, args.steps_per_orbit)
            print(f"{name:<18}{r['end']:>+18.3%}{r['worst']:>16.3%}{r['distance']:>9.1f} m")
    except sandbox.SimulationDiverged as e:
        print(f"diverged: {e}")
        return 1
    finally:
        warm.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

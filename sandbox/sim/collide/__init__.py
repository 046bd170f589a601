"""Collisions with static shapes and between particles, split along their concerns as Box2D
splits its own: ``geometry`` (distances and sweeps), ``shapes`` (the shape sets), ``broad``
(the broad phase), ``solver`` (one substep's contacts, and whole frames), ``jit`` (the
compiled path's decorator). Each numpy reference sits beside its compiled twin. The world
uses them through :class:`.colliders.Colliders`, what it keeps of them.
"""

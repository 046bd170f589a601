"""Collisions with static shapes and between particles, split along their concerns as Box2D
splits its own: ``geometry`` (distances and sweeps), ``shapes`` (the shape sets), ``broad``
(the broad phase), ``contacts`` (one substep's contacts, the numpy reference), ``begin``,
``project``, ``finish`` (its three stages compiled, a module a stage), ``frame`` (those
stages put together: a whole frame in one call), ``jit`` (the compiled path's decorator).
Each numpy reference has a compiled twin of the same name. The world uses them through
:class:`.colliders.Colliders`, what it keeps of them.
"""

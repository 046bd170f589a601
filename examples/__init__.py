"""Programs built on the engine's public API (``import sandbox``).

Run one from the checkout's folder as ``python -m examples.rope``; with the package
installed, ``python examples/rope.py`` from anywhere. Each takes ``--frames N``.
"""

"""``python -m sandbox``: the command line of :mod:`sandbox.cli`."""
from sandbox.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

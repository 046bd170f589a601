"""Where the shipped files are: the level files and the window's assets (fonts, icon, theme).

Two layouts, one answer:

- a checkout (development, ``python main.py``, ``pip install -e .``): the repository's
  own ``levels/`` and ``assets/``, beside the ``sandbox`` package;
- an installed wheel (``pip install .``, ``verlet-sandbox``): the same folders copied into
  the package as ``sandbox/levels_data`` and ``sandbox/assets_data`` (pyproject.toml's
  ``force-include``), found with :func:`importlib.resources.files`.

The installed copy is looked for first: an installed package has no checkout beside it,
and a ``levels`` folder that happens to sit next to it in ``site-packages`` is not ours.
Every module that needs these folders asks here; none builds the path by hand.

What the program *writes* (figures, archives, screenshots, saved levels) goes to the
working directory instead (``out/`` by default), never into these folders.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: The folders' names inside an installed package (pyproject.toml's ``force-include``).
LEVELS_DATA = "levels_data"
ASSETS_DATA = "assets_data"

#: The folder holding the ``sandbox`` package: a checkout's root in development.
CHECKOUT = Path(__file__).resolve().parent.parent


def _folder(installed: str, checkout: str) -> Path:
    """The installed copy ``sandbox/<installed>`` if there is one, else the checkout's
    ``<checkout>/`` (returned even when missing, so that a message names where the
    files were expected)."""
    inside = files(__package__ or "sandbox") / installed
    if inside.is_dir():
        return Path(str(inside))
    return CHECKOUT / checkout


def levels_dir() -> Path:
    """The shipped level files: ``<dir>/<name>.toml``, the benchmark's in ``bench/``, the
    warm-up's scenes in ``test/``."""
    return _folder(LEVELS_DATA, "levels")


def assets_dir() -> Path:
    """The window's assets: ``fonts/`` (with their licence), ``icon.png``, ``theme.json``."""
    return _folder(ASSETS_DATA, "assets")


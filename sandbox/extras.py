"""The optional parts of the install, and the one line that says how to add a missing one.

The base install (``pip install verlet-sandbox``) is the window and the headless commands
(``play``, ``demo``, ``check``, ``simulate``, ``replay``). The rest comes with an extra
(pyproject.toml's ``[project.optional-dependencies]``), each named by what it adds:

=========  =======================  ===============================================
extra      packages                 what needs it
=========  =======================  ===============================================
lab        matplotlib               ``experiment``: every experiment draws figures
cluster    dask[distributed]        ``experiment`` sweeps on all cores (``--jobs``) or
                                    on a cluster (``--scheduler``)
clips      imageio, imageio-ffmpeg, the window's clips (C: MP4, Shift+C: GIF)
           pillow
bench      pymunk                   ``bench``: the reference physics engine it times
=========  =======================  ===============================================

A command that needs a missing one stops before doing anything, with one line naming
the ``pip install`` that fixes it, and exit status 2 (:class:`MissingExtra`).
"""

from __future__ import annotations

import importlib.util

#: extra -> (the modules it provides, what they are for, in a user's words).
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "lab": (("matplotlib",), "the lab's figures"),
    "cluster": (("distributed",), "sweeps on several processes or a Dask cluster"),
    "clips": (("imageio", "imageio_ffmpeg", "PIL"), "clips of the window"),
    "bench": (("pymunk",), "the benchmark's reference engine"),
}

#: The import name -> the package to install, where they differ.
_PACKAGE = {"distributed": "dask[distributed]", "PIL": "pillow",
            "imageio_ffmpeg": "imageio-ffmpeg"}
#: The checkout's requirements file holding an extra's packages (requirements.txt else).
_CHECKOUT_FILE = {"bench": "requirements-dev.txt"}


class MissingExtra(RuntimeError):
    """An optional package is not installed; ``str()`` is the one line to print."""

    def __init__(self, extra: str, module: str, what: str | None = None) -> None:
        self.extra, self.module = extra, module
        what = what or EXTRAS[extra][1]
        super().__init__(
            f"{what}: {_PACKAGE.get(module, module)} is not installed; "
            f"pip install 'verlet-sandbox[{extra}]' adds it (in a checkout: "
            f"pip install -r {_CHECKOUT_FILE.get(extra, 'requirements.txt')})")


def available(module: str) -> bool:
    """``module`` is installed (found without importing it: the check costs nothing, the
    window's first C does not wait for imageio; one made unimportable on purpose with
    ``sys.modules[module] = None`` counts as missing)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):       # a parent missing; a module without a spec
        return False


def require(extra: str, what: str | None = None, modules: tuple[str, ...] | None = None
            ) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` (or ``modules``)
    imports; ``what``: what needs them, for the message."""
    for module in modules if modules is not None else EXTRAS[extra][0]:
        if not available(module):
            raise MissingExtra(extra, module, what)

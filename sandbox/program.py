"""How the program was started, in the words a user types again: ``main.py`` (the
checkout's script), ``python -m sandbox`` or ``verlet-sandbox`` (the installed command).
Messages anywhere in the package (the window's "replay saved: ... run it with ...", the
lab's report) name the command this way; it sits below them all and imports nothing of
the package, so naming the command ties no module to the command line's."""

from __future__ import annotations

import os
import sys


def prog() -> str:
    """How the program was started, for usage lines and messages: ``main.py`` (the
    checkout's script), ``python -m sandbox`` or ``verlet-sandbox`` (the installed
    command)."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if name == "__main__.py":
        return "python -m sandbox"
    if os.path.splitext(name)[0] in ("verlet-sandbox", "verlet-sandbox-script"):
        return "verlet-sandbox"
    return "main.py"


def command_line() -> str:
    """What a user types to run the program the way they did: ``python main.py``,
    ``python -m sandbox`` or ``verlet-sandbox``."""
    name = prog()
    return "python main.py" if name == "main.py" else name

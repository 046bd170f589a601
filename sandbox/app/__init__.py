"""The desktop sandbox window: the only package that imports pygame.

``main``    the :class:`~sandbox.app.main.App` (one frame: events -> commands -> plan ->
            steps -> energy sample -> render -> HUD) and ``run_app``, the ``play`` command
``keymap``  the one table of hotkeys; dispatch and the help overlay both read it
``camera``  world (m, y up) <-> screen (px, y down), pan and zoom about a point
``raster``  vectorised drawing of many segments and dots straight into pixel arrays
``render``  the world and its ghost: sticks coloured by strain, ropes, springs, pins
``hud``     text panel, energy graph, help overlay, banner and transient messages
``files``   timestamped, never-overwriting, atomic output files (screenshots, snapshots)
"""

import os

# pygame prints a banner on import unless told not to; the window has a title bar.
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

"""Reading what ``simulate`` saved, for the tests that run it as a user would."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def load_finite(path: Path) -> dict:
    """Every array of an ``.npz`` archive, after checking that each float one is finite."""
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    for k, a in data.items():
        if a.dtype.kind == "f":
            assert np.isfinite(a).all(), k
    return data

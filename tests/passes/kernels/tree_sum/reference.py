"""float64 reference for the tree_sum test kernel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def tree_sum(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    x = np.asarray(inputs["x"], dtype=np.float64).reshape(shape["rows"], shape["n"])
    return {"out": x.sum(axis=1)}

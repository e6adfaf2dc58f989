"""float64 reference for llm.c's residual_forward: out = inp1 + inp2."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def residual_forward(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point: the element-wise sum, in float64."""
    return {
        "out": np.asarray(inputs["inp1"], dtype=np.float64) + np.asarray(inputs["inp2"], dtype=np.float64)
    }

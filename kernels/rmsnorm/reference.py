"""float64 reference for rmsnorm: output = input * rsqrt(mean(input^2) + eps) * weight, per row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def reference(
    *, input: np.ndarray, weight: np.ndarray, eps: float = 1e-6, d: int | None = None, **_: object
) -> dict[str, np.ndarray]:
    """input [num_tokens, d], weight [d] -> {"output": [num_tokens, d]}, in float64."""
    x = np.asarray(input, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    if d is None:
        d = w.shape[-1]
    rows = x.reshape(-1, d)
    rms_rcp = 1.0 / np.sqrt(np.mean(rows * rows, axis=1, keepdims=True) + float(eps))
    return {"output": (rows * rms_rcp * w.reshape(d)).reshape(x.shape)}


def rmsnorm(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:rmsnorm``): inputs by parameter name, shape vars."""
    return reference(**{**shape, **inputs})

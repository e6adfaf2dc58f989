"""float64 reference for act_and_mul_scalar: out = silu(x) * y, x and y the two halves of each row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def reference(*, input: np.ndarray, d: int | None = None, **_: object) -> dict[str, np.ndarray]:
    """input [num_tokens, 2 * d] -> {"out": [num_tokens, d]}, computed in float64."""
    x2 = np.asarray(input, dtype=np.float64)
    if d is None:
        d = x2.shape[-1] // 2
    rows = x2.reshape(-1, 2 * d)
    x, y = rows[:, :d], rows[:, d:]
    out = x / (1.0 + np.exp(-x)) * y
    return {"out": out.reshape((*x2.shape[:-1], d))}


def act_and_mul_scalar(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:act_and_mul_scalar``): inputs by parameter name, shape vars."""
    return reference(**{**shape, **inputs})

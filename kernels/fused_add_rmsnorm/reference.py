"""float64 reference for fused_add_rmsnorm (in place on input and residual).

residual <- input + residual; input <- rmsnorm(input + residual) * weight. The kernel normalises
the fp32 sum (not the bf16-rounded residual), which this float64 reference matches to rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def reference(
    *,
    input: np.ndarray,
    residual: np.ndarray,
    weight: np.ndarray,
    eps: float = 1e-6,
    d: int | None = None,
    **_: object,
) -> dict[str, np.ndarray]:
    """input, residual [num_tokens, d], weight [d] -> {"input": normed, "residual": sum}."""
    x = np.asarray(input, dtype=np.float64)
    r = np.asarray(residual, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    if d is None:
        d = w.shape[-1]
    s = (x + r).reshape(-1, d)
    rms_rcp = 1.0 / np.sqrt(np.mean(s * s, axis=1, keepdims=True) + float(eps))
    return {"input": (s * rms_rcp * w.reshape(d)).reshape(x.shape), "residual": s.reshape(x.shape)}


def fused_add_rmsnorm(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:fused_add_rmsnorm``): inputs by name, shape vars."""
    return reference(**{**shape, **inputs})

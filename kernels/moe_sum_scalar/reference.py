"""float64 reference for moe_sum_scalar: out[t] = sum over the top-k expert rows of input[t]."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def reference(
    *,
    input: np.ndarray,
    d: int | None = None,
    TOPK: int | None = None,
    topk: int | None = None,
    **_: object,
) -> dict[str, np.ndarray]:
    """input [num_tokens, TOPK, d] (or flat, with d and TOPK given) -> {"out": [num_tokens, d]}."""
    x = np.asarray(input, dtype=np.float64)
    if d is None:
        d = x.shape[-1]
    k = TOPK if TOPK is not None else topk
    if k is None:
        if x.ndim < 3:
            raise ValueError("moe_sum_scalar reference: give TOPK or a [num_tokens, TOPK, d] input")
        k = x.shape[-2]
    return {"out": x.reshape(-1, int(k), int(d)).sum(axis=1)}


def moe_sum_scalar(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:moe_sum_scalar``): inputs by parameter name, shape vars."""
    return reference(**{**shape, **inputs})
